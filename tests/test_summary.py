"""The streamed summary: exact percentiles while few, bounded after, summaries that merge."""

import random
import subprocess
import sys

import pandas as pd
import pytest
from synth import Capture, Connection

import dissector
from dissector.flow import EVASIONS
from dissector.tables.summary import VOLUME, Distribution, Summary, capture_notes

SAMPLE = "captures/confluent-kafka.pcap"


def test_percentiles_are_those_of_the_pairs_table():
    summary = Summary()
    for e in dissector.dissect(SAMPLE):
        summary.add(e)
    pairs = dissector.read_pcap(SAMPLE)
    asked = pairs[pairs.request_frame.notna()]
    for row in summary.apis():
        mine = asked[
            (asked.api_name == row["api_name"]) & (asked.api_version == row["api_version"])
        ]
        assert row["requests"] == len(mine)
        latency = mine.latency_ms.dropna()
        if len(latency):
            assert row["p95_ms"] == pytest.approx(latency.quantile(0.95))
            assert row["max_ms"] == latency.max()
            assert row["queue_p95_ms"] == pytest.approx(mine.queue_ms.dropna().quantile(0.95))


def test_a_distribution_stays_bounded_within_one_percent():
    rng = random.Random(7)
    values = [rng.lognormvariate(1, 1.5) for _ in range(3 * Distribution.EXACT)] + [0.0, -0.1]
    d = Distribution()
    for x in values:
        d.add(x)
    assert d.buckets is not None and len(d.values) == 0 and len(d.buckets) < 2000
    truth = pd.Series(values)
    for q in (0.5, 0.95, 0.99):
        assert d.quantile(q) == pytest.approx(truth.quantile(q), rel=0.011)
    assert d.max == max(values) and d.count == len(values)


def test_summaries_of_parts_merge_into_the_whole():
    exchanges = list(dissector.dissect(SAMPLE))
    whole, a, b = Summary(), Summary(), Summary()
    for i, e in enumerate(exchanges):
        whole.add(e)
        (a if i % 2 else b).add(e)
    a.merge(b)
    assert a.text("t") == whole.text("t")
    big = Distribution()
    for part in range(3):
        d = Distribution()
        for x in range(Distribution.EXACT // 2):
            d.add(float(part * 10 + x % 7 + 1))
        big.merge(d)
    assert big.buckets is not None and big.count == 3 * (Distribution.EXACT // 2)
    assert sum(big.buckets.values()) == big.count  # every value counted once
    truth = pd.Series([float(p * 10 + x % 7 + 1) for p in range(3) for x in range(big.count // 3)])
    assert big.quantile(0.5) == pytest.approx(truth.quantile(0.5), rel=0.011)


@pytest.mark.parametrize("name", ["compression", "transactions", "kafka-python"])
def test_the_volume_with_decompress_is_the_partitions_tables(name):
    """With --decompress the summary measures each compressed batch without decoding the
    body: its volume by API and topic is the sum of the partitions table's rows, decoded,
    an unknown size staying unknown."""
    path = f"captures/{name}.pcap"
    summary = Summary(decompress=True)
    for e in dissector.dissect(path, decompress=True):
        summary.add(e)
    parts = dissector.read_pcap(path, table="partitions", decompress=True)
    parts = parts[parts["bytes"].fillna(0) > 0]
    expected = {
        key: {c: None if rows[c].isna().any() else int(rows[c].sum()) for c in VOLUME}
        for key, rows in parts.groupby(["api_name", "topic"])
    }
    got = {(r["api_name"], r["topic"]): {c: r[c] for c in VOLUME} for r in summary.volume()}
    assert got == expected and got
    if name == "compression":  # each codec's batches measured at their uncompressed size
        codecs = summary.codecs()
        assert {r["codec"] for r in codecs} == {"gzip", "lz4", "snappy", "zstd"}
        assert all(r["uncompressed_bytes"] > r["bytes"] > 0 for r in codecs)


# ---------------------------------------------------------------- notes on the capture

HINT = (
    "hint: no connection was taken as Kafka; name the broker ports with --port to dissect "
    "connections whose traffic does not show it"
)


def _ssh_capture(path):
    """One connection to port 22 that speaks SSH: no Kafka frame in it."""
    cap = Capture()
    conn = Connection(cap, broker=("10.0.0.1", 22))
    conn.send("b", b"SSH-2.0-OpenSSH_9.6\r\n")
    conn.send("c", b"SSH-2.0-OpenSSH_9.6\r\n" + bytes(range(64)))
    conn.close()
    return cap.write_pcap(path)


def _notes(*args):
    res = subprocess.run(
        [sys.executable, "-m", "dissector", "analyze", *map(str, args), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_the_port_hint_only_when_no_port_was_given(tmp_path):
    path = _ssh_capture(tmp_path / "ssh.pcap")
    notes = _notes(path)
    assert "not Kafka: 1 TCP connections (ports 22)" in notes
    assert HINT in notes
    # --port 22 was given, and the connection did not speak Kafka: the hint has nothing to add
    notes = _notes(path, "--port", "22")
    assert "not Kafka: 1 TCP connections (ports 22)" in notes
    assert HINT not in notes
    stats = {"not_kafka_ports": ["22"], "kafka_connections": 0, "gaps": 0, "cut_packets": 0}
    stats.update(dict.fromkeys(("bytes_skipped", "evicted", *EVASIONS), 0))
    assert capture_notes(stats) == ["not Kafka: 1 TCP connections (ports 22)", HINT]
    assert capture_notes(stats, [22]) == ["not Kafka: 1 TCP connections (ports 22)"]
