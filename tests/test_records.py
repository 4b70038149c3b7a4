"""Record sets: magic 2 batches, magic 0/1 message sets, every codec, and hostile input.

Valid sets come from kafka-python's builders where they can; control batches, framings the
builders do not write and hostile bytes are put together by hand below.
"""

import random
import struct
import time
import tracemalloc
import zlib

import cramjam
import crc32c
import lz4.frame
import pytest
import snappy
import xxhash
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecordsBuilder
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from dissector.protocol.records import STATUSES, Limits, decode_record_set
from dissector.protocol.records.census import measure
from dissector.protocol.records.common import (
    CODEC_NAMES,
    DEFAULT_LIMITS,
    RATIO_FLOOR,
    Allowance,
)
from dissector.tables.partitions import record_summary

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
TEXT = b"the quick brown fox jumps over the lazy dog; "
TS = 1_700_000_000_000
V2_HEADER = struct.Struct(">qiibIhiqqqhii")
V2_FIELDS = (
    "base_offset",
    "batch_length",
    "partition_leader_epoch",
    "magic",
    "crc",
    "attributes",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "record_count",
)
BATCH_KEYS = {
    "magic",
    "base_offset",
    "batch_length",
    "partition_leader_epoch",
    "crc",
    "crc_ok",
    "attributes",
    "compression",
    "timestamp_type",
    "transactional",
    "control",
    "has_delete_horizon",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "record_count",
    "records",
    "status",
    "error",
    "compressed_size",
    "uncompressed_size",
}
GIB = 1 << 30


# --- building record sets ---------------------------------------------------------------


def sample(n=50, headers=True):
    """(timestamp, key, value, headers) tuples that compress well."""
    return [
        (
            TS + i,
            b"key-%d" % i,
            TEXT * 3 + b"%d" % i,
            [("h", b"%d" % i), ("n", None)] if headers else [],
        )
        for i in range(n)
    ]


def v2(records, codec=NONE, base_offset=0, transactional=False, pid=-1, epoch=-1, seq=-1):
    builder = DefaultRecordBatchBuilder(2, codec, transactional, pid, epoch, seq, 1 << 30)
    for i, (ts, key, value, headers) in enumerate(records):
        builder.append(i, ts, key, value, headers)
    raw = bytes(builder.build())
    # The base offset is outside the CRC: set it like a broker does.
    return struct.pack(">q", base_offset) + raw[8:]


def zeros_batch():
    """A zstd batch of one record of 1,000,000 zero bytes, about 120 bytes: a ratio past
    8,000, under the 1 MiB floor of the ratio's check on its own."""
    return make_v2(
        zstandard.ZstdCompressor().compress(record(0, b"k", bytes(1_000_000))), 1,
        attributes=ZSTD,
    )  # fmt: skip


def header(raw):
    return dict(zip(V2_FIELDS, V2_HEADER.unpack_from(raw), strict=True))


def patch_v2(raw, **fields):
    """``raw`` with header fields replaced and the CRC made right again (unless given)."""
    values = header(raw) | fields
    out = bytearray(V2_HEADER.pack(*(values[f] for f in V2_FIELDS)) + raw[V2_HEADER.size :])
    if "crc" not in fields:
        struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def make_v2(body, count, attributes=0, base_offset=0, last_delta=0, pid=-1, epoch=-1, seq=-1):
    """A magic 2 batch around an already encoded (and possibly compressed) records area."""
    head = V2_HEADER.pack(
        base_offset, 49 + len(body), 0, 2, 0, attributes, last_delta, TS, TS, pid, epoch, seq, count
    )
    return patch_v2(head + body)


def zigzag(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def blob(b):
    return zigzag(-1) if b is None else zigzag(len(b)) + b


def record(offset_delta, key, value, headers=(), ts_delta=0, attributes=0):
    body = bytes([attributes]) + zigzag(ts_delta) + zigzag(offset_delta) + blob(key) + blob(value)
    body += zigzag(len(headers))
    for k, v in headers:
        body += blob(k.encode()) + blob(v)
    return zigzag(len(body)) + body


def message(offset, value, key=None, magic=1, attributes=0, timestamp=TS):
    """One magic 0/1 message with its offset and size, CRC computed."""
    body = struct.pack(">bb", magic, attributes)
    if magic:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(body)) + body


def legacy(magic, codec, n=20, offset=None):
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 30)
    for i in range(n):
        builder.append(i, TS + i, b"k%d" % i, TEXT * 2 + b"%d" % i)
    raw = bytes(builder.build())
    return raw if offset is None else struct.pack(">q", offset) + raw[8:]


def gzip_bytes(data):
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def decoded(records):
    return [(r["timestamp"], r["key"], r["value"], r["headers"]) for r in records]


def as_sample(records):
    return [(ts, k, v, [tuple(h) for h in hs]) for ts, k, v, hs in records]


def one(raw, limits=None):
    result = decode_record_set(raw) if limits is None else decode_record_set(raw, limits)
    assert len(result["batches"]) == 1, result
    return result["batches"][0]


# --- magic 2 ----------------------------------------------------------------------------


