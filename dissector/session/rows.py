"""Turning decoded requests and responses into `pairs` rows."""

from ..framing import CutFrame
from . import exchange as ex
from .exchange import Exchange

REQUEST, RESPONSE = 0, 1


class Malformed:
    """Frames (and their bytes, size prefix included) that did not decode, per direction."""

    __slots__ = ("frames", "bytes")

    def __init__(self):
        self.frames = [0, 0]  # [requests, responses]
        self.bytes = [0, 0]

    def count(self, direction, data):
        """One frame of this body (size prefix not included) did not decode."""
        self.frames[direction] += 1
        self.bytes[direction] += len(data) + 4


class Side:
    """One decoded (or scanned) frame of an exchange."""

    __slots__ = (
        "frame",
        "body",
        "topics",
        "error",
        "error_name",
        "reason",
        "names",
        "sets",
        "cut",
    )

    def __init__(
        self,
        frame,
        body=None,
        topics=(),
        error=0,
        error_name=None,
        reason=None,
        names=None,
        sets=None,
    ):
        self._fill(frame, body, topics, error, error_name, reason, names, sets)

    def _fill(self, frame, body, topics, error, error_name, reason, names, sets):
        """Side's fields (a C call from Request too, when compiled)."""
        self.names = names  # topic id -> name for the ids in body that are known
        self.frame = frame
        self.body = body  # a dict, a LazyBody, or None
        self.topics = topics
        self.error = error
        self.error_name = error_name
        self.reason = reason
        self.sets = sets  # where its record sets lie: [(topic or id, start, end)]
        # A frame the capture cut: `reason` says how much was captured, and is no sign of
        # a malformed frame.
        self.cut = frame.__class__ is CutFrame


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
        body=None,
        topics=(),
        reason=None,
        names=None,
        sets=None,
    ):
        self._fill(frame, body, topics, 0, None, reason, names, sets)
        self.api_key = api_key
        self.api_name = api_name
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


HOW = {"fin": "FIN", "rst": "RST"}


def ended(conn):
    """Why requests still waiting at a connection's end got no answer: who ended it, how,
    and at which frame ("connection ended by the broker (RST) at frame 812")."""
    if conn.ended_by is None:
        if conn.end_reason == "reused":
            return f"connection ended: its port was reused at frame {conn.end_frame}"
        if conn.end_reason == "idle":
            return f"connection ended: idle since frame {conn.end_frame}"
        if conn.end_reason == "evicted":
            return (
                f"connection ended: idle since frame {conn.end_frame}, evicted to bound the "
                "connections followed (--max-connections)"
            )
        return f"connection ended: the capture ends (last packet frame {conn.end_frame})"
    who = "client" if conn.ended_by == conn.client_side else "broker"
    how = HOW.get(conn.end_reason, "FIN")
    return f"connection ended by the {who} ({how}) at frame {conn.end_frame}"


def side_name(conn, side):
    if side is None or conn.client_side is None:
        return None
    return "client" if side == conn.client_side else "broker"


def wire_size(frame):
    """Bytes of a frame on the wire, size prefix included (a cut frame's full size)."""
    return (frame.size if frame.__class__ is CutFrame else len(frame.data)) + 4


_ENDPOINTS = {}  # (ip, port) -> its text: two per exchange, few distinct
_ENDPOINTS_MAX = 1 << 16


def endpoint(addr):
    text = _ENDPOINTS.get(addr)
    if text is None:
        if len(_ENDPOINTS) >= _ENDPOINTS_MAX:
            _ENDPOINTS.clear()
        ip, port = addr
        text = _ENDPOINTS[addr] = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
    return text


# Every attribute build() may set, at the value an exchange has when it is not set.
_UNSET = {
    **{name: None for name in ex.COLUMNS if name not in ("request", "response")},
    "_request": None,
    "_response": None,
    "record_sets": Exchange.record_sets,
    "topic_names": Exchange.topic_names,
}


def build(
    conn,
    protocol,
    req,
    resp=None,
    status=None,
    correlation_id=None,
    throttle=None,
    reason=None,
    queue_ns=None,
):
    """One row; status is derived (malformed / error / ok) unless given. queue_ns: how long
    the request waited behind the previous response on its connection."""
    client_side = conn.client_side if conn.client_side is not None else 0
    # The columns go into a copy of a dict that holds them all, which becomes the exchange's
    # own: with an exchange per request, building one attribute by attribute (or growing a
    # dict key by key) was the costliest step of the session.
    row = _UNSET.copy()
    row["stream"] = conn.id
    row["client"] = endpoint(conn.endpoints[client_side])
    row["broker"] = endpoint(conn.endpoints[1 - client_side])
    row["protocol"] = protocol
    row["correlation_id"] = correlation_id
    reasons = []  # why the exchange is malformed
    notes = []  # what the capture cut
    names = None
    if req is not None:
        f = req.frame
        row["api_key"] = req.api_key
        row["api_name"] = req.api_name
        row["api_version"] = req.api_version
        row["correlation_id"] = req.correlation_id
        row["client_id"] = req.client_id
        row["request_frame"] = f.last_frame
        row["request_start"] = f.first_ts
        row["request_end"] = f.last_ts
        row["request_bytes"] = wire_size(f)
        row["_request"] = req.body
        topics = req.topics
        names = req.names
        if req.sets:
            row["record_sets"] = ("request", f.data, req.sets)
        if req.reason:
            (notes if req.cut else reasons).append(req.reason)
    else:
        topics = ()
    error_code = None
    if resp is not None:
        f = resp.frame
        row["response_frame"] = f.last_frame
        row["response_start"] = f.first_ts
        row["response_end"] = f.last_ts
        row["response_bytes"] = wire_size(f)
        row["_response"] = resp.body
        if req is not None:
            row["latency_ms"] = (f.last_ts - req.frame.first_ts) / 1e6
            row["server_ms"] = (f.first_ts - req.frame.last_ts) / 1e6
            if queue_ns is not None:
                row["queue_ms"] = queue_ns / 1e6
        if resp.body is not None:
            error_code = row["error_code"] = resp.error
            row["error_name"] = resp.error_name
            row["throttle_ms"] = throttle
        if resp.topics:
            topics = (*topics, *resp.topics)
        if resp.names:
            names = dict(names, **resp.names) if names else resp.names
        if resp.sets:
            row["record_sets"] = ("response", f.data, resp.sets)
        if resp.reason:
            (notes if resp.cut else reasons).append(resp.reason)
    # Most exchanges name one topic, in the request and again in the response: no set to sort.
    if len(topics) == 2 and topics[0] == topics[1]:
        row["topics"] = [topics[0]]
    else:
        row["topics"] = sorted(set(topics)) if len(topics) > 1 else list(topics)
    if names:
        row["topic_names"] = names
    if reason:
        reasons.append(reason)
    if reasons or notes:
        row["reason"] = "; ".join(reasons + notes)
    if status is None:
        if reasons:
            status = ex.MALFORMED
        elif error_code:
            status = ex.ERROR
        else:
            status = ex.OK
    row["status"] = status
    return Exchange.of(row)
