"""TCP reassembly: segments built by hand, events checked byte for byte."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from dissector.net.segment import ACK, FIN, PSH, RST, SYN, Segment
from dissector.tcp import StreamData, StreamEnd, StreamGap, TcpTracker
from dissector.tcp.halfstream import LATE_SEGMENTS, PIECE_COST

MASK = 0xFFFFFFFF
C = ("10.0.0.1", 40000)
S = ("10.0.0.2", 9092)


def seg(frame, src, dst, seq, payload=b"", flags=ACK, ack=0, missing=0):
    return Segment(
        frame, frame * 1000, src[0], src[1], dst[0], dst[1], seq & MASK, ack & MASK, flags,
        payload, missing,
    )  # fmt: skip


def feed(tracker, segs):
    out = []
    for s in segs:
        out += tracker.feed(s)
    return out


def stream(events, side, conn_id=None):
    """One side's events as a list of bytes (data) and ints (gap sizes), merged."""
    out = []
    for ev in events:
        if isinstance(ev, StreamEnd) or ev.side != side:
            continue
        if conn_id is not None and ev.conn.id != conn_id:
            continue
        item = ev.data[ev.start :] if isinstance(ev, StreamData) else ev.size
        if out and type(out[-1]) is type(item):
            out[-1] += item
        else:
            out.append(item)
    return out


def ends(events):
    return [(ev.conn.id, ev.reason) for ev in events if isinstance(ev, StreamEnd)]


def handshake(tracker, cisn=1000, sisn=5000):
    """SYN, SYN+ACK, ACK; returns the events and the next sequence numbers of both sides."""
    evs = feed(
        tracker,
        [
            seg(1, C, S, cisn, flags=SYN),
            seg(2, S, C, sisn, flags=SYN | ACK, ack=cisn + 1),
            seg(3, C, S, cisn + 1, ack=sisn + 1),
        ],
    )
    return evs, cisn + 1, sisn + 1


def test_handshake_and_direction():
    t = TcpTracker()
    evs, c, s = handshake(t)
    assert evs == []
    ev = t.feed(seg(4, C, S, c, b"hello", flags=ACK | PSH, ack=s))
    assert len(ev) == 1
    conn = ev[0].conn
    assert conn.id == 0
    assert conn.endpoints == (C, S)
    assert (conn.client_side, conn.how) == (0, "syn")
    assert ev[0] == StreamData(conn, 0, b"hello", 4, 4000)
    ev = t.feed(seg(5, S, C, s, b"world", ack=c + 5))
    assert ev == [StreamData(conn, 1, b"world", 5, 5000)]
    assert (conn.first_frame, conn.last_frame, conn.last_ts) == (1, 5, 5000)


def test_syn_ack_first_decides_the_client():
    t = TcpTracker()
    t.feed(seg(1, S, C, 5000, flags=SYN | ACK, ack=1001))
    ev = t.feed(seg(2, C, S, 1001, b"req", ack=5001))
    conn = ev[0].conn
    assert conn.endpoints == (S, C)
    assert (conn.client_side, conn.how) == (1, "syn")
    assert ev[0].side == 1 and ev[0].data == b"req"


def test_in_order_segments_come_out_at_once():
    t = TcpTracker()
    _, c, s = handshake(t)
    for i in range(10):
        payload = bytes([i]) * 100
        ev = t.feed(seg(10 + i, C, S, c + 100 * i, payload, ack=s))
        assert [(e.data, e.frame) for e in ev] == [(payload, 10 + i)]


def test_out_of_order_is_delivered_in_the_filling_frame():
    t = TcpTracker()
    _, c, s = handshake(t)
    assert t.feed(seg(10, C, S, c + 100, b"b" * 100, ack=s)) == []
    assert t.feed(seg(11, C, S, c + 300, b"d" * 100, ack=s)) == []
    ev = t.feed(seg(12, C, S, c, b"a" * 100, ack=s))
    assert [(e.data, e.frame, e.ts) for e in ev] == [
        (b"a" * 100, 12, 12000),
        (b"b" * 100, 12, 12000),
    ]
    ev = t.feed(seg(13, C, S, c + 200, b"c" * 100, ack=s))
    assert [e.data for e in ev] == [b"c" * 100, b"d" * 100]
    conn = ev[0].conn
    assert conn.bytes_delivered == (400, 0)
    assert conn.bytes_buffered == (0, 0)