def test_v2_uncompressed_fields():
    records = sample(10)
    raw = v2(records, base_offset=1000)
    result = decode_record_set(raw)
    assert result["size"] == len(raw)
    assert result["truncated"] is False and result["truncated_bytes"] == 0
    assert result["error"] is None
    (batch,) = result["batches"]
    assert set(batch) == BATCH_KEYS
    assert batch["magic"] == 2
    assert batch["status"] == "ok" and batch["error"] is None
    assert batch["crc_ok"] is True
    assert batch["crc"] == header(raw)["crc"]
    assert batch["batch_length"] == len(raw) - 12
    assert batch["compression"] == "none"
    assert batch["timestamp_type"] == "create"
    assert batch["transactional"] is False and batch["control"] is False
    assert batch["has_delete_horizon"] is False
    assert batch["base_offset"] == 1000
    assert batch["last_offset_delta"] == 9
    assert batch["base_timestamp"] == TS and batch["max_timestamp"] == TS + 9
    assert (batch["producer_id"], batch["producer_epoch"], batch["base_sequence"]) == (-1, -1, -1)
    assert batch["record_count"] == 10
    assert batch["compressed_size"] == batch["uncompressed_size"] == len(raw) - 61
    assert [r["offset"] for r in batch["records"]] == list(range(1000, 1010))
    assert decoded(batch["records"]) == as_sample(records)
    assert all(r["attributes"] == 0 and "control" not in r for r in batch["records"])


@pytest.mark.parametrize(
    ("codec", "name"), [(GZIP, "gzip"), (SNAPPY, "snappy"), (LZ4, "lz4"), (ZSTD, "zstd")]
)
def test_v2_codecs(codec, name):
    records = sample(200)
    raw = v2(records, codec=codec, base_offset=7)
    batch = one(raw)
    assert batch["status"] == "ok", batch["error"]
    assert batch["compression"] == name
    assert batch["attributes"] & 7 == codec
    assert batch["crc_ok"] is True
    assert batch["compressed_size"] == len(raw) - 61
    assert batch["uncompressed_size"] > 3 * batch["compressed_size"]
    assert [r["offset"] for r in batch["records"]] == list(range(7, 207))
    assert decoded(batch["records"]) == as_sample(records)


def test_v2_snappy_is_xerial_framed_with_several_chunks():
    records = sample(2000)  # more than one 32 KiB xerial chunk
    raw = v2(records, codec=SNAPPY)
    assert raw[61:69] == b"\x82SNAPPY\x00"
    batch = one(raw)
    assert batch["status"] == "ok"
    assert batch["uncompressed_size"] > 64 * 1024
    assert decoded(batch["records"]) == as_sample(records)


def test_v2_snappy_raw():
    body = b"".join(record(i, b"k", TEXT * 4) for i in range(30))
    batch = one(make_v2(bytes(cramjam.snappy.compress_raw(body)), 30, attributes=SNAPPY))
    assert batch["status"] == "ok"
    assert batch["uncompressed_size"] == len(body)
    assert [r["value"] for r in batch["records"]] == [TEXT * 4] * 30


def test_v2_zstd_without_content_size_and_in_two_frames():
    body = b"".join(record(i, None, TEXT * 5 + b"%d" % i) for i in range(40))
    half = len(body) // 2
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    compressed = cctx.compress(body[:half]) + cctx.compress(body[half:])
    assert zstandard.frame_content_size(compressed) == -1
    batch = one(make_v2(compressed, 40, attributes=ZSTD))
    assert batch["status"] == "ok", batch["error"]
    assert batch["uncompressed_size"] == len(body)
    assert len(batch["records"]) == 40


def test_v2_gzip_concatenated_members():
    body = b"".join(record(i, b"k", TEXT) for i in range(10))
    batch = one(make_v2(gzip_bytes(body[:100]) + gzip_bytes(body[100:]), 10, attributes=GZIP))
    assert batch["status"] == "ok"
    assert len(batch["records"]) == 10


def test_v2_lz4_frame_variants():
    body = b"".join(record(i, b"k", TEXT * 3) for i in range(50))
    rng = random.Random(5)
    noise = bytes(rng.randrange(256) for _ in range(70_000))  # stored as uncompressed blocks
    noisy = body + record(50, b"n", noise)
    frame = lz4.frame.compress(
        noisy,
        block_linked=False,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        content_checksum=True,
        block_checksum=True,
        store_size=True,
    )
    batch = one(make_v2(frame, 51, attributes=LZ4))
    assert batch["status"] == "ok", batch["error"]
    assert batch["records"][-1]["value"] == noise

    # Linked blocks: the first decodes alone; a later one that refers back cannot.
    body = b"".join(record(i, b"k", TEXT * 30) for i in range(100))
    compressor = lz4.frame.LZ4FrameCompressor(
        block_linked=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB
    )
    linked = compressor.begin() + compressor.compress(body) + compressor.flush()
    assert not linked[4] & 0x20
    batch = one(make_v2(linked, 100, attributes=LZ4))
    assert batch["status"] == "decompression_error"
    assert "linked" in batch["error"]
    body = b"".join(record(i, b"k", TEXT * 30) for i in range(30))  # one 64 KiB block
    single = lz4.frame.LZ4FrameCompressor(block_linked=True)
    linked = single.begin() + single.compress(body) + single.flush()
    assert one(make_v2(linked, 30, attributes=LZ4))["status"] == "ok"


def test_v2_headers_null_key_null_value():
    records = [
        (TS, None, b"no key", [("a", b"1"), ("b", None), ("é", b"")]),
        (TS + 5, b"no value", None, []),
        (TS + 9, None, None, [("only", b"header")]),
        (TS + 1, b"", b"", []),
    ]
    batch = one(v2(records))
    assert batch["status"] == "ok"
    assert decoded(batch["records"]) == as_sample(records)
    assert batch["records"][0]["headers"][1] == ("b", None)


def test_v2_transactional_idempotent_fields():
    raw = v2(sample(5), codec=GZIP, transactional=True, pid=123456789, epoch=7, seq=42)
    batch = one(raw)
    assert batch["transactional"] is True
    assert batch["control"] is False
    assert batch["producer_id"] == 123456789
    assert batch["producer_epoch"] == 7
    assert batch["base_sequence"] == 42
    assert batch["attributes"] & 0x10


