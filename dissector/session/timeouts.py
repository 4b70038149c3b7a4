"""Requests that waited too long: reported `unanswered` instead of held for ever.

A live run never ends, so a request whose response never comes (lost by the capture, or never
sent) would wait in its session for good. Each request gets a deadline: a base allowance plus
the longest wait the request itself asks the broker for (a Fetch's MaxWaitMs, a JoinGroup's
RebalanceTimeoutMs, a Produce's or CreateTopics' TimeoutMs), so long polls and rebalances are
never cut short.
"""

from . import exchange as ex
from .exchange import LazyBody, decoded
from .rows import build

DEFAULT_ALLOWANCE_NS = 120 * 1_000_000_000
MS = 1_000_000
EXPIRED = "no response before the request's deadline"  # the reason of an expired request


def asked_wait_ns(body):
    """The longest wait a decoded request body asks for, in nanoseconds (0: none)."""
    if not isinstance(body, dict):
        return 0
    waits = [
        v
        for k, v in body.items()
        if isinstance(v, int) and (k.endswith("TimeoutMs") or k == "MaxWaitMs") and v > 0
    ]
    return max(waits, default=0) * MS


def deadline(req, allowance_ns=DEFAULT_ALLOWANCE_NS):
    """Capture time after which a request's response is no longer expected."""
    body = req.body
    if body.__class__ is LazyBody:  # a scanned body: decoded once, kept decoded
        body = req.body = decoded(body)
    return req.frame.last_ts + allowance_ns + asked_wait_ns(body)


def due(req, now, allowance_ns=DEFAULT_ALLOWANCE_NS):
    """Past its deadline; only requests past the base allowance have their body read."""
    return req.frame.last_ts + allowance_ns < now and deadline(req, allowance_ns) < now


def expired_rows(session, queue, now, allowance_ns, status=ex.UNANSWERED):
    """Rows for the requests at the head of `queue` (oldest first) whose deadline passed,
    taken off it."""
    out = []
    reason = EXPIRED if status == ex.UNANSWERED else None
    while queue and due(queue[0], now, allowance_ns):
        req = queue.popleft()
        out.append(build(session.conn, session.PROTOCOL, req, status=status, reason=reason))
    return out
