"""The core's public hooks for drivers (Spark uses them): connections as they open, IP
fragments noted instead of reassembled, a shared directory, and stream events handed to the
sessions by the driver."""

import socket
from itertools import groupby
from operator import attrgetter
from pathlib import Path

import pytest
from test_net import BIG, MAC, feed

import dissector
from dissector.capture import open_capture
from dissector.flow import Dissector
from dissector.net.decode import NetDecoder
from dissector.session.directory import Directory

CAPTURES = sorted(
    str(p) for p in (Path(__file__).resolve().parent.parent / "captures").glob("*.pcap")
)


def test_on_open_gives_every_connection_with_its_first_frame():
    path = CAPTURES[2]
    opened = []
    d = Dissector(on_open=opened.append)
    with open_capture(path) as reader:
        for packet in reader:
            d.feed(packet)
    d.finish()
    assert [c.id for c in opened] == list(range(d.tcp.connections)) and opened
    streams = dissector.read_pcap(path, table="streams")
    first = streams.groupby("stream")["first_frame"].min()
    # connections with payload have accounting rows: their first frames are the connections'
    assert {int(s): int(f) for s, f in first.items()} == {
        c.id: c.first_frame for c in opened if c.id in set(first.index)
    }


def test_events_flushed_connection_by_connection_equal_finish():
    """A driver running the end-of-capture flush itself, connection by connection, with a
    directory of its own, gets the exchanges finish() gives."""
    path = next(c for c in CAPTURES if "confluent" in c)
    with open_capture(path) as reader:
        packets = list(reader)

    def run(by_hand):
        directory = Directory()
        d = Dissector(directory=directory)
        out = [e for p in packets for e in d.feed(p)]
        if by_hand:
            for _conn, events in groupby(d.tcp.finish(), key=attrgetter("conn")):
                out += d.events(list(events))
        else:
            out += d.finish()
        assert d.directory is directory and directory.topic_names
        return [(e.stream, e.request_frame, e.response_frame, e.topics) for e in out]

    assert run(True) == run(False) and run(False)


@pytest.mark.parametrize("v6", [False, True])
def test_on_fragment_notes_fragments_instead_of_reassembling(v6):
    from scapy.all import IP, TCP, Ether, IPv6, IPv6ExtHdrFragment, fragment, fragment6

    tcp = TCP(sport=40000, dport=9092, seq=5, ack=6, flags="PA")
    if v6:
        src, dst = "2001:db8::1", "2001:db8::2"
        frames = fragment6(IPv6(src=src, dst=dst) / IPv6ExtHdrFragment(id=9) / tcp / BIG, 700)
    else:
        src, dst = "10.1.1.1", "10.2.2.2"
        frames = fragment(IP(src=src, dst=dst, id=4242) / tcp / BIG, fragsize=600)
    raw = [bytes(Ether(dst=MAC, src=MAC) / f) for f in frames]
    noted = []
    dec = NetDecoder(on_fragment=lambda a, b: noted.append((bytes(a), bytes(b))))
    assert feed(dec, raw) == []  # nothing reassembled
    family = socket.AF_INET6 if v6 else socket.AF_INET
    pair = (socket.inet_pton(family, src), socket.inet_pton(family, dst))
    assert noted == [pair] * len(frames) and len(frames) > 3
    assert dec.fragments.pending == 0
    ((_, seg),) = feed(NetDecoder(), raw)  # without the hook: reassembled
    assert seg.payload == BIG
