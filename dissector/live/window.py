"""What the last few seconds of traffic look like: the figures the terminal view shows.

Time here is capture time, the packets' timestamps: an exchange is placed when its last packet
was captured, and `at(now, elapsed)` says which capture time the figures are taken at. So
rates are those of the traffic, not of the dissection: a run that falls behind shows the
rates of the traffic it is dissecting, later, not lower ones. Every figure is taken over the
exchanges of the last `seconds`, and rates over the time that actually covers: less than the
window early in a run, or when past `max_items` the oldest leave early.
"""

from collections import Counter, deque

from ..session.exchange import ERROR, MALFORMED, UNANSWERED
from ..tables.summary import quantile

MAX_ITEMS = 200_000
MIN_SPAN = 1e-3  # seconds: a rate over no time at all is not a rate


def placed(e, now):
    """Capture time (ns) an exchange belongs to: its last packet. An unanswered request is
    reported once its deadline has passed, long after its last packet: it is placed when it
    was reported (`now`, the window's latest capture time)."""
    if e.status == UNANSWERED and now is not None:
        return now
    ends = (e.response_end, e.request_end, e.response_start, e.request_start)
    return next((t for t in ends if t is not None), now or 0)


class Seen:
    """The little the view needs of one exchange, kept instead of the exchange."""

    __slots__ = ("at", "api", "latency", "error", "client", "topics", "status", "corr", "start")

    def __init__(self, at, e):
        self.at = at
        self.api = e.api_name or "?"
        self.latency = e.latency_ms
        self.error = e.error_name if e.error_code else None
        if e.status in (UNANSWERED, MALFORMED) and not self.error:
            self.error = e.status
        self.client = f"{e.client_id or '-'} {e.client}"
        self.topics = e.topics or ()
        self.status = e.status
        self.corr = e.correlation_id
        self.start = e.request_start if e.request_start is not None else e.response_start


class Window:
    def __init__(self, seconds=10.0, max_items=MAX_ITEMS):
        self.seconds = seconds
        self.max_items = max_items
        self.items = deque()
        self.now = None  # capture time (ns) the figures are taken at
        self.elapsed = None  # capture seconds from the start of the capture to `now`

    def add(self, exchanges):
        now = self.now
        items = self.items
        for e in exchanges:
            items.append(Seen(placed(e, now), e))
        while len(items) > self.max_items:
            items.popleft()

    def at(self, now, elapsed):
        """Take the figures at capture time `now` (ns), `elapsed` seconds after the capture
        began."""
        self.now = now
        self.elapsed = elapsed
        horizon = self._horizon()
        items = self.items
        while items and items[0].at <= horizon:
            items.popleft()

    def _horizon(self):
        return None if self.now is None else self.now - int(self.seconds * 1e9)

    def held(self):
        """The exchanges of the window: those added out of order (as a connection ends) may
        be older than their neighbours, so each is checked."""
        horizon = self._horizon()
        if horizon is None:
            return list(self.items)
        return [s for s in self.items if s.at > horizon]

    def span(self):
        """Seconds the rates are taken over: the window, or the time since the capture began,
        or less when past max_items the oldest have left (then: the span held)."""
        span = self.seconds
        if self.elapsed is not None:
            span = min(span, self.elapsed)
        if len(self.items) >= self.max_items and self.now is not None:
            span = min(span, (self.now - self.items[0].at) / 1e9)
        return max(MIN_SPAN, span)

    def apis(self):
        """Per API: requests/s, latency p50/p95/p99/max (ms), errors; busiest first."""
        span = self.span()
        by_api = {}
        for s in self.held():
            by_api.setdefault(s.api, []).append(s)
        rows = []
        for api, seen in by_api.items():
            latency = [s.latency for s in seen if s.latency is not None]
            rows.append(
                {
                    "api": api,
                    "rate": len(seen) / span,
                    "p50": quantile(latency, 0.5),
                    "p95": quantile(latency, 0.95),
                    "p99": quantile(latency, 0.99),
                    "max": max(latency) if latency else float("nan"),
                    "errors": sum(1 for s in seen if s.error),
                }
            )
        rows.sort(key=lambda r: -r["rate"])
        return rows

    def errors(self, n=6):
        return Counter(s.error for s in self.held() if s.error).most_common(n)

    def clients(self, n=5):
        span = self.span()
        counts = Counter(s.client for s in self.held())
        return [(c, k / span) for c, k in counts.most_common(n)]

    def topics(self, n=5):
        span = self.span()
        counts = Counter(t for s in self.held() for t in s.topics)
        return [(t, k / span) for t, k in counts.most_common(n)]

    def slowest(self, n=5):
        timed = [s for s in self.held() if s.latency is not None]
        return sorted(timed, key=lambda s: -s.latency)[:n]

    def count(self, status=None):
        held = self.held()
        if status is None:
            return len(held)
        return sum(1 for s in held if s.status == status)

    def error_count(self):
        return sum(1 for s in self.held() if s.status in (ERROR, MALFORMED, UNANSWERED))