@pytest.mark.parametrize(("kind", "name"), [(1, "COMMIT"), (0, "ABORT")])
def test_v2_control_batch(kind, name):
    key = struct.pack(">hh", 0, kind)
    value = struct.pack(">hi", 0, 17)
    raw = make_v2(record(0, key, value), 1, attributes=0x30, base_offset=99, pid=5, epoch=2)
    batch = one(raw)
    assert batch["status"] == "ok", batch["error"]
    assert batch["control"] is True and batch["transactional"] is True
    assert batch["producer_id"] == 5 and batch["producer_epoch"] == 2
    (rec,) = batch["records"]
    assert rec["offset"] == 99
    assert rec["control"] == {"type": name, "version": 0, "coordinator_epoch": 17}


def test_v2_control_record_of_another_type_and_bad_key():
    other = record(0, struct.pack(">hh", 0, 2), b"\x00\x00leader-change")
    batch = one(make_v2(other, 1, attributes=0x20))
    assert batch["records"][0]["control"] == {"type": 2, "version": 0, "coordinator_epoch": None}

    short = record(0, b"\x00", struct.pack(">hi", 0, 1))
    batch = one(make_v2(short, 1, attributes=0x20))
    assert batch["status"] == "corrupt_records"
    assert batch["records"] == []


def test_v2_log_append_time_applies_max_timestamp():
    raw = v2(sample(5))
    raw = patch_v2(raw, attributes=0x08, max_timestamp=TS + 12345)
    batch = one(raw)
    assert batch["timestamp_type"] == "log_append"
    assert batch["crc_ok"] is True
    assert [r["timestamp"] for r in batch["records"]] == [TS + 12345] * 5


def test_v2_delete_horizon_flag():
    batch = one(patch_v2(v2(sample(2)), attributes=0x40))
    assert batch["has_delete_horizon"] is True


def test_v2_bad_crc_keeps_records():
    records = sample(8)
    raw = v2(records)
    bad = patch_v2(raw, crc=header(raw)["crc"] ^ 1)
    batch = one(bad)
    assert batch["crc_ok"] is False
    assert batch["status"] == "ok"
    assert decoded(batch["records"]) == as_sample(records)

    # A flipped byte in a value: the CRC catches it, the records still come out.
    pos = raw.index(b"quick")
    flipped = raw[:pos] + b"Q" + raw[pos + 1 :]
    batch = one(flipped)
    assert batch["crc_ok"] is False
    assert batch["records"][0]["value"].startswith(TEXT[:4] + b"Quick")


def test_truncated_trailing_batch():
    b1, b2, b3 = (v2(sample(3), base_offset=o) for o in (0, 3, 6))
    for cut in (5, 11, 12, 40, len(b3) - 1):
        result = decode_record_set(b1 + b2 + b3[:cut])
        assert [b["base_offset"] for b in result["batches"]] == [0, 3]
        assert all(b["status"] == "ok" for b in result["batches"])
        assert result["truncated"] is True
        assert result["truncated_bytes"] == cut
        assert result["error"] is None
    result = decode_record_set(b1 + b2 + b3)
    assert result["truncated"] is False and len(result["batches"]) == 3


def test_empty_record_set():
    assert decode_record_set(b"") == {
        "size": 0,
        "batches": [],
        "truncated": False,
        "truncated_bytes": 0,
        "error": None,
    }


def test_accepts_bytearray_and_memoryview():
    raw = v2(sample(3))
    assert decode_record_set(bytearray(raw)) == decode_record_set(raw)
    assert decode_record_set(memoryview(raw)) == decode_record_set(raw)


def test_unknown_codec_then_next_batch():
    raw = v2(sample(4))
    unknown = patch_v2(raw, attributes=5)
    result = decode_record_set(unknown + v2(sample(2), base_offset=4))
    first, second = result["batches"]
    assert first["status"] == "unknown_codec"
    assert first["compression"] == "unknown(5)"
    assert first["crc_ok"] is True
    assert first["records"] == [] and first["error"]
    assert second["status"] == "ok" and len(second["records"]) == 2


