"""The connection table: segments in, per-side ordered stream events out."""

from heapq import nsmallest
from operator import attrgetter

from dissector.tuples import new as _new  # a NamedTuple from its fields, a C call

from ..net.segment import ACK, FIN, RST, SYN
from ..options import DEFAULT_MAX_CONNECTIONS
from .connection import Connection, endpoints_key
from .events import StreamData, StreamEnd
from .halfstream import MASK, HalfStream

DEFAULT_MAX_BUFFER = 32 << 20  # out-of-order bytes held per direction
DEFAULT_MAX_CLOSED = 1 << 16  # ended 4-tuples remembered, to absorb their last packets
# The receive window when the capture cannot tell it: the largest any TCP can advertise
# (65535 scaled by 2**14), so no receiver would take a RST beyond it.
MAX_WINDOW = 65535 << 14

_FAST_MASK = SYN | FIN | RST | ACK  # the fast path takes plain ACK segments only


class TcpTracker:
    """Follow every TCP connection of a capture, fed segments in capture order.

    feed() returns the events a segment causes: StreamData, StreamGap and StreamEnd.
    `on_open`, if given, is called with each Connection as it opens (its id, endpoints and
    first frame are set): a driver's way to follow connections without state of its own.
    """

    def __init__(
        self,
        broker_ports=frozenset(),
        max_buffer=DEFAULT_MAX_BUFFER,
        max_closed=DEFAULT_MAX_CLOSED,
        on_open=None,
        max_connections=DEFAULT_MAX_CONNECTIONS,
    ):
        self.broker_ports = frozenset(broker_ports)
        self.on_open = on_open
        self.max_buffer = max_buffer
        self.max_closed = max_closed
        self.max_connections = max_connections
        self._halves = {}  # (src, sport, dst, dport) -> HalfStream of that sender
        self._live = {}  # id -> Connection, in order of id
        self._closed = {}  # 4-tuple -> id of the ended connection, oldest first
        self.connections = 0  # connections opened so far
        self.late_segments = 0  # segments of connections that had already ended
        self.late_bytes = 0
        self.evicted = 0  # connections ended to stay within max_connections
        self._ended = [0, 0, 0, 0, 0]  # seen, delivered, gap, dup, dropped of ended connections

    def feed(self, seg):
        frame, ts, src, sport, dst, dport, seq, ack, flags, payload, missing, start = seg
        half = self._halves.get((src, sport, dst, dport))
        # In-order data or pure ACK of a connection in a steady state: nothing to decide.
        if half is not None and seq == half.fastseq and flags & _FAST_MASK == ACK and not missing:
            conn = half.conn
            conn.last_frame = frame
            conn.last_ts = ts
            half.ack = ack
            n = len(payload) - start
            if n:
                mask = MASK  # a C integer when compiled, as are seq, n and the half's counters
                half.nxt += n
                half.fastseq = (seq + n) & mask
                return [_new(StreamData, (conn, half.side, payload, frame, ts, start))]
            return []
        if start:  # every other path reads the payload from its first byte
            payload = payload[start:]
            seg = seg._replace(payload=payload, start=0)
        out = []
        if half is None:
            if flags & (SYN | ACK) != SYN and (src, sport, dst, dport) in self._closed:
                self.late_segments += 1
                self.late_bytes += len(payload)
                return out
            if len(self._live) >= self.max_connections:
                self._evict(out)
            half = self._open(seg)
        self._segment(half, seg, out)
        return out

    def finish(self, only=None):
        """End of capture: deliver what is buffered, end every connection still open (or those
        of them whose ids are in `only`, leaving the others as they are), in id order."""
        out = []
        for conn in list(self._live.values()):
            if only is None or conn.id in only:
                self._end(conn, conn.last_frame, conn.last_ts, "eof", out)
        if only is None:
            self._closed.clear()
        return out

    def closed(self):
        """The 4-tuples of connections that ended by FIN or RST and are remembered, to absorb
        their last packets: as (endpoint, endpoint), sorted."""
        return {endpoints_key((a, pa), (b, pb)) for a, pa, b, pb in self._closed}

    def expire(self, before_ts):
        """End every connection with no packet since `before_ts` ("idle"). Its 4-tuple is not
        remembered as closed: a later packet starts a new connection, joined mid-stream."""
        out = []
        for conn in [c for c in self._live.values() if c.last_ts < before_ts]:
            self._end(conn, conn.last_frame, conn.last_ts, "idle", out)
        return out

    def _evict(self, out):
        """Too many connections followed: the longest idle eighth of them end ("evicted"), as
        idle ones do. An eighth at a time keeps the choice at O(log n) a connection."""
        eighth = max(1, self.max_connections >> 3)
        victims = nsmallest(eighth, self._live.values(), attrgetter("last_ts"))
        for conn in victims:
            self._end(conn, conn.last_frame, conn.last_ts, "evicted", out)
        self.evicted += len(victims)

    @property
    def live(self):
        """Connections not ended yet."""
        return list(self._live.values())

    @property
    def stats(self):
        totals = list(self._ended)
        for conn in self._live.values():
            for half in conn._halves:
                totals[0] += half.seen
                totals[1] += half.nxt - half.gap
                totals[2] += half.gap
                totals[3] += half.dup
                totals[4] += half.dropped
        seen, delivered, gap, dup, dropped = totals
        return {
            "connections": self.connections,
            "live": len(self._live),
            "bytes_seen": seen,
            "bytes_delivered": delivered,
            "bytes_gap": gap,
            "bytes_dup": dup,
            "bytes_dropped": dropped,
            "late_segments": self.late_segments,
            "late_bytes": self.late_bytes,
        }

    # -- connections -----------------------------------------------------------------------

    def _open(self, seg):
        frame, ts, src, sport, dst, dport, _, _, flags = seg[:9]
        conn = Connection(self.connections, ((src, sport), (dst, dport)), frame, ts)
        self.connections += 1
        if flags & SYN:
            conn.client_side = 1 if flags & ACK else 0
            conn.how = "syn"
        elif self.broker_ports:
            to_broker = dport in self.broker_ports
            from_broker = sport in self.broker_ports
            if to_broker != from_broker:
                conn.client_side = 0 if to_broker else 1
                conn.how = "port"
        h0 = HalfStream(conn, 0, self.max_buffer)
        h1 = HalfStream(conn, 1, self.max_buffer)
        h0.peer = h1
        h1.peer = h0
        conn._halves = (h0, h1)
        k0 = (src, sport, dst, dport)
        k1 = (dst, dport, src, sport)
        self._halves[k0] = h0
        self._halves[k1] = h1
        self._closed.pop(k0, None)
        self._closed.pop(k1, None)
        self._live[conn.id] = conn
        if self.on_open is not None:
            self.on_open(conn)
        return h0

    def _end(self, conn, frame, ts, reason, out):
        if conn.end_frame is None:  # nobody ended it: the capture, idleness or a reused port
            conn.end_frame, conn.end_ts = frame, ts
        h0, h1 = conn._halves
        for h in (h0, h1):
            if h.pending is not None:
                _drop_pending(h)
        if not conn._ignored:
            h0.flush(out, frame, ts)
            h1.flush(out, frame, ts)
        out.append(StreamEnd(conn, frame, ts, reason))
        conn.end_reason = reason
        del self._live[conn.id]
        (a, pa), (b, pb) = conn.endpoints
        k0 = (a, pa, b, pb)
        k1 = (b, pb, a, pa)
        del self._halves[k0]
        # k1 is k0 when both ends are one address and port (a socket connected to itself).
        self._halves.pop(k1, None)
        if reason not in ("reused", "idle", "evicted"):
            closed = self._closed
            closed[k0] = closed[k1] = conn.id
            while len(closed) > self.max_closed:
                del closed[next(iter(closed))]
        totals = self._ended
        for half in (h0, h1):
            half.fastseq = -1
            half.peer = None  # no cycles: the halves only keep their counters now
            half.conn = None
            totals[0] += half.seen
            totals[1] += half.nxt - half.gap
            totals[2] += half.gap
            totals[3] += half.dup
            totals[4] += half.dropped

    def _segment(self, half, seg, out):
        """Everything the fast path does not take: handshake, holes, ends, odd segments."""
        frame, ts, _, _, _, _, seq, ack, flags, payload, missing, _ = seg
        conn = half.conn
        peer = half.peer
        if flags & SYN:
            conn.syns += 1
        if peer.pending is not None and _answers(peer.pending, seg):
            # The peer took the new SYN as a new connection: the port was reused.
            syn, peer.pending = peer.pending, None
            self._end(conn, syn.frame, syn.ts, "reused", out)
            self._segment(self._open(syn), syn, out)
            self._segment(self._halves[seg[2:6]], seg, out)
            return
        fresh_syn = flags & (SYN | ACK) == SYN and not (half.syn and half.isn == seq)
        if fresh_syn and (half.base is not None or peer.base is not None):
            if half.fin is not None or peer.fin is not None:
                # A new SYN, not a retransmitted one, on a closing 4-tuple: the port was reused.
                self._end(conn, frame, ts, "reused", out)
                self._segment(self._open(seg), seg, out)
                return
            # On an open connection only the peer's answer tells reuse from a spoofed SYN.
            if half.pending is not None and half.pending.seq != seq:
                _drop_pending(half)
            conn.last_frame = frame
            conn.last_ts = ts
            if half.pending is None:
                half.pending = seg
            else:  # the pending SYN sent again
                half.dropped += len(payload)
            half.refresh()
            peer.refresh()
            return
        for h in (half, peer):  # the old connection goes on: a new SYN was not answered
            if h.pending is not None:
                _drop_pending(h)
        conn.last_frame = frame
        conn.last_ts = ts
        n = len(payload)
        if flags & RST and not _in_window(half, seq):
            # Out of the receiver's window: a receiver ignores it, the connection goes on.
            half.rsts_ignored += 1
            half.dropped += n
            return
        if flags & RST:
            half.dropped += n
            _ending(conn, half.side, frame, ts)
            self._end(conn, frame, ts, "rst", out)
            return
        if flags & SYN:
            if fresh_syn:
                half.start(seq, True)
                conn.client_side = half.side
                conn.how = "syn"
            elif flags & ACK and not half.syn and half.nxt == 0 and not half.starts:
                half.start(seq, True)
                conn.client_side = peer.side
                conn.how = "syn"
            elif half.isn != seq:  # a SYN+ACK that fits nothing known: leave the stream alone
                half.dropped += n
                return
            seq = (seq + 1) & MASK  # the SYN takes one sequence number
        if flags & ACK:
            half.ack = ack
            if peer.starts:
                peer.check_ack(ack)
        if flags & FIN:
            _ending(conn, half.side, frame, ts)
        if conn._ignored:
            half.dropped += n
            if flags & FIN and half.fin is None:
                half.fin = 0
        else:
            if n or missing:
                if half.base is None:
                    if n == 1 and not missing and not flags & (SYN | FIN):
                        # Mid-stream, a lone byte is likely a keep-alive (one byte below the
                        # next): the stream starts after it.
                        half.start((seq + 1) & MASK, False)
                        half.dup += 1
                        n = 0
                    else:
                        half.start(seq, False)
                if peer.waiting >= 0:  # what this side sends may answer the bytes held
                    peer.declare_acked(out)
                start = half.offset(seq)
                if n:
                    half.put(start, payload, n, frame, ts, out)
                if missing:
                    half.put(start + n, None, missing, frame, ts, out)
            if flags & FIN and half.fin is None:
                if half.base is None:
                    half.start(seq, False)
                half.fin = half.offset(seq) + n + missing
        if flags & FIN and peer.fin is not None and half.fin is not None:
            self._end(conn, frame, ts, "fin", out)
            return
        half.refresh()
        peer.refresh()


