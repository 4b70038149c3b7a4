"""The `records` table against what the recording script produced and consumed.

Every sample capture's manifest lists each record the script sent (key, value, headers,
timestamp, compression) and each record its consumer received. The records table must hold
exactly those: in the Produce requests and in the Fetch responses, for every codec.
"""

import hashlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pytest
from samples import client_captures

import dissector

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
RECORDED = sorted(
    p
    for p in client_captures()
    if not p.name.startswith("legacy-") and p.with_suffix(".expected.json").exists()
)


def blob(value):
    """(length, sha256) of bytes a manifest describes by their text or their digest."""
    if value is None or (value.get("text") is None and "sha256" not in value):
        return None
    if "sha256" in value:
        return value["length"], value["sha256"]
    return describe(value["text"].encode())


def describe(raw):
    """(length, sha256) of a key or value; None for a missing one (pd.NA in the table)."""
    return None if raw is None or raw is pd.NA else (len(raw), hashlib.sha256(raw).hexdigest())


def manifest_records(entries):
    return Counter(
        (
            e["topic"],
            blob(e["key"]),
            blob(e["value"]),
            tuple((k, v) for k, v in e["headers"]),
            e["timestamp_ms"],
        )
        for e in entries
    )


def table_records(rows):
    return Counter(
        (
            r.topic,
            describe(r.key),
            describe(r.value),
            tuple(
                (h["key"], None if h["value"] is None else h["value"].decode()) for h in r.headers
            ),
            None if r.timestamp is pd.NaT else int(r.timestamp.value // 1_000_000),
        )
        for r in rows.itertuples()
    )


@pytest.fixture(scope="module", params=RECORDED, ids=[p.stem for p in RECORDED])
def capture(request):
    m = json.loads(request.param.with_suffix(".expected.json").read_text())
    return m, dissector.read_pcap(request.param, table="records")


def test_produced_records_are_exactly_those_sent(capture):
    m, records = capture
    # Records whose produce failed were still sent (kcat's, which Tansu refused): all count.
    sent = m.get("produce", [])
    produced = records[(records.api_name == "Produce") & (records.direction == "request")]
    # A producer may retry a batch; every record sent is there, and nothing else.
    assert set(table_records(produced)) == set(manifest_records(sent))
    assert (produced.crc_ok.astype(bool)).all() and (produced.batch_status == "ok").all()
    codecs = {p["compression"] for p in sent}
    assert set(produced.compression) == (codecs or set())


def test_fetched_records_are_exactly_those_consumed(capture):
    m, records = capture
    consumed = m.get("consumed", [])
    fetched = records[(records.api_name == "Fetch") & (records.direction == "response")]
    fetched = fetched[fetched.control.isna()]  # transaction markers reach no application
    if not consumed:
        assert fetched.empty
        return
    got = fetched.drop_duplicates(["topic", "partition", "offset"])
    assert table_records(got) == manifest_records(consumed)
    offsets = {(c["topic"], c["partition"], c["offset"]) for c in consumed}
    assert set(zip(got.topic, got.partition, got.offset, strict=True)) == offsets


def test_every_codec_decodes():
    records = dissector.read_pcap(CAPTURES / "compression.pcap", table="records")
    produced = records[records.direction == "request"]
    assert set(produced.compression) == {"gzip", "snappy", "lz4", "zstd"}
    by_codec = produced.groupby("compression").size()
    assert (by_codec == 5).all()


ALL_CAPTURES = sorted(CAPTURES.glob("*.pcap"))


def rows_path_table(path, **options):
    """The records table as the rows path builds it: a dict per record, converted by Arrow."""
    import pyarrow as pa

    from dissector.tables.records import exchange_records
    from dissector.tables.schema import RECORDS

    rows = [
        r for e in dissector.dissect(path, records="full", **options) for r in exchange_records(e)
    ]
    return pa.Table.from_pylist(rows, schema=RECORDS)


def columns_table(path, max_rows, max_bytes, wanted=None):
    import pyarrow as pa
    from dissector.tables.record_columns import RecordColumns

    from dissector.tables.schema import RECORDS

    columns = RecordColumns(max_rows, max_bytes, wanted)
    batches = [b for e in dissector.dissect(path, records="full") for b in columns.add(e)]
    last = columns.finish()
    return pa.Table.from_batches(batches + ([last] if last is not None else []), RECORDS)


@pytest.mark.parametrize("path", ALL_CAPTURES, ids=[p.stem for p in ALL_CAPTURES])
def test_records_read_into_columns_equal_the_rows_path(path):
    """The compiled builder reads magic 2 batches from their bytes into columns; the rows
    path decodes a dict per record. Same table, value for value, however the rows are cut
    into Arrow batches: a row at a time, a few rows, or a byte budget smaller than a record
    (a Kafka batch then spans Arrow batches, each row with its batch's final status)."""
    pytest.importorskip("dissector.tables.record_columns", reason="built without a C compiler")
    expected = rows_path_table(path)
    for max_rows, max_bytes in ((65536, 64 << 20), (1, 1 << 30), (3, 1 << 30), (1000, 1)):
        got = columns_table(path, max_rows, max_bytes)
        assert got.equals(expected), (path.name, max_rows, max_bytes)
        assert all(b.num_rows <= max_rows for b in got.to_batches())


def _batch(values):
    """A magic 2 batch, uncompressed, of one record a value (each with a header), as
    kafka-python's producer builds it."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    for i, value in enumerate(values):
        builder.append(i, 0, None, value, [("h", bytes([i]))])
    return bytes(builder.build())


def test_megabytes_of_values_equal_the_rows_path(tmp_path):
    """Column buffers past a megabyte go to Arrow as they are, and the builder goes on in a
    new block: batch after batch of 1.5 MB values, cut into Arrow batches of any size."""
    pytest.importorskip("dissector.tables.record_columns", reason="built without a C compiler")
    from kafka_encoder import encode_request, encode_response
    from synth import Capture, Connection

    cap = Capture()
    c = Connection(cap, mss=65000)
    for corr in range(1, 5):
        values = [bytes([corr * 16 + i]) * (1_500_000 + i) for i in range(2)]
        body = {
            "Acks": 1,
            "TimeoutMs": 1000,
            "TopicData": [
                {"Name": "big", "PartitionData": [{"Index": 0, "Records": _batch(values)}]}
            ],
        }
        c.request(encode_request(0, 7, corr, "big", body))
        c.response(encode_response(0, 7, corr, {"Responses": [], "ThrottleTimeMs": 0}))
    path = tmp_path / "big.pcap"
    cap.write_pcap(path)
    expected = rows_path_table(path)
    assert expected.num_rows == 8
    assert [len(v) for v in expected.column("value").to_pylist()] == [1_500_000, 1_500_001] * 4
    for max_rows, max_bytes in ((65536, 64 << 20), (65536, 2 << 20), (1, 1 << 30), (3, 1 << 30)):
        got = columns_table(path, max_rows, max_bytes)
        assert got.equals(expected), (max_rows, max_bytes)


def failing_capture(path):
    """A Produce request whose record set holds, between good batches, entries of no known
    magic, a batch header cut short, counts that fail, a payload that does not decompress,
    records that do not parse (8 entries that fail), answered with base offset 100; then a
    Fetch response (frame 2's exchange) returning the same record set."""
    import struct

    from kafka_encoder import encode_request, encode_response
    from synth import Capture, Connection
    from test_records import GZIP, make_v2, record, sample, v2

    entries = [
        struct.pack(">qiib", 0, 10, 0, 7) + bytes(5),  # magic 7
        struct.pack(">qi", 0, 3) + bytes(3),  # no magic byte
        struct.pack(">qiib", 0, 20, 0, 2) + bytes(15),  # a magic 2 header cut short
        make_v2(record(0, b"k", b"v"), -3),  # negative count
        make_v2(record(0, b"k", b"v"), 9_999_999),  # cannot fit
        make_v2(b"\x1f\x8b" + bytes(30), 1, attributes=GZIP),  # not gzip after all
        make_v2(b"\xff" * 40, 2),  # records that do not parse
        make_v2(record(0, b"k", b"v") + b"\xff" * 9, 2, last_delta=1),  # one parses
    ]
    records = v2(sample(3), codec=GZIP) + b"".join(entries) + v2(sample(2))
    cap = Capture()
    c = Connection(cap, mss=65000)
    produce = {
        "Acks": 1,
        "TimeoutMs": 1000,
        "TopicData": [{"Name": "t", "PartitionData": [{"Index": 0, "Records": records}]}],
    }
    c.request(encode_request(0, 7, 1, "p", produce))
    answer = {"Index": 0, "ErrorCode": 0, "BaseOffset": 100, "LogAppendTimeMs": -1}
    answer["LogStartOffset"] = 0
    response = {"Responses": [{"Name": "t", "PartitionResponses": [answer]}]}
    c.response(encode_response(0, 7, 1, {**response, "ThrottleTimeMs": 0}))
    fetched = {"PartitionIndex": 0, "ErrorCode": 0, "HighWatermark": 200, "Records": records}
    fetched |= {"LastStableOffset": -1, "AbortedTransactions": None}
    fetch = {"ThrottleTimeMs": 0, "Responses": [{"Topic": "t", "Partitions": [fetched]}]}
    c.request(encode_request(1, 4, 2, "c", {"ReplicaId": -1, "MaxWaitMs": 0, "MinBytes": 1}))
    c.response(encode_response(1, 4, 2, fetch))
    return cap.write_pcap(path)


def test_record_sets_with_entries_that_fail_equal_the_rows_path(tmp_path):
    """The failing entries of failing_capture in a Produce request whose response assigns
    offsets and in a Fetch response: the compiled builder gives the rows path's table,
    offsets included (every entry holds its place)."""
    pytest.importorskip("dissector.tables.record_columns", reason="built without a C compiler")
    path = failing_capture(tmp_path / "failing.pcap")
    expected = rows_path_table(path)
    sent = expected.filter(pa.compute.equal(expected.column("direction"), "request"))
    assert sent.column("offset").to_pylist() == [100, 101, 102, 110, 112, 113]
    assert set(expected.column("batch_status").to_pylist()) == {"ok", "corrupt_records"}
    for max_rows, max_bytes in ((65536, 64 << 20), (1, 1 << 30), (3, 1 << 30)):
        assert columns_table(path, max_rows, max_bytes).equals(expected), (max_rows, max_bytes)


def test_topic_and_partition_filters_keep_only_their_records(tmp_path, monkeypatch):
    """topics=[...] and partitions=[...] keep those records, the same as filtering the whole
    table; the batches of other topics are not decompressed."""
    from dissector.protocol.records import batch, compression

    path = CAPTURES / "compression.pcap"
    whole = dissector.read_pcap(path, table="records")
    assert set(whole.topic) == {"comp-gzip", "comp-lz4", "comp-snappy", "comp-zstd"}
    calls = []

    def counted(codec, *args, **kwargs):
        calls.append(codec)
        return compression.decompress(codec, *args, **kwargs)

    # Where every reader of a batch decompresses (batch.records_bytes): the rows path and the
    # compiled builder alike.
    monkeypatch.setattr(batch, "decompress", counted)
    gzip = dissector.read_pcap(path, table="records", topics=["comp-gzip"])
    assert len(gzip) == (whole.topic == "comp-gzip").sum() > 0
    assert gzip.drop(columns="headers").equals(
        whole[whole.topic == "comp-gzip"].reset_index(drop=True).drop(columns="headers")
    )
    assert calls and set(calls) == {1}  # gzip batches only: the others were passed over
    none = dissector.read_pcap(path, table="records", topics=["comp-gzip"], partitions=[99])
    assert none.empty and list(none.columns) == list(whole.columns)
    parts = dissector.read_pcap(path, table="partitions", topics=["comp-lz4"])
    assert len(parts) > 0 and set(parts.topic) == {"comp-lz4"}
    out = tmp_path / "r.csv"
    cli = [sys.executable, "-m", "dissector.cli", "analyze", str(path), "--no-progress"]
    res = subprocess.run(
        [*cli, "--table", "records", "-o", str(out), "--topic", "comp-zstd", "--topic", "comp-lz4"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert set(pd.read_csv(out).topic) == {"comp-zstd", "comp-lz4"}