# --- bounds and bombs -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def gzip_bomb():
    """1 GiB of zeros as a valid gzip stream of about 1 MB.

    With a full flush every MiB the deflate state restarts, so every MiB compresses to the
    same bytes: the stream is one piece repeated, and builds in a fraction of a second.
    """
    zeros = bytes(1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(1024):
        crc = zlib.crc32(zeros, crc)
    gzip_header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return gzip_header + piece * 1024 + c.flush() + struct.pack("<II", crc, GIB & 0xFFFFFFFF)


@pytest.fixture(scope="module")
def zstd_bomb():
    """1 GiB of zeros as one zstd frame that does not declare its content size."""
    compressor = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    zeros = bytes(1 << 20)
    frame = b"".join(compressor.compress(zeros) for _ in range(1024)) + compressor.flush()
    assert zstandard.frame_content_size(frame) == -1
    return frame


def assert_defused(raw, limits=None):
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        result = decode_record_set(raw) if limits is None else decode_record_set(raw, limits)
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (batch,) = result["batches"]
    assert batch["status"] == "decompression_bomb", batch["error"]
    assert batch["records"] == []
    assert elapsed < 0.25
    assert peak < 16 * 1024 * 1024  # the bomb is 1 GiB
    return batch


def test_gzip_bomb(gzip_bomb):
    batch = assert_defused(make_v2(gzip_bomb, 1, attributes=GZIP))
    assert "ratio" in batch["error"]


def test_zstd_bomb_without_content_size(zstd_bomb):
    batch = assert_defused(make_v2(zstd_bomb, 1, attributes=ZSTD))
    assert "ratio" in batch["error"]


def test_gzip_bomb_in_legacy_wrapper(gzip_bomb):
    assert_defused(message(0, gzip_bomb, attributes=GZIP))


def test_bombs_caught_by_size_when_ratio_allows(gzip_bomb, zstd_bomb):
    lenient = Limits(max_output=8 * 1024 * 1024, max_ratio=10**9)
    for raw in (make_v2(gzip_bomb, 1, attributes=GZIP), make_v2(zstd_bomb, 1, attributes=ZSTD)):
        batch = assert_defused(raw, lenient)
        assert "limit" in batch["error"]


def test_declared_sizes_checked_before_decompressing():
    # Raw snappy declaring 4 GiB, and a zstd frame declaring 1 TiB: refused up front.
    lying_snappy = b"\xff\xff\xff\xff\x0f" + b"\x00" * 20
    assert one(make_v2(lying_snappy, 1, attributes=SNAPPY))["status"] == "decompression_bomb"
    zstd_header = struct.pack("<IBB", 0xFD2FB528, 0xC0, 0x58) + struct.pack("<Q", 1 << 40)
    assert one(make_v2(zstd_header + b"\x00" * 8, 1, attributes=ZSTD))["status"] == (
        "decompression_bomb"
    )


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_max_output_per_codec(codec):
    raw = v2(sample(300), codec=codec)
    assert one(raw)["status"] == "ok"
    batch = one(raw, Limits(max_output=10_000))
    assert batch["status"] == "decompression_bomb"
    assert batch["records"] == []


def test_max_records():
    raw = v2(sample(50))
    batch = one(raw, Limits(max_records=49))
    assert batch["status"] == "too_many_records"
    assert batch["records"] == [] and batch["record_count"] == 50
    assert one(raw, Limits(max_records=50))["status"] == "ok"
    assert one(legacy(1, GZIP, n=20), Limits(max_records=10))["status"] == "too_many_records"


def decoded_bytes(result):
    return sum(b["uncompressed_size"] or 0 for b in result["batches"])


def test_batch_after_batch_under_the_floor_shares_one_allowance():
    """3,000 zstd batches, each a record of 1,000,000 zero bytes from about 60 bytes: each
    under the 1 MiB below which a ratio alone is no bomb. Together they would be 3 GB from
    170 KB; the ratio is checked over all of them, so decoding stops near 1000 times the
    input, every later batch a bomb, in bounded memory."""
    one_batch = zeros_batch()
    raw = one_batch * 3000
    tracemalloc.start()
    try:
        result = decode_record_set(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    statuses = [b["status"] for b in result["batches"]]
    ok = statuses.count("ok")
    assert statuses == ["ok"] * ok + ["decompression_bomb"] * (3000 - ok)
    # Past the floor, never more than 1000 times the compressed bytes decoded so far.
    assert ok >= 1 and decoded_bytes(result) <= max(1 << 20, 1000 * len(one_batch) * ok)
    assert decoded_bytes(result) < 64 << 20 and "ratio" in result["batches"][-1]["error"]
    assert peak < 160 << 20


def test_nested_message_sets_do_not_multiply_the_ratio():
    """Magic 1: 40 gzip wrappers, each holding 50 gzip messages of 900,000 zero bytes. Each
    decompression alone passes the checks (under the floor, or under the ratio to its own
    input, itself decompressed); all together would be 1.8 GB from a few KB. Only the
    outermost compressed bytes count as input, for every level and every wrapper."""
    # A compressed message holds a message set: here one message of 900,000 zero bytes.
    inner = message(0, gzip_bytes(message(0, bytes(900_000))), attributes=GZIP)
    wrapper_value = gzip_bytes(b"".join(struct.pack(">q", i) + inner[8:] for i in range(50)))
    raw = b"".join(message(50 * w + 49, wrapper_value, attributes=GZIP) for w in range(40))
    result = decode_record_set(raw)
    assert len(raw) < 400_000
    assert decoded_bytes(result) <= max(1 << 20, 1000 * len(raw)) + (1 << 20)
    assert any(b["status"] == "decompression_bomb" for b in result["batches"])
    records = sum(len(b["records"]) for b in result["batches"])
    assert records < 2000  # of 2,000


def test_the_record_sets_of_one_body_share_one_allowance():
    """A Produce request with 200 partitions, each record set a batch of 1,000,000 zeros:
    decoded as one body they are bounded together, not each on its own."""
    from dissector.options import Options
    from dissector.protocol.codegen import Context

    one_batch = zeros_batch()
    decode = Options(records="full").record_decoder()
    ctx = Context(decode)
    results = [decode(one_batch, ctx) for _ in range(200)]
    total = sum(decoded_bytes(r) for r in results)
    assert total <= max(1 << 20, 1000 * len(one_batch) * 200) and total < 64 << 20
    assert results[-1]["batches"][0]["status"] == "decompression_bomb"
    alone = [decode(one_batch) for _ in range(3)]  # without a context: a set on its own
    assert all(r["batches"][0]["status"] == "ok" for r in alone)


@pytest.fixture
def counted(monkeypatch):
    """The decompressions the codec libraries are asked for, by codec."""
    from dissector.protocol.records import compression

    calls = []
    inner = compression._decompress

    def counting(codec, data, meter):
        calls.append(codec)
        return inner(codec, data, meter)

    monkeypatch.setattr(compression, "_decompress", counting)
    monkeypatch.setattr(compression._RECENT, "recent", compression.Recent(), raising=False)
    return calls


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_a_batch_fetched_again_is_not_decompressed_again(counted, codec):
    """The same batch bytes (a produce, then each fetch of it) decompress once; the
    decodings are the same, and each draws on its own allowance as if it had decompressed."""
    raw = v2(sample(30), codec=codec)
    other = v2(sample(31), codec=codec)
    first, again = Allowance(DEFAULT_LIMITS), Allowance(DEFAULT_LIMITS)
    decoded_once = decode_record_set(raw, DEFAULT_LIMITS, first)
    assert decode_record_set(raw, DEFAULT_LIMITS, again) == decoded_once
    assert decoded_once["batches"][0]["status"] == "ok"
    assert (again.out, again.taken, again.left) == (first.out, first.taken, first.left) != (
        0, 0, DEFAULT_LIMITS.max_output,
    )  # fmt: skip
    decode_record_set(other, DEFAULT_LIMITS, Allowance(DEFAULT_LIMITS))
    assert counted == [codec, codec]  # raw once, other once


def test_an_output_kept_is_held_to_this_bodys_limits(counted):
    """A kept output passes only where decompressing would: the second copy of a batch in
    one body past max_output is the bomb it would be without it, after decompressing to see,
    as a run's ratio stops a batch seen before (test_the_bodies_of_one_run_share_its_ratio)."""
    raw = v2(sample(40), codec=GZIP)
    size = decode_record_set(raw)["batches"][0]["uncompressed_size"]
    limits = Limits(max_output=size + size // 2)
    result = decode_record_set(raw + raw, limits, Allowance(limits))
    assert [b["status"] for b in result["batches"]] == ["ok", "decompression_bomb"]
    assert "limit" in result["batches"][1]["error"]
    assert counted == [GZIP, GZIP]  # the first decoding; then the copy past the limit


def test_what_is_kept_is_bounded(counted):
    """Outputs are kept up to RECENT_BYTES together, the least recently used let go first,
    and none larger than RECENT_LARGEST."""
    from dissector.protocol.records import compression

    kept = compression._RECENT.recent
    values = [TEXT * 400 + random.randbytes(2_000) for _ in range(600)]  # 20 KB, half random
    batches = [v2([(TS, b"k", value, [])], codec=LZ4) for value in values]
    for raw in batches:
        decode_record_set(raw, DEFAULT_LIMITS, Allowance(DEFAULT_LIMITS))
    assert 0 < kept.size <= compression.RECENT_BYTES
    assert len(kept.entries) < 600
    decode_record_set(batches[-1], DEFAULT_LIMITS, Allowance(DEFAULT_LIMITS))
    decode_record_set(batches[0], DEFAULT_LIMITS, Allowance(DEFAULT_LIMITS))
    assert len(counted) == 601  # the last was kept; the first, long let go
    large = v2([(TS, b"k", TEXT * 25_000 + random.randbytes(1 << 20), [])], codec=LZ4)
    for _ in range(2):
        assert decode_record_set(large)["batches"][0]["status"] == "ok"
    assert len(counted) == 603
    assert max(len(out) for out in kept.entries.values()) <= compression.RECENT_LARGEST


# --- measured, not decoded (the summary with --decompress) -------------------------------


def summarised(raw, limits=DEFAULT_LIMITS, allowance=None):
    """What the partitions table's record_summary makes of the decoded set."""
    s = record_summary(decode_record_set(raw, limits, allowance or Allowance(limits)))
    codecs = {codec: list(sizes) for codec, sizes in s["codecs"].items()}
    return s["batches"], s["records"], s["control_records"], s["uncompressed_bytes"], codecs


def measured(raw, limits=DEFAULT_LIMITS, allowance=None):
    """census.measure of `raw` where it lies inside a larger body."""
    body = b"head" + raw + b"tail"
    return measure(body, 4, 4 + len(raw), limits, allowance or Allowance(limits))


BATCHES_ONLY = Limits(records=False)  # what the session decodes with --decompress
CONTROL = make_v2(record(0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 3)), 1, 0x30)


@pytest.mark.parametrize("limits", [DEFAULT_LIMITS, BATCHES_ONLY, Limits(max_output=20_000)])
@pytest.mark.parametrize(
    "case",
    [
        "every codec",
        "unknown codec",
        "negative count",
        "count past the limit",
        "damaged payload",
        "short, unknown magic, no magic",
        "cut last batch",
        "negative length",
        "control batch",
        "empty",
    ],
)
def test_a_record_set_measured_gives_what_its_decoding_summarises(case, limits):
    """Batches, data and control records, the uncompressed size and each codec's sizes, as
    the summary shows them with --decompress: measured without a dict, equal to the
    decoded set's summary, failures included (a batch that fails leaves sizes unknown)."""
    codecs = b"".join(v2(sample(40), codec=c, base_offset=40 * c) for c in range(5))
    body = record(0, b"k", b"v")
    raw = {
        "every codec": codecs,
        "unknown codec": patch_v2(v2(sample(4), codec=GZIP), attributes=6) + codecs,
        "negative count": make_v2(zlib.compress(body), -3, attributes=GZIP) + codecs,
        "count past the limit": make_v2(gzip_bytes(body), 10_000_001, attributes=GZIP),
        "damaged payload": make_v2(b"\x1f\x8b" + bytes(30), 1, attributes=GZIP) + codecs,
        "short, unknown magic, no magic": struct.pack(">qiib", 0, 20, 0, 2)
        + bytes(15)
        + struct.pack(">qiib", 0, 10, 0, 7)
        + bytes(5)
        + struct.pack(">qi", 0, 3)
        + bytes(3)
        + codecs,
        "cut last batch": codecs + v2(sample(5), codec=ZSTD)[:-7],
        "negative length": codecs + struct.pack(">qi", 0, -20) + bytes(40),
        "control batch": v2(sample(3), codec=SNAPPY) + CONTROL,
        "empty": b"",
    }[case]
    assert measured(raw, limits) == summarised(raw, limits)


def test_measured_batches_draw_on_the_bodys_allowance_as_decoded_ones(gzip_bomb, zstd_bomb):
    """Bombs, and 3,000 batches each under the ratio's floor, split over two record sets of
    one body: the same batches pass and fail, so the same sizes are known."""
    one_batch = zeros_batch()
    small = v2(sample(3), codec=LZ4)
    first, second = one_batch * 1500, one_batch * 1500 + small
    shared = [Allowance(DEFAULT_LIMITS), Allowance(DEFAULT_LIMITS)]
    got = [measured(raw, allowance=shared[0]) for raw in (first, second)]
    assert got == [summarised(raw, allowance=shared[1]) for raw in (first, second)]
    # One such batch alone is measured; after what the body's sets spent, it is a bomb.
    assert measured(one_batch)[3] > 1_000_000
    assert measured(one_batch, allowance=shared[0]) == summarised(one_batch, allowance=shared[1])
    assert measured(one_batch, allowance=shared[0])[3] is None
    for bomb, codec in ((gzip_bomb, GZIP), (zstd_bomb, ZSTD)):
        raw = make_v2(bomb, 1, attributes=codec) + v2(sample(2), codec=codec)
        assert measured(raw) == summarised(raw)
        assert measured(raw)[4][CODEC_NAMES[codec]][1] is None


def test_a_record_sets_summary_counts_the_batches_that_failed(gzip_bomb):
    """The partitions table's failed_batches and batch_errors: batches whose status is not
    ok, and their statuses; a CRC that does not match is not a failure (its records are
    read)."""
    good = v2(sample(3), codec=GZIP)
    bad_crc = patch_v2(v2(sample(2)), crc=1)
    unknown = patch_v2(v2(sample(4), codec=GZIP), attributes=6)
    raw = good + make_v2(gzip_bomb, 1, attributes=GZIP) + bad_crc + unknown + good
    summary = record_summary(decode_record_set(raw))
    assert summary["batches"] == 5 and summary["failed_batches"] == 2
    assert summary["batch_errors"] == "decompression_bomb,unknown_codec"
    clean = record_summary(decode_record_set(good + bad_crc))
    assert (clean["failed_batches"], clean["batch_errors"]) == (0, None)


def test_a_record_set_with_magic_0_or_1_messages_is_left_to_the_decoder():
    assert measured(v2(sample(3)) + legacy(1, GZIP, n=3)) is None
    assert measured(legacy(0, NONE, n=2)) is None


V2_SET = CONTROL + b"".join(v2(sample(12), codec=c, base_offset=12 * c) for c in range(5))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    flips=st.lists(st.tuples(st.integers(0, len(V2_SET) - 1), st.integers(0, 255)), max_size=8),
    cut=st.integers(0, len(V2_SET)),
)
def test_a_damaged_record_set_measured_gives_what_its_decoding_summarises(flips, cut):
    raw = bytearray(V2_SET)
    for index, value in flips:
        raw[index] = value
    raw = bytes(raw[:cut])
    got = measured(raw, BATCHES_ONLY)
    if got is None:  # a flipped magic byte made a magic 0 or 1 message
        assert any(b["magic"] in (0, 1) for b in decode_record_set(raw)["batches"])
    else:
        assert got == summarised(raw, BATCHES_ONLY)


def test_the_bodies_of_one_run_share_its_ratio():
    """3,000 bodies, each one zstd batch of a record of 1,000,000 zero bytes from about 120
    bytes: each body alone stays under the 1 MiB floor of its own ratio, so body after body
    would decompress 3 GB from 360 KB. The ratio holds over the decoder's run too: once past
    the floor, every later batch is a bomb, and a decoder of its own starts a new run."""
    from dissector.options import Options
    from dissector.protocol.codegen import Context

    zeros = record(0, b"k", bytes(1_000_000))
    one_batch = zeros_batch()
    decode = Options(records="full").record_decoder()
    results = [decode(one_batch, Context(decode)) for _ in range(3000)]
    batches = [r["batches"][0] for r in results]
    assert [b["status"] for b in batches] == ["ok"] + ["decompression_bomb"] * 2999
    assert batches[1]["error"].endswith("passes the ratio 1000 over the run")
    assert sum(decoded_bytes(r) for r in results) == len(zeros)
    assert (decode.spent.out, decode.spent.taken) == (len(zeros), len(one_batch) - 61)
    fresh = Options(records="full").record_decoder()
    assert fresh(one_batch, Context(fresh))["batches"][0]["status"] == "ok"
    # Ordinary traffic after it keeps the run's ratio low, past the floor: none held back.
    text = [v2(sample(40), codec=ZSTD) for _ in range(50)]
    assert all(decode(t, Context(decode))["batches"][0]["status"] == "ok" for t in text)
    assert decode.spent.out > RATIO_FLOOR


# --- hostile records ------------------------------------------------------------------------


def test_hostile_record_count_is_refused_quickly():
    body = record(0, b"k", b"v")
    t0 = time.perf_counter()
    batch = one(make_v2(body, 9_999_999))
    assert batch["status"] == "corrupt_records"
    assert "cannot fit" in batch["error"]
    assert one(make_v2(body, 2**31 - 1))["status"] == "too_many_records"
    assert time.perf_counter() - t0 < 0.05
    assert one(make_v2(body, -3))["status"] == "corrupt_records"


def test_record_count_mismatches_keep_what_parsed():
    body = b"".join(record(i, b"k%d" % i, b"v") for i in range(5))
    fewer = one(make_v2(body, 3))
    assert fewer["status"] == "corrupt_records" and len(fewer["records"]) == 3
    more = one(make_v2(body + b"\x00" * 7, 6))
    assert more["status"] == "corrupt_records" and len(more["records"]) == 5


@pytest.mark.parametrize(
    "body",
    [
        b"\xff" * 100,  # a varint that never ends
        zigzag(-5) + b"\x00" * 20,  # negative record length
        zigzag(200) + b"\x00" * 20,  # record longer than the batch
        zigzag(8) + b"\x00\x00\x00" + zigzag(-7) + b"\x00" * 10,  # key length -7
        zigzag(8) + b"\x00\x00\x00" + zigzag(50) + b"\x00" * 10,  # key overruns the record
        zigzag(5) + b"\x00\x00\x00" + zigzag(-1) + zigzag(-1) + zigzag(99) + b"\x00" * 10,
        zigzag(6) + b"\x00\x00\x00" + b"\x02x" + b"\x02\x00" + b"\x00" * 10,  # size mismatch
    ],
)
def test_corrupt_records_then_next_batch_decodes(body):
    result = decode_record_set(make_v2(body, 1) + v2(sample(2), base_offset=10))
    bad, good = result["batches"]
    assert bad["status"] == "corrupt_records", bad
    assert bad["error"]
    assert bad["crc_ok"] is True  # the CRC is over the bytes, whatever they mean
    assert good["status"] == "ok" and [r["offset"] for r in good["records"]] == [10, 11]


def test_corrupt_compressed_payload():
    for codec in (GZIP, SNAPPY, LZ4, ZSTD):
        batch = one(make_v2(b"\x00garbage that is not compressed" * 3, 2, attributes=codec))
        assert batch["status"] == "decompression_error", (codec, batch)
        assert batch["error"]
    truncated_gzip = gzip_bytes(b"".join(record(i, b"k", TEXT) for i in range(20)))[:-30]
    assert one(make_v2(truncated_gzip, 20, attributes=GZIP))["status"] == "decompression_error"


def test_negative_length_stops_the_set():
    raw = v2(sample(2)) + struct.pack(">qi", 0, -20) + b"\x00" * 40
    result = decode_record_set(raw)
    assert len(result["batches"]) == 1
    assert "negative length" in result["error"]
    assert result["truncated"] is False


def test_unknown_magic_and_short_batches_are_skipped_by_length():
    odd = struct.pack(">qiib", 0, 10, 0, 7) + b"\x00" * 5
    short_v2 = struct.pack(">qiib", 0, 20, 0, 2) + b"\x00" * 15
    no_magic = struct.pack(">qi", 0, 3) + b"\x00" * 3
    result = decode_record_set(odd + short_v2 + no_magic + v2(sample(1), base_offset=4))
    statuses = [b["status"] for b in result["batches"]]
    assert statuses == ["corrupt_records"] * 3 + ["ok"]
    assert result["batches"][0]["magic"] == 7
    assert "magic 7" in result["batches"][0]["error"]
    assert result["batches"][3]["records"][0]["offset"] == 4


@pytest.mark.parametrize("seed", range(20))
def test_garbage_never_raises(seed):
    rng = random.Random(seed)
    raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4000)))
    result = decode_record_set(raw)
    assert result["size"] == len(raw)
    assert all(b["status"] in STATUSES for b in result["batches"])


