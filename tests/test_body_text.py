"""Bodies written straight to JSON text (tables/body_text.pyx) are the text of the decoded
dict, byte for byte: for every message version, for record sets of every kind, and for every
scanned body of the bundled captures in every record mode."""

import random
from pathlib import Path

import kafka_encoder as ke
import pytest
from test_records import GZIP, LZ4, ZSTD, legacy, make_v2, patch_v2, sample, v2

import dissector
from dissector.options import Options
from dissector.protocol import messages
from dissector.protocol.codegen import Context
from dissector.session.exchange import LazyBody, decoded
from dissector.session.modern import decode_later
from dissector.tables.bodies import body_utf8, parse_body
from dissector.tables.pairs import json_text, pairs_row

body_text_module = pytest.importorskip(
    "dissector.tables.body_text", reason="built without a C compiler: bodies take the dict path"
)
write = body_text_module.write

CAPTURES = sorted((Path(__file__).resolve().parent.parent / "captures").glob("*.pcap"))
PRODUCE = 0
MODES = [
    {"records": "none"},
    {"records": "batches"},
    {"records": "batches", "decompress": True},
    {"records": "full"},
]


def dict_text(key, kind, version, raw, pos, records):
    """What the dict path writes: the decoded body, serialized."""
    return body_utf8(messages.decode_body(key, kind, version, raw, pos, Context(records)))


@pytest.mark.parametrize("unknown_tags", [False, True], ids=["schema-tags", "unknown-tags"])
def test_every_message_version(unknown_tags):
    """Random values of every field of every version, strings in several scripts, tagged
    fields known and unknown: the same text, and never left to the dict path."""
    versions = ke.all_message_versions()
    for key, name, kind, version in versions:
        for seed in range(3):
            rng = random.Random(f"{key}/{kind}/{version}/{seed}")
            definition = ke.definition_of(key, kind, version)
            value = ke.random_value(definition, version, rng, unknown_tags=unknown_tags)
            raw = ke.encode(definition, version, value)
            text = write(key, kind, version, raw, 0, None)
            assert text is not None, f"{name} {kind} v{version} seed {seed}"
            assert text == dict_text(key, kind, version, raw, 0, None), (
                f"{name} {kind} v{version} seed {seed}"
            )
    assert len(versions) > 700


def produce(record_set, version=9):
    """A Produce request body (flexible at v9, not at v3) carrying one record set."""
    definition = ke.definition_of(PRODUCE, "request", version)
    partition = {"Index": 3, "Records": record_set}
    value = {
        "TransactionalId": None,
        "Acks": -1,
        "TimeoutMs": 30000,
        "TopicData": [{"Name": "orders", "PartitionData": [partition]}],
    }
    return ke.encode(definition, version, value)


def record_sets():
    plain = v2(sample(5))
    return {
        "plain": plain,
        "two batches": plain + v2(sample(3), base_offset=5),
        "gzip": v2(sample(20), GZIP),
        "lz4 and zstd": v2(sample(4), LZ4) + v2(sample(4), ZSTD, base_offset=4),
        "transactional": v2(sample(2), transactional=True, pid=7, epoch=1, seq=0),
        "log append time": patch_v2(plain, attributes=0x08, max_timestamp=1_700_000_009_999),
        "control commit": make_v2(b"", 0, attributes=0x30),
        "bad crc": patch_v2(plain, crc=12345),
        "negative count": patch_v2(plain, record_count=-1),
        "cut in a batch": plain + v2(sample(3))[:40],
        "cut in the length": plain + b"\x00" * 7,
        "negative length": plain + b"\x00" * 8 + b"\xff\xff\xff\xfe" + b"\x00" * 10,
        "unknown magic": plain[:16] + b"\x07" + plain[17:],
        "unknown codec": patch_v2(plain, attributes=6),
        "magic 0 and 1": legacy(0, 0, n=3) + legacy(1, 0, n=3, offset=3),
        "empty": b"",
        "null": None,
    }


@pytest.mark.parametrize("version", [3, 9])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: "-".join(map(str, m.values())))
@pytest.mark.parametrize("name", list(record_sets()))
def test_record_sets(name, mode, version):
    records = Options(**mode).record_decoder()
    raw = produce(record_sets()[name], version)
    text = write(PRODUCE, "request", version, raw, 0, records)
    assert text == dict_text(PRODUCE, "request", version, raw, 0, records)
    if mode == {"records": "batches"} and name in WELL_FORMED:
        body = parse_body(text.decode())
        batches = body["TopicData"][0]["PartitionData"][0]["Records"]["batches"]
        assert [b["status"] for b in batches] == ["ok"] * len(batches)
        assert batches[0]["record_count"] == (20 if name == "gzip" else 5)


