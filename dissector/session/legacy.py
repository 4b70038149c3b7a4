"""Kafka 0.7 on one connection: no correlation ids, so responses answer requests in order.

Produce and Multi-Produce requests get no response at all.
"""

from collections import deque

from ..errors import DecodeError
from ..protocol import legacy
from . import exchange as ex
from .rows import REQUEST, RESPONSE, Malformed, Request, Side, build, ended
from .timeouts import expired_rows

PROTOCOL = "0.7"


def _topics(body):
    if not body:
        return []
    return [p["Topic"] for p in legacy.topic_partitions(body) if p.get("Topic")]


class LegacySession:
    PROTOCOL = PROTOCOL

    def __init__(self, conn):
        self.conn = conn
        self.pending = deque()  # requests that expect a response, oldest first
        self.lost = False
        self.bad = Malformed()

    def request(self, frame):
        try:
            decoded = legacy.decode_request(frame.data)
        except DecodeError as e:
            self.bad.count(REQUEST, frame.data)
            req = Request(frame, reason=f"0.7 request: {e}")
            return [build(self.conn, PROTOCOL, req, status=ex.MALFORMED)]
        kind = decoded["request_type"]
        req = Request(
            frame,
            api_key=kind,
            api_name=decoded["api_name"],
            body=decoded["body"],
            topics=_topics(decoded["body"]),
        )
        if not legacy.expects_response(kind):
            return [build(self.conn, PROTOCOL, req, status=ex.NO_RESPONSE_EXPECTED)]
        self.pending.append(req)
        return []

    def response(self, frame):
        if not self.pending:
            return [build(self.conn, PROTOCOL, None, Side(frame), status=ex.ORPHAN_RESPONSE)]
        req = self.pending.popleft()
        try:
            body = legacy.decode_response(req.api_key, frame.data, req.body)
        except DecodeError as e:
            self.bad.count(RESPONSE, frame.data)
            return [build(self.conn, PROTOCOL, req, Side(frame, reason=f"0.7 response: {e}"))]
        code, name = body.get("ErrorCode", 0), body.get("error_name")
        if not code:  # else the first failed part of a Multi-Fetch, as 0.8+ reports it
            failed = next((p for p in body.get("TopicPartitions") or () if p["ErrorCode"]), None)
            if failed is not None:
                code, name = failed["ErrorCode"], failed["error_name"]
        resp = Side(frame, body, error=code, error_name=name)
        return [build(self.conn, PROTOCOL, req, resp)]

    def response_lost(self):
        """A whole response was lost in a gap: it was the oldest waiting request's."""
        if not self.pending:
            return []
        req = self.pending.popleft()
        why = "response lost in a capture gap"
        return [build(self.conn, PROTOCOL, req, status=ex.UNANSWERED, reason=why)]

    def expire(self, now, allowance_ns):
        """Rows for the requests that waited past their deadline (session/timeouts.py)."""
        return expired_rows(self, self.pending, now, allowance_ns)

    def state(self):
        """Requests waiting, oldest first (see ModernSession.state)."""
        return (
            PROTOCOL,
            tuple((r.api_key, r.frame.first_frame, r.frame.last_frame) for r in self.pending),
        )

    def rare_state(self):
        return (None, self.lost)

    def end(self):
        out = [
            build(self.conn, PROTOCOL, req, status=ex.UNANSWERED, reason=ended(self.conn))
            for req in self.pending
        ]
        self.pending.clear()
        return out

    def queues(self):
        """The requests waiting for their response, oldest first (pairing is by order)."""
        return [list(self.pending)]