def test_retransmission_with_other_boundaries():
    t = TcpTracker()
    _, c, s = handshake(t)
    data = bytes(range(250))
    t.feed(seg(4, C, S, c, data[:100], ack=s))
    t.feed(seg(5, C, S, c + 100, data[100:200], ack=s))
    ev = t.feed(seg(6, C, S, c + 50, data[50:250], ack=s))
    assert [e.data for e in ev] == [data[200:250]]
    assert ev[0].conn.bytes_dup == (150, 0)
    # A retransmission wholly inside delivered data yields nothing.
    assert t.feed(seg(7, C, S, c + 10, data[10:90], ack=s)) == []


def test_overlaps_among_buffered_segments_keep_the_later_copy():
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c + 100, b"A" * 100, ack=s))  # [100, 200)
    t.feed(seg(5, C, S, c + 150, b"B" * 150, ack=s))  # [150, 300): wins over [150, 200)
    t.feed(seg(6, C, S, c + 280, b"D" * 40, ack=s))  # [280, 320): wins over [280, 300)
    ev = t.feed(seg(7, C, S, c, b"E" * 100, ack=s))
    data = b"".join(e.data for e in ev)
    assert data == b"E" * 100 + b"A" * 50 + b"B" * 130 + b"D" * 40
    assert ev[0].conn.bytes_dup == (50 + 20, 0)
    assert ev[0].conn.bytes_conflicting == (50 + 20, 0)


def test_overlap_spanning_several_buffered_pieces():
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c + 20, b"a" * 10, ack=s))  # [20, 30)
    t.feed(seg(5, C, S, c + 40, b"b" * 10, ack=s))  # [40, 50)
    t.feed(seg(6, C, S, c + 10, b"x" * 50, ack=s))  # [10, 60): covers them both
    ev = t.feed(seg(7, C, S, c, b"y" * 10, ack=s))
    assert b"".join(e.data for e in ev) == b"y" * 10 + b"x" * 50
    assert ev[0].conn.bytes_conflicting == (20, 0)
    assert ev[0].conn.bytes_dup == (20, 0)


def test_duplicate_packets():
    t = TcpTracker()
    _, c, s = handshake(t)
    p = seg(4, C, S, c, b"x" * 100, ack=s)
    assert len(t.feed(p)) == 1
    assert t.feed(p) == []
    assert t.feed(p._replace(frame=5)) == []
    q = seg(6, C, S, c + 200, b"z" * 100, ack=s)
    assert t.feed(q) == [] and t.feed(q) == []
    ev = t.feed(seg(7, C, S, c + 100, b"y" * 100, ack=s))
    assert b"".join(e.data for e in ev) == b"y" * 100 + b"z" * 100
    assert ev[0].conn.bytes_dup == (300, 0)


def test_sequence_wrap_around():
    t = TcpTracker()
    isn = MASK - 150  # data crosses 2**32 after 150 bytes
    _, c, s = handshake(t, cisn=isn)
    data = bytes(random.Random(1).randrange(256) for _ in range(600))
    segs = [seg(10 + i, C, S, c + 100 * i, data[100 * i : 100 * i + 100], ack=s) for i in range(6)]
    evs = feed(t, [segs[0], segs[2], segs[1], segs[4], segs[3], segs[3], segs[5]])
    assert stream(evs, 0) == [data]
    assert segs[2].seq < segs[1].seq  # really wrapped