def test_garbage_shaped_like_batches():
    rng = random.Random(1)
    for magic in (0, 1, 2):
        for _ in range(200):
            length = rng.randrange(0, 120)
            body = bytes(rng.randrange(256) for _ in range(length))
            if length > 4:
                body = body[:4] + bytes([magic]) + body[5:]
            result = decode_record_set(struct.pack(">qi", 0, length) + body)
            assert all(b["status"] in STATUSES for b in result["batches"])


# --- magic 0 and 1 --------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_uncompressed(magic):
    raw = legacy(magic, NONE, n=3)
    result = decode_record_set(raw)
    assert result["truncated"] is False
    batches = result["batches"]
    assert [b["offset"] for b in batches] == [0, 1, 2]
    for i, batch in enumerate(batches):
        assert batch["magic"] == magic
        assert batch["status"] == "ok" and batch["crc_ok"] is True
        assert batch["compression"] == "none"
        assert batch["key"] == b"k%d" % i and batch["value"] == TEXT * 2 + b"%d" % i
        assert batch["timestamp"] == (TS + i if magic else None)
        assert batch["timestamp_type"] == ("create" if magic else None)
        (rec,) = batch["records"]
        assert rec == {
            "offset": i,
            "timestamp": TS + i if magic else None,
            "attributes": 0,
            "key": b"k%d" % i,
            "value": TEXT * 2 + b"%d" % i,
            "headers": [],
            "crc_ok": True,
        }


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize(("codec", "name"), [(GZIP, "gzip"), (SNAPPY, "snappy"), (LZ4, "lz4")])
def test_legacy_compressed(magic, codec, name):
    raw = legacy(magic, codec, n=20, offset=500)
    batch = one(raw)
    assert batch["status"] == "ok", batch["error"]
    assert batch["magic"] == magic and batch["compression"] == name
    assert batch["crc_ok"] is True
    assert batch["record_count"] == 20
    assert batch["compressed_size"] == len(batch["value"])
    assert batch["uncompressed_size"] > batch["compressed_size"]
    keys = [r["key"] for r in batch["records"]]
    assert keys == [b"k%d" % i for i in range(20)]
    offsets = [r["offset"] for r in batch["records"]]
    if magic == 1:
        # Relative inner offsets; the wrapper holds the offset of the last one.
        assert offsets == list(range(481, 501))
        assert [r["timestamp"] for r in batch["records"]] == [TS + i for i in range(20)]
    else:
        assert offsets == list(range(20))  # absolute, whatever the wrapper says
        assert all(r["timestamp"] is None for r in batch["records"])
    if codec == SNAPPY:
        assert batch["value"].startswith(b"\x82SNAPPY\x00")  # xerial framing


