"""What message bodies carry: the consumer protocol, topic ids, partitions, hostile batches."""

import gzip
import json
import struct
import time
from pathlib import Path

from kafka_encoder import encode_request, encode_response
from synth import Capture, Connection

import dissector
from dissector import Dissector

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def manifest(name):
    return json.loads((CAPTURES / f"{name}.expected.json").read_text())


def test_consumer_protocol_inside_join_and_sync_group():
    m = manifest("confluent-kafka")
    group = m["consumer_group"]
    pairs = dissector.parse_bodies(dissector.read_pcap(CAPTURES / "confluent-kafka.pcap"))
    join = pairs[(pairs.api_name == "JoinGroup") & (pairs.status == "ok")].iloc[0]
    subscription = join.request["Protocols"][0]["Metadata"]
    assert subscription["Version"] == 3 and subscription["Topics"] == sorted(group["topics"])
    assert subscription["OwnedPartitions"] == [] and subscription["GenerationId"] == -1
    member = join.response["Members"][0]["Metadata"]
    assert member["Topics"] == sorted(group["topics"])
    sync = pairs[pairs.api_name == "SyncGroup"].iloc[0]
    assigned = sync.response["Assignment"]["AssignedPartitions"]
    got = sorted(f"{a['Topic']}/{p}" for a in assigned for p in a["Partitions"])
    assert got == sorted(group["assignment"])
    assert sync.request["Assignments"][0]["Assignment"]["AssignedPartitions"] == assigned


def test_fetch_by_topic_id_is_resolved_through_metadata():
    # librdkafka's Fetch v16 names topics only by id; earlier Metadata responses name them.
    pairs = dissector.parse_bodies(dissector.read_pcap(CAPTURES / "confluent-kafka.pcap"))
    fetch = pairs[(pairs.api_name == "Fetch") & (pairs.api_version >= 13)]
    assert not fetch.empty
    assert all("Topic" not in t for r in fetch.request for t in r["Topics"])
    names = set(manifest("confluent-kafka")["consumer_group"]["topics"])
    assert set().union(*fetch.topics) == names
    parts = dissector.read_pcap(CAPTURES / "confluent-kafka.pcap", table="partitions")
    fetched = parts[(parts.api_name == "Fetch") & parts.bytes.gt(0)]
    assert set(fetched.topic) <= names and fetched.topic_id.notna().all()


def test_unknown_topic_id_stays_visible_as_an_id():
    cap = Capture()
    c = Connection(cap)
    topic_id = "AQIDBAUGBwgJCgsMDQ4PEA"  # never named by a Metadata response
    c.request(
        encode_request(
            1,
            13,
            1,
            "c",
            {"Topics": [{"TopicId": topic_id, "Partitions": [{"Partition": 0}]}]},
        )
    )
    d = Dissector()
    out = [e for p in cap.packets for e in d.feed(p)] + d.finish()
    assert out[0].topics == [topic_id]


def test_partitions_table_offsets_and_lag():
    m = manifest("kafka-python")
    parts = dissector.read_pcap(CAPTURES / "kafka-python.pcap", table="partitions")
    produce = parts[parts.api_name == "Produce"]
    acked = [p for p in m["produce"] if p["acks"] != "0"]
    # Every acknowledged record's offset lies in the range a Produce response gave its batch.
    ranges = {
        (r.topic, r.partition, off)
        for r in produce.itertuples()
        if r.status == "ok"
        for off in range(r.base_offset, r.base_offset + r.records)
    }
    assert {(p["topic"], p["partition"], p["offset"]) for p in acked} <= ranges
    assert (produce.records_from == "request").all() and produce.records.gt(0).all()
    commits = parts[parts.api_name == "OffsetCommit"]
    committed = {f"{r.topic}/{r.partition}": r.committed_offset for r in commits.itertuples()}
    assert committed == m["consumer_group"]["committed"]
    fetch = parts[(parts.api_name == "Fetch") & parts.high_watermark.notna()]
    for r in fetch.itertuples():
        # Lag: high watermark minus the next offset the consumer will fetch.
        assert r.lag == r.high_watermark - (
            r.fetch_offset if not r.records else r.fetch_offset + r.records
        )


def record_batch(records_bytes, codec=0, count=1, crc=0):
    """A magic 2 batch around an already-built records area."""
    header = struct.pack(">ibIhiqqqhii", 0, 2, crc, codec, count - 1, 0, 0, -1, -1, -1, count)
    return struct.pack(">qi", 0, len(header) + len(records_bytes)) + header + records_bytes


def produce_with(records, corr):
    return encode_request(
        0,
        7,
        corr,
        "hostile",
        {
            "Acks": 1,
            "TimeoutMs": 1000,
            "TopicData": [{"Name": "t", "PartitionData": [{"Index": 0, "Records": records}]}],
        },
    )


def test_hostile_batches_get_a_status_and_the_rest_is_decoded():
    bomb = record_batch(gzip.compress(b"\0" * (64 * 1024 * 1024)), codec=1, count=1)
    unknown = record_batch(b"\x00" * 20, codec=5)
    cut = record_batch(b"\x10\x00\x00\x00\x02ab\x02cd\x00")[:-4]
    cap = Capture()
    c = Connection(cap, mss=65000)
    for corr, records in enumerate([bomb, unknown, cut], start=1):
        c.request(produce_with(records, corr))
        c.response(encode_response(0, 7, corr, {"Responses": [], "ThrottleTimeMs": 0}))
    c.request(encode_request(18, 3, 9, "hostile", {}))
    c.response(encode_response(18, 3, 9, {"ErrorCode": 0, "ApiKeys": []}))
    d = Dissector(records="full")
    start = time.monotonic()
    out = [e for p in cap.packets for e in d.feed(p)] + d.finish()
    assert time.monotonic() - start < 5
    sets = [e.request["TopicData"][0]["PartitionData"][0]["Records"] for e in out[:3]]
    assert sets[0]["batches"][0]["status"] == "decompression_bomb"
    assert sets[0]["batches"][0]["crc_ok"] is False  # the CRC field was left 0: reported
    assert sets[1]["batches"][0]["status"] == "unknown_codec"
    assert sets[2]["truncated"] is True and sets[2]["batches"] == []
    assert [e.status for e in out] == ["ok"] * 4
    assert out[3].api_name == "ApiVersions" and out[3].correlation_id == 9
