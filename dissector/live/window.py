"""What the last few seconds of traffic look like: the figures the terminal view shows.

Exchanges enter as they complete and leave the window `seconds` later; every figure is taken
over what is in it. Its size is bounded: past `max_items` the oldest leave early (the rates
then say so, being taken over the span actually held).
"""

import time
from collections import Counter, deque

from ..session.exchange import ERROR, MALFORMED, UNANSWERED
from ..tables.summary import quantile

MAX_ITEMS = 200_000


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
    def __init__(self, seconds=10.0, max_items=MAX_ITEMS, clock=time.monotonic):
        self.seconds = seconds
        self.max_items = max_items
        self.clock = clock
        self.items = deque()

    def add(self, exchanges):
        now = self.clock()
        items = self.items
        for e in exchanges:
            items.append(Seen(now, e))
        while len(items) > self.max_items:
            items.popleft()

    def _expire(self):
        horizon = self.clock() - self.seconds
        items = self.items
        while items and items[0].at < horizon:
            items.popleft()

    def span(self):
        """Seconds the rates are taken over: the window, or less when it holds fewer."""
        self._expire()
        if len(self.items) >= self.max_items:
            return max(1e-3, self.clock() - self.items[0].at)
        return self.seconds

    def apis(self):
        """Per API: requests/s, latency p50/p95/p99/max (ms), errors; busiest first."""
        span = self.span()
        by_api = {}
        for s in self.items:
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
        return Counter(s.error for s in self.items if s.error).most_common(n)

    def clients(self, n=5):
        span = self.span()
        return [(c, k / span) for c, k in Counter(s.client for s in self.items).most_common(n)]

    def topics(self, n=5):
        span = self.span()
        counts = Counter(t for s in self.items for t in s.topics)
        return [(t, k / span) for t, k in counts.most_common(n)]

    def slowest(self, n=5):
        timed = [s for s in self.items if s.latency is not None]
        return sorted(timed, key=lambda s: -s.latency)[:n]

    def count(self, status=None):
        if status is None:
            return len(self.items)
        return sum(1 for s in self.items if s.status == status)

    def error_count(self):
        return sum(1 for s in self.items if s.status in (ERROR, MALFORMED, UNANSWERED))
