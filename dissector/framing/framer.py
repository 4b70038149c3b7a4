"""Stage 4: split one side's byte stream into Kafka frames (int32 big-endian size + body).

Every byte fed ends up in exactly one Frame (4 + len(data) bytes) or one Skipped. Bytes known
to be missing (gaps) are counted in offsets but belong to neither.
"""

import re
import struct
from typing import NamedTuple

from dissector.tuples import new as _new  # a NamedTuple from its fields, a C call

DEFAULT_MAX_FRAME = 256 << 20
# The smallest Kafka header: a response's correlation id. A smaller frame is believed only on
# its own (the empty token a broker answers a raw SASL PLAIN login with, a 0.7 response that
# is just its error code): one followed by another is a run of bytes that hold no frames.
DEFAULT_MIN_FRAME = 4
DEFAULT_MAX_SEARCH = 1 << 20  # skipped bytes reported at least this often while searching
DEFAULT_LOOKAHEAD = 64  # body bytes a frame-start check gets to see, when the frame has them
# Frames of a response side a search holds as possible orphans (responses to requests the
# capture did not see), and the largest it holds.
ORPHAN_CANDIDATES = 16
MAX_ORPHAN = 64 << 20

_i32 = struct.Struct(">i").unpack_from
# A byte that is not zero: runs of zeros, which hold no size prefix of a frame large enough,
# are passed over at the speed of the regex engine, not a candidate at a time.
_NONZERO = re.compile(b"[^\\x00]")

# Modes.
_SYNC = 0  # at a frame boundary, nothing held
_HEAD = 1  # part of a size prefix held
_BODY = 2  # size known, body incomplete
_SKIP = 3  # in a frame with a hole: its end is known, the rest of it is skipped
_SEARCH = 4  # lost: looking for a frame start
_BLIND = 5  # lost, with no way to find a frame start: everything is skipped


class Frame(NamedTuple):
    data: bytes  # the frame body, without the 4-byte size prefix
    offset: int  # stream offset of the size prefix
    first_frame: int  # packet that carried the first byte of the size prefix
    first_ts: int
    last_frame: int  # packet that delivered the last byte
    last_ts: int


class CutFrame(NamedTuple):
    """A frame with a hole of known size (bytes past a packet's snap length, or a segment the
    capture lost between two it has) where its size prefix was captured: its start and end
    are known, so framing stays in step; `data` is the body up to the first missing byte,
    `size` the body's full length, `lost` how many of its bytes lost segments took (0: only
    the snap length cut it)."""

    data: bytes
    offset: int
    first_frame: int
    first_ts: int
    last_frame: int
    last_ts: int
    size: int
    lost: int = 0


class ShortFrame(NamedTuple):
    """A frame its sender cut short: the stream ended (the sender's FIN) inside it with no
    byte missing. `data` is the body sent, `size` the body's length its size prefix gave,
    `end` what ended the stream ("FIN")."""

    data: bytes
    offset: int
    first_frame: int
    first_ts: int
    last_frame: int
    last_ts: int
    size: int
    end: str


class Skipped(NamedTuple):
    offset: int
    size: int
    # "gap" (a frame lost to a gap), "hole" (the rest of a CutFrame after its hole),
    # "truncated", "bad-size" (from an impossible size on), "resync"
    reason: str
    frame: int  # packet that carried the first of these bytes
    ts: int


