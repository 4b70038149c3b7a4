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


# How the length of a string or bytes, or the count of an array, is encoded (the decode and
# scan programs carry it in the low two bits of an opcode).
I16 = 1  # int16, -1 null (strings)
I32 = 2  # int32, -1 null (bytes, records, arrays)
VAR = 3  # unsigned varint of the number + 1, 0 null (compact forms)


def read_length(buf, pos, end, width):
    """(n, position after it): the length or count at buf[pos] (bytes; the frame ends at
    `end`), encoded as `width` says; -1 for null. Every string, bytes, records and array is
    read with it: compiled (primitives.pxd), a C call reading through a pointer, one- and
    two-byte varints inline. A length cut short raises IndexError (DecodeError for a varint)."""
    p = buf
    if width == VAR:
        n = p[pos] if pos < end else 0x80
        if n < 128:  # one byte, nearly all
            pos += 1
        elif pos + 1 < end and p[pos + 1] < 128:  # two: up to 16 KB
            n = (n & 0x7F) | p[pos + 1] << 7
            pos += 2
        else:
            n, pos = uvarint(buf, pos)
        return n - 1, pos
    if width == I16:
        if pos + 2 > end:
            raise IndexError
        n = p[pos] << 8 | p[pos + 1]
        return (-1 if n >= 0x8000 else n), pos + 2
    if pos + 4 > end:
        raise IndexError
    n = p[pos]  # widened before the shift: 24 bits up overflows a C int
    n = n << 24 | p[pos + 1] << 16 | p[pos + 2] << 8 | p[pos + 3]
    return (-1 if n >= 0x80000000 else n), pos + 4


def past_end(what, n, pos):
    """The error of a string or bytes of n bytes at pos that the frame does not hold."""
    return DecodeError(f"{what} of {n} bytes runs past the end of the frame", pos)


def too_many(n, end, pos):
    """The error of an array of n elements at pos that the frame (ending at `end`) cannot
    hold: each element takes a byte at least."""
    return DecodeError(f"array of {n} elements cannot fit in {end - pos} bytes", pos)


def _sized(buf, pos, width, what):
    """(bytes or None, position after them): a length encoded as `width`, then its bytes."""
    if buf.__class__ is not bytes:
        buf = bytes(buf)
    n, pos = read_length(buf, pos, len(buf), width)
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(buf):
        raise past_end(what, n, pos)
    return buf[pos:end], end


def string(buf, pos):
    """int16 length (-1 = null) then UTF-8 (bytes that are not UTF-8 become U+FFFD)."""
    raw, pos = _sized(buf, pos, I16, "string")
    return (None if raw is None else raw.decode("utf-8", "replace")), pos


def compact_string(buf, pos):
    """unsigned varint length+1 (0 = null) then UTF-8."""
    raw, pos = _sized(buf, pos, VAR, "string")
    return (None if raw is None else raw.decode("utf-8", "replace")), pos


def bytes_(buf, pos):
    """int32 length (-1 = null) then raw bytes."""
    return _sized(buf, pos, I32, "bytes")


def compact_bytes(buf, pos):
    return _sized(buf, pos, VAR, "bytes")


def array_count(buf, pos, compact):
    """Element count of an array: None for a null array. Bounded by the bytes left."""
    if buf.__class__ is not bytes:
        buf = bytes(buf)
    n, pos = read_length(buf, pos, len(buf), VAR if compact else I32)
    if n < 0:
        return None, pos
    if n > len(buf) - pos:
        raise too_many(n, len(buf), pos)
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
        end = pos + size
        if end > len(buf):
            raise past_end("tagged field", size, pos)
        tags[tag] = bytes(buf[pos:end])
        pos = end
    return tags, pos
