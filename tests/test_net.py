"""Network layer: link types, IPv4/IPv6 headers and TCP down to Segments."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dissector.capture import Packet, open_capture
from dissector.net.decode import NetDecoder, segments
from dissector.net.segment import ACK, PSH, SYN, Segment

# ---------------------------------------------------------------- builders

SRC4, DST4 = bytes([192, 168, 1, 10]), bytes([10, 0, 0, 1])
SRC6 = bytes.fromhex("20010db8000000000000000000000001")
DST6 = bytes.fromhex("fe800000000000000000000000000002")


def tcp_header(sport=40000, dport=9092, seq=1000, ack=2000, flags=PSH | ACK, options=b""):
    assert len(options) % 4 == 0
    doff = (20 + len(options)) // 4
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, doff << 4, flags, 65535, 0, 0) + (
        options
    )


def ipv4(payload, proto=6, src=SRC4, dst=DST4, options=b"", total=None, frag=0x4000):
    ihl = 5 + len(options) // 4
    total = ihl * 4 + len(payload) if total is None else total
    head = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, total, 1, frag, 64, proto, 0, src, dst)
    return head + options + payload


def ipv6(payload, nxt=6, ext=(), src=SRC6, dst=DST6):
    """ext: (type, body) pairs in order; each body is sized to a multiple of 8 with its header."""
    chain = b""
    types = [t for t, _ in ext] + [nxt]
    for (_t, body), following in zip(ext, types[1:], strict=True):
        chain += bytes([following]) + body
    first = types[0]
    return struct.pack(
        "!IHBB16s16s", 0x60000000, len(chain) + len(payload), first, 64, src, dst
    ) + (chain + payload)


def hop_opts(length_units=0):
    # next header byte is prepended by ipv6(); hdr ext len, then PadN filling the rest.
    size = (length_units + 1) * 8
    return bytes([length_units, 1, size - 4]) + b"\0" * (size - 4)


def frag_header(offset=0, more=False):
    return struct.pack("!BHI", 0, offset << 3 | int(more), 0x12345678)


def ether(payload, ethertype=0x0800, tags=()):
    head = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02"
    for tpid, vid in tags:
        head += struct.pack("!HH", tpid, vid)
    return head + struct.pack("!H", ethertype) + payload


def pkt(data, linktype=1, frame=1, ts=123, wirelen=None):
    return Packet(frame, ts, linktype, data, len(data) if wirelen is None else wirelen)


def decode(data, linktype=1):
    return NetDecoder().decode(pkt(data, linktype))


PAYLOAD = b"\x00\x00\x00\x10kafka-request!!!"
SEG4 = Segment(1, 123, "192.168.1.10", 40000, "10.0.0.1", 9092, 1000, 2000, PSH | ACK, PAYLOAD, 0)
SEG6 = SEG4._replace(src="2001:db8::1", dst="fe80::2")


# ---------------------------------------------------------------- link types


def test_ethernet_ipv4_tcp():
    seg = decode(ether(ipv4(tcp_header() + PAYLOAD)))
    assert seg == SEG4
    assert isinstance(seg, Segment)


def test_ethernet_ipv6_tcp():
    assert decode(ether(ipv6(tcp_header() + PAYLOAD), 0x86DD)) == SEG6


@pytest.mark.parametrize(
    "tags",
    [
        [(0x8100, 100)],  # 802.1Q
        [(0x88A8, 10), (0x8100, 20)],  # 802.1ad QinQ
        [(0x9100, 1), (0x8100, 2)],  # pre-standard QinQ
        [(0x88A8, 1), (0x8100, 2), (0x8100, 3)],
    ],
)
def test_vlan_tags(tags):
    assert decode(ether(ipv4(tcp_header() + PAYLOAD), tags=tags)) == SEG4
    assert decode(ether(ipv6(tcp_header() + PAYLOAD), 0x86DD, tags=tags)) == SEG6


def test_vlan_tag_cut_short():
    assert decode(ether(b"", 0x8100)[:14] + b"\x00") is None


def sll(payload, proto=0x0800):
    return struct.pack("!HHH8sH", 0, 772, 6, b"\0" * 8, proto) + payload


def sll2(payload, proto=0x0800):
    return struct.pack("!HHIHBB8s", proto, 0, 1, 772, 0, 6, b"\0" * 8) + payload


@pytest.mark.parametrize(
    "linktype, frame4, frame6",
    [
        (113, sll(ipv4(tcp_header() + PAYLOAD)), sll(ipv6(tcp_header() + PAYLOAD), 0x86DD)),
        (276, sll2(ipv4(tcp_header() + PAYLOAD)), sll2(ipv6(tcp_header() + PAYLOAD), 0x86DD)),
        (101, ipv4(tcp_header() + PAYLOAD), ipv6(tcp_header() + PAYLOAD)),
        (12, ipv4(tcp_header() + PAYLOAD), ipv6(tcp_header() + PAYLOAD)),
    ],
)
def test_cooked_and_raw(linktype, frame4, frame6):
    assert decode(frame4, linktype) == SEG4
    assert decode(frame6, linktype) == SEG6


def test_raw_ipv4_and_ipv6_linktypes():
    assert decode(ipv4(tcp_header() + PAYLOAD), 228) == SEG4
    assert decode(ipv6(tcp_header() + PAYLOAD), 229) == SEG6


def test_raw_ip_unknown_version():
    assert decode(b"\x50" + bytes(40), 101) is None
    assert decode(b"", 101) is None


@pytest.mark.parametrize("bo", ["<", ">"])
@pytest.mark.parametrize("af6", [24, 28, 30])
def test_bsd_null_loopback(bo, af6):
    assert decode(struct.pack(bo + "I", 2) + ipv4(tcp_header() + PAYLOAD), 0) == SEG4
    assert decode(struct.pack(bo + "I", af6) + ipv6(tcp_header() + PAYLOAD), 0) == SEG6


def test_bsd_null_other_family():
    assert decode(struct.pack("<I", 7) + ipv4(tcp_header()), 0) is None


def test_openbsd_loop():
    assert decode(struct.pack(">I", 2) + ipv4(tcp_header() + PAYLOAD), 108) == SEG4
    assert decode(struct.pack(">I", 24) + ipv6(tcp_header() + PAYLOAD), 108) == SEG6
    # LOOP is always big-endian: a little-endian AF_INET is not AF_INET.
    assert decode(struct.pack("<I", 2) + ipv4(tcp_header() + PAYLOAD), 108) is None


def test_unknown_linktype_counted():
    dec = NetDecoder()
    assert dec.decode(pkt(ipv4(tcp_header()), linktype=147)) is None
    assert dec.decode(pkt(ipv4(tcp_header()), linktype=147)) is None
    assert dec.decode(pkt(ipv4(tcp_header()), linktype=9)) is None
    assert dec.unsupported_linktypes == {147, 9}
    assert dec.unsupported_packets == 3


def test_non_ip_ethertypes():
    assert decode(ether(b"\0" * 28, 0x0806)) is None  # ARP
    assert decode(ether(b"\0" * 40, 0x8863)) is None  # PPPoE discovery
    assert decode(b"\x01\x80\xc2" + bytes(60)) is None  # 802.3 length field (STP)
    assert decode(b"\0" * 10) is None


# ---------------------------------------------------------------- IPv4


@pytest.mark.parametrize("options", [b"\x01\x01\x01\x00", b"\x07\x07\x04" + bytes(5) + b"\x00" * 4])
def test_ipv4_options(options):
    assert decode(ether(ipv4(tcp_header() + PAYLOAD, options=options))) == SEG4
    assert decode(ipv4(tcp_header() + PAYLOAD, options=options), 101) == SEG4


def test_ethernet_padding_trimmed():
    # A bare ACK is 54 bytes; Ethernet pads it to 60.
    frame = ether(ipv4(tcp_header(flags=ACK))) + b"\xee" * 6
    seg = decode(frame)
    assert (seg.payload, seg.missing, seg.flags) == (b"", 0, ACK)
    frame = ether(ipv4(tcp_header() + b"ab")) + b"\xee" * 4
    assert decode(frame).payload == b"ab"
    frame = ether(ipv6(tcp_header() + b"ab"), 0x86DD) + b"\xee" * 4
    assert decode(frame).payload == b"ab"


def test_snap_length_cut():
    body = bytes(range(200))
    frame = ether(ipv4(tcp_header() + body))
    seg = decode(frame[:96])
    assert seg.payload == body[: 96 - 54]
    assert seg.missing == 200 - (96 - 54)
    seg = decode(ether(ipv6(tcp_header() + body), 0x86DD)[:100])
    assert (seg.payload, seg.missing) == (body[:26], 174)
    seg = decode(sll(ipv4(tcp_header() + body, options=b"\x01" * 4))[:100], 113)
    assert (seg.payload, seg.missing) == (body[: 100 - 16 - 24 - 20], 200 - 40)


def test_snap_length_cut_inside_headers():
    frame = ether(ipv4(tcp_header(options=b"\x01" * 12) + b"data"))
    assert decode(frame[:60]) is None  # TCP options cut
    assert decode(frame[:40]) is None  # TCP header cut
    assert decode(ether(ipv6(tcp_header()), 0x86DD)[:50]) is None  # IPv6 header cut


def test_tcp_options_and_flags():
    opts = b"\x02\x04\x05\xb4\x01\x03\x03\x07"  # MSS, NOP, window scale
    seg = decode(ether(ipv4(tcp_header(seq=0xFFFFFFFF, ack=0, flags=SYN, options=opts))))
    assert (seg.seq, seg.ack, seg.flags, seg.payload) == (0xFFFFFFFF, 0, SYN, b"")
    seg = decode(ether(ipv4(tcp_header(options=opts) + b"xyz")))
    assert seg.payload == b"xyz"


def test_udp_and_icmp_are_not_segments():
    udp = struct.pack("!HHHH", 53, 53, 12, 0) + b"abcd"
    assert decode(ether(ipv4(udp, proto=17))) is None
    assert decode(ether(ipv4(udp, proto=17, options=b"\x01" * 4))) is None
    assert decode(ether(ipv6(udp, nxt=17), 0x86DD)) is None
    assert decode(ipv4(b"\x08\x00" + bytes(30), proto=1), 101) is None


@pytest.mark.parametrize("frag", [0x2000, 0x0010, 0x2010, 0x0001])
def test_ipv4_lone_fragments_wait_for_the_rest(frag):
    assert decode(ether(ipv4(tcp_header() + PAYLOAD, frag=frag))) is None
    assert decode(ipv4(tcp_header() + PAYLOAD, frag=frag), 101) is None


def test_ipv4_dont_fragment_is_fine():
    assert decode(ether(ipv4(tcp_header() + PAYLOAD, frag=0x4000))) == SEG4
    assert decode(ether(ipv4(tcp_header() + PAYLOAD, frag=0))) == SEG4


def test_ipv4_malformed():
    good = ipv4(tcp_header() + PAYLOAD)
    assert decode(ether(b"\x44" + good[1:])) is None  # IHL 4
    assert decode(ether(b"\x55" + good[1:])) is None  # version 5
    assert decode(ether(ipv4(tcp_header(), total=19))) is None  # total < header
    assert decode(ether(ipv4(tcp_header(), total=30))) is None  # total cuts the TCP header
    bad_doff = bytearray(tcp_header())
    bad_doff[12] = 0x40  # data offset 4 words
    assert decode(ether(ipv4(bytes(bad_doff) + PAYLOAD))) is None
    assert decode(ipv4(bytes(bad_doff) + PAYLOAD), 101) is None


def test_ipv4_total_length_zero_offload():
    # Captured on the sender before segmentation offload filled in the length.
    seg = decode(ether(ipv4(tcp_header() + PAYLOAD, total=0)))
    assert seg == SEG4


def test_address_text_and_cache():
    dec = NetDecoder()
    a = dec.decode(pkt(ether(ipv4(tcp_header(), src=bytes([1, 2, 3, 4]), dst=bytes(4)))))
    b = dec.decode(pkt(ether(ipv4(tcp_header(), src=bytes(4), dst=bytes([1, 2, 3, 4])))))
    assert (a.src, a.dst, b.src, b.dst) == ("1.2.3.4", "0.0.0.0", "0.0.0.0", "1.2.3.4")
    assert a.src is b.dst  # the cache hands out one string per address


# ---------------------------------------------------------------- IPv6 extension headers


def test_ipv6_extension_headers():
    routing = bytes(7)  # length 0, type 0, segments left 0, reserved
    ext = [(0, hop_opts()), (43, routing), (60, hop_opts(1)), (44, frag_header())]
    frame = ether(ipv6(tcp_header() + PAYLOAD, ext=ext), 0x86DD)
    assert decode(frame) == SEG6


@pytest.mark.parametrize("offset, more", [(0, True), (100, False), (100, True)])
def test_ipv6_lone_fragments_wait_for_the_rest(offset, more):
    frame = ipv6(tcp_header() + PAYLOAD, ext=[(44, frag_header(offset, more))])
    assert decode(frame, 229) is None


def test_ipv6_payload_length_zero_offload():
    frame = bytearray(ether(ipv6(tcp_header() + PAYLOAD), 0x86DD))
    frame[18:20] = b"\0\0"
    assert decode(bytes(frame)) == SEG6
    frame = bytearray(ipv6(tcp_header() + PAYLOAD, ext=[(60, hop_opts())]))
    frame[4:6] = b"\0\0"
    assert decode(bytes(frame), 229) == SEG6


def test_ipv6_bad_tcp_data_offset():
    bad_doff = bytearray(tcp_header())
    bad_doff[12] = 0x30
    assert decode(ipv6(bytes(bad_doff) + PAYLOAD), 229) is None
    assert decode(ipv6(bytes(bad_doff) + PAYLOAD, ext=[(0, hop_opts())]), 229) is None


def test_ipv6_no_next_header_and_udp_after_ext():
    assert decode(ipv6(b"", nxt=59, ext=[(0, hop_opts())]), 229) is None
    assert decode(ipv6(bytes(8), nxt=17, ext=[(60, hop_opts())]), 229) is None


def test_ipv6_extension_header_cut():
    frame = ipv6(tcp_header() + PAYLOAD, ext=[(0, hop_opts(3))])
    assert decode(frame[:44], 229) is None


def test_ipv6_extension_header_beyond_payload_length():
    frame = bytearray(ipv6(tcp_header(), ext=[(0, hop_opts())]))
    frame[41] = 200  # hop-by-hop length far past the payload
    assert decode(bytes(frame), 229) is None


def test_scapy_built_packets_agree():
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting
    from scapy.layers.l2 import Dot1AD, Dot1Q, Ether

    cases = [
        Ether()
        / IP(src="1.1.1.1", dst="2.2.2.2", options=b"\x01\x01\x01\x00")
        / TCP(sport=1, dport=2, seq=3, ack=4, flags="PA", options=[("MSS", 1460), ("NOP", None)])
        / b"hello",
        Ether()
        / Dot1AD(vlan=5)
        / Dot1Q(vlan=6)
        / IP(src="1.1.1.1", dst="2.2.2.2")
        / TCP(sport=1, dport=2, seq=3, ack=4, flags="PA")
        / b"hello",
        Ether()
        / IPv6(src="::1", dst="2001:db8::5")
        / IPv6ExtHdrHopByHop()
        / IPv6ExtHdrRouting()
        / IPv6ExtHdrDestOpt()
        / TCP(sport=1, dport=2, seq=3, ack=4, flags="PA")
        / b"hello",
    ]
    for p in cases:
        seg = decode(bytes(p))
        ip = p.getlayer(IP) or p.getlayer(IPv6)
        assert (seg.src, seg.dst) == (ip.src, ip.dst)
        assert (seg.sport, seg.dport, seg.seq, seg.ack, seg.flags) == (1, 2, 3, 4, PSH | ACK)
        assert seg.payload == b"hello" and seg.missing == 0


# ---------------------------------------------------------------- over a capture


def test_segments_keep_frame_numbers_of_the_capture(tmp_path):
    udp = struct.pack("!HHHH", 53, 53, 8, 0)
    frames = [
        ether(ipv4(tcp_header(seq=1) + b"a")),
        ether(ipv4(udp, proto=17)),
        ether(b"\0" * 28, 0x0806),
        ether(ipv6(tcp_header(seq=2) + b"b"), 0x86DD, tags=[(0x8100, 7)]),
        ether(ipv4(tcp_header(seq=3), frag=0x2000)),
        ether(ipv4(tcp_header(seq=4) + b"c")),
    ]
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for i, f in enumerate(frames):
        out.append(struct.pack("<IIII", 100, i, len(f), len(f)) + f)
    path = tmp_path / "mixed.pcap"
    path.write_bytes(b"".join(out))
    dec = NetDecoder()
    with open_capture(path) as r:
        segs = list(segments(r, dec))
    assert [(s.frame, s.seq, s.payload, s.ts) for s in segs] == [
        (1, 1, b"a", 100_000_000_000),
        (4, 2, b"b", 100_000_003_000),
        (6, 4, b"c", 100_000_005_000),
    ]
    assert dec.unsupported_linktypes == set()


def test_segments_method_and_function_agree():
    packets = [pkt(ether(ipv4(tcp_header(seq=i))), frame=i + 1) for i in range(5)]
    packets.insert(2, pkt(b"junk", linktype=999, frame=99))
    assert list(NetDecoder().segments(packets)) == list(segments(packets))
    assert [s.frame for s in segments(packets)] == [1, 2, 3, 4, 5]


# ---------------------------------------------------------------- unsupported link types


def test_unsupported_link_types_counted_with_their_first_frame():
    dec = NetDecoder()
    for frame, linktype in [(1, 1), (2, 147), (3, 9), (4, 147), (5, 147), (6, 1)]:
        dec.decode(pkt(ether(ipv4(tcp_header())) if linktype == 1 else b"x", linktype, frame))
    assert dec.unsupported == {147: [3, 2], 9: [1, 3]}
    assert dec.unsupported_linktypes == {147, 9} and dec.unsupported_packets == 4


# ---------------------------------------------------------------- IP fragment reassembly


def frag4(payload, offset, more, ident=7, proto=6, src=SRC4, dst=DST4):
    """An IPv4 fragment carrying `payload` at byte `offset` of its datagram."""
    assert offset % 8 == 0
    flags = offset // 8 | (0x2000 if more else 0)
    head = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, flags, 64, proto, 0, src, dst
    )
    return head + payload


def split(datagram, size):
    """(offset, more, bytes) pieces of `datagram`, `size` bytes each (a multiple of 8)."""
    return [
        (i, i + size < len(datagram), datagram[i : i + size]) for i in range(0, len(datagram), size)
    ]


def feed(dec, frames, linktype=1, first=1, ts_step=1000):
    """Decode raw frames numbered from `first`; the (frame, Segment) pairs that came out."""
    out = []
    for i, data in enumerate(frames):
        seg = dec.decode(pkt(data, linktype, frame=first + i, ts=(first + i) * ts_step))
        if seg is not None:
            out.append((first + i, seg))
    return out


BIG = bytes(range(256)) * 12 + b"end of the Kafka frame"
MAC = "02:00:00:00:00:01"  # explicit, so that scapy looks up no neighbour


@pytest.mark.parametrize("linktype", [1, 101])
def test_ipv4_fragments_reassembled_in_the_frame_of_the_last(linktype):
    datagram = tcp_header(seq=77) + BIG
    frames = [frag4(d, o, m) for o, m, d in split(datagram, 512)]
    if linktype == 1:
        frames = [ether(f) for f in frames]
    dec = NetDecoder()
    ((frame, seg),) = feed(dec, frames, linktype, first=10)
    assert frame == 10 + len(frames) - 1 == seg.frame
    assert seg.ts == seg.frame * 1000
    assert (seg.src, seg.dst, seg.sport, seg.dport, seg.seq) == (
        "192.168.1.10",
        "10.0.0.1",
        40000,
        9092,
        77,
    )
    assert seg.payload == BIG and seg.missing == 0
    assert (dec.fragments.reassembled, dec.fragments.pending, dec.fragments.dropped) == (1, 0, 0)


def test_ipv4_fragments_out_of_order_and_duplicated():
    datagram = tcp_header() + BIG
    pieces = split(datagram, 256)
    order = [pieces[-1], pieces[3], pieces[0], pieces[3], *pieces[1:3], *pieces[4:-1]]
    frames = [ether(frag4(d, o, m)) for o, m, d in order]
    ((frame, seg),) = feed(NetDecoder(), frames)
    assert frame == len(frames) and seg.payload == BIG


def test_ipv4_fragment_overlaps_first_wins():
    head = tcp_header()
    a = head + b"A" * 20  # bytes 0..40
    b = b"B" * 24  # bytes 32..56: its first 8 overlap the end of a
    c = b"C" * 8  # bytes 56..64, the last
    out = feed(NetDecoder(), [ether(frag4(a, 0, True)), ether(frag4(b, 32, True))])
    assert out == []
    dec = NetDecoder()
    ((_, seg),) = feed(
        dec, [ether(frag4(x, o, m)) for x, o, m in [(a, 0, 1), (b, 32, 1), (c, 56, 0)]]
    )
    assert seg.payload == b"A" * 20 + b"B" * 16 + b"C" * 8
    dec = NetDecoder()
    ((_, seg),) = feed(
        dec, [ether(frag4(x, o, m)) for x, o, m in [(b, 32, 1), (a, 0, 1), (c, 56, 0)]]
    )
    assert seg.payload == b"A" * 12 + b"B" * 24 + b"C" * 8


def test_ipv4_fragments_of_different_datagrams_kept_apart():
    one, two = tcp_header(seq=1) + b"1" * 40, tcp_header(seq=2) + b"2" * 40
    frames = []
    for (o1, m1, d1), (o2, m2, d2) in zip(split(one, 16), split(two, 16), strict=True):
        frames += [ether(frag4(d1, o1, m1, ident=1)), ether(frag4(d2, o2, m2, ident=2))]
    # Same id, other source: a third datagram, never completed.
    frames.insert(1, ether(frag4(one[:16], 0, True, ident=1, src=bytes([9, 9, 9, 9]))))
    dec = NetDecoder()
    out = feed(dec, frames)
    assert [(s.seq, s.payload) for _, s in out] == [(1, b"1" * 40), (2, b"2" * 40)]
    assert dec.fragments.pending == 1


def test_ipv4_fragment_cut_by_the_snap_length():
    datagram = tcp_header() + BIG
    pieces = split(datagram, 1024)
    frames = [ether(frag4(d, o, m)) for o, m, d in pieces]
    frames[1] = frames[1][:-100]  # the second fragment lost its last 100 bytes
    ((_, seg),) = feed(NetDecoder(), frames)
    assert seg.payload == BIG[: 2048 - 20 - 100]
    assert len(seg.payload) + seg.missing == len(BIG)


def test_ipv4_fragments_of_udp_are_not_held():
    dec = NetDecoder()
    assert feed(dec, [ether(frag4(b"u" * 64, 0, True, proto=17))]) == []
    assert dec.fragments.pending == 0


def test_ipv4_fragment_beyond_65535_bytes_is_dropped():
    dec = NetDecoder()
    frames = [
        ether(frag4(tcp_header() + b"x" * 20, 0, True)),
        ether(frag4(b"y" * 40, 65496, False)),
    ]
    assert feed(dec, frames) == []
    assert (dec.fragments.pending, dec.fragments.dropped) == (0, 1)


def test_ipv4_conflicting_last_fragments_drop_the_datagram():
    dec = NetDecoder()
    frames = [
        ether(frag4(b"z" * 16, 40, False)),  # the datagram is 56 bytes
        ether(frag4(b"z" * 16, 64, True)),  # bytes beyond its end
        ether(frag4(tcp_header() + b"z" * 20, 0, True)),
    ]
    assert feed(dec, frames) == []
    assert dec.fragments.dropped == 1 and dec.fragments.pending == 1


def test_fragments_expire_by_packet_count_and_by_time():
    from dissector.net import fragments

    datagram = tcp_header() + b"q" * 60
    (o1, m1, d1), (o2, m2, d2) = split(datagram, 48)
    first, last = ether(frag4(d1, o1, m1)), ether(frag4(d2, o2, m2))
    dec = NetDecoder()
    dec.decode(pkt(first, frame=1, ts=0))
    late = fragments.MAX_AGE_FRAMES + 1
    assert dec.decode(pkt(last, frame=late, ts=1)) is None
    assert dec.fragments.dropped == 1
    dec = NetDecoder()
    dec.decode(pkt(first, frame=1, ts=0))
    assert dec.decode(pkt(last, frame=2, ts=fragments.MAX_AGE_NS)) is None
    assert dec.fragments.dropped == 1
    dec = NetDecoder()
    dec.decode(pkt(first, frame=1, ts=0))
    assert dec.decode(pkt(last, frame=2, ts=fragments.MAX_AGE_NS - 1)).payload == b"q" * 60


def test_pending_fragments_are_bounded():
    from dissector.net import fragments

    dec = NetDecoder()
    n = fragments.MAX_PENDING + 50
    for ident in range(n):
        dec.decode(pkt(ether(frag4(tcp_header() + b"h" * 1204, 0, True, ident=ident))))
    assert dec.fragments.pending <= fragments.MAX_PENDING
    assert dec.fragments.dropped == n - dec.fragments.pending
    assert dec.fragments._bytes <= fragments.MAX_PENDING_BYTES
    # The oldest went first: the newest can still be completed.
    seg = dec.decode(pkt(ether(frag4(b"t" * 8, 1224, False, ident=n - 1))))
    assert seg.payload == b"h" * 1204 + b"t" * 8


def test_many_tiny_overlapping_fragments_stay_cheap():
    from dissector.net import fragments

    dec = NetDecoder()
    for i in range(fragments.MAX_PIECES + 10):  # every other 8-byte slot: no merging possible
        dec.decode(pkt(ether(frag4(b"s" * 8, 16 * i + 8, True))))
    assert dec.fragments.dropped == 1


def test_scapy_fragmented_ipv4_and_ipv6():
    from scapy.layers.inet import IP, TCP, fragment
    from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, fragment6
    from scapy.layers.l2 import Ether

    tcp = TCP(sport=40000, dport=9092, seq=5, ack=6, flags="PA")
    v4 = fragment(IP(src="10.1.1.1", dst="10.2.2.2", id=4242) / tcp / BIG, fragsize=600)
    v6 = fragment6(
        IPv6(src="2001:db8::1", dst="2001:db8::2")
        / IPv6ExtHdrDestOpt()
        / IPv6ExtHdrFragment(id=99)
        / tcp
        / BIG,
        700,
    )
    assert len(v4) > 3 and len(v6) > 3
    for frames, src in [(v4, "10.1.1.1"), (v6, "2001:db8::1")]:
        out = feed(NetDecoder(), [bytes(Ether(dst=MAC, src=MAC) / f) for f in frames])
        ((frame, seg),) = out
        assert frame == len(frames) and seg.src == src and seg.seq == 5 and seg.payload == BIG


def test_ipv6_fragment_then_extension_headers_and_non_tcp():
    tail = bytes([6, 0]) + b"\x01\x04" + b"\0" * 4  # destination options, then TCP
    datagram = tail + tcp_header(seq=9) + BIG
    frames = [
        ipv6(d, nxt=60, ext=[(44, frag_header(o // 8, m))]) for o, m, d in split(datagram, 800)
    ]
    ((_, seg),) = feed(NetDecoder(), frames, linktype=229)
    assert seg.seq == 9 and seg.payload == BIG
    udp = [ipv6(d, nxt=17, ext=[(44, frag_header(o // 8, m))]) for o, m, d in split(BIG, 800)]
    dec = NetDecoder()
    assert feed(dec, udp, linktype=229) == [] and dec.fragments.pending == 0


# ---------------------------------------------------------------- fragments through the core


def fragmented_conversation(fragsize=512, ipv6_too=False):
    """Packets of one Kafka exchange whose request and response travel in IP fragments.

    Returns (packets, frame of the request's last fragment, frame of the response's last).
    """
    from kafka_encoder import encode_request, encode_response
    from scapy.layers.inet import IP, TCP, fragment
    from scapy.layers.l2 import Ether
    from synth import frame_bytes

    topics = [f"topic-{i:03d}" for i in range(200)]
    request = frame_bytes(
        encode_request(
            3,
            9,
            41,
            "frag-client",
            {"Topics": [{"Name": t} for t in topics], "AllowAutoTopicCreation": False},
        )
    )
    response = frame_bytes(
        encode_response(
            3,
            9,
            41,
            {
                "Brokers": [{"NodeId": 1, "Host": "broker", "Port": 9092}],
                "ClusterId": "c1",
                "ControllerId": 1,
                "Topics": [{"ErrorCode": 0, "Name": t, "Partitions": []} for t in topics],
            },
        )
    )
    assert len(request) > 3 * fragsize and len(response) > 3 * fragsize
    client, broker = ("10.0.0.2", 40000), ("10.0.0.1", 9092)
    seq = {"c": 1000, "b": 5000}
    packets = []

    def send(side, flags, payload=b"", ident=0):
        src, dst = (client, broker) if side == "c" else (broker, client)
        other = "b" if side == "c" else "c"
        tcp = TCP(sport=src[1], dport=dst[1], seq=seq[side], ack=seq[other], flags=flags)
        ip = IP(src=src[0], dst=dst[0], id=ident, flags=0 if payload else "DF") / tcp / payload
        for f in fragment(ip, fragsize) if payload else [ip]:
            data = bytes(Ether(dst=MAC, src=MAC) / f)
            n = len(packets) + 1
            packets.append(Packet(n, 1_700_000_000_000_000_000 + n * 1_000_000, 1, data, len(data)))
        seq[side] += len(payload) + (1 if "S" in flags or "F" in flags else 0)
        return len(packets)

    send("c", "S")
    send("b", "SA")
    send("c", "A")
    req_frame = send("c", "PA", request, ident=1)
    resp_frame = send("b", "PA", response, ident=2)
    send("c", "FA")
    send("b", "FA")
    return packets, req_frame, resp_frame


def test_dissector_decodes_an_exchange_carried_in_fragments():
    from dissector import Dissector

    packets, req_frame, resp_frame = fragmented_conversation()
    d = Dissector()
    out = []
    for p in packets:
        out += d.feed(p)
    out += d.finish()
    (e,) = out
    assert (e.api_name, e.api_version, e.correlation_id, e.client_id) == (
        "Metadata",
        9,
        41,
        "frag-client",
    )
    assert (e.request_frame, e.response_frame) == (req_frame, resp_frame)
    assert e.status == "ok" and len(e.topics) == 200
    assert e.request_end == packets[req_frame - 1].ts
    assert d.net.fragments.reassembled == 2


def test_read_pcap_of_a_fragmented_capture(tmp_path):
    from scapy.utils import wrpcap

    import dissector

    packets, req_frame, resp_frame = fragmented_conversation(fragsize=304)
    path = tmp_path / "fragments.pcap"
    wrpcap(str(path), [p.data for p in packets])
    pairs = dissector.read_pcap(path)
    assert pairs[["api_name", "request_frame", "response_frame", "status"]].values.tolist() == [
        ["Metadata", req_frame, resp_frame, "ok"]
    ]


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(
    st.integers(8, 3000),
    st.integers(1, 64).map(lambda n: n * 8),
    st.randoms(use_true_random=False),
)
def test_fragments_in_any_order_with_overlaps_give_the_datagram(size, piece, rng):
    """Pieces of one datagram, shuffled, some sent twice and some re-cut across others."""
    datagram = tcp_header() + rng.randbytes(size)
    pieces = split(datagram, piece)
    extra = []
    for _ in range(rng.randint(0, 4)):  # overlapping re-sends of the same bytes
        start = rng.randrange(0, len(datagram), 8)
        end = min(len(datagram), start + rng.randint(1, 400))
        extra.append((start, end < len(datagram), datagram[start:end]))
    order = pieces + extra
    rng.shuffle(order)
    dec = NetDecoder()
    out = feed(dec, [ether(frag4(d, o, m)) for o, m, d in order])
    assert out, "never completed"
    _frame, seg = out[0]
    assert seg.payload == datagram[20:] and seg.missing == 0


def test_in_place_leaves_the_payload_in_the_packet():
    """NetDecoder(in_place=True), as the core makes it: a payload that runs to the end of its
    packet is the packet's own bytes from `start`, not a copy; a padded one is copied."""
    frames = [
        (ether(ipv4(tcp_header() + PAYLOAD)), 1, True),
        (ether(ipv6(tcp_header() + PAYLOAD), 0x86DD), 1, True),
        (ether(ipv4(tcp_header() + PAYLOAD), tags=[(0x8100, 7)]), 1, True),
        (sll(ipv4(tcp_header() + PAYLOAD, options=b"\x01" * 4)), 113, True),
        (ether(ipv4(tcp_header() + PAYLOAD)) + b"\xee" * 4, 1, False),  # Ethernet padding
        (ether(ipv4(tcp_header() + PAYLOAD))[:60], 1, True),  # cut by the snap length
    ]
    for data, linktype, kept in frames:
        copied = NetDecoder().decode(pkt(data, linktype))
        seg = NetDecoder(in_place=True).decode(pkt(data, linktype))
        assert copied.start == 0
        assert seg.payload[seg.start :] == copied.payload
        assert seg._replace(payload=copied.payload, start=0) == copied
        assert (seg.payload is data) == kept and (seg.start > 0) == kept
