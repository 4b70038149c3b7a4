"""One direction of a TCP connection: sequence numbers in, ordered bytes out.

Positions are 64-bit stream offsets (0 = first data byte of the side); 32-bit sequence numbers
are mapped onto them relative to the next expected byte, so wrap-around needs no special case.
"""

from bisect import bisect_right

from .events import StreamData, StreamGap

MASK = 0xFFFFFFFF
HALF = 0x80000000
WRAP = 0x100000000


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
        self.items = []  # (end, data or None for bytes known missing, frame, ts)
        self.pbytes = 0  # data bytes buffered
        self.gap = 0
        self.dup = 0
        self.dropped = 0
        self.max_buffer = max_buffer

    @property
    def seen(self):
        return self.nxt - self.gap + self.dup + self.dropped + self.pbytes

    def state(self):
        """Where this side stands, in sequence numbers (not stream offsets, which depend on
        where a run began): next byte, FIN, last ACK sent and the pieces held after a hole.
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
        return ((base + self.nxt) & mask, fin, self.ack, held)

    def syn_state(self):
        return (self.syn, self.isn)

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
            self._deliver(data, size, frame, ts, out)
            if self.starts:
                self._drain(frame, ts, out)
            return
        self._buffer(start, data, size, frame, ts)
        ack = self.peer.ack
        if ack is not None:
            self.check_ack(ack, out)
        while self.pbytes > self.max_buffer:
            self._force(out)

    def check_ack(self, ack, out):
        """A hole the receiver acknowledged was lost by the capture, not by the network: it will
        never be retransmitted, so declare it now."""
        if not self.starts:
            return
        acked = self.offset(ack)
        while self.starts and self.starts[0] <= acked:
            self._force(out)

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
        self.dropped += self.pbytes
        self.pbytes = 0
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
            e, d, f, t = items[i]
            i += 1
            if d is not None:
                self.pbytes -= len(d)
            if e <= nxt:  # already covered by in-order data
                if d is not None:
                    self.dup += len(d)
                continue
            if s < nxt and d is not None:
                d = d[nxt - s :]
                self.dup += nxt - s
            if frame is not None:
                f = frame
                t = ts
            if d is None:  # the part of a packet past its snap length
                out.append(StreamGap(conn, side, e - nxt, f, t, True))
                self.gap += e - nxt
            else:
                out.append(StreamData(conn, side, d, f, t))
            nxt = e
        del starts[:i]
        del items[:i]
        self.nxt = nxt

    def _buffer(self, start, data, size, frame, ts):
        """Insert a piece after a hole; where buffered pieces overlap it, the first copy stays."""
        starts = self.starts
        items = self.items
        end = start + size
        i = bisect_right(starts, start)
        pieces = []
        pos = start
        if i and items[i - 1][0] > pos:
            pos = items[i - 1][0]
        while pos < end and i < len(starts):
            s = starts[i]
            if s >= end:
                break
            if s > pos:
                pieces.append((pos, s))
            pos = max(pos, items[i][0])
            i += 1
        if pos < end:
            pieces.append((pos, end))
        kept = 0
        for a, b in pieces:
            if data is None:
                piece = None
            else:
                piece = data if b - a == size else data[a - start : b - start]
                kept += b - a
            j = bisect_right(starts, a)
            starts.insert(j, a)
            items.insert(j, (b, piece, frame, ts))
        if data is not None:
            self.pbytes += kept
            self.dup += size - kept
