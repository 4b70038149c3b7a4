"""One direction of a TCP connection: sequence numbers in, ordered bytes out.

Positions are 64-bit stream offsets (0 = first data byte of the side); 32-bit sequence numbers
are mapped onto them relative to the next expected byte, so wrap-around needs no special case.
"""

from bisect import bisect_right

from .events import StreamData, StreamGap

MASK = 0xFFFFFFFF
HALF = 0x80000000
WRAP = 0x100000000
# What a buffered piece costs beyond its payload (its objects, list slots and the mark of its
# packet), counted against the buffer's bound so that many small pieces cannot hold more
# memory than large ones.
PIECE_COST = 288
# Segments of a side a hole its receiver acknowledged waits for its bytes before it is taken
# as lost by the capture. A capture can show a packet after the ACK of it (two CPUs handing
# packets to the capture socket in either order), a few packets late; the peer's next data
# ends the wait at once, so bytes never pass what answers them.
LATE_SEGMENTS = 8


class HalfStream:
    """Reassembly state of the bytes one side sends."""

    __slots__ = (
        "conn",
        "side",
        "peer",
        "fastseq",
        "base",
        "isn",
        "syn",
        "nxt",
        "fin",
        "ack",
        "starts",
        "items",
        "pbytes",
        "gap",
        "dup",
        "dropped",
        "max_buffer",
        "conflicting",
        "rsts_ignored",
        "syns_ignored",
        "pending",
        "pieces",
        "waiting",
    )

    def __init__(self, conn, side, max_buffer):
        self.conn = conn
        self.side = side
        self.peer = None
        # Sequence number that lets the tracker's fast path take a segment as is; -1 when it
        # cannot (not started, FIN seen, out-of-order data on either side, ignored).
        self.fastseq = -1
        self.base = None  # sequence number of stream offset 0
        self.isn = None  # from the SYN, when seen
        self.syn = False
        self.nxt = 0  # stream offset of the next byte to deliver
        self.fin = None  # stream offset of the FIN
        self.ack = None  # last ACK number this side sent, about the peer's bytes
        self.starts = []  # buffered out-of-order pieces: sorted, disjoint start offsets
        # (end, Run or None for bytes known missing, frame, ts): adjacent data pieces are
        # merged into one Run, which keeps the frame and time of its earliest part.
        self.items = []
        self.pbytes = 0  # data bytes buffered
        self.gap = 0
        self.dup = 0
        self.dropped = 0
        self.max_buffer = max_buffer
        self.conflicting = 0  # buffered bytes a later copy contradicted (and replaced)
        self.rsts_ignored = 0  # RSTs out of the receiver's window: they end nothing
        self.syns_ignored = 0  # new SYNs the connection's own traffic went on past
        self.pending = None  # a new SYN on this live connection, until the peer answers it
        self.pieces = 0  # segments (or parts of them) buffered: a mark each in their run
        # Segments buffered since the receiver acknowledged the first hole (-1: it has not).
        self.waiting = -1

    @property
    def seen(self):
        return self.nxt - self.gap + self.dup + self.dropped + self.pbytes

    def state(self):
        """Where this side stands, in sequence numbers (not stream offsets, which depend on
        where a run began): next byte, FIN, last ACK sent, the pieces held after a hole and
        how long an acknowledged hole has waited.
        None before its first byte. The SYN's sequence number is apart (`syn_state`): a run
        that joined mid-stream never saw it, and it matters only to a later SYN."""
        base = self.base
        if base is None:
            return None
        mask = MASK
        held = tuple(
            ((base + s) & mask, e - s, d is None, f)
            for s, (e, d, f, _) in zip(self.starts, self.items, strict=True)
        )
        fin = None if self.fin is None else (base + self.fin) & mask
        return ((base + self.nxt) & mask, fin, self.ack, held, self.waiting)

    def syn_state(self):
        pending = self.pending
        return (self.syn, self.isn, None if pending is None else pending.seq)

    def start(self, seq, syn):
        """Anchor stream offset 0: after the SYN, or at the first data byte seen."""
        self.base = (seq + 1) & MASK if syn else seq
        self.isn = seq if syn else None
        self.syn = syn

    def offset(self, seq):
        """Stream offset of a sequence number: the one nearest to the next expected byte."""
        d = (seq - self.base - self.nxt) & MASK
        return self.nxt + (d - WRAP if d >= HALF else d)

    def refresh(self):
        if (
            self.base is None
            or self.fin is not None
            or self.starts
            or self.peer.starts
            or self.pending is not None
            or self.peer.pending is not None
            or self.conn._ignored
        ):
            self.fastseq = -1
        else:
            self.fastseq = (self.base + self.nxt) & MASK

    def put(self, start, data, size, frame, ts, out):
        """Take size bytes at a stream offset (data None: bytes the capture cut off)."""
        n = size if data is not None else 0
        fin = self.fin
        if fin is not None and start + size > fin:  # nothing is sent after the FIN
            if start >= fin:
                self.dropped += n
                return
            extra = start + size - fin
            size -= extra
            if data is not None:
                data = data[:size]
                self.dropped += extra
                n = size
        nxt = self.nxt
        if start + size <= nxt:  # retransmission, keep-alive
            self.dup += n
            return
        if start < nxt:  # overlaps what was delivered: keep only the new tail
            cut = nxt - start
            if data is not None:
                data = data[cut:]
                self.dup += cut
            start = nxt
            size -= cut
        if start == nxt:
            if self.starts and data is not None:
                self._compare(start, data)
            self._deliver(data, size, frame, ts, out)
            if self.starts:
                self._drain(frame, ts, out)
            return
        self._buffer(start, data, size, frame, ts)
        if self.waiting >= 0:
            self.waiting += 1
            if self.waiting > LATE_SEGMENTS:
                self.declare_acked(out)
        ack = self.peer.ack
        if ack is not None:
            self.check_ack(ack)
        while self.pbytes + PIECE_COST * (self.pieces + len(self.starts)) > self.max_buffer:
            self._force(out)

    def check_ack(self, ack):
        """A hole the receiver acknowledged was lost by the capture, not by the network: it will
        never be retransmitted. Its bytes may still come, captured late: it waits for them
        (LATE_SEGMENTS) before it is declared (declare_acked)."""
        if self.starts and self.waiting < 0 and self.starts[0] <= self.offset(ack):
            self.waiting = 0

    def declare_acked(self, out):
        """Declare the holes the receiver acknowledged (while `waiting`): their bytes will not
        come."""
        acked = self.offset(self.peer.ack)
        while self.starts and self.starts[0] <= acked:
            self._force(out)
        self.waiting = -1

    def flush(self, out, frame, ts):
        """The end: holes become gaps, everything buffered is delivered."""
        while self.starts:
            self._force(out)
        if self.fin is not None and self.fin > self.nxt:
            size = self.fin - self.nxt
            out.append(StreamGap(self.conn, self.side, size, frame, ts))
            self.gap += size
            self.nxt = self.fin

    def drop_buffered(self):
        self.waiting = -1
        self.dropped += self.pbytes
        self.pbytes = 0
        self.pieces = 0
        self.starts = []
        self.items = []
        self.fastseq = -1

    def _deliver(self, data, size, frame, ts, out):
        if data is None:  # the part of a packet past its snap length
            out.append(StreamGap(self.conn, self.side, size, frame, ts, True))
            self.gap += size
        else:
            out.append(StreamData(self.conn, self.side, data, frame, ts))
        self.nxt += size

    def _force(self, out):
        """Give up on the first hole; the data after it goes out in its own packets."""
        start = self.starts[0]
        size = start - self.nxt
        if size > 0:
            _, _, frame, ts = self.items[0]
            out.append(StreamGap(self.conn, self.side, size, frame, ts))
            self.gap += size
            self.nxt = start
        self._drain(None, None, out)

    def _drain(self, frame, ts, out):
        """Deliver buffered pieces that have become contiguous; frame None: their own packets."""
        starts = self.starts
        items = self.items
        nxt = self.nxt
        conn = self.conn
        side = self.side
        i = 0
        k = len(starts)
        while i < k and starts[i] <= nxt:
            s = starts[i]
            e, run, f, t = items[i]
            i += 1
            if run is None:
                self.pieces -= 1
            else:
                self.pbytes -= len(run)
                self.pieces -= run.count()
            if e <= nxt:  # already covered by in-order data
                if run is not None:
                    self.dup += len(run)
                continue
            if frame is not None:
                f = frame
                t = ts
            if run is None:  # the part of a packet past its snap length
                out.append(StreamGap(conn, side, e - nxt, f, t, True))
                self.gap += e - nxt
            elif frame is not None:
                d = run.read(nxt - s, e - s) if s < nxt else run.tobytes()
                out.append(StreamData(conn, side, d, f, t))
            else:  # each part in the packet that brought it
                whole = run.tobytes()
                marks = run.marks()
                ends = [m[0] for m in marks[1:]] + [e]
                for (m, mf, mt), me in zip(marks, ends, strict=True):
                    if me > nxt:
                        out.append(StreamData(conn, side, whole[max(m, nxt) - s : me - s], mf, mt))
            if run is not None and s < nxt:
                self.dup += nxt - s
            nxt = e
        del starts[:i]
        del items[:i]
        self.nxt = nxt
        if not starts:  # no hole left to wait on
            self.waiting = -1

    def _compare(self, start, data):
        """Count the buffered bytes that data, about to be delivered at start, contradicts:
        the in-order copy wins, as the receiver reads it."""
        starts = self.starts
        items = self.items
        end = start + len(data)
        i = 0
        while i < len(starts) and starts[i] < end:
            s = starts[i]
            e, run, _, _ = items[i]
            i += 1
            a, b = max(s, start), min(e, end)
            if run is not None and a < b:
                self.conflicting += differing(run.read(a - s, b - s), data[a - start : b - start])

    def _buffer(self, start, data, size, frame, ts):
        """Insert a piece after a hole. Bytes known missing (cut by the snap length) stay as
        first seen; data overlapping buffered data wins over it (as Linux keeps the later
        segment) and merges with the pieces it touches into one run."""
        starts = self.starts
        items = self.items
        end = start + size
        i = bisect_right(starts, start)
        if i and items[i - 1][0] > start:
            i -= 1
        free = []  # parts of [start, end) not held as missing
        pos = start
        while pos < end and i < len(starts):
            s = starts[i]
            if s >= end:
                break
            e = items[i][0]
            if (data is None or items[i][1] is None) and e > pos:
                if s > pos:
                    free.append((pos, s))
                pos = e
            i += 1
        if pos < end:
            free.append((pos, end))
        kept = 0
        for a, b in free:
            kept += b - a
            if data is None:
                j = bisect_right(starts, a)
                starts.insert(j, a)
                items.insert(j, (b, None, frame, ts))
                self.pieces += 1
            else:
                self._merge(a, data if b - a == size else data[a - start : b - start], frame, ts)
        if data is not None:
            self.dup += size - kept

    def _merge(self, start, data, frame, ts):
        """Buffer data touching no missing bytes: the runs it overlaps take its bytes, and it
        joins them and the runs it touches into one (copying the shorter side each time, so
        any order of arrival costs O(log n) per byte at most)."""
        starts = self.starts
        items = self.items
        end = start + len(data)
        lo = bisect_right(starts, start)
        if lo and items[lo - 1][0] >= start and items[lo - 1][1] is not None:
            lo -= 1
        hi = lo
        k = len(starts)
        while hi < k and starts[hi] <= end and items[hi][1] is not None:
            hi += 1
        if lo == hi:
            starts.insert(lo, start)
            items.insert(lo, (end, Run(data, start, frame, ts), frame, ts))
            self.pbytes += len(data)
            self.pieces += 1
            return
        merged = None
        pos = start
        held = 0
        for i in range(lo, hi):
            s = starts[i]
            e, run, _, _ = items[i]
            a, b = max(s, start), min(e, end)
            if a < b:  # overlap: the later bytes win
                new = data[a - start : b - start]
                n = differing(run.read(a - s, b - s), new)
                if n:
                    self.conflicting += n
                    run.write(a - s, new)
                held += b - a
            if s > pos:
                merged = _join(merged, Run(data[pos - start : s - start], pos, frame, ts))
                self.pieces += 1
            merged = _join(merged, run)
            pos = max(pos, e)
        if pos < end:
            merged = _join(merged, Run(data[pos - start :], pos, frame, ts))
            self.pieces += 1
        self.dup += held
        self.pbytes += len(data) - held
        first = min(starts[lo], start)
        starts[lo:hi] = [first]
        _, f, t = merged.first()  # the packet where the hole showed
        items[lo:hi] = [(max(items[hi - 1][0], end), merged, f, t)]