def test_legacy_lz4_with_the_broken_header_checksum_of_kafka_08():
    batch = one(legacy(0, LZ4, n=5))
    frame = batch["value"]
    # The checksum covers magic and descriptor instead of the descriptor alone.
    assert frame[6] == xxhash.xxh32(frame[:6]).digest()[2]
    assert frame[6] != xxhash.xxh32(frame[4:6]).digest()[2]
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(frame)
    assert batch["status"] == "ok"
    assert [r["key"] for r in batch["records"]] == [b"k%d" % i for i in range(5)]


def test_legacy_snappy_raw():
    inner = legacy(1, NONE, n=4)
    batch = one(message(3, snappy.compress(inner), attributes=SNAPPY))
    assert batch["status"] == "ok"
    assert [r["offset"] for r in batch["records"]] == [0, 1, 2, 3]


def test_legacy_log_append_wrapper_timestamps():
    inner = legacy(1, NONE, n=3)
    raw = message(10, gzip_bytes(inner), attributes=GZIP | 0x08, timestamp=TS + 999)
    batch = one(raw)
    assert batch["timestamp_type"] == "log_append"
    assert [r["timestamp"] for r in batch["records"]] == [TS + 999] * 3
    assert [r["offset"] for r in batch["records"]] == [8, 9, 10]