WELL_FORMED = ("plain", "two batches", "gzip", "cut in a batch")


def test_bytes_after_the_last_field_are_left_to_the_dict_path():
    raw = produce(v2(sample(2))) + b"\x00\x01"
    records = Options().record_decoder()
    assert write(PRODUCE, "request", 9, raw, 0, records) is None
    body = (decode_later, PRODUCE, "request", 9, raw, 0, records)
    text = json_text(body)
    assert b'"_trailing_bytes":"AAE="' in text
    assert text == body_utf8(decoded(body))


def test_a_tag_twice_is_read_as_the_decoder_reads_it():
    """The last value of a tag sent twice, where the first came (ApiVersions request v3)."""
    raw = b"\x04abc\x021" + b"\x02" + b"\x05\x01\x01" + b"\x05\x01\x02"
    text = write(18, "request", 3, raw, 0, None)
    assert (
        text
        == b'{"ClientSoftwareName":"abc","ClientSoftwareVersion":"1","_unknown_tags":{"5":"Ag=="}}'
    )
    assert text == dict_text(18, "request", 3, raw, 0, None)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "-".join(map(str, m.values())))
def test_every_scanned_body_of_the_bundled_captures(mode):
    """Every body the session left to decode later, from real clients and brokers."""
    written = 0
    for path in CAPTURES:
        for exchange in dissector.dissect(path, progress=False, **mode):
            for body in (exchange._request, exchange._response):
                if body.__class__ is not LazyBody:
                    continue
                text = write(*body[1:])
                assert text == body_utf8(decoded(body)), f"{path.name}: {exchange}"
                written += 1
    assert written > 900


def test_a_row_leaves_scanned_bodies_undecoded():
    """The pairs row of a Produce exchange carries its bodies' text; the exchange keeps the
    bytes, not a decoded dict."""
    path = next(p for p in CAPTURES if p.name == "confluent-kafka.pcap")
    exchange = next(e for e in dissector.dissect(path, progress=False) if e.api_name == "Produce")
    row = pairs_row(exchange)
    assert exchange._request.__class__ is LazyBody
    assert row[-2] == body_utf8(exchange.request)
    assert b'"compression":' in row[-2]


def test_the_record_sets_of_a_body_written_as_text_share_one_allowance():
    """The JSON text written straight from the bytes decodes a body's record sets as the
    dict path does: 200 of them, each a zstd batch of a record of 1,000,000 zero bytes, share
    one allowance, so all but the first are bombs, as in the dict path."""
    import json

    from test_records import zeros_batch

    batch = zeros_batch()
    definition = ke.definition_of(PRODUCE, "request", 7)
    partitions = [{"Index": i, "Records": batch} for i in range(200)]
    value = {"TransactionalId": None, "Acks": -1, "TimeoutMs": 30000}
    value["TopicData"] = [{"Name": "orders", "PartitionData": partitions}]
    raw = ke.encode(definition, 7, value)
    records = Options(records="full").record_decoder()
    text = write(PRODUCE, "request", 7, raw, 0, records)
    assert text is not None and len(text) < 8 << 20
    sets = [p["Records"] for p in json.loads(text)["TopicData"][0]["PartitionData"]]
    statuses = [s["batches"][0]["status"] for s in sets]
    assert statuses == ["ok"] + ["decompression_bomb"] * 199
    # The dict path in a run of its own: in the same run the first batch would be a bomb too.
    records = Options(records="full").record_decoder()
    body = messages.decode_body(PRODUCE, "request", 7, raw, 0, Context(records))
    as_dicts = [p["Records"]["batches"][0]["status"] for p in body["TopicData"][0]["PartitionData"]]
    assert as_dicts == statuses


@pytest.mark.parametrize("name", ["plain", "two batches", "gzip", "lz4 and zstd", "transactional"])
def test_records_in_full_are_written_from_their_bytes(name, monkeypatch):
    """Data batches whose records all parse are written with their records straight from
    the bytes, decompressed where they are compressed: the record decoder is not called (the
    text is the dict path's, byte for byte)."""
    from dissector.protocol.records import record_set

    records = Options(records="full").record_decoder()
    raw = produce(record_sets()[name])
    expected = dict_text(PRODUCE, "request", 9, raw, 0, records)

    def refused(self, raw, ctx=None):
        raise AssertionError("the record decoder was called")

    monkeypatch.setattr(record_set.RecordSets, "__call__", refused)
    assert write(PRODUCE, "request", 9, raw, 0, records) == expected
