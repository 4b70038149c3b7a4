"""Turning decoded requests and responses into `pairs` rows."""

from . import exchange as ex
from .exchange import Exchange

REQUEST, RESPONSE = 0, 1


class Malformed:
    """Frames (and their bytes, size prefix included) that did not decode, per direction."""

    __slots__ = ("frames", "bytes")

    def __init__(self):
        self.frames = [0, 0]  # [requests, responses]
        self.bytes = [0, 0]

    def count(self, direction, frame):
        self.frames[direction] += 1
        self.bytes[direction] += len(frame.data) + 4


class Side:
    """One decoded frame of an exchange."""

    __slots__ = ("frame", "body", "topics", "error", "error_name", "reason", "names")

    def __init__(
        self, frame, body=None, topics=(), error=0, error_name=None, reason=None, names=None
    ):
        self.names = names  # topic id -> name for the ids in body that are known
        self.frame = frame
        self.body = body
        self.topics = topics
        self.error = error
        self.error_name = error_name
        self.reason = reason


class Request(Side):
    """A request frame with what its header (or 0.7 request type) says."""

    __slots__ = ("api_key", "api_name", "api_version", "correlation_id", "client_id")

    def __init__(
        self,
        frame,
        api_key=None,
        api_name=None,
        api_version=None,
        correlation_id=None,
        client_id=None,
        **side,
    ):
        super().__init__(frame, **side)
        self.api_key = api_key
        self.api_name = api_name
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


def endpoint(addr):
    ip, port = addr
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def build(
    conn, protocol, req, resp=None, status=None, correlation_id=None, throttle=None, reason=None
):
    """One row; status is derived (malformed / error / ok) unless given."""
    client_side = conn.client_side if conn.client_side is not None else 0
    row = Exchange(
        stream=conn.id,
        client=endpoint(conn.endpoints[client_side]),
        broker=endpoint(conn.endpoints[1 - client_side]),
        protocol=protocol,
        correlation_id=correlation_id,
        status=status,
    )
    topics = set()
    reasons = []
    if req is not None:
        f = req.frame
        row.api_key, row.api_name, row.api_version = req.api_key, req.api_name, req.api_version
        row.correlation_id, row.client_id = req.correlation_id, req.client_id
        row.request_frame, row.request_start, row.request_end = f.last_frame, f.first_ts, f.last_ts
        row.request_bytes = len(f.data) + 4
        row.request = req.body
        topics.update(req.topics)
        if req.names:
            row.topic_names.update(req.names)
        if req.reason:
            reasons.append(req.reason)
    if resp is not None:
        f = resp.frame
        row.response_frame, row.response_start, row.response_end = (
            f.last_frame,
            f.first_ts,
            f.last_ts,
        )
        row.response_bytes = len(f.data) + 4
        row.response = resp.body
        if req is not None:
            row.latency_ms = (f.last_ts - req.frame.first_ts) / 1e6
            row.server_ms = (f.first_ts - req.frame.last_ts) / 1e6
        if resp.body is not None:
            row.error_code = resp.error
            row.error_name = resp.error_name
            row.throttle_ms = throttle
        topics.update(resp.topics)
        if resp.names:
            row.topic_names.update(resp.names)
        if resp.reason:
            reasons.append(resp.reason)
    row.topics = sorted(topics)
    if reason:
        reasons.append(reason)
    row.reason = "; ".join(reasons) or None
    if row.status is None:
        if row.reason:
            row.status = ex.MALFORMED
        elif row.error_code:
            row.status = ex.ERROR
        else:
            row.status = ex.OK
    return row