def test_legacy_bad_crc_and_inner_crc():
    inner = message(0, b"a") + message(1, b"b")
    inner = inner[:-1] + b"B"  # the last inner message no longer matches its CRC
    raw = message(1, gzip_bytes(inner), attributes=GZIP)
    raw = raw[:12] + bytes([raw[12] ^ 0xFF]) + raw[13:]  # nor does the wrapper
    batch = one(raw)
    assert batch["crc_ok"] is False and batch["status"] == "ok"
    assert [r["crc_ok"] for r in batch["records"]] == [True, False]
    assert [r["value"] for r in batch["records"]] == [b"a", b"B"]


def test_legacy_nesting_depth():
    plain = message(0, b"x") + message(1, b"y")
    level2 = message(1, gzip_bytes(plain), attributes=GZIP)
    ok = one(message(5, gzip_bytes(level2), attributes=GZIP))
    assert ok["status"] == "ok"
    assert [(r["offset"], r["value"]) for r in ok["records"]] == [(4, b"x"), (5, b"y")]

    level3 = message(1, gzip_bytes(level2), attributes=GZIP)
    deep = one(message(5, gzip_bytes(level3), attributes=GZIP))
    assert deep["status"] == "corrupt_records"
    assert "nested" in deep["error"]


def test_legacy_corrupt_inner_sets():
    partial = (message(0, b"a") + message(1, b"b"))[:-3]
    batch = one(message(0, gzip_bytes(partial), attributes=GZIP))
    assert batch["status"] == "corrupt_records"
    assert [r["value"] for r in batch["records"]] == [b"a"]

    mixed = message(0, b"a", magic=0)
    assert one(message(0, gzip_bytes(mixed), attributes=GZIP))["status"] == "corrupt_records"

    assert one(message(0, None, attributes=GZIP))["status"] == "corrupt_records"
    bad_key = message(0, b"v")[:-9] + struct.pack(">i", -9) + b"\x00\x00\x00\x01v"
    assert one(bad_key)["status"] == "corrupt_records"


