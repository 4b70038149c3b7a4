"""Readers of Kafka's primitive types."""

import struct

import kafka_encoder as ke
import pytest

from dissector.errors import DecodeError
from dissector.protocol import primitives as p

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


# -- varints -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (-2, "03"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (-65, "8101"),
        (INT32_MAX, "feffffff0f"),
        (INT32_MIN, "ffffffff0f"),
    ],
)
def test_varint_zigzag(value, wire):
    raw = bytes.fromhex(wire)
    assert ke.varint(value) == raw
    assert p.varint(raw, 0) == (value, len(raw))
    assert p.varlong(raw, 0) == (value, len(raw))


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (INT64_MAX, "feffffffffffffffff01"),
        (INT64_MIN, "ffffffffffffffffff01"),
        (INT32_MAX + 1, "8080808010"),
        (INT32_MIN - 1, "8180808010"),
    ],
)
def test_varlong_zigzag(value, wire):
    raw = bytes.fromhex(wire)
    assert ke.varlong(value) == raw
    assert p.varlong(raw, 0) == (value, len(raw))


def test_varint_round_trip_across_the_range():
    values = [0, -1, 1, INT32_MIN, INT32_MAX]
    values += [sign * (2**k + d) for k in range(31) for d in (-1, 0) for sign in (1, -1)]
    for v in values:
        if INT32_MIN <= v <= INT32_MAX:
            raw = ke.varint(v)
            assert p.varint(b"\xaa" + raw + b"\xbb", 1) == (v, 1 + len(raw))
    for v in [INT64_MIN, INT64_MAX] + [sign * 2**k for k in range(63) for sign in (1, -1)]:
        raw = ke.varlong(v)
        assert p.varlong(raw, 0) == (v, len(raw))


@pytest.mark.parametrize(
    ("wire", "value"),
    [
        ("00", 0),
        ("01", 1),
        ("7f", 127),
        ("8001", 128),
        ("ff7f", 2**14 - 1),
        ("808001", 2**14),
        ("ffffffff0f", 2**32 - 1),
        ("8080808000", 0),  # not minimal, still 5 bytes
    ],
)
def test_unsigned_varint(wire, value):
    raw = bytes.fromhex(wire)
    assert p.uvarint(raw, 0) == (value, len(raw))
    assert p.uvarint(raw + b"\x05", 0) == (value, len(raw))


def test_unsigned_varint_is_at_most_five_bytes():
    with pytest.raises(DecodeError):
        p.uvarint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(DecodeError):
        p.uvarint(b"\x80" * 6 + b"\x00", 0)
    with pytest.raises(DecodeError):
        p.varint(b"\x80" * 5, 0)


def test_unsigned_varlong_is_at_most_ten_bytes():
    assert p.uvarlong(bytes.fromhex("ffffffffffffffffff01"), 0) == (2**64 - 1, 10)
    with pytest.raises(DecodeError):
        p.uvarlong(b"\x80" * 10 + b"\x00", 0)


@pytest.mark.parametrize("reader", [p.uvarint, p.uvarlong, p.varint, p.varlong])
def test_varint_cut_short(reader):
    for raw, pos in ((b"", 0), (b"\x80", 0), (b"\xff\xff", 0), (b"\x00\x80", 1)):
        with pytest.raises(DecodeError):
            reader(raw, pos)


# -- strings and bytes ---------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "topic-1", "é", "日本語", "🦀 crab", "a\x00b"])
def test_string(text):
    data = text.encode("utf-8")
    raw = struct.pack(">h", len(data)) + data
    assert p.string(raw + b"!", 0) == (text, len(raw))
    compact = ke.uvarint(len(data) + 1) + data
    assert p.compact_string(b"?" + compact, 1) == (text, 1 + len(compact))


def test_null_strings():
    assert p.string(b"\xff\xff", 0) == (None, 2)
    assert p.compact_string(b"\x00", 0) == (None, 1)
    assert p.compact_string(b"\x01", 0) == ("", 1)


def test_invalid_utf8_is_replaced():
    assert p.string(b"\x00\x02\xc3\x28", 0) == ("\ufffd(", 4)


def test_long_compact_string_has_a_multi_byte_length():
    text = "x" * 300
    raw = ke.uvarint(301) + text.encode()
    assert raw[:2] == b"\xad\x02"
    assert p.compact_string(raw, 0) == (text, len(raw))


def test_strings_longer_than_the_buffer():
    with pytest.raises(DecodeError):
        p.string(b"\x00\x05abcd", 0)
    with pytest.raises(DecodeError):
        p.string(b"\x7f\xff", 0)
    with pytest.raises(DecodeError):
        p.compact_string(b"\x06abcd", 0)
    with pytest.raises(DecodeError):
        p.compact_string(b"\xff\xff\xff\xff\x0f", 0)


def test_bytes():
    assert p.bytes_(b"\x00\x00\x00\x03abcd", 0) == (b"abc", 7)
    assert p.bytes_(b"\x00\x00\x00\x00", 0) == (b"", 4)
    assert p.bytes_(b"\xff\xff\xff\xff", 0) == (None, 4)
    assert p.compact_bytes(b"\x04\x00\x01\xff", 0) == (b"\x00\x01\xff", 4)
    assert p.compact_bytes(b"\x01", 0) == (b"", 1)
    assert p.compact_bytes(b"\x00", 0) == (None, 1)


def test_bytes_from_a_memoryview_are_bytes():
    view = memoryview(b"\x00\x00\x00\x02hi\x03yo")
    value, pos = p.bytes_(view, 0)
    assert (type(value), value, pos) == (bytes, b"hi", 6)
    value, pos = p.compact_bytes(view, 6)
    assert (type(value), value, pos) == (bytes, b"yo", 9)
    assert p.string(memoryview(b"\x00\x02hi"), 0) == ("hi", 4)


def test_bytes_longer_than_the_buffer():
    with pytest.raises(DecodeError):
        p.bytes_(b"\x7f\xff\xff\xff" + b"\x00" * 16, 0)
    with pytest.raises(DecodeError):
        p.bytes_(b"\x00\x00\x00\x05abcd", 0)
    with pytest.raises(DecodeError):
        p.compact_bytes(b"\x80\x80\x80\x80\x01", 0)


# -- arrays, uuids, tagged fields ----------------------------------------------------------


def test_array_count():
    assert p.array_count(b"\x00\x00\x00\x02ab", 0, False) == (2, 4)
    assert p.array_count(b"\x00\x00\x00\x00", 0, False) == (0, 4)
    assert p.array_count(b"\xff\xff\xff\xff", 0, False) == (None, 4)
    assert p.array_count(b"\x03ab", 0, True) == (2, 1)
    assert p.array_count(b"\x01", 0, True) == (0, 1)
    assert p.array_count(b"\x00", 0, True) == (None, 1)
    assert p.array_count(b"xx\x02a", 2, True) == (1, 3)


def test_array_count_cannot_exceed_the_bytes_left():
    with pytest.raises(DecodeError):
        p.array_count(b"\x7f\xff\xff\xff" + b"\x00" * 100, 0, False)
    with pytest.raises(DecodeError):
        p.array_count(b"\x00\x00\x00\x03ab", 0, False)
    with pytest.raises(DecodeError):
        p.array_count(b"\xff\xff\xff\xff\x0f", 0, True)
    with pytest.raises(DecodeError):
        p.array_count(b"\x04ab", 0, True)


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (bytes(16), "AAAAAAAAAAAAAAAAAAAAAA"),
        (b"\xff" * 16, "_" * 21 + "w"),
        (b"\xfb\xef\xbe" * 5 + b"\x00", "-" * 20 + "AA"),
    ],
)
def test_uuid_text(raw, text):
    assert p.uuid_text(raw) == text
    assert len(text) == 22 and "=" not in text
    assert p.uuid_bytes(text) == raw


def test_uuid_text_round_trip():
    for i in range(64):
        raw = bytes((i * 37 + j * 11) & 0xFF for j in range(16))
        text = p.uuid_text(raw)
        assert p.uuid_bytes(text) == raw
        assert text == ke.uuid_to_text(raw)


def test_tagged_fields():
    assert p.tagged_fields(b"\x00", 0) == ({}, 1)
    raw = b"\x02" + b"\x00\x02ab" + b"\x81\x01\x00"
    assert p.tagged_fields(raw + b"rest", 0) == ({0: b"ab", 129: b""}, len(raw))
    assert p.tagged_fields(b"x" + ke.tag_section({5: b"\x01" * 200}), 1)[0] == {5: b"\x01" * 200}


def test_hostile_tagged_fields():
    with pytest.raises(DecodeError):
        p.tagged_fields(b"\xff\xff\xff\xff\x0f", 0)
    with pytest.raises(DecodeError):
        p.tagged_fields(b"\x01\x00\x05abc", 0)
    with pytest.raises(DecodeError):
        p.tagged_fields(b"\x02\x00\x00", 0)
    with pytest.raises(DecodeError):
        p.tagged_fields(b"\x01" + b"\x80" * 6, 0)


def test_fixed_width_readers():
    raw = struct.pack(">bhiq", -1, -2, INT32_MIN, INT64_MAX)
    assert p.i8(raw, 0) == (-1,)
    assert p.i16(raw, 1) == (-2,)
    assert p.i32(raw, 3) == (INT32_MIN,)
    assert p.i64(raw, 7) == (INT64_MAX,)