class Run:
    """Contiguous buffered bytes that grow at either end in time proportional to what is
    added: the bytes put before the first ones are kept reversed in `front`. Marks say where
    each packet's part starts (stream offset, frame, ts), the same way: `before` reversed."""

    __slots__ = ("front", "back", "before", "after")

    def __init__(self, data, start, frame, ts):
        self.front = bytearray()
        self.back = bytearray(data)
        self.before = []
        self.after = [(start, frame, ts)]

    def __len__(self):
        return len(self.front) + len(self.back)

    def count(self):
        return len(self.before) + len(self.after)

    def first(self):
        return self.before[-1] if self.before else self.after[0]

    def marks(self):
        return self.before[::-1] + self.after

    def tobytes(self):
        if not self.front:
            return bytes(self.back)
        return b"".join((self.front[::-1], self.back))

    def read(self, a, b):
        """Bytes [a, b) of the run."""
        f = len(self.front)
        if a >= f:
            return bytes(self.back[a - f : b - f])
        head = self.front[f - min(b, f) : f - a][::-1]
        return bytes(head + self.back[: b - f]) if b > f else bytes(head)

    def write(self, a, data):
        """Overwrite bytes from a (within the run) with data."""
        f = len(self.front)
        b = a + len(data)
        if a < f:
            m = min(b, f)
            self.front[f - m : f - a] = data[: m - a][::-1]
        if b > f:
            s = max(a, f)
            self.back[s - f : b - f] = data[s - a :]


def _join(left, right):
    """One run of left's bytes then right's, copying the shorter of the two."""
    if left is None:
        return right
    if len(left) + left.count() >= len(right) + right.count():
        left.back += right.tobytes()
        left.after += right.marks()
        return left
    right.front += left.tobytes()[::-1]
    right.before += left.marks()[::-1]
    return right


def differing(a, b):
    """How many bytes differ between two byte strings of one length."""
    if a == b:
        return 0
    x = int.from_bytes(a, "big") ^ int.from_bytes(b, "big")
    return len(a) - x.to_bytes(len(a), "big").count(0)