def _ending(conn, side, frame, ts):
    """The first FIN or RST of a connection says who ended it, and when."""
    if conn.ended_by is None:
        conn.ended_by, conn.end_frame, conn.end_ts = side, frame, ts


def _answers(syn, seg):
    """Whether seg is the SYN+ACK answering syn (it acknowledges syn's sequence number)."""
    return seg[8] & (SYN | ACK) == SYN | ACK and seg[7] == (syn[6] + 1) & MASK


def _drop_pending(half):
    """A new SYN nobody answered while the connection went on: reported, its payload dropped."""
    half.syns_ignored += 1
    half.dropped += len(half.pending[9])
    half.pending = None


def _in_window(half, seq):
    """Whether a RST from this side falls where the receiver would take it: from the lower
    of the next byte seen and the receiver's last ACK, up to a window past the furthest byte
    known of this side (its FIN included). The capture shows no window: MAX_WINDOW stands for
    it. A side whose sequence numbers are unknown cannot be judged."""
    if half.base is None:
        return True
    pos = half.offset(seq)
    low = high = half.nxt
    if half.starts:
        high = half.items[-1][0]
    if half.fin is not None:
        high = max(high, half.fin + 1)
    ack = half.peer.ack
    if ack is not None:
        acked = half.offset(ack)
        if high - MAX_WINDOW <= acked <= high + MAX_WINDOW:
            low = min(low, acked)
            high = max(high, acked)
    return low <= pos <= high + MAX_WINDOW
