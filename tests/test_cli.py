"""The kafka-dissect command line on the bundled captures."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import dissector
from dissector.tables import sort_table
from dissector.tables.output import read_table

SAMPLE = Path(__file__).resolve().parent.parent / "captures" / "kafka-python.pcap"


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "dissector", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def summary_rows(stdout):
    """api name -> (version, request count) from the printed summary."""
    rows = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 7 and parts[1].isdigit() and parts[2].isdigit():
            rows[(parts[0], int(parts[1]))] = int(parts[2])
    return rows


def test_analyze_prints_the_summary():
    res = run("analyze", SAMPLE, "--no-progress")
    assert res.returncode == 0, res.stderr
    pairs = dissector.read_pcap(SAMPLE)
    rows = summary_rows(res.stdout)
    expected = pairs.groupby(["api_name", "api_version"]).size()
    assert rows == {(name, int(v)): int(n) for (name, v), n in expected.items()}
    assert rows[("Produce", 9)] == 4 and rows[("Metadata", 12)] == 10
    joins = [line for line in res.stdout.splitlines() if line.startswith("JoinGroup")]
    assert "MEMBER_ID_REQUIRED x1" in joins[0]
    counts = pairs.status.value_counts()
    assert f"status: ok {counts['ok']}, error {counts['error']}," in res.stdout
    assert f"{len(pairs)} exchanges" in res.stdout
    assert res.stderr == ""  # no progress bar when stderr is not a terminal


TUNING = """
import gc, sys
from dissector import cli
before = gc.get_threshold()
cli.main(["analyze", sys.argv[1], "--no-progress"])
untouched = gc.get_threshold() == before and gc.get_freeze_count() == 0
cli.main(["analyze", sys.argv[1], "--no-progress"], own_process=True)
print(untouched, gc.get_threshold()[0], gc.get_freeze_count() > 0, file=sys.stderr)
"""


def test_analyze_tunes_only_a_process_of_its_own():
    """The console script's analyze collects garbage less often (and keeps large buffers in
    glibc's heap); main() called from another program leaves that program's settings alone."""
    res = subprocess.run(
        [sys.executable, "-c", TUNING, str(SAMPLE)], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr.split() == ["True", "100000", "True"]
    assert res.stdout.count(f"{SAMPLE}: ") == 2  # both runs printed their summary


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_analyze_writes_the_table(tmp_path, suffix):
    out = tmp_path / f"pairs{suffix}"
    res = run("analyze", SAMPLE, "--port", 9092, "-o", out, "--no-progress")
    assert res.returncode == 0, res.stderr
    expected = dissector.read_pcap(SAMPLE, ports=[9092])
    # Rows come in the order exchanges complete; read_table reads any format back typed.
    got = sort_table(read_table(out), "pairs")
    assert list(got.columns) == list(dissector.COLUMNS)
    assert len(got) == len(expected)
    pd.testing.assert_frame_equal(got, expected)
    if suffix == ".parquet":
        raw = pd.read_parquet(out)
    elif suffix == ".csv":
        raw = pd.read_csv(out)
        assert raw.request_start.str.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z").all()
    else:
        raw = pd.read_json(out, lines=True, dtype=False)
    raw = raw.sort_values("request_frame", kind="stable")
    first = raw.request.iloc[0]
    assert json.loads(first) == json.loads(expected.request.iloc[0])


def test_analyze_writes_the_pairs_without_bodies(tmp_path):
    """--no-bodies: the pairs table with empty bodies, every other column as read_pcap's."""
    out = tmp_path / "pairs.parquet"
    res = run("analyze", SAMPLE, "-o", out, "--no-bodies", "--no-progress")
    assert res.returncode == 0, res.stderr
    got = sort_table(read_table(out), "pairs")
    expected = dissector.read_pcap(SAMPLE)
    assert got[["request", "response"]].isna().all().all()
    assert expected["request"].notna().all()
    pd.testing.assert_frame_equal(
        got.drop(columns=["request", "response"]),
        expected.drop(columns=["request", "response"]),
    )


def test_gzip_capture_gives_the_same_pairs(tmp_path):
    gz = tmp_path / "kafka-python.pcap.gz"
    gz.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    a, b = dissector.read_pcap(SAMPLE), dissector.read_pcap(gz)
    cols = ["request_frame", "response_frame", "correlation_id", "latency_ms", "status"]
    pd.testing.assert_frame_equal(a[cols], b[cols])


def test_bad_input_is_one_line_with_file_and_offset(tmp_path):
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture file at all")
    res = run("analyze", junk)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert str(junk) in res.stderr and "offset 0" in res.stderr
    missing = run("analyze", tmp_path / "missing.pcap")
    assert missing.returncode == 2 and "missing.pcap" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_truncated_capture_decodes_up_to_the_cut_with_a_warning(tmp_path):
    cut = tmp_path / "cut.pcap"
    data = SAMPLE.read_bytes()
    cut.write_bytes(data[: len(data) // 2 + 7])
    res = run("analyze", cut, "--no-progress")
    assert res.returncode == 0
    assert "warning" in res.stderr and "truncated" in res.stderr
    assert "Traceback" not in res.stderr
    assert "exchanges" in res.stdout


def test_analyze_writes_partitions_and_records_and_shows_volume(tmp_path):
    compression = SAMPLE.parent / "compression.pcap"
    out = tmp_path / "records.parquet"
    res = run("analyze", compression, "--table", "records", "-o", out, "--no-progress")
    assert res.returncode == 0, res.stderr
    records = pd.read_parquet(out)
    produced = records[records.direction == "request"]
    assert sorted(set(produced.compression)) == ["gzip", "lz4", "snappy", "zstd"]
    assert len(produced) == 20 and produced.value.map(len).gt(300).all()

    def produce_volume(res):
        lines = [line.split() for line in res.stdout.splitlines()]
        volume = [v for v in lines if v[:1] == ["Produce"] and v[1].startswith("comp-")]
        assert {v[1] for v in volume} == {"comp-gzip", "comp-lz4", "comp-snappy", "comp-zstd"}
        return lines, volume

    # The table decompresses what it shows; the summary's uncompressed sizes need --decompress
    # (batches, records, control records, bytes, uncompressed bytes, ratio)
    _, volume = produce_volume(res)
    assert all(v[2:5] == ["1", "5", "0"] and v[6:8] == ["-", "-"] for v in volume)
    assert "uncompressed sizes of compressed batches: not measured (--decompress)" in res.stdout
    res = run("analyze", compression, "--table", "records", "-o", out, "--decompress")
    assert res.returncode == 0, res.stderr
    lines, volume = produce_volume(res)
    for v in volume:  # the text compresses well
        assert (int(v[2]), int(v[3]), int(v[4])) == (1, 5, 0) and float(v[7]) > 1.5
    codecs = [v for v in lines if v[:1] == ["Produce"] and v[1] in ("gzip", "lz4", "snappy")]
    assert len(codecs) == 3 and all(float(v[4]) > 1.5 for v in codecs)
    parts = tmp_path / "parts.csv"
    res = run("analyze", compression, "--table", "partitions", "-o", parts, "--no-progress")
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(parts)
    assert {"topic", "partition", "high_watermark", "lag"} <= set(table.columns)
