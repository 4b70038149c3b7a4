"""Network layer: link types, IPv4/IPv6 headers and TCP down to Segments."""

import struct

import pytest

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
def test_ipv4_fragments_not_decoded_yet(frag):
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
def test_ipv6_fragments_not_decoded_yet(offset, more):
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
