"""Findings of record data: batches that could not be read, against a capture built by hand
(test_records_table.failing_capture) whose eight failing entries are known."""

import json
import subprocess
import sys

from test_records_table import failing_capture

import dissector
from dissector import analysis as ka


def test_batches_that_cannot_be_read_are_a_finding_with_their_frames(tmp_path):
    """Read in full, the eight failing entries of the Produce request and of the Fetch
    response are one finding each, with the frame that carried them; read as batches only,
    the four whose header already fails."""
    path = failing_capture(tmp_path / "failing.pcap")
    pairs = dissector.read_pcap(path, records="full")
    parts = dissector.read_pcap(path, table="partitions", records="full")
    found = ka.diagnose(pairs, partitions=parts)
    found = found[found["kind"] == "unreadable_batches"]
    produce, fetch = (pairs[pairs["api_name"] == api].iloc[0] for api in ("Produce", "Fetch"))
    assert list(found["frames"]) == [[produce.request_frame], [fetch.response_frame]]
    assert list(found["severity"]) == ["error", "error"]
    assert list(found["count"]) == [8, 8]
    assert found["statuses"].iloc[0] == ["corrupt_records", "decompression_error"]
    assert found["topics"].iloc[0] == ["t"]
    assert found["detail"].iloc[0] == (
        "8 record batch(es) in Produce requests of p (10.0.0.2:40000) to 10.0.0.1:9092 could "
        "not be read (corrupt_records, decompression_error; topics t): the broker cannot read "
        "them either: check the producer's compression library and its codec settings"
    )
    assert "Fetch responses from" in found["detail"].iloc[1]
    headers = dissector.read_pcap(path, table="partitions")
    shallow = ka.diagnose(pairs, partitions=headers)
    assert list(shallow[shallow["kind"] == "unreadable_batches"]["count"]) == [4, 4]


def test_doctor_names_unreadable_batches_and_exits_1(tmp_path):
    path = failing_capture(tmp_path / "failing.pcap")
    cli = [sys.executable, "-m", "dissector.cli", "doctor", str(path), "--records", "full"]
    res = subprocess.run([*cli, "--format", "json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    kinds = [r["kind"] for r in rows if r["kind"] == "unreadable_batches"]
    assert len(kinds) == 2
    clean = subprocess.run(
        [sys.executable, "-m", "dissector.cli", "doctor", "captures/compression.pcap"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "unreadable_batches" not in clean.stdout