def test_keep_alive_and_zero_window_probe():
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c, b"x" * 100, ack=s))
    # Keep-alive: one garbage byte below the next sequence number; also the empty kind.
    assert t.feed(seg(5, C, S, c + 99, b"\0", ack=s)) == []
    assert t.feed(seg(6, C, S, c + 99, b"", ack=s)) == []
    # Zero-window probe: the next byte alone, then sent again with what follows.
    ev = t.feed(seg(7, C, S, c + 100, b"y", ack=s))
    assert [e.data for e in ev] == [b"y"]
    ev = t.feed(seg(8, C, S, c + 100, b"yzzz", ack=s))
    assert [e.data for e in ev] == [b"zzz"]
    ev = t.feed(seg(9, C, S, c + 104, b"w", ack=s))
    assert [e.data for e in ev] == [b"w"]
    assert ev[0].conn.bytes_dup == (2, 0)


def test_fin_on_both_sides_ends_once_and_late_packets_are_absorbed():
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c, b"req", ack=s))
    assert ends(t.feed(seg(5, C, S, c + 3, flags=FIN | ACK, ack=s))) == []
    ev = t.feed(seg(6, S, C, s, b"resp", flags=FIN | ACK, ack=c + 4))
    assert [e.data for e in ev if isinstance(e, StreamData)] == [b"resp"]
    assert ends(ev) == [(0, "fin")]
    assert isinstance(ev[-1], StreamEnd) and ev[-1].frame == 6
    assert t.live == []
    # The last ACK and a retransmitted FIN belong to the ended connection.
    assert t.feed(seg(7, C, S, c + 4, ack=s + 5)) == []
    assert t.feed(seg(8, S, C, s, b"resp", flags=FIN | ACK, ack=c + 4)) == []
    assert t.connections == 1
    assert t.stats["late_segments"] == 2


def test_fin_does_not_end_a_half_closed_connection():
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c, flags=FIN | ACK, ack=s))
    ev = feed(t, [seg(5, S, C, s + i * 10, b"r" * 10, ack=c + 1) for i in range(3)])
    assert stream(ev, 1) == [b"r" * 30]
    assert ends(ev) == []
    # Nothing comes after a FIN: such bytes are dropped.
    assert t.feed(seg(6, C, S, c, b"bogus", ack=s + 30)) == []
    assert ev[0].conn.bytes_dropped == (5, 0)


def test_rst_mid_stream():
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c, b"x" * 10, ack=s))
    t.feed(seg(5, C, S, c + 20, b"z" * 10, ack=s))  # buffered behind a hole
    ev = t.feed(seg(6, S, C, s, flags=RST | ACK))
    assert [type(e) for e in ev] == [StreamGap, StreamData, StreamEnd]
    assert ev[0].size == 10 and ev[1].data == b"z" * 10
    assert ends(ev) == [(0, "rst")]
    assert t.feed(seg(7, C, S, c + 30, b"late", ack=s)) == []
    assert t.connections == 1 and t.live == []


def test_port_reuse_after_close_starts_a_new_connection():
    t = TcpTracker()
    _, c, s = handshake(t)
    feed(t, [seg(4, C, S, c, flags=FIN | ACK, ack=s), seg(5, S, C, s, flags=FIN | ACK, ack=c + 1)])
    evs, c2, s2 = handshake(t, cisn=900000, sisn=7)
    ev = t.feed(seg(10, C, S, c2, b"again", ack=s2))
    assert ev[0].conn.id == 1 and ev[0].data == b"again"
    assert ev[0].conn.client_side == 0


def test_new_syn_answered_on_a_live_connection_means_reuse():
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c, b"x", ack=s))
    # A retransmitted SYN (same ISN) changes nothing.
    assert t.feed(seg(5, C, S, c - 1, flags=SYN)) == []
    # A new one waits for the broker's answer: a SYN+ACK tells the port was reused.
    assert t.feed(seg(6, C, S, 123456, flags=SYN)) == []
    ev = t.feed(seg(7, S, C, 99, flags=SYN | ACK, ack=123457))
    assert ends(ev) == [(0, "reused")] and ev[-1].frame == 6
    ev = t.feed(seg(8, C, S, 123457, b"new", ack=100))
    assert ev[0].conn.id == 1 and ev[0].conn.first_frame == 6
    assert ev[0].data == b"new"
    assert [c.id for c in t.live] == [1]


