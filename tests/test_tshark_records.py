"""Record batches compared with Wireshark's dissector, and where tshark 4.0 is wrong.

test_tshark_bodies.py compares every value tshark shows; this file states the record-batch
facts plainly: CRCs, codecs, offsets, timestamps, producer ids, keys and values.
"""

from pathlib import Path

import pytest
import tshark_oracle

import dissector

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

pytestmark = [
    pytest.mark.tshark,
    pytest.mark.skipif(not tshark_oracle.available(), reason="tshark is not installed"),
]


def our_batches(exchange, direction):
    """The record batches of one side of an exchange, in wire order."""
    body = exchange.request if direction == "request" else exchange.response
    yield from _batches(body or {})


def _batches(node):
    for key, value in node.items():
        if key == "Records" and isinstance(value, dict):
            yield from value.get("batches", [])
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    yield from _batches(item)


def test_magic_2_batches_agree_with_tshark():
    # aiokafka speaks Produce v7 and Fetch v11, versions tshark 4.0 decodes.
    path = CAPTURES / "aiokafka.pcap"
    frames = {}
    for e in dissector.dissect(path, records="full"):
        if e.api_name == "Produce":
            frames[e.request_frame, e.correlation_id] = list(our_batches(e, "request"))
        elif e.api_name == "Fetch" and e.response is not None:
            frames[e.response_frame, e.correlation_id] = list(our_batches(e, "response"))
    compared = batches = records = 0
    for t in tshark_oracle.record_fields(path, 9092):
        ours = frames.get((t.frame, t.correlation_id))
        if not t.crcs or ours is None:
            continue
        assert [b["crc"] for b in ours] == t.crcs
        assert [CODECS[b["compression"]] for b in ours] == t.codecs
        assert [b["last_offset_delta"] for b in ours] == t.last_offset_deltas
        assert [b["base_timestamp"] for b in ours] == t.first_timestamps
        assert [b["producer_id"] for b in ours] == t.producer_ids
        assert [b["base_sequence"] for b in ours] == t.base_sequences
        ours_records = [r for b in ours for r in b["records"]]
        assert [r["key"] for r in ours_records] == t.keys
        assert [r["value"] for r in ours_records] == t.values
        assert all(b["crc_ok"] for b in ours)
        compared += 1
        batches += len(ours)
        records += len(ours_records)
    print(f"compared {compared} PDUs, {batches} batches, {records} records with tshark")
    assert compared >= 10 and records >= 20


def test_magic_0_message_set_tshark_4_gets_wrong():
    """kcat falls back to Produce v1 with a magic 0 message set. tshark 4.0 stops at the first
    message's key and reports the packet malformed; the records are all there."""
    path = CAPTURES / "kcat.pcap"
    manifest = tshark_oracle.manifest(path)
    produce = [e for e in dissector.dissect(path, records="full") if e.api_name == "Produce"]
    (e,) = produce
    theirs = [t for t in tshark_oracle.record_fields(path, 9092) if t.frame == e.request_frame]
    assert theirs and theirs[0].malformed and theirs[0].values == []
    (batch_list,) = [list(our_batches(e, "request"))]
    assert [b["magic"] for b in batch_list] == [0] * len(manifest["produce"])
    assert all(b["crc_ok"] and b["status"] == "ok" for b in batch_list)
    got = [(b["records"][0]["key"], b["records"][0]["value"]) for b in batch_list]
    sent = [(p["key"]["text"].encode(), p["value"]["text"].encode()) for p in manifest["produce"]]
    assert got == sent
