"""Kafka 0.8 and later on one connection: requests paired with responses by correlation id.

A response carries no API key or version, so it is decoded with those of its request.
"""

import heapq
import struct
from collections import deque

from ..errors import DecodeError
from ..framing import CutFrame, ShortFrame
from ..protocol import envelope, messages, sasl, schema
from ..protocol.apikeys import (
    CREATE_TOPICS,
    ENVELOPE,
    FETCH,
    FETCH_SNAPSHOT,
    GROUP_PROTOCOL,
    METADATA,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SHARE_FETCH,
)
from ..protocol.codegen import Context
from ..protocol.embedded import decode_group_protocol
from ..protocol.errors import error_name
from ..protocol.messages import (
    correlation_id,
    decode_request_header,
    decode_response_header,
    scan_body,
)
from . import exchange as ex
from .directory import NO_TOPIC_ID
from .rows import REQUEST, RESPONSE, Malformed, Request, Side, build, ended
from .timeouts import due, expired_rows

PROTOCOL = "0.8+"
_KEY_VERSION_ID = struct.Struct(">hhi").unpack_from  # a request header's first fields
SILENT_WINDOW = 64  # acks=0 produce requests kept in case a broker answers them anyway
# A response captured before its request is held this long (capture time) for the request
# to come, and at most this many are held.
EARLY_WINDOW = 200_000_000
EARLY_LIMIT = 64

# APIs whose bodies the session reads as they pass (what connections learn from each other,
# SASL state, secrets to redact, Envelope's forwarded requests): decoded at once. Every other
# body is scanned for what the columns need and decoded in full only when it is read.
EAGER = (
    frozenset(
        {METADATA, CREATE_TOPICS, SASL_HANDSHAKE, SASL_AUTHENTICATE, ENVELOPE} | GROUP_PROTOCOL
    )
    | sasl.SECRET_APIS
)


def header_captured(data, request):
    """Whether the body of a CutFrame holds its header: a request's, or a response's
    correlation id."""
    if not request:
        return len(data) >= 4
    try:
        decode_request_header(data)
    except DecodeError:
        return False
    return True


def cut_reason(kind, frame):
    """What the capture took of a CutFrame: lost segments, else the snap length's cut."""
    size = frame.size + 4
    if frame.lost:
        return f"{kind} lost {frame.lost} of {size} bytes in a capture gap"
    return f"{kind} cut by the capture: {len(frame.data) + 4} of {size} bytes captured"


def decode_later(key, kind, version, data, pos, records):
    """The full body behind a LazyBody (its scan succeeded, so this does too)."""
    try:
        return messages.decode_body(key, kind, version, data, pos, Context(records))
    except DecodeError:  # pragma: no cover - the scan walked the same fields
        return None


def scanned(body):
    """Whether a body is one the session only scanned, not decoded: a LazyBody of
    decode_later, whose (decode_later, key, kind, version, data, pos, record decoder) a
    reader may read from its bytes instead of decoding it."""
    return body.__class__ is ex.LazyBody and body[0] is decode_later


def short_reason(kind, frame):
    """Why a frame its sender cut short is malformed ("request cut short by the client: 30 of
    504 bytes, then FIN")."""
    who = "client" if kind == "request" else "broker"
    have, size = len(frame.data) + 4, frame.size + 4
    return f"{kind} cut short by the {who}: {have} of {size} bytes, then {frame.end}"


def decodes_fully(data):
    """Whether a frame is a request that decodes completely: the test for "this is Kafka"."""
    return messages.decodes_exactly(messages.decode_request, data, Context())