def test_rst_out_of_the_window_is_counted_and_ignored():
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c, b"x" * 10, ack=s))
    assert t.feed(seg(5, S, C, s + (1 << 31), flags=RST | ACK, ack=c + 10)) == []
    assert t.feed(seg(6, S, C, s - 1000, flags=RST | ACK, ack=c + 10)) == []  # below
    ev = t.feed(seg(7, C, S, c + 10, b"y", ack=s))
    assert ev[0].data == b"y" and ev[0].conn.rsts_ignored == (0, 2)
    ev = t.feed(seg(8, S, C, s, flags=RST | ACK, ack=c + 11))  # at the next byte: it ends
    assert ends(ev) == [(0, "rst")]


def test_unanswered_syn_on_an_open_connection_is_counted_and_ignored():
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c, b"x", ack=s))
    assert t.feed(seg(5, C, S, 123456, flags=SYN)) == []
    assert t.feed(seg(6, C, S, 123456, flags=SYN)) == []  # sent again: still one
    ev = t.feed(seg(7, S, C, s, b"resp", ack=c + 1))  # the old connection goes on
    assert ev[0].data == b"resp" and ev[0].conn.id == 0
    assert ev[0].conn.syns_ignored == (1, 0) and t.connections == 1
    ev = t.feed(seg(8, C, S, c + 1, b"more", ack=s + 4))
    assert ev[0].data == b"more"


def test_new_syn_after_a_fin_means_reuse_at_once():
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c, flags=FIN | ACK, ack=s))
    ev = t.feed(seg(5, C, S, 123456, flags=SYN))
    assert ends(ev) == [(0, "reused")] and t.live[0].id == 1


def test_mid_stream_start_uses_broker_ports():
    t = TcpTracker(broker_ports={9092})
    ev = t.feed(seg(1, S, C, 777, b"response", ack=5))
    conn = ev[0].conn
    assert ev[0].data == b"response"
    assert conn.endpoints == (S, C)
    assert (conn.client_side, conn.how) == (1, "port")
    ev = t.feed(seg(2, C, S, 5, b"request", ack=777 + 8))
    assert ev[0].side == 1 and ev[0].data == b"request"


def test_mid_stream_start_without_ports_leaves_the_client_unknown():
    t = TcpTracker()
    ev = t.feed(seg(1, C, S, 42, b"abc", ack=5))
    conn = ev[0].conn
    assert conn.client_side is None and conn.how is None
    conn.client_side = 0
    conn.how = "traffic"
    assert conn.client_side == 0


def test_mid_stream_keep_alive_first():
    t = TcpTracker()
    assert t.feed(seg(1, C, S, 41, b"\0", ack=5)) == []
    ev = t.feed(seg(2, C, S, 42, b"abc", ack=5))
    assert [e.data for e in ev] == [b"abc"]


def test_max_buffer_exceeded_declares_the_hole():
    # The bound counts a cost per buffered piece and per run of adjacent pieces.
    t = TcpTracker(max_buffer=3 * PIECE_COST + 250)
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c, b"a" * 100, ack=s))
    assert t.feed(seg(5, C, S, c + 200, b"c" * 100, ack=s)) == []
    assert t.feed(seg(6, C, S, c + 300, b"d" * 100, ack=s)) == []  # one run of two pieces
    ev = t.feed(seg(7, C, S, c + 400, b"e" * 100, ack=s))
    assert [(type(e), e.frame) for e in ev] == [
        (StreamGap, 5),
        (StreamData, 5),
        (StreamData, 6),
        (StreamData, 7),
    ]
    assert ev[0].size == 100
    assert stream(ev, 0) == [100, b"c" * 100 + b"d" * 100 + b"e" * 100]
    conn = ev[0].conn
    assert conn.bytes_gap == (100, 0)
    # The lost bytes, should they come after all, are old news.
    assert t.feed(seg(8, C, S, c + 100, b"b" * 100, ack=s)) == []


