"""Connection state bounded by the bytes captured, whatever connections they make: captures
built by hand of many spoofed one-packet connections (no handshake, a request each) and of
many short connections opened and closed. The heavy ones run in a child bounded in memory."""

import json
import sys

from bounded import run_bounded
from kafka_encoder import encode_request
from synth import Capture, Connection

import dissector

BROKER = ("10.0.0.254", 9092)
MEMORY = 1 << 30  # address space of a child, bytes


def api_versions(corr):
    """The smallest request a client sends first: ApiVersions v0, client id "c"."""
    return encode_request(18, 0, corr, "c", {})


def client(i):
    """The address and port of the i-th client: 60,000 ports an address."""
    a, port = divmod(i, 60_000)
    return f"10.1.{a >> 8}.{a & 255}", 1024 + port


def spoofed(path, n, again=()):
    """n connections of one packet each, a request with correlation id i from client i, no
    handshake; then a second request (id n + i) from each client i in `again`."""
    cap = Capture()
    conns = [Connection(cap, client(i), BROKER, handshake=False) for i in range(n)]
    for i, conn in enumerate(conns):
        conn.request(api_versions(i))
    for i in again:
        conns[i].request(api_versions(n + i))
    return cap.write_pcap(path)


def closed(path, n):
    """n connections seen whole: handshake, a request, FINs both ways."""
    cap = Capture()
    for i in range(n):
        conn = Connection(cap, client(i), BROKER)
        conn.request(api_versions(7))
        conn.close()
    return cap.write_pcap(path)


def test_connections_beyond_the_cap_end_longest_idle_first(tmp_path):
    """3,000 one-packet connections with room for 1,000: the longest idle are evicted an
    eighth of the cap at a time, their requests reported unanswered with the reason; the
    first client's later request is followed as a new connection, the last client's in the
    connection it never left."""
    n, cap = 3000, 1000
    path = spoofed(tmp_path / "spoofed.pcap", n, again=(0, n - 1))
    d = dissector.dissect(path, ports=(BROKER[1],), max_connections=cap)
    rows = {e.correlation_id: e for e in d}
    stats = d.stats()
    # An eviction of 125 each time a connection opens with 1,000 followed: 17 of them, the
    # last when the first client comes back.
    assert stats["evicted"] == 17 * 125
    assert stats["connections"] == n + 1  # the first client came back as a new connection
    assert {r.status for r in rows.values()} == {"unanswered"} and len(rows) == n + 2
    evicted = [e for e in d.streams if e["end"] == "evicted"]
    assert len(evicted) == 2 * 17 * 125  # a row per direction
    # The longest idle went first: the first clients, in order of their only packet.
    assert sorted({r["stream"] for r in evicted}) == list(range(17 * 125))
    assert "evicted to bound the connections followed" in rows[5].reason
    assert rows[2500].reason.startswith("connection ended: the capture ends")
    first = [r for r in d.streams if r["client"] == "{}:{}".format(*client(0))]
    assert [(r["stream"], r["end"]) for r in first if r["direction"] == "request"] == [
        (0, "evicted"),
        (n, "eof"),
    ]
    assert rows[n].request_frame == n + 1  # its second request, read in its new connection
    last = [r for r in d.streams if r["client"] == "{}:{}".format(*client(n - 1))]
    assert {(r["stream"], r["end"]) for r in last} == {(n - 1, "eof")}
    assert rows[2 * n - 1].request_frame == n + 2


def analyze_capped(path, cap, timeout):
    """`kafka-dissect analyze --port 9092 --max-connections cap` in a bounded child."""
    res = run_bounded(
        [sys.executable, "-m", "dissector", "analyze", str(path), "--port", "9092"]
        + ["--max-connections", str(cap), "--no-progress"],
        timeout,
        MEMORY,
    )
    assert res.returncode == 0, res.stderr
    return res


def test_the_summary_says_how_many_connections_were_evicted(tmp_path):
    res = analyze_capped(spoofed(tmp_path / "spoofed.pcap", 300), 100, timeout=60)
    assert "unanswered 300" in res.stdout
    # 12 (an eighth of 100) each time one of connections 101 to 300 opens with 100 followed
    assert "warning: 204 connections evicted, the longest idle" in res.stdout


# A child: one-packet connections in a Dissector, the traced memory they hold while open.
OPEN_COST = """
import json, sys, tracemalloc
import dissector
from dissector.capture import open_capture
from dissector.flow import Dissector

tracemalloc.start()
d = Dissector(ports=(9092,))
with open_capture(sys.argv[1]) as packets:
    for packet in packets:
        d.feed(packet)
held = tracemalloc.get_traced_memory()[0]
print(json.dumps({"open": d.stats()["open_connections"], "bytes": held}))
"""


def test_a_spoofed_packet_costs_a_connection_of_a_few_kb(tmp_path):
    """What one data packet without a handshake makes the core hold until the connection
    ends: under 6.5 KB (it was 8.6 KB: a deque of 760 bytes for every request in flight and
    three more for queues most connections never use)."""
    n = 20_000
    path = spoofed(tmp_path / "spoofed.pcap", n)
    res = run_bounded([sys.executable, "-c", OPEN_COST, str(path)], 120, MEMORY)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["open"] == n
    assert out["bytes"] / n < 6500, out


def test_100000_spoofed_connections_in_bounded_memory(tmp_path):
    """100,000 one-packet connections (8.5 MB of capture) within a 1 GiB address space: they
    needed over 1 GB before connections were capped and evicted."""
    n = 100_000
    res = analyze_capped(spoofed(tmp_path / "spoofed.pcap", n), 10_000, timeout=180)
    assert f"{n} TCP connections examined, {n} Kafka, {n} exchanges" in res.stdout
    assert f"unanswered {n}," in res.stdout


# A child: closed connections through dissect(), with the collector off: how much of them
# is left once they ended, and whether any was left to the collector (a reference cycle).
CLOSED_COST = """
import gc, json, sys, tracemalloc
import dissector

gc.disable()
tracemalloc.start()
d = dissector.dissect(sys.argv[1], ports=(9092,), streams=sys.argv[2] == "streams")
rows = sum(1 for _ in d)
held = tracemalloc.get_traced_memory()[0]
print(json.dumps({"rows": rows, "streams": len(d.streams), "bytes": held, "cycles": gc.collect()}))
"""


def test_ended_connections_keep_only_their_streams_rows(tmp_path):
    """30,000 connections opened and closed: nothing of them waits for the garbage collector
    (each was a reference cycle of about 100 objects), and what is left is their streams rows,
    kept as tuples (under 1 KB a connection, where dicts took 2.8 KB), or nothing at all when
    the streams table is not wanted."""
    n = 30_000
    path = closed(tmp_path / "closed.pcap", n)
    held = {}
    for streams in ("streams", "none"):
        res = run_bounded([sys.executable, "-c", CLOSED_COST, str(path), streams], 120, MEMORY)
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert out["rows"] == n
        assert out["cycles"] < 100, out  # the interpreter's own, not the connections'
        held[streams] = out
    assert held["streams"]["streams"] == 2 * n and held["none"]["streams"] == 0
    # Without the rows: the ended 4-tuples remembered to absorb late packets (at most 65,536
    # of them), and no more.
    assert held["none"]["bytes"] / n < 300, held
    assert (held["streams"]["bytes"] - held["none"]["bytes"]) / n < 1000, held
