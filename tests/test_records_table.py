"""The `records` table against what the recording script produced and consumed.

Every sample capture's manifest lists each record the script sent (key, value, headers,
timestamp, compression) and each record its consumer received. The records table must hold
exactly those: in the Produce requests and in the Fetch responses, for every codec.
"""

import hashlib
import json
from collections import Counter
from pathlib import Path

import pandas as pd
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
    return None if raw is None else (len(raw), hashlib.sha256(raw).hexdigest())


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