def test_many_small_pieces_count_their_cost():
    t = TcpTracker(max_buffer=10 * PIECE_COST)
    _, c, s = handshake(t)
    evs = []
    for i in range(20):  # one-byte pieces, each after a hole of its own
        evs += t.feed(seg(4 + i, C, S, c + 2 * i + 1, b"x", ack=s))
    conn = t.live[0]
    half = conn._halves[0]
    assert half.pbytes + PIECE_COST * (half.pieces + len(half.starts)) <= 10 * PIECE_COST
    assert stream(evs, 0)[:2] == [1, b"x"]


def test_hole_acknowledged_by_the_receiver_is_a_capture_loss():
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c, b"a" * 100, ack=s))
    # [100, 200) was not captured; the server acknowledges it before the next data.
    t.feed(seg(5, S, C, s, ack=c + 200))
    ev = t.feed(seg(6, C, S, c + 200, b"c" * 100, ack=s))
    assert stream(ev, 0) == []  # its bytes may still come, captured late
    # The server's next data may answer what the hole held: the hole is declared first.
    ev = t.feed(seg(7, S, C, s, b"r" * 10, ack=c + 300))
    assert stream(ev, 0) == [100, b"c" * 100] and stream(ev, 1) == [b"r" * 10]
    assert ev[0].frame == 6  # where the capture noticed the bytes were missing
    # With no answer, the hole is declared after LATE_SEGMENTS more segments of its side.
    t.feed(seg(8, C, S, c + 400, b"e" * 100, ack=s + 10))
    t.feed(seg(9, S, C, s + 10, ack=c + 500))
    got = []
    for i in range(LATE_SEGMENTS + 1):
        got += stream(t.feed(seg(10 + i, C, S, c + 500 + 10 * i, b"f" * 10, ack=s + 10)), 0)
    assert got[0] == 100 and b"".join(got[1:]) == b"e" * 100 + b"f" * 10 * (LATE_SEGMENTS + 1)


def test_bytes_captured_after_their_ack_fill_the_hole():
    # Two CPUs can hand packets to the capture in either order: the data of [100, 200)
    # comes after the server's ACK of it, and after the data behind it.
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c, b"a" * 100, ack=s))
    t.feed(seg(5, C, S, c + 200, b"c" * 100, ack=s))
    t.feed(seg(6, S, C, s, ack=c + 300))
    ev = t.feed(seg(7, C, S, c + 100, b"b" * 100, ack=s))
    assert stream(ev, 0) == [b"b" * 100 + b"c" * 100]
    conn = ev[0].conn
    assert conn.bytes_gap == (0, 0) and conn.bytes_delivered == (300, 0)


def test_snap_length_cut_payload():
    t = TcpTracker()
    _, c, s = handshake(t)
    ev = t.feed(seg(4, C, S, c, b"x" * 60, ack=s, missing=1400))
    assert [(type(e), e.frame) for e in ev] == [(StreamData, 4), (StreamGap, 4)]
    assert ev[1].size == 1400
    ev = t.feed(seg(5, C, S, c + 1460, b"y" * 60, ack=s, missing=1400))
    assert stream(ev, 0) == [b"y" * 60, 1400]
    ev = t.feed(seg(6, C, S, c + 2920, b"z" * 10, ack=s))
    assert stream(ev, 0) == [b"z" * 10]
    conn = ev[0].conn
    assert conn.bytes_gap == (2800, 0) and conn.bytes_delivered == (130, 0)


