"""Captures built to hide traffic from the dissector or to exhaust it: segments after a hole in
the worst order, RSTs and SYNs a receiver would ignore, overlaps that disagree. Each capture is
dissected in a child process with a memory limit and a timeout; the tests read its rows."""

import json
import os
import sys
from pathlib import Path

from bounded import run_bounded
from kafka_encoder import encode_request, encode_response
from synth import ACK, RST, SYN, Capture, Connection, frame_bytes
from test_accounting import assert_adds_up

MEMORY = 2 << 30  # address space of the child, bytes
ROOT = Path(__file__).resolve().parent.parent
COUNTERS = (
    "bytes_seen",
    "bytes_delivered",
    "bytes_tls",
    "bytes_duplicate",
    "bytes_dropped",
    "bytes_missing",
    "bytes_framed",
    "bytes_skipped",
    "bytes_abandoned",
    "bytes_decoded",
    "bytes_malformed",
    "bytes_unused",
    "bytes_conflicting",
    "rsts_ignored",
    "syns_ignored",
)


def dissect_limited(path, timeout=60, mode="dissect"):
    """Dissect path in a child process: its pairs, streams rows and capture notes (mode
    "dissect"), or how long TCP reassembly takes over its segments (mode "tcp")."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    done = run_bounded([sys.executable, __file__, mode, str(path)], timeout, MEMORY, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def streams_frame(result):
    import pandas as pd

    return pd.DataFrame(result["streams"])


def api_versions(c, n):
    c.request(encode_request(18, 3, n, "evasion", {}))
    c.response(encode_response(18, 3, n, {"ErrorCode": 0, "ApiKeys": []}))


def test_one_byte_segments_after_a_hole_in_descending_order(tmp_path):
    """Over 100,000 one-byte segments after a hole, last first: the buffer holds them as one
    run, in time linear in their number, and delivers them when the hole fills."""
    requests = b""
    n = 0
    while len(requests) < 100_000:
        n += 1
        requests += frame_bytes(encode_request(18, 3, n, "evasion", {}))
    cap = Capture()
    c = Connection(cap)
    first = c.seq["c"]
    hole = 10
    for i in range(len(requests) - 1, hole - 1, -1):
        c._send("c", ACK, requests[i : i + 1], after_ns=1, seq=first + i)
    c._send("c", ACK, requests[:hole], seq=first)
    c.seq["c"] += len(requests)
    for k in range(1, n + 1):
        c.response(encode_response(18, 3, k, {"ErrorCode": 0, "ApiKeys": []}))
    c.close()
    result = dissect_limited(cap.write_pcap(tmp_path / "descending.pcap"), timeout=90)
    assert result["pairs"] == [[18, k, "ok"] for k in range(1, n + 1)]
    streams = streams_frame(result)
    assert_adds_up(streams)
    request = streams[streams.direction == "request"].iloc[0]
    assert request.bytes_seen == request.bytes_delivered == len(requests)
    assert request.bytes_missing == request.bytes_duplicate == 0 and request.end == "fin"


def one_byte_segments(path, n, descending):
    """n one-byte segments after a 10-byte hole, then the segment filling the hole."""
    cap = Capture()
    c = Connection(cap)
    first = c.seq["c"] + 10
    order = range(n - 1, -1, -1) if descending else range(n)
    for i in order:
        c._send("c", ACK, b"x", after_ns=1, seq=first + i)
    c._send("c", ACK, b"y" * 10, seq=first - 10)
    return cap.write_pcap(path)


def test_buffering_cost_does_not_depend_on_the_order(tmp_path):
    """100,000 one-byte segments after a hole, first first or last first: the buffer holds
    them as one run of bytes (not a piece each, inserted in O(n)), in comparable time."""
    n = 100_000
    times = {}
    for descending in (False, True):
        path = one_byte_segments(tmp_path / f"{descending}.pcap", n, descending)
        result = dissect_limited(path, timeout=90, mode="tcp")
        assert result["pieces"] == 1 and result["delivered"] == n + 10
        times[descending] = result["seconds"]
    # Loose: timing shares the machine; the single run above is what keeps it linear.
    assert times[True] < 10 * times[False] + 5, times


def test_rst_out_of_the_window_ends_nothing(tmp_path):
    cap = Capture()
    c = Connection(cap)
    api_versions(c, 1)
    # A RST far from any sequence number the broker expects: the broker ignores it.
    c._send("c", RST | ACK, b"", seq=c.seq["c"] + (1 << 31))
    for n in range(2, 12):
        api_versions(c, n)
    c.close()
    result = dissect_limited(cap.write_pcap(tmp_path / "rst.pcap"))
    assert result["pairs"] == [[18, n, "ok"] for n in range(1, 12)]
    streams = streams_frame(result)
    assert_adds_up(streams)
    assert list(streams.end) == ["fin", "fin"]
    assert list(streams.rsts_ignored) == [1, 0]  # request row: sent by the client side
    assert "warning: segments a receiver would ignore: 1 RSTs out of the window" in result["notes"]


def test_rst_in_the_window_still_ends_the_connection(tmp_path):
    cap = Capture()
    c = Connection(cap)
    api_versions(c, 1)
    c._send("c", RST | ACK, b"")
    result = dissect_limited(cap.write_pcap(tmp_path / "rst.pcap"))
    streams = streams_frame(result)
    assert list(streams.end) == ["rst", "rst"] and list(streams.rsts_ignored) == [0, 0]
    assert result["pairs"] == [[18, 1, "ok"]]


def test_spoofed_syn_on_an_open_connection_is_reported_not_reuse(tmp_path):
    cap = Capture()
    c = Connection(cap)
    api_versions(c, 1)
    c._send("c", SYN, b"", seq=123456)  # nobody answers it; the old traffic goes on
    for n in range(2, 12):
        api_versions(c, n)
    c.close()
    result = dissect_limited(cap.write_pcap(tmp_path / "syn.pcap"))
    assert result["pairs"] == [[18, n, "ok"] for n in range(1, 12)]
    streams = streams_frame(result)
    assert_adds_up(streams)
    assert list(streams.stream) == [0, 0] and list(streams.end) == ["fin", "fin"]
    assert list(streams.syns_ignored) == [1, 0]


def test_answered_syn_on_an_open_connection_is_reuse(tmp_path):
    cap = Capture()
    old = Connection(cap)
    api_versions(old, 1)
    new = Connection(cap, handshake=False)  # same 4-tuple: a handshake the broker answers
    new.seq = {"c": 90000, "b": 70000}
    new._send("c", SYN, b"")
    new.seq["c"] += 1
    new._send("b", SYN | ACK, b"")
    new.seq["b"] += 1
    new._send("c", ACK, b"")
    api_versions(new, 2)
    new.close()
    result = dissect_limited(cap.write_pcap(tmp_path / "reuse.pcap"))
    assert result["pairs"] == [[18, 1, "ok"], [18, 2, "ok"]]
    streams = streams_frame(result)
    assert_adds_up(streams)
    assert list(streams.stream) == [0, 0, 1, 1]
    assert list(streams.end) == ["reused", "reused", "fin", "fin"]
    assert streams.syns_ignored.sum() == 0


def test_overlap_with_other_bytes_keeps_the_later_copy(tmp_path):
    """A buffered piece of garbage, then a later segment covering it with the request's real
    bytes: the receiver reads the later bytes, and so does the dissector, counting them."""
    cap = Capture()
    c = Connection(cap)
    wire = frame_bytes(encode_request(18, 3, 1, "evasion", {}))
    first = c.seq["c"]
    send = c._send
    assert len(wire) > 20
    send("c", ACK, b"\xff" * 10, seq=first + 10)  # [10, 20): garbage, behind a hole
    send("c", ACK, wire[5:], seq=first + 5)  # [5, end): the real bytes, covering it
    send("c", ACK, wire[:5], seq=first)  # the hole fills
    c.seq["c"] += len(wire)
    c.response(encode_response(18, 3, 1, {"ErrorCode": 0, "ApiKeys": []}))
    c.close()
    result = dissect_limited(cap.write_pcap(tmp_path / "overlap.pcap"))
    assert result["pairs"] == [[18, 1, "ok"]]
    streams = streams_frame(result)
    assert_adds_up(streams)
    conflicting = sum(a != 0xFF for a in wire[10:20])
    assert list(streams.bytes_conflicting) == [conflicting, 0]
    assert list(streams.bytes_duplicate) == [10, 0]
    assert f"warning: {conflicting} bytes of overlapping segments disagreed" in "\n".join(
        result["notes"]
    )


def _child(path):
    import dissector
    from dissector.tables import build_table
    from dissector.tables.summary import evasion_notes

    dissection = dissector.dissect(path)
    pairs = [[e.api_key, e.correlation_id, e.status] for e in dissection]
    streams = build_table(dissection.ended, "streams")
    columns = ["stream", "direction", "kafka", "end", *COUNTERS]
    rows = streams[columns].to_dict("records")
    sums = {name: int(streams[name].sum()) for name in COUNTERS}
    json.dump(
        {
            "pairs": pairs,
            "streams": [
                {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in rows
            ],
            "notes": evasion_notes(sums),
        },
        sys.stdout,
    )


def _child_tcp(path):
    """Time TcpTracker alone over the capture's segments, decoded beforehand; report the
    pieces buffered before the last segment (which fills the hole)."""
    import time

    from dissector.capture import open_capture
    from dissector.net.decode import NetDecoder
    from dissector.tcp import TcpTracker

    net = NetDecoder()
    with open_capture(path) as packets:
        segments = [s for s in map(net.decode, packets) if s is not None]
    tracker = TcpTracker()
    for s in segments[:3]:  # the handshake
        tracker.feed(s)
    began = time.perf_counter()
    delivered = 0
    for s in segments[3:-1]:
        tracker.feed(s)
    half = tracker.live[0]._halves[0]
    pieces = len(half.starts)
    for e in tracker.feed(segments[-1]):
        delivered += len(e.data) - e.start
    json.dump(
        {"seconds": time.perf_counter() - began, "pieces": pieces, "delivered": delivered},
        sys.stdout,
    )


if __name__ == "__main__":
    (_child if sys.argv[1] == "dissect" else _child_tcp)(sys.argv[2])