class Waiting(deque):
    """The requests waiting on one correlation id, oldest first (a session's queues become
    Waiting ones once its broker side re-finds a boundary), and what re-finding frame
    boundaries asks of them per (api key, version): how many wait and the earliest time one
    was complete. A candidate response is then checked once per kind, not once per request
    (ids may repeat: an attacker's 100,000 requests on one id would otherwise cost 100,000
    decodes at every byte tried)."""

    def __init__(self):
        super().__init__()
        self.kinds = {}  # (api_key, api_version) -> [count, heap of (last_ts, n, request)]
        self.gone = set()  # ids of requests left but still in a heap (deleted lazily)
        self.added = 0

    def append(self, req):
        super().append(req)
        kind = self.kinds.setdefault((req.api_key, req.api_version), [0, []])
        kind[0] += 1
        self.added += 1
        heapq.heappush(kind[1], (req.frame.last_ts, self.added, req))

    def popleft(self):
        req = super().popleft()
        self._forget(req)
        return req

    def remove(self, req):
        super().remove(req)
        self._forget(req)

    def _forget(self, req):
        key = (req.api_key, req.api_version)
        kind = self.kinds[key]
        kind[0] -= 1
        if not kind[0]:
            del self.kinds[key]
            self.gone.difference_update(id(item[2]) for item in kind[1])
            return
        self.gone.add(id(req))

    def earliest(self):
        """(api_key, earliest last_ts, a request) per kind waiting."""
        out = []
        for (key, _), (_, heap) in self.kinds.items():
            while id(heap[0][2]) in self.gone:
                self.gone.discard(id(heapq.heappop(heap)[2]))
            out.append((key, heap[0][0], heap[0][2]))
        return out