def test_fin_after_a_hole_declares_it_when_the_connection_ends():
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c, b"a" * 10, ack=s))
    t.feed(seg(5, C, S, c + 20, b"c" * 10, flags=FIN | ACK, ack=s))
    ev = t.feed(seg(6, S, C, s, flags=FIN | ACK, ack=c + 10))
    assert stream(ev, 0) == [10, b"c" * 10]
    assert ends(ev) == [(0, "fin")]


def test_finish_flushes_and_ends_every_open_connection():
    t = TcpTracker()
    _, c, s = handshake(t)
    t.feed(seg(4, C, S, c, b"a" * 10, ack=s))
    t.feed(seg(5, C, S, c + 20, b"c" * 10, ack=s))
    other = ("10.0.0.3", 50000)
    t.feed(seg(6, other, S, 1, b"zz", ack=1))
    ev = t.finish()
    assert stream(ev, 0, conn_id=0) == [10, b"c" * 10]
    assert ends(ev) == [(0, "eof"), (1, "eof")]
    assert ev[-1].frame == 6
    assert t.live == []


def test_ignored_connection_drops_payload_but_ends():
    t = TcpTracker()
    _, c, s = handshake(t)
    ev = t.feed(seg(4, C, S, c, b"GET / HTTP/1.1\r\n", ack=s))
    conn = ev[0].conn
    t.feed(seg(5, C, S, c + 100, b"later", ack=s))  # buffered behind a hole
    conn.ignored = True
    assert conn.bytes_buffered == (0, 0)
    assert t.feed(seg(6, S, C, s, b"HTTP/1.1 200 OK", ack=c + 16)) == []
    assert t.feed(seg(7, C, S, c + 16, b"more", ack=s + 15)) == []
    assert conn.bytes_dropped == (5 + 4, 15)
    t.feed(seg(8, C, S, c + 20, flags=FIN | ACK, ack=s + 15))
    ev = t.feed(seg(9, S, C, s + 15, flags=FIN | ACK, ack=c + 21))
    assert ev == [StreamEnd(conn, 9, 9000, "fin")]


