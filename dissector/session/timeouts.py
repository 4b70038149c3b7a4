"""Requests that waited too long: reported `unanswered` instead of held for ever.

A live run never ends, so a request whose response never comes (lost by the capture, or never
sent) would wait in its session for good. Each request gets a deadline: a base allowance plus
the longest wait the request itself asks the broker for (a Fetch's MaxWaitMs, a JoinGroup's
RebalanceTimeoutMs, a Produce's or CreateTopics' TimeoutMs), so long polls and rebalances are
never cut short.
"""

from . import exchange as ex
from .exchange import LazyBody
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
        body = req.body = body()
    return req.frame.last_ts + allowance_ns + asked_wait_ns(body)


def _due(req, now, allowance_ns):
    """Past its deadline; only requests past the base allowance have their body read."""
    return req.frame.last_ts + allowance_ns < now and deadline(req, allowance_ns) < now


def expire_requests(session, now, allowance_ns=DEFAULT_ALLOWANCE_NS):
    """Rows for the requests of a session whose deadline passed before `now`, removed from it:
    `unanswered` for requests awaiting a response, `no_response_expected` for acks=0 produce
    requests kept in case the broker answered them anyway; and `orphan_response` for
    responses held for a request that never came."""
    out = []
    why = EXPIRED
    pending = session.pending
    protocol = session.PROTOCOL
    if isinstance(pending, dict):  # 0.8+: correlation id -> deque of requests
        for corr in [c for c, q in pending.items() if _due(q[0], now, allowance_ns)]:
            queue = pending[corr]
            while queue and _due(queue[0], now, allowance_ns):
                req = queue.popleft()
                out.append(build(session.conn, protocol, req, status=ex.UNANSWERED, reason=why))
            if not queue:
                del pending[corr]
        silent = session.silent
        while silent and _due(silent[0], now, allowance_ns):
            req = silent.popleft()
            out.append(build(session.conn, protocol, req, status=ex.NO_RESPONSE_EXPECTED))
        queue = session.raw_pending
        # Responses held in case their request was captured after them: orphans once their
        # window has passed, even when no later traffic comes to say so.
        out += session.expire_early(now)
    else:  # 0.7: requests in order
        queue = pending
    while queue and _due(queue[0], now, allowance_ns):
        req = queue.popleft()
        out.append(build(session.conn, protocol, req, status=ex.UNANSWERED, reason=why))
    out.sort(key=lambda row: row.request_frame or 0)
    return out