class ModernSession:
    PROTOCOL = PROTOCOL

    def __init__(self, conn, directory, options, records):
        self.conn = conn
        self.directory = directory
        self.show_secrets = options.show_secrets
        self.records = records  # the record-set decoder handed to every Context
        # Correlation id -> the Request waiting on it, or a deque of them when the id repeats
        # (a deque costs 760 bytes: one per request in flight would be most of a session's
        # memory). See _requests.
        self.pending = {}
        self.sent = deque()  # requests in the order sent; answered ones leave lazily
        # The queues below are rarely used: () until their first item, then deques.
        self.early = ()  # (correlation id, frame) of responses captured before a request
        self.last_response_end = None  # when the broker last finished a response
        # Produce requests with acks=0 expect no response, but some brokers answer them:
        # the newest are kept until a later response proves theirs will not come.
        self.silent = ()
        # Whether the entries of `pending` are Waiting queues, indexed by kind: from the first
        # time the broker side re-finds a boundary; until then a Request or a plain deque, as
        # cheap as can be.
        self.indexed = False
        # The SASL mechanism the broker accepted in the last SaslHandshake; None before its
        # answer or after a refusal: tokens are then read as unknown, opaque.
        self.mechanism = None
        self.raw_sasl = False  # after a SaslHandshake v0: raw SASL tokens, no Kafka headers
        self.raw_pending = ()
        self.client_id = None  # of the last request: raw SASL tokens have no header
        self.lost = False  # bytes of the broker's side went missing (a capture gap)
        self.bad = Malformed()
        self.api_names = schema.api_names()

    # Responses larger than this only answer Fetch-like requests.
    SMALL_RESPONSE = 8 * 1024 * 1024
    LARGE_RESPONSES = frozenset({FETCH, ENVELOPE, FETCH_SNAPSHOT, SHARE_FETCH})

    def could_answer(self, corr, size, ts, whole=None):
        """Whether a frame found while re-finding boundaries can be the response to a waiting
        request: its correlation id waits, its request was captured before it, its size is
        believable for that API, and when the whole frame is at hand, it decodes as one."""
        if not self.indexed:
            self._index()
        queue = self.pending.get(corr)
        if queue:
            kinds = queue.earliest()
        else:  # acks=0 requests: a bounded window (SILENT_WINDOW)
            kinds = [
                (r.api_key, r.frame.last_ts, r) for r in self.silent if r.correlation_id == corr
            ]
        # The size and the decoding depend on the api key and version only: many requests
        # waiting on one id cost one check a kind.
        return any(
            first_ts <= ts
            and (size <= self.SMALL_RESPONSE or key in self.LARGE_RESPONSES)
            and (whole is None or self._decodes_as_response(req, whole))
            for key, first_ts, req in kinds
        )

    def _index(self):
        """From now on, the waiting queues know their kinds (Waiting)."""
        self.indexed = True
        for corr, queue in list(self.pending.items()):
            waiting = Waiting()
            for req in _requests(queue):
                waiting.append(req)
            self.pending[corr] = waiting

    @staticmethod
    def _decodes_as_response(req, data):
        key, version = req.api_key, req.api_version
        if key is None or messages.body_decoder(key, "response", version) is None:
            return True  # nothing to check it against
        return messages.decodes_exactly(messages.decode_response, data, key, version, Context())

    def response_lost(self):
        """A whole response was lost in a gap: in raw SASL, the oldest token's."""
        if not self.raw_pending:
            return []
        req = self.raw_pending.popleft()
        why = "response lost in a capture gap"
        return [build(self.conn, PROTOCOL, req, status=ex.UNANSWERED, reason=why)]

    # -- requests ----------------------------------------------------------------------------

    def request(self, frame):
        data = frame.data
        if self.raw_sasl:
            if not decodes_fully(data):
                if not self.raw_pending:
                    self.raw_pending = deque()
                self.raw_pending.append(self._raw_token(frame, from_client=True))
                return []
            self.raw_sasl = False  # the client is back to Kafka requests
            # Tokens still waiting lost their responses: do not give them Kafka responses.
            early = [
                build(self.conn, PROTOCOL, r, status=ex.UNANSWERED, reason="response lost")
                for r in self.raw_pending
            ]
            self.raw_pending = ()
            return early + self.request(frame)
        sent = self.sent
        if sent and sent[-1].api_key == SASL_HANDSHAKE:
            lost = self._handshake_lost(sent[-1], data)
            if lost:
                return lost + self.request(frame)
        # Cut short by the client: decoded as far as it goes, a row at once (no answer comes).
        short = frame.__class__ is ShortFrame
        try:
            header = decode_request_header(data)
        except DecodeError as e:
            self.bad.count(REQUEST, frame.data)
            if short:
                return [build(self.conn, PROTOCOL, self._short_header(frame), status=ex.MALFORMED)]
            req = Request(frame, reason=f"request header: {e}")
            return [build(self.conn, PROTOCOL, req, status=ex.MALFORMED)]
        # Unpacked rather than read by name: once a request, names cost a look-up each.
        key, version, corr, client_id, _, end = header
        self.client_id = client_id
        if key in EAGER or short:
            body, ctx, reason = self._decode(key, "request", version, frame, end)
            if body is not None and reason is None:  # learn only from whole bodies
                self.directory.learn(key, body, None)
                if key in GROUP_PROTOCOL:
                    group = self.directory.group_type(key, body, None)
                    decode_group_protocol(key, body, None, group)
            if key == SASL_HANDSHAKE:  # what the client asks for is not settled yet
                self.mechanism = None
            if body is not None:
                sasl.redact_body(key, body, self.mechanism, True, self.show_secrets)
                if key == ENVELOPE:
                    envelope.open_request(body, self.show_secrets)
        else:
            body, ctx, reason = self._scan(key, "request", version, frame, end)
        topics, names = self._topics(ctx)
        name = self.api_names.get(key)
        if name is None:  # a key the schema does not know still gets a name to group by
            name = f"Unknown({key})"
        # By position: a keyword call builds a dict, once per request.
        req = Request(
            frame,
            key,
            name,
            version,
            corr,
            client_id,
            body,
            topics,
            reason,
            names,
            ctx.record_sets,
        )
        if short:
            return [build(self.conn, PROTOCOL, req, status=ex.MALFORMED)]
        if self.early:
            early = self._claim_early(req)
            out = self.expire_early(frame.last_ts)
            if early is not None:
                return out + [self._answer(req, early)]
            if out:
                return out + self._queue(req, ctx, reason)
        return self._queue(req, ctx, reason)

    def _short_header(self, frame):
        """A request cut short inside its header: the API key, version and correlation id
        when they were sent."""
        why = short_reason("request", frame)
        data = frame.data
        if len(data) < 8:
            return Request(frame, reason=why)
        key, version, corr = _KEY_VERSION_ID(data, 0)
        name = self.api_names.get(key) or f"Unknown({key})"
        return Request(frame, key, name, version, corr, reason=why)

    def _queue(self, req, ctx, reason):
        """A request waits for its response (acks=0 produce requests, for none)."""
        key = req.api_key
        if key == PRODUCE and ctx.fields.get("Acks") == 0:
            if not self.silent:
                self.silent = deque()
            self.silent.append(req)
            if len(self.silent) > SILENT_WINDOW:
                return [self._unanswerable(self.silent.popleft())]
            return []
        self.sent.append(req)
        corr = req.correlation_id
        waiting = self.pending.get(corr)
        if waiting is None:
            if not self.indexed:
                self.pending[corr] = req
                return []
            waiting = self.pending[corr] = Waiting()
        elif waiting.__class__ is Request:  # the id repeats: a queue from now on
            waiting = self.pending[corr] = deque((waiting,))
        waiting.append(req)
        return []

    def _decode(self, key, kind, version, frame, pos):
        """(body, ctx, reason) of a body decoded in full. A body cut short keeps the fields
        decoded before the failure, and `_stopped_at`, the offset where decoding stopped."""
        data = frame.data
        ctx = Context(self.records)
        try:
            body = messages.decode_body(key, kind, version, data, pos, ctx)
        except DecodeError as e:
            partial = dict(e.partial, _stopped_at=e.offset) if e.partial else None
            if frame.__class__ is CutFrame:  # no fault of the frame's
                return partial, ctx, cut_reason(kind, frame)
            self.bad.count(REQUEST if kind == "request" else RESPONSE, data)
            if frame.__class__ is ShortFrame:
                return partial, ctx, short_reason(kind, frame)
            return partial, ctx, f"{kind} body: {e}"
        if frame.__class__ is ShortFrame:  # what was sent decodes, but is not all of it
            self.bad.count(REQUEST if kind == "request" else RESPONSE, data)
            return body, ctx, short_reason(kind, frame)
        return body, ctx, None

    def _scan(self, key, kind, version, frame, pos):
        """(LazyBody, ctx, reason) of a body scanned for its notes, decoded when read; a body
        that does not scan is decoded at once, for what it holds before the failure."""
        data = frame.data
        ctx = Context(self.records)
        try:
            scan_body(key, kind, version, data, pos, ctx)
        except DecodeError:
            return self._decode(key, kind, version, frame, pos)
        return (decode_later, key, kind, version, data, pos, self.records), ctx, None

    def _topics(self, ctx):
        """Topic names of a decoded body, with ids resolved where Metadata named them;
        and the id -> name map of those resolved."""
        if not ctx.topic_ids:
            return ctx.topics, None
        known = self.directory.topic_names
        resolved = {t: known[t] for t in ctx.topic_ids if t in known}
        unresolved = [t for t in ctx.topic_ids if t not in known and t != NO_TOPIC_ID]
        return ctx.topics + list(resolved.values()) + unresolved, resolved

    def _unanswerable(self, req):
        return build(self.conn, PROTOCOL, req, status=ex.NO_RESPONSE_EXPECTED)

    # -- responses ---------------------------------------------------------------------------

    def response(self, frame):
        data = frame.data
        if self.raw_pending:
            # SASL is lock-step: a client sends a token once the last one was answered, so a
            # token answers the newest waiting; the answers to older ones were lost.
            out = []
            while len(self.raw_pending) > 1:
                out += self.response_lost()
            req = self.raw_pending.popleft()
            out.append(build(self.conn, PROTOCOL, req, self._raw_token(frame, from_client=False)))
            return out
        if len(data) < 4:
            self.bad.count(RESPONSE, frame.data)
            why = "response shorter than a header"
            if frame.__class__ is ShortFrame:
                why = short_reason("response", frame)
            resp = Side(frame, reason=why)
            return [build(self.conn, PROTOCOL, None, resp, status=ex.MALFORMED)]
        corr = correlation_id(data)
        queue = self.pending.get(corr)
        out = []
        if queue is not None:
            if queue.__class__ is Request:
                req = queue
                del self.pending[corr]
            else:
                req = queue.popleft()
                if not queue:
                    del self.pending[corr]
            # A broker answers in order: requests sent before this one have had their chance.
            while self.silent and self.silent[0].frame.offset < req.frame.offset:
                out.append(self._unanswerable(self.silent.popleft()))
            out += self._passed_over(req)
        else:
            req = self._answered_silent(corr, out)
            if req is None:
                # Its request may come next: captures on several queues or interfaces can
                # record a response before the request it answers.
                if not self.early:
                    self.early = deque()
                self.early.append((corr, frame))
                return self.expire_early(frame.last_ts, len(self.early) > EARLY_LIMIT)
        out.append(self._answer(req, frame))
        return out

    def _claim_early(self, req):
        """The response captured before `req` that answers it, taken off the early list."""
        for i, (corr, frame) in enumerate(self.early):
            if corr == req.correlation_id:
                del self.early[i]
                return frame
        return None

    def expire_early(self, now, one_more=False):
        """Early responses whose request has not come within EARLY_WINDOW are orphans."""
        out = []
        early = self.early
        while early and (one_more or early[0][1].last_ts < now - EARLY_WINDOW):
            corr, frame = early.popleft()
            out.append(build(self.conn, PROTOCOL, None, Side(frame), ex.ORPHAN_RESPONSE, corr))
            one_more = False
        return out

    def _handshake_lost(self, hs, data):
        """After a SaslHandshake v0 still waiting, a frame from the client that is not a Kafka
        request is a raw SASL token: a client sends one only once the broker accepted the
        mechanism, so the capture lost that answer. The handshake (and what waited before it)
        then ends unanswered and raw tokens follow; [] if this is not that case."""
        if hs.api_version != 0 or not self._waiting(hs) or decodes_fully(data):
            return []
        self.lost = True  # the capture lost the broker's answer
        out = self._passed_over(hs)  # takes the handshake off `sent`, and those before it
        self._unqueue(hs)
        why = "response lost in a capture gap"
        out.append(build(self.conn, PROTOCOL, hs, status=ex.UNANSWERED, reason=why))
        mechanism = (hs.body or {}).get("Mechanism")
        self.mechanism = mechanism if isinstance(mechanism, str) else None
        self.raw_sasl = True
        return out

    def _waiting(self, r):
        queue = self.pending.get(r.correlation_id)
        return queue is r or (queue is not None and queue.__class__ is not Request and r in queue)

    def _unqueue(self, r):
        """Take a request still waiting off its queue."""
        queue = self.pending[r.correlation_id]
        if queue is r:
            del self.pending[r.correlation_id]
            return
        queue.remove(r)
        if not queue:
            del self.pending[r.correlation_id]

    def _passed_over(self, req):
        """Requests sent before `req` still waiting when its response came: a broker answers in
        order, so theirs will not come (lost in a capture gap, or never sent). The requests
        sent before it are at the front of `sent`: no scan of everything in flight."""
        sent = self.sent
        older = []
        while sent:
            r = sent.popleft()
            if r is req:
                break
            if self._waiting(r):
                self._unqueue(r)
                older.append(r)
        if not older:
            return []
        why = "response lost in a capture gap" if self.lost else "a later request was answered"
        return [build(self.conn, PROTOCOL, r, status=ex.UNANSWERED, reason=why) for r in older]

    def _answered_silent(self, corr, out):
        """The acks=0 request this response answers, if any; older ones go to out."""
        for req in self.silent:
            if req.correlation_id == corr:
                while self.silent[0] is not req:
                    out.append(self._unanswerable(self.silent.popleft()))
                return self.silent.popleft()
        return None

    def _answer(self, req, frame):
        key, version = req.api_key, req.api_version
        prev, self.last_response_end = self.last_response_end, frame.last_ts
        queued = max(0, prev - req.frame.last_ts) if prev is not None else 0
        if key is None:  # the request's header did not decode: nor can its response
            self.bad.count(RESPONSE, frame.data)
            return build(self.conn, PROTOCOL, req, Side(frame), status=ex.MALFORMED)
        data = frame.data
        try:
            _, pos = decode_response_header(data, key, version)
        except DecodeError as e:
            self.bad.count(RESPONSE, data)
            why = f"response body: {e}"
            if frame.__class__ is ShortFrame:
                why = short_reason("response", frame)
            resp = Side(frame, reason=why)
            return build(self.conn, PROTOCOL, req, resp, queue_ns=queued)
        if key in EAGER or frame.__class__ is ShortFrame:
            body, ctx, reason = self._decode(key, "response", version, frame, pos)
            if body is not None and reason is None:
                self.directory.learn(key, req.body, body)
                if key in GROUP_PROTOCOL:
                    group = self.directory.group_type(key, req.body, body)
                    decode_group_protocol(key, None, body, group)
                elif key == SASL_HANDSHAKE:
                    self.mechanism = sasl.accepted_mechanism(req.body, body)
                    self.raw_sasl = version == 0 and not body.get("ErrorCode")
            elif key == SASL_HANDSHAKE:  # an answer that does not decode settles nothing
                self.mechanism = None
            if body is not None:
                sasl.redact_body(key, body, self.mechanism, False, self.show_secrets)
                if key == ENVELOPE:
                    envelope.open_response(req.body, body, self.show_secrets)
        else:
            body, ctx, reason = self._scan(key, "response", version, frame, pos)
        throttle = ctx.fields.get("ThrottleTimeMs") if body is not None else None
        topics, names = self._topics(ctx)
        resp = Side(
            frame, body, topics, ctx.error, error_name(ctx.error), reason, names, ctx.record_sets
        )
        # By position (status, correlation id and reason left to build): keywords would make
        # this a Python call, once an exchange.
        return build(self.conn, PROTOCOL, req, resp, None, None, throttle, None, queued)

    # -- raw SASL (after SaslHandshake v0) ---------------------------------------------------

    def _raw_token(self, frame, from_client):
        token = sasl.parse_token(self.mechanism, frame.data, from_client, self.show_secrets)
        if from_client:
            return Request(
                frame,
                api_key=SASL_AUTHENTICATE,
                api_name=self.api_names[SASL_AUTHENTICATE],
                client_id=self.client_id,
                body={"AuthBytes": token, "raw": True},
            )
        return Side(frame, body={"AuthBytes": token, "raw": True}, error_name="NONE")

    # -- state -------------------------------------------------------------------------------

    def state(self):
        """What the session holds that decides what comes next, as plain values: requests
        waiting (in the order sent), acks=0 requests kept, responses held for their request,
        raw SASL tokens waiting, the client id of the last request and the end of the last
        response. Facts a run that joined mid-stream cannot know and that matter only now
        and then (the SASL mechanism, a gap in the broker's bytes) are apart, in `rare_state`."""
        waiting = {id(r) for q in self.pending.values() for r in _requests(q)}
        return (
            PROTOCOL,
            tuple(_identity(r) for r in self.sent if id(r) in waiting),
            tuple(_identity(r) for r in self.silent),
            tuple((corr, f.first_frame, f.last_frame) for corr, f in self.early),
            tuple(_identity(r) for r in self.raw_pending),
            self.raw_sasl,
            self.client_id,
            self.last_response_end,
        )

    def rare_state(self):
        return (self.mechanism, self.lost)

    # -- end ---------------------------------------------------------------------------------

    def expire(self, now, allowance_ns):
        """Rows for what waited past its deadline (session/timeouts.py), taken off: requests
        `unanswered`, acks=0 produce requests `no_response_expected`, raw SASL tokens
        `unanswered`, and responses held for a request that never came, orphans."""
        out = []
        for corr, queue in list(self.pending.items()):
            if not due(_requests(queue)[0], now, allowance_ns):
                continue
            if queue.__class__ is Request:
                queue = deque((queue,))
            out += expired_rows(self, queue, now, allowance_ns)
            if queue:
                self.pending[corr] = queue
            else:
                del self.pending[corr]
        out += expired_rows(self, self.silent, now, allowance_ns, ex.NO_RESPONSE_EXPECTED)
        out += expired_rows(self, self.raw_pending, now, allowance_ns)
        out += self.expire_early(now)
        out.sort(key=lambda row: row.request_frame or 0)
        return out

    def end(self):
        """The connection is over: requests still waiting are unanswered."""
        why = "response lost in a capture gap" if self.lost else ended(self.conn)
        out = [
            build(self.conn, PROTOCOL, req, status=ex.UNANSWERED, reason=why)
            for queue in self.pending.values()
            for req in _requests(queue)
        ]
        out += [self._unanswerable(req) for req in self.silent]
        out += [
            build(self.conn, PROTOCOL, req, status=ex.UNANSWERED, reason=ended(self.conn))
            for req in self.raw_pending
        ]
        out += [
            build(self.conn, PROTOCOL, None, Side(frame), ex.ORPHAN_RESPONSE, corr)
            for corr, frame in self.early
        ]
        self.early = self.silent = self.raw_pending = ()
        self.pending.clear()
        self.sent.clear()
        return out

    def queues(self):
        """The requests waiting for their response, one list per correlation id, oldest
        first."""
        return [list(_requests(q)) for q in self.pending.values()]


def _requests(entry):
    """The requests of an entry of `pending`: one Request, or a deque of those on one id."""
    return (entry,) if entry.__class__ is Request else entry


def _identity(req):
    """A request as two runs over the same packets can compare it."""
    frame = req.frame
    return (req.correlation_id, req.api_key, req.api_version, frame.first_frame, frame.last_frame)