def test_mixed_formats_in_one_set():
    raw = legacy(0, NONE, n=1) + legacy(1, GZIP, n=2, offset=2) + v2(sample(2), base_offset=3)
    result = decode_record_set(raw)
    assert [b["magic"] for b in result["batches"]] == [0, 1, 2]
    offsets = [r["offset"] for b in result["batches"] for r in b["records"]]
    assert offsets == [0, 1, 2, 3, 4]


def test_memory_records_builder_set():
    builder = MemoryRecordsBuilder(magic=2, compression_type=ZSTD, batch_size=1 << 20, offset=50)
    for i in range(100):
        builder.append(TS + i, b"k%d" % i, TEXT * 2, [("i", b"%d" % i)])
    builder.close()
    batch = one(bytes(builder.buffer()))
    assert batch["status"] == "ok" and batch["compression"] == "zstd"
    assert [r["offset"] for r in batch["records"]] == list(range(50, 150))


# --- properties -----------------------------------------------------------------------------

_headers = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))), max_size=3
)
_records = st.lists(
    st.tuples(
        st.integers(0, 2**40),
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=200)),
        _headers,
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=100, deadline=None)
@given(records=_records, codec=st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]))
def test_roundtrip_property(records, codec):
    batch = one(v2(records, codec=codec, base_offset=1))
    assert batch["status"] == "ok" and batch["crc_ok"]
    expected = [(ts, k, v, [tuple(h) for h in hs]) for ts, k, v, hs in records]
    assert decoded(batch["records"]) == expected
    assert [r["offset"] for r in batch["records"]] == list(range(1, len(records) + 1))


VALID_SET = (
    v2(sample(6), base_offset=0)
    + v2(sample(30), codec=GZIP, base_offset=6)
    + v2(sample(30), codec=LZ4, base_offset=36)
    + legacy(1, SNAPPY, n=5, offset=70)
    + legacy(0, NONE, n=2)
    + v2(sample(30), codec=ZSTD, base_offset=80)
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    flips=st.lists(st.tuples(st.integers(0, len(VALID_SET) - 1), st.integers(0, 255)), max_size=8),
    cut=st.integers(0, len(VALID_SET)),
    insert=st.tuples(st.integers(0, len(VALID_SET)), st.binary(max_size=16)),
)
def test_mutations_never_raise(flips, cut, insert):
    raw = bytearray(VALID_SET)
    for index, value in flips:
        raw[index] = value
    at, extra = insert
    raw[at:at] = extra
    del raw[cut:]
    result = decode_record_set(bytes(raw))
    assert result["size"] == len(raw)
    assert 0 <= result["truncated_bytes"] <= len(raw)
    for batch in result["batches"]:
        assert batch["status"] in STATUSES
        assert (batch["status"] == "ok") == (batch["error"] is None)
        assert isinstance(batch["records"], list)