class Framer:
    """Frames of one side of one connection.

    is_frame_start(buf, pos, size, ts) -> bool tells whether a frame of that size whose body
    starts at buf[pos], in a packet captured at ts, is believable; buf holds at least
    min(size, lookahead) bytes from pos, except just before a gap or the end of the stream,
    where it holds what there is. None: believable so far, to be decided with the whole
    frame (the search waits for it; before a gap or the end, it is taken). It must not keep
    a reference to buf. Without it the framer cannot find its way back once lost, and skips
    everything after. refuses() -> bool, if given, tells that is_frame_start would refuse
    every candidate for now (a side that cannot hold a frame start yet): a search then skips
    the calls, with the same outcome.
    synced=False starts in search mode (the capture began mid-stream).

    min_frame: the smallest body a frame of this side can have; a smaller one followed by
    another such (in the bytes at hand) is a framing error, as is a frame start found while
    searching that is smaller. It may be changed between calls, as what the side may send is
    learnt.
    """

    __slots__ = (
        "max_frame",
        "min_frame",
        "is_frame_start",
        "refuses",
        "max_search",
        "lookahead",
        "frames",
        "bytes_framed",
        "bytes_skipped",
        "bytes_missing",
        "_cand",
        "_mode",
        "_off",
        "_hparts",
        "_chunks",
        "_need",
        "_size",
        "_fstart",
        "_fframe",
        "_fts",
        "_sbuf",
        "_soff",
        "_sfr",
        "_sscan",
        "_sreason",
        "_koff",
        "_kn",
        "_kreason",
        "_kframe",
        "_kts",
        "_cut",
        "orphans",
        "_orph",
        "_pst",
        "_lframe",
        "_lts",
    )

    def __init__(
        self,
        max_frame=DEFAULT_MAX_FRAME,
        is_frame_start=None,
        refuses=None,
        synced=True,
        max_search=DEFAULT_MAX_SEARCH,
        lookahead=DEFAULT_LOOKAHEAD,
        min_frame=DEFAULT_MIN_FRAME,
        orphans=None,
    ):
        self.max_frame = max(0, min(max_frame, 0x7FFFFFFF))
        self.min_frame = min_frame
        self.is_frame_start = is_frame_start
        self.refuses = refuses
        self.max_search = max_search
        self.lookahead = lookahead
        self.frames = 0
        self.bytes_framed = 0  # 4 + len(data) of every Frame
        self.bytes_skipped = 0
        self.bytes_missing = 0  # gap bytes: in offsets, never fed
        # A plausible size has a small first byte: lets a regex skip most positions.
        self._cand = re.compile(b"[\\x00-\\x%02x]" % (self.max_frame >> 24))
        self._off = 0  # stream offset of the next byte to be fed
        self._hparts = None  # size prefix so far: [(bytes, frame, ts)]
        self._chunks = None  # body so far
        self._need = 0  # body bytes still to come (_BODY) or to skip (_SKIP)
        self._size = 0
        self._fstart = 0  # the frame in progress: offset, first packet
        self._fframe = 0
        self._fts = 0
        self._sbuf = bytearray()  # search: bytes not yet ruled out as a frame start
        self._soff = 0
        self._sfr = []  # search: (position in _sbuf, frame, ts) where each packet's bytes begin
        self._sscan = 0  # search: first position of _sbuf not yet tried
        self._sreason = "resync"
        self._kn = 0  # skipped bytes not reported yet, contiguous from _koff
        self._koff = 0
        self._kreason = ""
        self._kframe = 0
        self._kts = 0
        # The CutFrame being skipped to its end: [data, offset, frame, ts, size, lost].
        self._cut = None
        # orphans() -> bool, if given, tells that this side carries responses: a search then
        # also takes a frame that starts where a packet's bytes begin (or where such a frame
        # ends) and ends exactly where a frame start the check confirms begins, directly or
        # through a chain of such frames, or where the stream ends: a response whose request
        # the capture did not see, or one its check refused (a broker's malformed response).
        self.orphans = orphans
        # Search: [start, end, head] of those frames, and stream offsets where packets' bytes
        # begin, not yet tried (lists once there are some: most framers never hold any).
        self._orph = ()
        self._pst = ()
        self._lframe = 0  # the packet fed last, and its time
        self._lts = 0
        self._mode = _SYNC
        if not synced:
            self._lose("resync")

    @property
    def offset(self):
        """Stream offset of the next byte."""
        return self._off

    @property
    def synced(self):
        return self._mode < _SEARCH

    def state(self, base):
        """Where this side stands, as plain values two runs can compare though they began at
        different points of the stream: `base` is the sequence number of stream offset 0.
        A framer still searching for a frame start never equals one in step."""
        mask = 0xFFFFFFFF
        mode = self._mode
        if mode == _HEAD:
            detail = (
                (base + self._fstart) & mask,
                self._fframe,
                b"".join(p[0] for p in self._hparts),
            )
        elif mode == _BODY:
            detail = ((base + self._fstart) & mask, self._fframe, self._size, self._need)
        elif mode == _SKIP:
            cut = self._cut
            detail = (
                self._need,
                None if cut is None else ((base + cut[1]) & mask, cut[2], cut[4], cut[5]),
            )
        elif mode >= _SEARCH:
            orph = tuple(((base + s) & mask, e - s, (base + h) & mask) for s, e, h in self._orph)
            detail = (self._sreason, (base + self._soff) & mask, len(self._sbuf), orph)
        else:
            detail = ()
        skipped = (self._kn, (base + self._koff) & mask, self._kreason) if self._kn else ()
        return (mode, (base + self._off) & mask, skipped, detail)

    def feed(self, data, frame, ts, start=0):
        """Next bytes of the stream, data[start:] (bytes left in their packet); returns Frames
        and Skipped, in stream order."""
        n = len(data)
        base = self._off - start  # the stream offset of data[0]
        self._off = base + n
        self._lframe = frame
        self._lts = ts
        mode = self._mode
        if mode == _BODY:
            need = self._need
            if n - start < need:  # middle of a large frame
                self._chunks.append(data[start:] if start else data)
                self._need = need - (n - start)
                return []
            chunks = self._chunks
            end = start + need
            chunks.append(data[start:end] if start or end < n else data)
            out = [
                _new(
                    Frame,
                    (b"".join(chunks), self._fstart, self._fframe, self._fts, frame, ts),
                )
            ]
            self.frames += 1
            self.bytes_framed += 4 + self._size
            self._chunks = None
            self._mode = _SYNC
            if end < n:
                pos = self._sync(data, end, base, frame, ts, out)
                if pos < n:
                    self._run(data, pos, base, frame, ts, out)
            return out
        out = []
        if mode == _SYNC:
            pos = self._sync(data, start, base, frame, ts, out)
            if pos < n:
                self._run(data, pos, base, frame, ts, out)
        elif n > start:
            self._run(data, start, base, frame, ts, out)
        return out

    def gap(self, size, frame, ts, cut=False):
        """size bytes (0: unknown) are missing before the next ones fed: what a packet had
        past its snap length (cut), else a segment the capture lost, its size known from the
        sequence numbers of the bytes on both sides. A frame whose size prefix was captured
        keeps its place: it is given out as a CutFrame at its end (what was captured up to
        the hole; the rest of it is skipped), and framing stays in step after it when the
        gap ends inside it, or re-finds the next boundary when the gap runs past its end."""
        out = []
        if self._mode == _SEARCH:
            self._settle(out)
        mode = self._mode
        if mode == _SYNC:
            self._lose("resync")
        elif mode == _HEAD:
            self._partial("gap", out)
            self._lose("resync")
        elif mode == _BODY:
            if size > 0:
                data = b"".join(self._chunks)
                self._cut = [data, self._fstart, self._fframe, self._fts, self._size, 0]
                self.frames += 1
                self.bytes_framed += 4 + len(data)
                self._chunks = None
                self._mode = _SKIP
                self._hole(size, cut, frame, ts, out)
            else:
                self._partial("gap", out)
                self._lose("resync")
        elif mode == _SKIP:
            self._flush_skip(out)
            if size > 0:
                self._hole(size, cut, frame, ts, out)
            else:
                self._end_cut(frame, ts, out)
                self._lose("resync")
        else:
            self._reject_all(out)
            self._flush_skip(out)
            self._sreason = "resync"
        self._flush_skip(out)
        self._off += size
        self.bytes_missing += size
        return out

    def _hole(self, size, cut, frame, ts, out):
        """A gap of known size inside the frame being skipped to its end (a CutFrame)."""
        inside = min(size, self._need)
        if not cut:
            self._cut[5] += inside
        self._need -= inside
        if not self._need:
            self._end_cut(frame, ts, out)
            if size > inside:  # the gap runs on past the frame's end
                self._lose("resync")

    def finish(self, ended=None):
        """End of stream: a partial frame is reported as truncated. ended: what ended the
        stream when its sender did, with no byte missing ("FIN"): a frame whose size prefix
        was sent is then given out as a ShortFrame, the sender's doing."""
        out = []
        if self._mode == _SEARCH:
            self._settle(out, True)
        mode = self._mode
        if mode == _BODY and ended:
            data = b"".join(self._chunks)
            short = (data, self._fstart, self._fframe, self._fts, self._lframe, self._lts)
            out.append(ShortFrame(*short, self._size, ended))
            self.frames += 1
            self.bytes_framed += 4 + len(data)
        elif mode in (_HEAD, _BODY):
            self._partial("truncated", out)
        elif mode == _SKIP:
            cut = self._cut
            if cut is not None and cut[5]:  # the rest of a frame with a lost segment: lost too
                cut[5] += self._need
            self._end_cut(self._kframe, self._kts, out)
        elif mode >= _SEARCH:
            self._reject_all(out)
        self._flush_skip(out)
        self._mode = _SYNC
        self._chunks = None
        self._hparts = None
        return out

    # -- in step ---------------------------------------------------------------------------

    def _run(self, data, pos, base, frame, ts, out):
        """Consume data[pos:], data[0] being at stream offset base, whatever the mode."""
        queue = [(data, pos, base, frame, ts)]
        while queue:
            data, pos, base, frame, ts = queue.pop()
            n = len(data)
            while pos < n:
                mode = self._mode
                if mode == _SYNC:
                    pos = self._sync(data, pos, base, frame, ts, out)
                elif mode == _BODY:
                    pos = self._body(data, pos, frame, ts, out)
                elif mode == _HEAD:
                    pos = self._head(data, pos, base, frame, ts, out)
                elif mode == _SKIP:
                    take = min(self._need, n - pos)
                    self._skip(base + pos, take, "hole", frame, ts, out)
                    pos += take
                    self._need -= take
                    if not self._need:
                        self._end_cut(frame, ts, out)
                elif mode == _SEARCH:
                    redo = self._search(data, pos, base, frame, ts, out)
                    pos = n
                    # A frame start was found: what follows it is framed again, in order.
                    queue.extend(reversed(redo))
                else:
                    self._skip(base + pos, n - pos, self._sreason, frame, ts, out)
                    if self._kn >= self.max_search:
                        self._flush_skip(out)
                    pos = n

    def _sync(self, data, pos, base, frame, ts, out):
        """Whole frames from data[pos:] (at a frame boundary), until one goes past the end."""
        p = data
        n = len(data)
        mx = self.max_frame
        append = out.append
        nf = nb = 0
        while True:
            rem = n - pos
            if rem < 4:
                if rem:
                    self._mode = _HEAD
                    self._hparts = [(data[pos:], frame, ts)]
                    self._fstart = base + pos
                    self._fframe = frame
                    self._fts = ts
                    pos = n
                break
            size = p[pos]  # widened before the shift: 24 bits up overflows a C int
            size = size << 24 | p[pos + 1] << 16 | p[pos + 2] << 8 | p[pos + 3]
            if size > mx:  # a negative int32 too (0x7FFFFFFF bounds mx)
                self._lose("bad-size", skip_first=True)
                break
            end = pos + 4 + size
            if size < self.min_frame and self._tiny_run(data, end):
                self._lose("bad-size", skip_first=True)
                break
            if end > n:
                self._mode = _BODY
                self._chunks = [data[pos + 4 :]]
                self._size = size
                self._need = end - n
                self._fstart = base + pos
                self._fframe = frame
                self._fts = ts
                pos = n
                break
            append(_new(Frame, (data[pos + 4 : end], base + pos, frame, ts, frame, ts)))
            nf += 1
            nb += end - pos
            pos = end
        self.frames += nf
        self.bytes_framed += nb
        return pos

    def _body(self, data, pos, frame, ts, out):
        need = self._need
        n = len(data)
        if n - pos < need:
            self._chunks.append(data[pos:] if pos else data)
            self._need = need - (n - pos)
            return n
        end = pos + need
        self._chunks.append(data[pos:end])
        out.append(Frame(b"".join(self._chunks), self._fstart, self._fframe, self._fts, frame, ts))
        self.frames += 1
        self.bytes_framed += 4 + self._size
        self._chunks = None
        self._mode = _SYNC
        return end

    def _head(self, data, pos, base, frame, ts, out):
        parts = self._hparts
        have = sum(len(p[0]) for p in parts)
        take = data[pos : pos + 4 - have]
        parts.append((take, frame, ts))
        pos += len(take)
        if have + len(take) < 4:
            return pos
        head = b"".join(p[0] for p in parts)
        size = _i32(head, 0)[0]
        if (
            size < 0
            or size > self.max_frame
            or (size < self.min_frame and self._tiny_run(data, pos + size))
        ):
            # Lost: search from the prefix's second byte, with the packets its bytes came in.
            self._hparts = None
            self._lose("bad-size", skip_first=True)
            off = self._soff = self._fstart
            sbuf = self._sbuf
            for part, f, t in parts:
                if self._mode == _BLIND:
                    self._skip(off, len(part), "bad-size", f, t, out)
                    off += len(part)
                else:
                    self._sfr.append((len(sbuf), f, t))
                    sbuf += part
            return pos
        self._hparts = None
        if size == 0:
            out.append(Frame(b"", self._fstart, self._fframe, self._fts, frame, ts))
            self.frames += 1
            self.bytes_framed += 4
            self._mode = _SYNC
        else:
            self._mode = _BODY
            self._chunks = []
            self._size = size
            self._need = size
        return pos

    def _tiny_run(self, data, end):
        """Whether the frame too small that ends at data[end] is followed by another."""
        return end + 4 <= len(data) and 0 <= _i32(data, end)[0] < self.min_frame

    def _end_cut(self, frame, ts, out):
        """The end of a cut frame: it goes out, after the skipped bytes of its hole."""
        self._flush_skip(out)
        if self._cut is not None:
            data, offset, first_frame, first_ts, size, lost = self._cut
            if not frame:  # the stream ended inside its hole
                frame, ts = first_frame, first_ts
            out.append(CutFrame(data, offset, first_frame, first_ts, frame, ts, size, lost))
            self._cut = None
        self._mode = _SYNC

    def _partial(self, reason, out):
        """Report the frame in progress (prefix and body so far) as skipped."""
        if self._mode == _HEAD:
            have = sum(len(p[0]) for p in self._hparts)
        else:
            have = 4 + self._size - self._need
        self._skip(self._fstart, have, reason, self._fframe, self._fts, out)
        self._flush_skip(out)
        self._hparts = None
        self._chunks = None

    # -- lost ------------------------------------------------------------------------------

    def _lose(self, reason, skip_first=False):
        self._mode = _SEARCH if self.is_frame_start is not None else _BLIND
        self._sreason = reason
        self._sbuf = bytearray()
        self._sfr = []
        self._sscan = 1 if skip_first else 0
        self._chunks = None
        self._orph = ()
        self._pst = ()

    def _search(self, data, pos, base, frame, ts, out):
        """Add data[pos:] to the search buffer and look for a frame start in it."""
        if not self._sbuf:
            self._soff = base + pos
            self._sfr = []
        if self.orphans is not None and len(self._pst) < ORPHAN_CANDIDATES:
            if self._pst.__class__ is tuple:
                self._pst = []
            self._pst.append(base + pos)
        self._sfr.append((len(self._sbuf), frame, ts))
        self._sbuf += memoryview(data)[pos:] if pos else data
        return self._scan(out, False)

    def _scan(self, out, final, at_end=False):
        """Look for a frame start in the search buffer; skip the bytes ruled out.

        A candidate whose check needs bytes still to come is left undecided, unless final (a
        gap or the end follows): then it is checked with what there is. at_end: the stream
        ends after these bytes, so a chain of frames held that ends exactly where they do is
        confirmed by that end (a last response its check refused, e.g. one cut short by its
        broker, then the connection's end).
        Returns the pieces (bytes, 0, offset, frame, ts) from the frame start on, or [].
        """
        sbuf = self._sbuf
        end = len(sbuf)
        p = self._sscan
        mx = self.max_frame
        mn = self.min_frame
        look = self.lookahead
        check = self.is_frame_start
        refused = self.refuses is not None and self.refuses()
        search = self._cand.search
        found = False
        soff = self._soff
        orph = self._orph
        orphans = self.orphans is not None and bool(orph or self._pst) and self.orphans()
        if not orphans:
            self._pst = ()
        if refused:
            # No check is made: a candidate whose check needs no bytes still to come (all but
            # the last lookahead) is passed over, unless it may be held as an orphan. Only
            # those (at a packet's start, or where a frame held ends) are looked at.
            tail = end - 4 - look
            if tail > p:
                if orphans:
                    self._orphans_before(sbuf, p, tail)
                p = tail
        while p < end:
            m = search(sbuf, p)
            if m is None:
                p = end
                break
            q = m.start()
            if q + 4 > end:
                p = end if final else q  # else undecided until more bytes come
                break
            size = _i32(sbuf, q)[0]
            if size < 0 or size > mx:
                p = q + 1
                continue
            if size < mn:
                # Too small to start a frame, and so is every start inside the run of zeros
                # from q on but the last three: go on from those.
                z = _NONZERO.search(sbuf, q)
                p = max(q + 1, (end if z is None else z.start()) - 3)
                continue
            if q + 4 + (size if size < look else look) > end and not final:
                p = q
                break
            verdict = False if refused else check(sbuf, q + 4, size, self._ts_at(q))
            if verdict is None:  # believable so far: decided once the frame is whole
                if not final:
                    p = q
                    break
                verdict = True  # a gap or the end follows: as believable as it gets
            if verdict:
                p = q
                found = True
                if orphans:  # the end of a chain of frames held: they are frames too
                    head = self._orphan_head(soff + q)
                    if head is not None:
                        p = head - soff
                break
            if orphans:
                self._orphan(sbuf, q, size)
            p = q + 1
        orph = self._orph  # _orphan may have made it a list
        if orphans and not found and at_end:
            head = self._orphan_head(soff + end)
            if head is not None:
                p = head - soff
                found = True
        if orphans and not found:
            # Frames held whose end the scan passed without a confirmed start there: none.
            until = soff + (end if final else p)
            self._orph = orph = [c for c in orph if c[1] >= until]
            self._pst = [s for s in self._pst if s >= until]
        held = p
        if orph and not found:  # their bytes, from the head of each chain, are kept
            held = min(p, min(c[2] for c in orph) - soff)
        if held:
            self._reject(held, out)
        if not found:
            self._sscan = p - held
            if self._kn >= self.max_search:
                self._flush_skip(out)
            return []
        self._orph = ()
        self._pst = ()
        self._flush_skip(out)
        pieces = []
        fr = self._sfr
        off = self._soff
        for i, (start, f, t) in enumerate(fr):
            stop = fr[i + 1][0] if i + 1 < len(fr) else len(sbuf)
            if stop > start:
                pieces.append((bytes(sbuf[start:stop]), 0, off + start, f, t))
        self._sbuf = bytearray()
        self._sfr = []
        self._sscan = 0
        self._mode = _SYNC
        return pieces

    def _orphan(self, sbuf, q, size):
        """Hold the frame at sbuf[q] as a possible orphan, if it starts where a packet's bytes
        begin or where one held ends, carries a correlation id, and is not too large."""
        qo = self._soff + q
        pst = self._pst
        while pst and pst[0] < qo:
            del pst[0]
        orph = self._orph
        link = None
        for c in orph:
            if c[1] == qo:
                link = c
            elif c[0] == qo:
                return  # held already (the scan stopped here for more bytes before)
        if link is None and not (pst and pst[0] == qo):
            return
        if size < 4 or size > MAX_ORPHAN or q + 8 > len(sbuf) or _i32(sbuf, q + 4)[0] < 0:
            return
        if len(orph) < ORPHAN_CANDIDATES:
            if orph.__class__ is tuple:
                orph = self._orph = []
            orph.append([qo, qo + 4 + size, qo if link is None else link[2]])

    def _orphans_before(self, sbuf, p, stop):
        """What the scan does to the candidates in sbuf[p:stop] while checks refuse them all
        and none waits for bytes: offer _orphan those it may hold, in order (those at a
        packet's start or where a frame held ends), with the scan's tests of a candidate."""
        soff = self._soff
        first = self.max_frame >> 24  # the largest first byte of a candidate
        q = p
        while True:
            nxt = stop
            for s in self._pst:  # ascending
                if s - soff >= q:
                    nxt = s - soff
                    break
            for c in self._orph:
                e = c[1] - soff
                if q <= e < nxt:
                    nxt = e
            if nxt >= stop:
                return
            q = nxt
            if sbuf[q] <= first:
                size = _i32(sbuf, q)[0]
                if 0 <= size <= self.max_frame and size >= self.min_frame:
                    self._orphan(sbuf, q, size)
            q += 1

    def _orphan_head(self, start):
        """Where the chain of frames held that ends at `start` begins, or None."""
        for _, e, head in self._orph:
            if e == start:
                return head
        return None

    def _ts_at(self, q):
        """Capture time of the packet that brought byte q of the search buffer."""
        fr = self._sfr
        ts = fr[0][2]
        if len(fr) == 1:  # most searches: a packet's bytes, nothing held back
            return ts
        for start, _, t in fr:
            if start > q:
                break
            ts = t
        return ts

    def _settle(self, out, at_end=False):
        """Before a gap or the end: decide the search buffer with the bytes there are."""
        while self._mode == _SEARCH and self._sbuf:
            pieces = self._scan(out, True, at_end)
            if not pieces:
                break
            for piece in pieces:
                self._run(*piece, out)

    def _reject(self, p, out):
        """The first p bytes of the search buffer start no frame: skip them."""
        fr = self._sfr
        self._skip(self._soff, p, self._sreason, fr[0][1], fr[0][2], out)
        del self._sbuf[:p]
        self._soff += p
        i = 0
        while i + 1 < len(fr) and fr[i + 1][0] <= p:
            i += 1
        self._sfr = [(max(0, start - p), f, t) for start, f, t in fr[i:]]

    def _reject_all(self, out):
        if self._sbuf:
            self._reject(len(self._sbuf), out)
        self._sfr = []
        self._sscan = 0
        self._orph = ()
        self._pst = ()

    # -- skipped bytes ---------------------------------------------------------------------

    def _skip(self, off, size, reason, frame, ts, out):
        """Count skipped bytes, merged with the previous ones when contiguous."""
        if not size:
            return
        if self._kn:
            if self._koff + self._kn == off and self._kreason == reason:
                self._kn += size
                return
            self._flush_skip(out)
        self._koff = off
        self._kn = size
        self._kreason = reason
        self._kframe = frame
        self._kts = ts

    def _flush_skip(self, out):
        if self._kn:
            out.append(Skipped(self._koff, self._kn, self._kreason, self._kframe, self._kts))
            self.bytes_skipped += self._kn
            self._kn = 0
