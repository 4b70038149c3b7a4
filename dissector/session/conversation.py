"""Per-connection state machine: frames in, matched request/response exchanges out.

A conversation decides which side is the client (when TCP could not tell), whether the
connection speaks Kafka at all, decodes each frame, and pairs responses with requests by
correlation id. A response carries no API key or version, so it is decoded with those of
its request.
"""

from collections import deque

from ..errors import DecodeError
from ..framing import Frame, Framer
from ..protocol import messages, schema
from ..protocol.codegen import Context
from ..protocol.errors import error_name
from ..protocol.primitives import i32
from . import exchange as ex
from .exchange import Exchange
from .plausible import plausible_request

PRODUCE = 0
UNDECIDED_LIMIT = 64  # frames held per side while the client side is unknown
SILENT_WINDOW = 64  # acks=0 produce requests kept in case a broker answers them anyway


class Request:
    __slots__ = ("frame", "header", "body", "topics", "reason")

    def __init__(self, frame, header, body, topics, reason):
        self.frame = frame
        self.header = header
        self.body = body
        self.topics = topics
        self.reason = reason


def endpoint(addr):
    ip, port = addr
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


class Conversation:
    """Frames of one TCP connection, both directions, turned into exchanges."""

    def __init__(self, conn, forced, max_frame):
        self.conn = conn
        self.kafka = forced  # forced by --port, else confirmed by a request that decodes
        self.sniffed = forced  # whether the first bytes were checked for a request's shape
        self.max_frame = max_frame
        # Without the SYN the capture may start mid-frame: search for a frame start first.
        synced = conn.how == "syn"
        self.framers = tuple(
            Framer(max_frame=max_frame, is_frame_start=self._frame_start(side), synced=synced)
            for side in (0, 1)
        )
        self.pending = {}  # correlation id -> deque of Requests (ids may repeat)
        # Produce requests with acks=0 expect no response, but some brokers answer them:
        # the newest are kept until a later response proves theirs will not come.
        self.silent = deque()
        self.held = ([], [])  # frames per side while the client side is unknown
        self.malformed = 0
        self.skipped = [0, 0]  # bytes per side that were not part of any frame

    # -- input -----------------------------------------------------------------------------

    def data(self, side, data, frame, ts):
        """In-order bytes of one side; return the exchanges they complete."""
        if not self.sniffed and side == self.conn.client_side and len(data) >= 14:
            # A connection that does not open with a request-shaped frame is not Kafka: drop it
            # before its framer buffers a "frame" of some other protocol.
            self.sniffed = True
            (size,) = i32(data, 0)
            if not (0 < size <= self.max_frame and plausible_request(data, 4, size)):
                self._not_kafka()
                return []
        return self._framed(side, self.framers[side].feed(data, frame, ts))

    def _frame_start(self, side):
        """The check the framer uses to re-find frame boundaries on one side (after a gap)."""

        def check(buf, pos, size):
            client = self.conn.client_side
            if client is None or side == client:
                return plausible_request(buf, pos, size)
            return size >= 4 and len(buf) - pos >= 4 and i32(buf, pos)[0] in self.pending

        return check

    def gap(self, side, size, frame, ts):
        return self._framed(side, self.framers[side].gap(size, frame, ts))

    def _framed(self, side, items):
        out = []
        for item in items:
            if item.__class__ is Frame:
                out += self.frame(side, item)
            else:
                self.skipped[side] += item.size
        return out

    def frame(self, side, frame):
        """Handle one complete frame from a side; return the exchanges it completes."""
        client = self.conn.client_side
        if client is None:
            return self._undecided(side, frame)
        if side == client:
            return self._request(frame)
        return self._response(frame)

    def end(self):
        """The connection is over: requests still waiting are unanswered."""
        out = []
        for side in (0, 1):
            out += self._framed(side, self.framers[side].finish())
        self.held = ([], [])  # never decided which side is the client: not Kafka to us
        out += [
            self._build(req, status=ex.UNANSWERED, reason="connection ended")
            for queue in self.pending.values()
            for req in queue
        ]
        out += [self._build(req, status=ex.NO_RESPONSE_EXPECTED) for req in self.silent]
        self.pending.clear()
        self.silent.clear()
        return out

    # -- direction ---------------------------------------------------------------------------

    def _undecided(self, side, frame):
        """Hold frames until one side sends a frame that decodes fully as a request."""
        if plausible_request(frame.data) and self._decodes_as_request(frame.data):
            self.conn.client_side = side
            self.conn.how = "traffic"
            out = []
            held, self.held = self.held, ([], [])
            for s in (0, 1):
                for f in held[s]:
                    if s == side:
                        out += self._request(f)
            out += self._request(frame)
            for f in held[1 - side]:
                out += self._response(f)
            return out
        if len(self.held[side]) < UNDECIDED_LIMIT:
            self.held[side].append(frame)
        return []

    @staticmethod
    def _decodes_as_request(data):
        try:
            header = messages.decode_request_header(data)
            body = messages.decode_body(
                header.api_key, "request", header.api_version, data, header.end, Context()
            )
        except DecodeError:
            return False
        return "_trailing_bytes" not in body

    # -- requests ----------------------------------------------------------------------------

    def _request(self, frame):
        data = frame.data
        try:
            header = messages.decode_request_header(data)
        except DecodeError as e:
            return self._malformed_request(frame, f"request header: {e}")
        ctx = Context()
        body = reason = None
        try:
            body = messages.decode_body(
                header.api_key, "request", header.api_version, data, header.end, ctx
            )
        except DecodeError as e:
            reason = f"request body: {e}"
        if not self.kafka:
            if body is None or "_trailing_bytes" in body:
                self._not_kafka()
                return []
            self.kafka = True
        req = Request(frame, header, body, ctx.topics, reason)
        if header.api_key == PRODUCE and body is not None and body.get("Acks") == 0:
            self.silent.append(req)
            if len(self.silent) > SILENT_WINDOW:
                return [self._build(self.silent.popleft(), status=ex.NO_RESPONSE_EXPECTED)]
            return []
        queue = self.pending.get(header.correlation_id)
        if queue is None:
            self.pending[header.correlation_id] = deque([req])
        else:
            queue.append(req)
        return []

    def _unsilence(self, corr):
        """The acks=0 request a response answers, if any; and the older ones, which were
        not answered (a broker answers in order)."""
        for req in self.silent:
            if req.header.correlation_id == corr:
                break
        else:
            return None, []
        done = []
        while self.silent[0] is not req:
            done.append(self._build(self.silent.popleft(), status=ex.NO_RESPONSE_EXPECTED))
        self.silent.popleft()
        return req, done

    def _malformed_request(self, frame, reason):
        if not self.kafka:
            self._not_kafka()
            return []
        self.malformed += 1
        return [self._build(Request(frame, None, None, [], reason), status=ex.MALFORMED)]

    def _not_kafka(self):
        self.conn.ignored = True
        self.pending.clear()
        self.silent.clear()

    # -- responses ---------------------------------------------------------------------------

    def _response(self, frame):
        if not self.kafka:
            return []  # a response before any request that decoded: not (yet) Kafka to us
        data = frame.data
        if len(data) < 4:
            self.malformed += 1
            return [
                self._build(
                    None, frame, status=ex.MALFORMED, reason="response shorter than a header"
                )
            ]
        (corr,) = i32(data, 0)
        queue = self.pending.get(corr)
        if queue:
            req = queue.popleft()
            if not queue:
                del self.pending[corr]
            out = self._answered_before(req)
        else:
            req, out = self._unsilence(corr)
            if req is None:
                return [self._build(None, frame, corr=corr, status=ex.ORPHAN_RESPONSE)]
        return out + [self._answer(req, frame)]

    def _answered_before(self, req):
        """acks=0 requests sent before an answered request will get no response."""
        out = []
        while self.silent and self.silent[0].frame.offset < req.frame.offset:
            out.append(self._build(self.silent.popleft(), status=ex.NO_RESPONSE_EXPECTED))
        return out

    def _answer(self, req, frame):
        data = frame.data
        if req.header is None:
            return self._build(req, frame, status=ex.MALFORMED, reason=req.reason)
        key, version = req.header.api_key, req.header.api_version
        ctx = Context()
        body = reason = None
        try:
            _, pos = messages.decode_response_header(data, key, version)
            body = messages.decode_body(key, "response", version, data, pos, ctx)
        except DecodeError as e:
            reason = f"response body: {e}"
        return self._build(req, frame, body, ctx, reason=reason)

    # -- rows --------------------------------------------------------------------------------

    def _build(self, req, resp=None, body=None, ctx=None, corr=None, status=None, reason=None):
        conn = self.conn
        client_side = conn.client_side if conn.client_side is not None else 0
        header = req.header if req is not None else None
        row = Exchange(
            stream=conn.id,
            client=endpoint(conn.endpoints[client_side]),
            broker=endpoint(conn.endpoints[1 - client_side]),
            protocol="0.8+",
            correlation_id=header.correlation_id if header else corr,
            status=status,
            reason=reason or (req.reason if req is not None else None),
        )
        topics = []
        if header is not None:
            row.api_key = header.api_key
            row.api_name = schema.api_names().get(header.api_key)
            row.api_version = header.api_version
            row.client_id = header.client_id
        if req is not None:
            f = req.frame
            row.request_frame, row.request_start, row.request_end = (
                f.last_frame,
                f.first_ts,
                f.last_ts,
            )
            row.request_bytes = len(f.data) + 4
            row.request = req.body
            topics += req.topics
        if resp is not None:
            row.response_frame, row.response_start, row.response_end = (
                resp.last_frame,
                resp.first_ts,
                resp.last_ts,
            )
            row.response_bytes = len(resp.data) + 4
            row.response = body
            if req is not None:
                row.latency_ms = (resp.last_ts - req.frame.first_ts) / 1e6
                row.server_ms = (resp.first_ts - req.frame.last_ts) / 1e6
            if body is not None:
                row.error_code = ctx.error
                row.error_name = error_name(ctx.error)
                row.throttle_ms = body.get("ThrottleTimeMs")
                topics += ctx.topics
        row.topics = sorted(set(topics))
        if row.status is None:
            if row.reason:
                row.status = ex.MALFORMED
            elif row.error_code:
                row.status = ex.ERROR
            else:
                row.status = ex.OK
        return row
