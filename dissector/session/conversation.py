"""Per-connection state machine: bytes of both sides in, exchanges out.

It frames each side, decides which side is the client when TCP could not tell, decides
whether the connection speaks Kafka at all and which generation (0.7 or 0.8+), and hands
each frame to the session of that generation.
"""

from ..errors import DecodeError
from ..framing.framer import CutFrame, Frame, Framer, ShortFrame, Skipped
from ..protocol import legacy, messages
from ..protocol.codegen import Context
from ..protocol.messages import decode_request_header
from ..protocol.primitives import i32
from ..tls import TlsConnection, opens_tls
from .legacy import LegacySession
from .modern import ModernSession, decodes_fully, header_captured
from .plausible import plausible_request
from .rows import endpoint, side_name

_NOTHING_ABANDONED = (0, 0)
UNDECIDED_LIMIT = 64  # frames held per side while the client side is unknown
# A response a search finds that is no larger is decided once whole, by decoding it.
WHOLE_WAIT = 1 << 20
# Body bytes the frame-start checks read (request header to the client id's length; a
# response's correlation id): waiting for more would hold a short request back.
HEADER_LOOKAHEAD = 10


class Conversation:
    """Frames of one TCP connection, both directions, turned into exchanges."""

    def __init__(self, conn, options, directory, records=None):
        self.conn = conn
        self.options = options
        self.directory = directory
        self.records = records
        # Forced by --port: the connection is Kafka whatever its first bytes look like.
        self.forced = bool(options.ports)
        self.session = None  # ModernSession or LegacySession once the first request is seen
        self.sniffed = self.forced  # whether the first bytes were checked for a request's shape
        self.held = ([], [])  # frames per side while the client side is unknown
        # While it is unknown, per side: correlation id -> (api key, version, time) of the held
        # frames that decode as requests, and the index in `held` of the first of them.
        undecided = conn.client_side is None
        self.asked = ({}, {}) if undecided else None
        self.first_asked = [None, None] if undecided else None
        # Bytes per side in frames that were framed but not used: held while the client side
        # was unknown and then found not to be requests, or responses before any request.
        self.unused = [0, 0]
        # Of those, per side, the bytes counted while the client side was unknown: framed as
        # a client's, by the framer the broker's side drops once it is known (_decide).
        self.unused_undecided = [0, 0]
        self.gaps = [0, 0]
        # Bytes per side of a frame left unfinished when the other side ended the connection
        # (its RST or FIN): data a peer abandoned, not capture loss (a part of bytes_skipped).
        # Set at the end: a tuple, as most connections keep theirs (0, 0), shared.
        self.abandoned = _NOTHING_ABANDONED
        self.tls = None  # a TlsConnection, once the client's first bytes open TLS
        self.opened = conn.how != "syn"  # whether the client's first bytes were examined
        # Without the SYN the capture may start mid-frame: search for a frame start first.
        synced = conn.how == "syn"
        self.framers = tuple(
            self._framer(self._frame_start(side), self._refuses(side), synced, self._responds(side))
            for side in (0, 1)
        )
        # Without the SYN (or --port) either side may be the client: each side is framed as a
        # client's too (`framers`, frame starts shaped as requests) and as a broker's
        # (`answering`, frame starts that answer a request the other side sent), until a
        # request is answered. The broker side's `answering` framer then takes its place.
        self.answering = None
        self.replies = None  # per side, frames of its `answering` framer held meanwhile
        if conn.client_side is None:
            self.answering = tuple(
                self._framer(
                    self._answer_start(side),
                    self._unasked(side),
                    False,
                    self._responds(side, answering=True),
                )
                for side in (0, 1)
            )
            self.replies = ([], [])

    def _framer(self, check, refuses, synced, orphans):
        return Framer(
            max_frame=self.options.max_frame,
            is_frame_start=check,
            refuses=refuses,
            synced=synced,
            lookahead=HEADER_LOOKAHEAD,
            orphans=orphans,
        )

    @property
    def kafka(self):
        return self.session is not None

    # -- bytes in ----------------------------------------------------------------------------

    def data(self, side, data, frame, ts, start=0):
        """In-order bytes of one side, data[start:]; return the exchanges they complete."""
        if self.tls is not None:
            return self._decrypted(side, data, frame, ts, start)
        if not self.opened and side == self.conn.client_side:
            # Seen from its SYN, a connection opens with the client's first bytes: a TLS
            # ClientHello makes it TLS, its plaintext (if any) is what is framed.
            self.opened = True
            if opens_tls(data, start):
                self.tls = TlsConnection(self.directory.tls_keys, side)
                return self._decrypted(side, data, frame, ts, start)
        return self._plain(side, data, frame, ts, start)

    def _decrypted(self, side, data, frame, ts, start):
        tls = self.tls
        out = []
        for plain, last_frame, last_ts in tls.feed(side, data, frame, ts, start):
            out += self._plain(side, plain, last_frame, last_ts, 0)
        if tls.done and self.session is None and not self.conn.ignored:
            self._not_kafka()  # no plaintext will come: nothing to frame
        return out

    def _plain(self, side, data, frame, ts, start):
        out = ()  # no list made for a packet of a connection whose client side is known
        if self.answering is not None:
            if self.conn.client_side is None:
                # First as the broker's: an answer decides, and its framer is then this side's.
                answering = self.answering[side]
                out = self._replies(side, answering, answering.feed(data, frame, ts, start))
                if self.framers[side] is answering:
                    return out
            else:  # TCP told (a SYN after all)
                self._drop_answering()
        framer = self.framers[side]
        # Only a stream seen from its SYN starts with a frame; later bytes may be mid-frame.
        if (
            not self.sniffed
            and self.conn.how == "syn"
            and side == self.conn.client_side
            and len(data) - start >= 14
            and framer.offset == 0  # a size prefix sent on its own came before
        ):
            # A connection that does not open with a request-shaped frame is not Kafka: drop it
            # before its framer buffers a "frame" of some other protocol.
            self.sniffed = True
            (size,) = i32(data, start)
            shaped = 0 < size <= self.options.max_frame and self._request_shaped(
                data, start + 4, size
            )
            if not shaped and not self._known_broker():
                self._not_kafka()
                return []
        framed = self._framed(side, framer.feed(data, frame, ts, start), framer)
        return out + framed if out else framed

    def gap(self, side, size, frame, ts, cut=False):
        self.gaps[side] += 1
        if self.session is not None and side != self.conn.client_side and not cut:
            self.session.lost = True  # a response may be in the missing bytes
        out = []
        tls = self.tls
        if self.answering is not None and self.conn.client_side is None:
            answering = self.answering[side]
            items = answering.finish() if tls else answering.gap(size, frame, ts, cut)
            out = self._replies(side, answering, items)
            if self.framers[side] is answering:
                if tls is not None:
                    tls.lose(side, frame)
                return out
        framer = self.framers[side]
        if tls is not None:  # records lost: the side's plaintext ends here
            tls.lose(side, frame)
            return out + self._framed(side, framer.finish(), framer)
        return out + self._framed(side, framer.gap(size, frame, ts, cut), framer)

    def end(self):
        """The connection is over: flush partial frames; requests still waiting are unanswered."""
        out = []
        left = {}  # framer -> bytes of a frame it was given unfinished (see _left)
        for side in (0, 1):
            if self.answering is None or self.conn.client_side is not None:
                break  # decided (by the last frames of a side's `answering` framer, say)
            answering = self.answering[side]
            items = answering.finish(self._ended(side, answering))
            left[answering] = self._left(side, items)
            out += self._replies(side, answering, items)
        conn = self.conn
        for side in (0, 1):
            framer = self.framers[side]
            items = framer.finish(self._ended(side, framer))
            left[framer] = left.get(framer, 0) + self._left(side, items)
            out += self._framed(side, items, framer)
        if conn.client_side is None and not conn.ignored:
            out += self._settle()  # no request was seen answered: the first one decides
        # Counted from the framers the sides keep: settling may have swapped one in.
        kept = tuple(left.get(f, 0) for f in self.framers)
        if any(kept):  # else the shared (0, 0) stays
            self.abandoned = tuple(a + k for a, k in zip(self.abandoned, kept, strict=True))
        for side in (0, 1):  # never decided which side is the client: not Kafka to us
            self._unused(side, sum(len(f.data) + 4 for f in self.held[side]))
        self.held = ([], [])
        if self.session is not None and not self.conn.ignored:
            out += self.session.end()
        self._drop_answering()
        for framer in self.framers:  # their checks hold this object: no cycle left to collect
            framer.is_frame_start = framer.refuses = framer.orphans = None
        return out

    def _left(self, side, items):
        """The bytes of the frame a side's framer ends unfinished because the other side
        closed or reset the connection: abandoned by a peer, not lost by the capture."""
        conn = self.conn
        if conn.end_reason not in ("fin", "rst") or conn.ended_by != 1 - side:
            return 0
        return sum(x.size for x in items if x.__class__ is Skipped and x.reason == "truncated")

    def _drop_answering(self):
        for framer in self.answering or ():
            if framer not in self.framers:
                framer.is_frame_start = framer.refuses = framer.orphans = None
        self.answering = self.replies = None

    def _ended(self, side, framer):
        """What ended this side's stream when its sender did: "FIN" when its FIN was seen,
        "RST" when it reset the connection, every byte before delivered (missing ones became
        a gap first) and framed in step from the first (nothing skipped: no frame boundary
        was guessed). A frame left open then was cut short by its sender."""
        conn = self.conn
        halves = conn._halves
        if not halves:
            return None
        if halves[side].fin is not None:
            how = "FIN"
        elif conn.end_reason == "rst" and conn.ended_by == side:
            how = "RST"
        else:
            return None
        return None if self.gaps[side] or framer.bytes_skipped else how

    def _framed(self, side, items, source=None):
        """Exchanges from the framer's items of one side; `source`, the framer they came from,
        if it may lose its place while they are handled (the client side decided)."""
        out = []
        for item in items:
            if self.conn.ignored or (source is not None and self.framers[side] is not source):
                break
            cls = item.__class__
            if cls is Frame or cls is CutFrame or cls is ShortFrame:
                out += self.frame(side, item)
            elif (
                item.reason == "gap" and self.session is not None and side != self.conn.client_side
            ):
                # The rest of a response the capture lost: sessions that pair by order must
                # not give the next response to its request.
                out += self.session.response_lost()
        return out

    def _frame_start(self, side):
        """The check the framer uses to re-find frame boundaries on one side (after a gap)."""

        def check(buf, pos, size, ts):
            client = self.conn.client_side
            if client is None or side == client:
                return self._request_shaped(buf, pos, size)
            session = self.session
            if not isinstance(session, ModernSession):
                return False
            have = len(buf) - pos
            if session.raw_pending:
                # A raw SASL token answers the client's, which waits for it: it is all the
                # broker sends until the client speaks again, so it ends where its bytes do.
                if size > WHOLE_WAIT:
                    return False
                return None if have < size else have == size
            if size < 4 or have < 4:
                return False
            corr = i32(buf, pos)[0]
            if have >= size:
                return session.could_answer(corr, size, ts, bytes(buf[pos : pos + size]))
            if not session.could_answer(corr, size, ts):
                return False
            # A small id (1, 2, ...) is found in any data: a frame that may be one is decided
            # once whole, decoded as a response, unless too large to wait for.
            return None if size <= WHOLE_WAIT else True

        return check

    def _responds(self, side, answering=False):
        """Whether a side carries responses with correlation ids (the broker's, or, for its
        `answering` framer, the side taken for the broker's while the client side is unknown;
        not raw SASL tokens, nor 0.7): its search may find responses to requests not
        captured."""

        def responds():
            session = self.session
            if session is not None and (
                not isinstance(session, ModernSession) or session.raw_sasl or session.raw_pending
            ):
                return False
            client = self.conn.client_side
            if client is None:
                return answering
            return side != client

        return responds

    def _answer_start(self, side):
        """The check of a side's `answering` framer: a frame that starts with the correlation
        id of a request the other side sent before it, with a size believable for that API
        and, when whole at hand, that decodes as its response."""

        def check(buf, pos, size, ts):
            if size < 4 or len(buf) - pos < 4:
                return False
            kind = self.asked[1 - side].get(i32(buf, pos)[0])
            if kind is None or kind[2] > ts:
                return False
            if size > ModernSession.SMALL_RESPONSE and kind[0] not in ModernSession.LARGE_RESPONSES:
                return False
            return len(buf) - pos < size or _answers(kind, bytes(buf[pos : pos + size]))

        return check

    def _unasked(self, side):
        """Whether the other side has sent no request yet: nothing this side could answer."""

        def refuses():
            return not self.asked[1 - side]

        return refuses

    def _refuses(self, side):
        """Whether the check of _frame_start(side) refuses every candidate for now: the
        broker's while no request waits for a response."""

        def refuses():
            client = self.conn.client_side
            if client is None or side == client:
                return False
            session = self.session
            return not (
                isinstance(session, ModernSession)
                and (session.pending or session.silent or session.raw_pending)
            )

        return refuses

    def _broker(self):
        return self.conn.endpoints[1 - self.conn.client_side]

    def _known_broker(self):
        """Whether earlier connections proved this one's broker endpoint to speak Kafka."""
        return self.conn.client_side is not None and (
            self._broker() in self.directory.kafka_endpoints
        )

    def _request_shaped(self, buf, pos, size):
        if self.options.protocol != "0.7" and plausible_request(buf, pos, size):
            return True
        if self.options.protocol != "0.8+":
            # A view, not a copy: a search may check many candidates in a large buffer. It is
            # released before returning, so the framer may resize its buffer.
            with memoryview(buf) as view:
                return legacy.plausible_request(view[pos : pos + size])
        return False

    # -- frames ------------------------------------------------------------------------------

    def frame(self, side, frame):
        """Handle one complete frame from a side; return the exchanges it completes."""
        client = self.conn.client_side
        cls = frame.__class__
        if (
            cls is ShortFrame
            and self.session is None
            and side == client
            and (self.forced or self._known_broker())
        ):
            # A request its client cut short, to a broker named or proved: a row, though
            # what was sent cannot tell the generation.
            self._open("0.7" if self.options.protocol == "0.7" else "0.8+")
        elif cls is CutFrame and self.session is None and side == client and self._modern(frame):
            self._open("0.8+")
        if cls is not Frame and not isinstance(self.session, ModernSession):
            if cls is ShortFrame and client is None and len(self.held[side]) < UNDECIDED_LIMIT:
                self.held[side].append(frame)  # a request, if this side turns out the client
                return []
            # What a frame cut short says is no proof of Kafka, and 0.7 frames are read whole:
            # for a session pairing by order, a cut response is a lost one.
            self._unused(side, len(frame.data) + 4)
            if self.session is not None and side != client:
                return self.session.response_lost()
            return []
        if (
            frame.__class__ is CutFrame
            and not (self.session.raw_sasl or self.session.raw_pending)  # tokens: no header
            and not header_captured(frame.data, side == client)
        ):
            # A hole took its header: it keeps its place, but says nothing to pair or show.
            self._unused(side, len(frame.data) + 4)
            return []
        if client is None:
            return self._undecided(side, frame)
        if side == client:
            if self.session is None:
                if not self._start(frame.data):
                    return []
                # Responses captured before the first request (see below) meet it now.
                early, self.held = self.held[1 - side], ([], [])
                out = [x for f in early for x in self.session.response(f)]
                return out + self.session.request(frame)
            return self.session.request(frame)
        if self.session is None:
            if self.conn.how == "syn" and len(self.held[side]) < UNDECIDED_LIMIT:
                # Seen from its SYN, a connection's first response can only precede the
                # first request in a capture that reordered them: hold it for the request.
                self.held[side].append(frame)
            else:
                self._unused(side, len(frame.data) + 4)  # a response before any request
            return []
        return self.session.response(frame)

    def _unused(self, side, n):
        """`n` bytes of a side framed and not used."""
        self.unused[side] += n
        if self.conn.client_side is None:
            self.unused_undecided[side] += n

    def _modern(self, frame):
        """Whether a first request the capture cut (snap length, lost segments) is taken as
        Kafka 0.8 or later on its header alone, a known API key and version and a client id
        that fits: as much proof as the capture holds (a client cut short proves less). Not
        when a 0.7 request may be read so (its type, 0 to 4, reads as an API key, its topic's
        length as a version), unless the generation was given."""
        protocol = self.options.protocol
        if protocol == "0.7":
            return False
        try:
            api_key = decode_request_header(frame.data)[0]
        except DecodeError:
            return False
        return protocol == "0.8+" or api_key not in legacy.REQUEST_TYPES

    def _start(self, data):
        """Decide from the first request which generation the connection speaks."""
        protocol = self.options.protocol
        if protocol is None:
            if decodes_fully(data):
                protocol = "0.8+"
            elif legacy.plausible_request(data):
                protocol = "0.7"
            elif self.forced or self._known_broker():
                protocol = "0.8+"
            else:
                self._not_kafka()
                return False
        self._open(protocol)
        return True

    def _open(self, protocol):
        if self.conn.client_side is not None:
            self.directory.kafka_endpoints.add(self._broker())
        if protocol == "0.7":
            self.session = LegacySession(self.conn)
        else:
            self.session = ModernSession(self.conn, self.directory, self.options, self.records)

    def _undecided(self, side, frame):
        """Hold frames of both sides until one side's request is answered by the other's: a
        frame that decodes as a request, then a frame of the other side that starts with its
        correlation id and decodes as its response. The port numbers do not tell: brokers
        listen on high ports too. A 0.7 request (no correlation id) decides at once."""
        data = frame.data
        protocol = self.options.protocol
        if protocol != "0.7" and decodes_fully(data):
            key, version, corr = decode_request_header(data)[:3]
            if corr not in self.asked[side]:
                self.asked[side][corr] = (key, version, frame.last_ts)
            if self.first_asked[side] is None:
                self.first_asked[side] = len(self.held[side])
        elif protocol != "0.8+" and legacy.plausible_request(data):
            self.held[side].append(frame)
            self.first_asked[side] = len(self.held[side]) - 1
            return self._decide(side)
        if len(self.held[side]) < UNDECIDED_LIMIT:
            self.held[side].append(frame)
            return []
        self._unused(side, len(frame.data) + 4)
        # Many frames and no request answered: the first request decides (its answers may
        # not come, as for acks=0 produce requests, or not decode).
        return self._settle()

    def _replies(self, side, answering, items):
        """Frames of a side's `answering` framer: the first that answers a request of the
        other side decides; until then they are held."""
        out = []
        for i, item in enumerate(items):
            if self.conn.client_side is not None:  # decided: they are this side's frames now
                if self.framers[side] is answering:
                    out += self._framed(side, items[i:], answering)
                break
            if item.__class__ is Skipped:
                continue
            data = item.data
            if item.__class__ is Frame and len(data) >= 4:
                kind = self.asked[1 - side].get(i32(data, 0)[0])
                if kind is not None and kind[2] <= item.first_ts and _answers(kind, data):
                    out += self._decide(1 - side, item)
                    continue
            if len(self.replies[side]) < UNDECIDED_LIMIT:
                self.replies[side].append(item)
        return out

    def _settle(self):
        """Decide from the first frame held that decodes as a request, if any."""
        first = [
            (self.held[side][i].last_frame, side)
            for side, i in enumerate(self.first_asked)
            if i is not None
        ]
        if not first:
            return []
        return self._decide(min(first)[1])

    def _decide(self, client, answer=None):
        """`client` is the client side: its frames held from its first request on are its
        requests; the other side's `answering` framer becomes its framer, and the frames it
        gave (`answer` last, the one that answered a request) are responses, in capture
        order with the requests. The other side's frames as a client's are dropped with
        their framer, which the `answering` one counted the same bytes of."""
        broker = 1 - client
        self.conn.client_side = client
        self.conn.how = "traffic"
        held, self.held = self.held, ([], [])
        replies = self.replies[broker] if self.replies is not None else []
        if self.answering is not None:
            promoted = self.answering[broker]
            promoted.is_frame_start = self._frame_start(broker)
            promoted.refuses = self._refuses(broker)
            promoted.orphans = self._responds(broker)
            dropped = self.framers[broker]
            dropped.is_frame_start = dropped.refuses = dropped.orphans = None
            self.unused[broker] -= self.unused_undecided[broker]  # its bytes are promoted's
            self.framers = (
                (promoted, self.framers[1]) if broker == 0 else (self.framers[0], promoted)
            )
            self._drop_answering()
        first = self.first_asked[client]
        self.asked = self.first_asked = None
        requests = held[client][first:]
        # Client frames held before the first request that decodes are not requests.
        self.unused[client] += sum(len(f.data) + 4 for f in held[client][:first])
        if self.session is None and not self._start(requests[0].data):
            return []
        order = sorted(
            [(f.last_frame, client, f) for f in requests]
            + [(f.last_frame, broker, f) for f in replies],
            key=lambda x: (x[0], x[1] == broker),
        )
        if answer is not None:
            order.append((answer.last_frame, broker, answer))
        out = []
        for _, side, f in order:
            out += self.frame(side, f)
        return out

    def state(self):
        """What decides how this connection goes on, as plain values two runs over the same
        packets can compare whatever packet each began at: (plain, rare). `plain`: per
        endpoint (in sorted order) its TCP and framing state and frames held, then which
        endpoint is the client, who sent the first FIN or RST, whether it is Kafka, and its
        session's state. `rare`: what matters only now and then and a run that joined
        mid-stream cannot know: (each side's SYN, the SASL mechanism, whether the broker's
        bytes had a gap), each consulted on its own occasions (a later SYN, a SASL exchange,
        a request left unanswered)."""
        conn = self.conn
        sides = sorted((0, 1), key=lambda side: conn.endpoints[side])
        halves = conn._halves
        plain, syns = [], []
        for side in sides:
            half = halves[side]
            base = half.base
            framer = None if base is None else self.framers[side].state(base)
            held = tuple((f.first_frame, f.last_frame) for f in self.held[side])
            if self.answering is not None:  # framed as a broker's too, while undecided
                answering = None if base is None else self.answering[side].state(base)
                replies = tuple((f.first_frame, f.last_frame) for f in self.replies[side])
                framer, held = (framer, answering), (held, replies)
            plain.append((conn.endpoints[side], half.state(), framer, held))
            syns.append(half.syn_state())
        client = conn.client_side
        plain.append(None if client is None else conn.endpoints[client])
        ended = conn.ended_by
        plain.append((None if ended is None else conn.endpoints[ended], conn.end_frame))
        session = self.session
        plain.append((conn.ignored, session is None and conn.how))
        plain.append(None if session is None else session.state())
        plain.append(None if self.tls is None else self.tls.state())
        mechanism, lost = (None, False) if session is None else session.rare_state()
        return tuple(plain), (tuple(syns), mechanism, lost)

    def streams(self):
        """One accounting row per direction (see tables/streams.py for the columns)."""
        conn = self.conn
        client = conn.client_side if conn.client_side is not None else 0
        rows = []
        tls = self.tls
        facts = (None,) * 6 if tls is None else tls.facts()
        for side, direction in ((client, "request"), (1 - client, "response")):
            framer = self.framers[side]
            bad = self.session.bad if self.session is not None else None
            which = 0 if direction == "request" else 1
            rows.append(
                {
                    "stream": conn.id,
                    "direction": direction,
                    "client": endpoint(conn.endpoints[client]),
                    "broker": endpoint(conn.endpoints[1 - client]),
                    "kafka": self.kafka,
                    "protocol": None if self.session is None else self.session.PROTOCOL,
                    "client_side_from": conn.how,
                    "end": conn.end_reason,
                    "ended_by": side_name(conn, conn.ended_by),
                    "end_frame": conn.end_frame,
                    "end_time": conn.end_ts,
                    "first_frame": conn.first_frame,
                    "last_frame": conn.last_frame,
                    "tls": facts[0],
                    "tls_version": facts[1],
                    "tls_cipher": facts[2],
                    "tls_sni": facts[3],
                    "tls_alpn": facts[4],
                    "tls_error": facts[5],
                    "bytes_seen": conn.bytes_seen[side],
                    "bytes_duplicate": conn.bytes_dup[side],
                    "bytes_dropped": conn.bytes_dropped[side],
                    "bytes_missing": conn.bytes_gap[side],
                    "bytes_delivered": conn.bytes_delivered[side],
                    "bytes_tls": 0 if tls is None else tls.bytes_tls(side),
                    "bytes_framed": framer.bytes_framed,
                    "bytes_skipped": framer.bytes_skipped,
                    "bytes_abandoned": self.abandoned[side],
                    "bytes_malformed": bad.bytes[which] if bad else 0,
                    "bytes_unused": self.unused[side],
                    "frames": framer.frames,
                    "malformed_frames": bad.frames[which] if bad else 0,
                    "gaps": self.gaps[side],
                    "bytes_conflicting": conn.bytes_conflicting[side],
                    "rsts_ignored": conn.rsts_ignored[side],
                    "syns_ignored": conn.syns_ignored[side],
                }
            )
        return rows

    def _not_kafka(self):
        self.conn.ignored = True
        self.session = None


def _answers(kind, data):
    """Whether a frame (after its correlation id matched) decodes as the response of a request
    of kind (api key, version, time)."""
    key, version = kind[:2]
    if messages.body_decoder(key, "response", version) is None:
        return True  # nothing to check it against
    return messages.decodes_exactly(messages.decode_response, data, key, version, Context())
