"""The contract between the core (dissector.Dissector) and its drivers: exchanges from feed,
finish and expire; ConnectionEnded events from ended(); counters from stats()."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import damage
import pandas as pd
import pytest

import dissector
from dissector import ConnectionEnded, Dissector
from dissector.capture import open_capture
from dissector.tables import build_table
from dissector.tables.summary import capture_notes

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted((ROOT / "captures").glob("*.pcap"))
SAMPLE = ROOT / "captures" / "kafka-python.pcap"
SUMS = ("bytes_seen", "bytes_missing", "bytes_skipped", "gaps")


def packets_of(path):
    with open_capture(path) as reader:
        return list(reader)


def run(path, **kw):
    """A core over a whole capture, its events pulled after every packet."""
    d = Dissector(**kw)
    events, exchanges = [], []
    for packet in packets_of(path):
        exchanges += d.feed(packet)
        events += d.ended()
    exchanges += d.finish()
    events += d.ended()
    return d, events, exchanges


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_ended_events_carry_the_streams_table(path):
    d, events, exchanges = run(path)
    table = dissector.read_pcap(path, table="streams")
    assert all(isinstance(e, ConnectionEnded) for e in events)
    assert len(table) == 2 * len(events) and events
    for e in events:
        assert [r["direction"] for r in e.rows] == ["request", "response"]
        assert {r["stream"] for r in e.rows} == {e.id}
        assert all(r["kafka"] == e.kafka for r in e.rows)
    pd.testing.assert_frame_equal(build_table(events, "streams"), table)
    # accounting rows (as Spark's range tasks hand them) build the same table
    rows = [r for e in events for r in e.rows]
    pd.testing.assert_frame_equal(build_table(rows, "streams"), table)
    # and the file driver collects the same events
    dissection = dissector.dissect(path)
    assert [e.status for e in dissection] == [e.status for e in exchanges]
    assert dissection.ended == events and dissection.streams == rows


def _figures(stats, table):
    requests = table[table.direction == "request"]
    assert stats["connections"] == len(requests) == table.stream.nunique()
    assert stats["kafka_connections"] == int(requests.kafka.sum())
    assert stats["open_connections"] == 0 and stats["requests_waiting"] == 0
    for key in SUMS:
        assert stats[key] == int(table[key].sum()), key
    assert stats["midstream"] == int((requests.client_side_from != "syn").sum())
    ports = requests[~requests.kafka.astype(bool)].broker.str.rsplit(":", n=1).str[1]
    assert stats["not_kafka_ports"] == dict(ports.value_counts())


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_stats_are_the_sums_of_the_streams_table(path):
    d, events, _ = run(path)
    stats = d.stats()
    _figures(stats, build_table(events, "streams"))
    assert stats["packets"] == len(packets_of(path))
    assert stats["cut_packets"] == 0 and stats["unsupported"] == {}
    assert d.ended() == []


@pytest.fixture(scope="module")
def lossy(tmp_path_factory):
    """A sample capture with payload packets dropped: gaps, bytes missing and skipped."""
    pcap = damage.read_pcap(SAMPLE)
    path = tmp_path_factory.mktemp("contract") / "dropped.pcap"
    damage.drop(pcap.packets, 0.1, seed=7).write(path, pcap)
    return path


def test_stats_match_the_summary_line_and_notes(lossy):
    d, events, _ = run(lossy)
    stats = d.stats()
    table = dissector.read_pcap(lossy, table="streams")
    _figures(stats, table)
    assert stats["gaps"] > 0 and stats["bytes_missing"] > 0
    res = subprocess.run(
        [sys.executable, "-m", "dissector", "analyze", str(lossy), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    title = re.search(r"(\d+) packets, (\d+) TCP connections examined, (\d+) Kafka", res.stdout)
    assert tuple(map(int, title.groups())) == (
        stats["packets"],
        stats["connections"],
        stats["kafka_connections"],
    )
    notes = capture_notes(stats)
    assert f"{stats['bytes_missing']} bytes missing in {stats['gaps']} gaps" in notes[-1]
    assert all(line in res.stdout for line in notes)


def test_stats_midway_add_up_ended_and_open_connections():
    packets = packets_of(SAMPLE)
    d = Dissector()
    ended = []
    for packet in packets[: len(packets) // 2]:
        d.feed(packet)
    ended += d.ended()
    stats = d.stats()
    snap = d.snapshot()
    assert stats["open_connections"] > 0
    assert {i for i, _ in d.open_connections()} == {s.id for s in snap.values()}
    assert dict(d.open_connections()) == {s.id: key for key, s in snap.items()}
    rows = [r for e in ended for r in e.rows] + [r for s in snap.values() for r in s.accounting]
    for key in SUMS:
        assert stats[key] == sum(r[key] for r in rows), key
    waiting = d.waiting(limit=100)
    assert len(waiting) <= stats["requests_waiting"]
    times = [req.frame.first_ts for req, _conn in waiting]
    assert times == sorted(times)
    assert [w[0] for w in d.waiting(limit=1)] == [w[0] for w in waiting[:1]]


def test_ended_forgets_what_it_returned():
    d = Dissector()
    for packet in packets_of(SAMPLE):
        d.feed(packet)
    d.finish()
    events = d.ended()
    assert events and d.ended() == [] and d.ended() == []
    # the counters stay: they are kept as connections end, not from the events
    assert d.stats()["connections"] == len(events) == d.connections


def test_max_buffer_reaches_the_tracker(tmp_path):
    pcap = damage.read_pcap(SAMPLE)
    path = tmp_path / "reordered.pcap"
    damage.reorder(pcap.packets, seed=3, fraction=0.8).write(path, pcap)
    default = run(path)[0].stats()
    assert default["gaps"] == 0  # out-of-order data waits for what comes before it
    small = run(path, max_buffer=1)[0].stats()
    assert small["gaps"] > 0 and small["bytes_missing"] > 0


# -- drivers use the contract, not the core's parts ---------------------------------------------

CORE = ("flow.py", "session", "tcp", "net", "framing")
PARTS = {"tcp", "net", "conversations", "streams"}
# names and attributes that hold a Dissector in the drivers
HOLDERS = {"d", "core", "dissector"}


def _outside_the_core():
    base = ROOT / "dissector"
    for path in sorted(base.rglob("*.py")):
        if path.relative_to(base).parts[0] not in CORE:
            yield path


def _holds_a_dissector(node):
    if isinstance(node, ast.Name):
        return node.id in HOLDERS
    return isinstance(node, ast.Attribute) and node.attr in {"core", "dissector"}


def test_no_driver_reaches_into_the_core():
    found = []
    for path in _outside_the_core():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in PARTS
                and _holds_a_dissector(node.value)
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    assert found == []


def test_no_driver_reaches_into_the_core_textually():
    """The same, by grep: `.tcp.`, `.net.`, `.conversations`, `.streams` after a name that
    holds a Dissector (imports of the core's modules aside)."""
    pattern = re.compile(r"\b(?:d|core|dissector)\.(?:tcp\.|net\.|conversations\b|streams\b)")
    found = []
    for path in _outside_the_core():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith(("from ", "import ")):
                continue
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []
