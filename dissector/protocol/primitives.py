"""Readers for Kafka's primitive types.

Every reader takes (buf, pos) and returns (value, new_pos). They check lengths against the
buffer, so a hostile length can never make them allocate more than the frame holds.
"""

import base64
import struct

from ..errors import DecodeError

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")

i8 = INT8.unpack_from
i16 = INT16.unpack_from
i32 = INT32.unpack_from
i64 = INT64.unpack_from


def _unsigned(buf, pos, limit, what):
    """Unsigned LEB128 of at most `limit` bytes: a varint that never ends is an error."""
    value = shift = 0
    end = len(buf)
    for _ in range(limit):
        if pos >= end:
            raise DecodeError(f"{what} runs past the end of the frame", pos)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise DecodeError(f"{what} longer than {limit} bytes", pos)


def uvarint(buf, pos):
    """Unsigned varint of at most 5 bytes (Kafka's 32-bit unsigned varint)."""
    if pos < len(buf) and buf[pos] < 0x80:  # one byte: nearly every length on the wire
        return buf[pos], pos + 1
    return _unsigned(buf, pos, 5, "varint")


def uvarlong(buf, pos):
    """Unsigned varint of at most 10 bytes."""
    return _unsigned(buf, pos, 10, "varlong")


def varint(buf, pos):
    """Zig-zag signed varint."""
    v, pos = uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def varlong(buf, pos):
    v, pos = uvarlong(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def _take(buf, pos, n, what):
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"{what} of {n} bytes runs past the end of the frame", pos)
    return end


def utf8(raw):
    """Text of a string's bytes; bytes that are not UTF-8 become U+FFFD."""
    return bytes(raw).decode("utf-8", "replace")


def string(buf, pos):
    """int16 length (-1 = null) then UTF-8."""
    (n,), pos = i16(buf, pos), pos + 2
    if n < 0:
        return None, pos
    end = _take(buf, pos, n, "string")
    return utf8(buf[pos:end]), end


def compact_string(buf, pos):
    """unsigned varint length+1 (0 = null) then UTF-8."""
    n, pos = uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1, "string")
    return utf8(buf[pos:end]), end


def bytes_(buf, pos):
    """int32 length (-1 = null) then raw bytes."""
    (n,), pos = i32(buf, pos), pos + 4
    if n < 0:
        return None, pos
    end = _take(buf, pos, n, "bytes")
    return bytes(buf[pos:end]), end


def compact_bytes(buf, pos):
    n, pos = uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1, "bytes")
    return bytes(buf[pos:end]), end


def skip_string(buf, pos):
    """Past an int16-length string (or -1, null) without decoding it."""
    (n,), pos = i16(buf, pos), pos + 2
    return pos if n < 0 else _take(buf, pos, n, "string")


def skip_bytes(buf, pos):
    (n,), pos = i32(buf, pos), pos + 4
    return pos if n < 0 else _take(buf, pos, n, "bytes")


def skip_compact(buf, pos):
    """Past a compact string or compact bytes without copying them."""
    n, pos = uvarint(buf, pos)
    return pos if n == 0 else _take(buf, pos, n - 1, "string")


def span_bytes(buf, pos):
    """(start, end) of int32-length bytes without copying them; start None when null."""
    (n,), pos = i32(buf, pos), pos + 4
    if n < 0:
        return None, pos
    return pos, _take(buf, pos, n, "bytes")


def span_compact(buf, pos):
    n, pos = uvarint(buf, pos)
    if n == 0:
        return None, pos
    return pos, _take(buf, pos, n - 1, "bytes")


def too_many(n, buf, pos):
    raise DecodeError(f"array of {n} elements cannot fit in {len(buf) - pos} bytes", pos)


def array_count(buf, pos, compact):
    """Element count of an array: None for a null array. Bounded by the bytes left."""
    if compact:
        n, pos = uvarint(buf, pos)
        n -= 1
    else:
        (n,), pos = i32(buf, pos), pos + 4
    if n < 0:
        return None, pos
    if n > len(buf) - pos:
        raise DecodeError(f"array of {n} elements cannot fit in {len(buf) - pos} bytes", pos)
    return n, pos


_UUIDS = {}  # 16 bytes -> their text: every Fetch names its topics by id, few distinct
_UUIDS_MAX = 1 << 16


def uuid_text(raw):
    """Kafka prints topic and member ids as URL-safe base64 without padding (raw: bytes)."""
    text = _UUIDS.get(raw)
    if text is None:
        if len(_UUIDS) >= _UUIDS_MAX:
            _UUIDS.clear()
        text = _UUIDS[raw] = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
    return text


def uuid_bytes(text):
    return base64.urlsafe_b64decode(text + "==")


def tagged_fields(buf, pos):
    """The raw tagged-field section: {tag: bytes}."""
    count, pos = uvarint(buf, pos)
    if count > len(buf) - pos:
        raise DecodeError(f"{count} tagged fields cannot fit in {len(buf) - pos} bytes", pos)
    tags = {}
    for _ in range(count):
        tag, pos = uvarint(buf, pos)
        size, pos = uvarint(buf, pos)
        end = _take(buf, pos, size, "tagged field")
        tags[tag] = bytes(buf[pos:end])
        pos = end
    return tags, pos