def test_accounting_adds_up():
    t = TcpTracker(max_buffer=300)
    _, c, s = handshake(t)
    rng = random.Random(7)
    data = bytes(rng.randrange(256) for _ in range(5000))
    segs = []
    for i in range(0, 5000, 100):
        segs.append(seg(10 + i, C, S, c + i, data[i : i + 100], ack=s))
    # Shuffle a little, duplicate some, lose a few.
    rng.shuffle(segs)
    segs += segs[:5]
    del segs[20:23]
    fed = sum(len(x.payload) for x in segs)
    evs = feed(t, segs) + t.finish()
    conn = evs[0].conn
    got = sum(len(e.data) for e in evs if isinstance(e, StreamData))
    gaps = sum(e.size for e in evs if isinstance(e, StreamGap))
    assert conn.bytes_seen[0] == fed
    assert conn.bytes_delivered[0] == got
    assert conn.bytes_gap[0] == gaps
    assert got + conn.bytes_dup[0] + conn.bytes_dropped[0] == fed
    # Whatever was delivered sits at its right place in the stream.
    pos = 0
    for e in evs:
        if isinstance(e, StreamData):
            assert e.data == data[pos : pos + len(e.data)]
            pos += len(e.data)
        elif isinstance(e, StreamGap):
            pos += e.size
    assert t.stats["bytes_seen"] == fed


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(min_size=1, max_size=3000),
    cuts=st.lists(st.integers(1, 400), min_size=1, max_size=40),
    isn=st.integers(0, MASK),
    seed=st.integers(0, 2**32),
    dups=st.integers(0, 10),
)
def test_any_reordering_and_duplication_yields_the_stream(data, cuts, isn, seed, dups):
    rng = random.Random(seed)
    segs = []
    pos = 0
    i = 0
    while pos < len(data):
        size = cuts[i % len(cuts)]
        i += 1
        # Retransmissions may start a little earlier and carry other boundaries.
        start = max(0, pos - rng.randrange(0, 50)) if rng.random() < 0.2 else pos
        segs.append((start, data[start : pos + size]))
        pos += size
    segs += [rng.choice(segs) for _ in range(dups)]
    rng.shuffle(segs)
    t = TcpTracker()
    t.feed(seg(1, C, S, isn, flags=SYN))
    evs = [
        ev
        for n, (start, payload) in enumerate(segs)
        for ev in t.feed(seg(2 + n, C, S, isn + 1 + start, payload))
    ]
    evs += t.finish()
    assert stream(evs, 0) == [data]
    assert ends(evs) == [(0, "eof")]


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(1, 4000),
    mss=st.integers(1, 500),
    seed=st.integers(0, 2**32),
    loss=st.floats(0, 0.3),
    max_buffer=st.integers(1, 2000),
    isn=st.integers(0, MASK),
)
def test_losses_acks_and_bounds_keep_bytes_in_place(size, mss, seed, loss, max_buffer, isn):
    """Whatever the capture loses or reorders, delivered bytes sit at their stream offsets and
    every captured byte is accounted for."""
    rng = random.Random(seed)
    data = rng.randbytes(size)
    t = TcpTracker(max_buffer=max_buffer)
    _, c, s = handshake(t, cisn=isn)
    segs = [(i, data[i : i + mss]) for i in range(0, size, mss)]
    order = []
    for item in segs:
        if rng.random() < 0.2 and order:  # swapped with the previous one
            order.insert(len(order) - 1, item)
        else:
            order.append(item)
        if rng.random() < 0.1:
            order.append(rng.choice(segs))
    evs = []
    fed = 0
    acked = 0
    for n, (start, payload) in enumerate(order):
        if rng.random() < loss:  # the receiver got it, the capture did not
            acked = max(acked, start + len(payload))
            continue
        fed += len(payload)
        evs += t.feed(seg(10 + n, C, S, c + start, payload, ack=s))
        if rng.random() < 0.3:
            evs += t.feed(seg(10 + n, S, C, s, ack=c + max(acked, start + len(payload))))
    evs += t.finish()
    pos = 0
    for e in evs:
        if isinstance(e, StreamData):
            assert e.data == data[pos : pos + len(e.data)]
            pos += len(e.data)
        elif isinstance(e, StreamGap):
            assert e.size > 0
            pos += e.size
    conn = evs[-1].conn
    assert conn.bytes_seen[0] == fed
    assert conn.bytes_buffered == (0, 0)
    delivered = sum(len(e.data) for e in evs if isinstance(e, StreamData))
    assert delivered == conn.bytes_delivered[0]
    assert delivered + conn.bytes_dup[0] + conn.bytes_dropped[0] == fed
    assert ends(evs) == [(0, "eof")]


def test_payload_left_in_its_packet_reassembles_as_a_copy():
    """Segments whose payload starts `start` bytes into their packet (NetDecoder(in_place=
    True)): in order, out of order, overlapping and retransmitted, the same stream."""
    data = bytes(range(256)) * 8
    rng = random.Random(5)
    in_order = [(i, data[i : i + 150]) for i in range(0, 600, 150)]
    rest = [(i, data[i : i + 200]) for i in range(600, len(data), 150)]  # overlapping
    rest += rng.sample(rest, 4)  # retransmitted
    rng.shuffle(rest)
    pieces = in_order + rest

    def events(in_place):
        tracker, out = TcpTracker(), []
        _, cseq, _ = handshake(tracker)
        for n, (i, chunk) in enumerate(pieces):
            s = seg(10 + n, C, S, cseq + i, chunk)
            if in_place:
                head = b"\xff" * (14 + n % 40)
                s = s._replace(payload=head + chunk, start=len(head))
            out += tracker.feed(s)
        return out

    left_in_place = events(in_place=True)
    assert stream(left_in_place, 0) == stream(events(in_place=False), 0) == [data]
    left = [ev for ev in left_in_place if isinstance(ev, StreamData) and ev.start]
    assert len(left) == len(in_order)  # the in-order ones, passed on where they lie
