"""Kafka 0.6/0.7 messages and message sets.

A message is LENGTH int32, MAGIC int8, for magic 1 an attributes byte whose low two bits name
the compression codec, then CRC int32 (CRC32 of the payload alone) and the payload. A set is
messages back to back. A compressed message's payload is a whole message set, compressed.

Offsets in 0.7 are byte positions in the partition's log, so a message's offset is where it
starts in its set plus the offset the set was fetched from.
"""

import struct
import zlib

from ...errors import DecodeError
from ..primitives import i32

U32 = struct.Struct(">I")
CODECS = {0: "none", 1: "gzip", 2: "snappy"}

# 0.7 producers compress a set once; deeper nesting only comes from crafted bytes.
MAX_DEPTH = 3
# Decompressed bytes allowed per decoded frame: a few bytes of gzip can inflate to gigabytes.
MAX_DECOMPRESSED = 64 << 20

# snappy-java's stream format (what 0.7's Java client writes): this magic, int32 version,
# int32 compatible version, then blocks of int32 length + raw snappy.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = 16
# The official snappy framing format, which other clients may use.
FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"


class _Inflate(Exception):
    """A compressed payload that cannot be expanded; reported on its message, not raised."""


class Budget:
    """Decompressed bytes still allowed for the frame being decoded."""

    __slots__ = ("left",)

    def __init__(self, left=MAX_DECOMPRESSED):
        self.left = left

    def take(self, n):
        if n > self.left:
            raise _Inflate(f"decompressed size {n} exceeds the {self.left} bytes left")
        self.left -= n


def decode_message_set(
    buf, pos, end, base_offset=None, partial_ok=False, budget=None, depth=0, inner=False
):
    """(messages in buf[pos:end], size of an incomplete last message or 0).

    Each message's "offset" is base_offset, the set's own offset in the log (a fetch
    response's), plus its position in the set; None without one: a produced message has no
    offset until the broker writes it, and 0.7 tells no client where that was. partial_ok
    accepts a cut-off last message: a broker sends MAX_SIZE bytes of its log, which may end
    inside a message. inner: the messages inside a compressed one, which all share
    base_offset, the offset of the message holding them.
    """
    budget = Budget() if budget is None else budget
    messages = []
    start = pos
    while pos < end:
        if end - pos < 4:
            if partial_ok:
                return messages, end - pos
            raise DecodeError("message length runs past the end of the message set", pos)
        size = i32(buf, pos)[0]
        if size > end - pos - 4:
            if partial_ok:
                return messages, end - pos
            raise DecodeError(f"message of {size} bytes runs past the end of the message set", pos)
        if size < 5:
            raise DecodeError(f"message length {size} is shorter than a message header", pos)
        unplaced = inner or base_offset is None
        offset = base_offset if unplaced else base_offset + pos - start
        messages.append(_message(buf, pos + 4, pos + 4 + size, offset, budget, depth))
        pos += 4 + size
    return messages, 0


def _message(buf, pos, end, offset, budget, depth):
    magic = buf[pos]
    if magic == 0:
        attributes = None
        crc_at = pos + 1
    elif magic == 1:
        if end - pos < 6:
            raise DecodeError("magic 1 message is shorter than its header", pos)
        attributes = buf[pos + 1]
        crc_at = pos + 2
    else:
        raise DecodeError(f"unknown message magic {magic}", pos)
    crc = U32.unpack_from(buf, crc_at)[0]
    value = bytes(buf[crc_at + 4 : end])
    codec = 0 if attributes is None else attributes & 0x03
    msg = {
        "offset": offset,
        "magic": magic,
        "attributes": attributes,
        "compression": CODECS.get(codec) or f"codec-{codec}",
        "crc": crc,
        "crc_ok": zlib.crc32(value) == crc,
        "value": value,
    }
    if codec:
        msg["messages"] = []
        try:
            if depth >= MAX_DEPTH:
                raise _Inflate(f"compressed sets nested more than {MAX_DEPTH} deep")
            inner = _decompress(codec, value, budget)
            # Only the outer message has a fetchable offset: the inner ones share it.
            msg["messages"], _ = decode_message_set(
                inner, 0, len(inner), offset, budget=budget, depth=depth + 1, inner=True
            )
        except _Inflate as e:
            msg["error"] = str(e)
        except DecodeError as e:
            msg["error"] = f"compressed message set: {e}"
    return msg


def _decompress(codec, data, budget):
    if codec == 1:
        return _gunzip(data, budget)
    if codec == 2:
        return _unsnappy(data, budget)
    raise _Inflate(f"unsupported compression codec {codec}")


def _gunzip(data, budget):
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data, budget.left + 1)
    except zlib.error as e:
        raise _Inflate(f"gzip: {e}") from None
    budget.take(len(out))
    if not d.eof:
        raise _Inflate("gzip stream ends early")
    return out


def _unsnappy(data, budget):
    import cramjam  # loaded on first use, as records/compression.py says

    try:
        if data.startswith(XERIAL_MAGIC):
            return _unsnappy_xerial(data, budget)
        if data.startswith(FRAMED_MAGIC):
            # Snappy expands at most ~21x (3-byte copy op, 64 bytes out): checking after is safe.
            out = bytes(cramjam.snappy.decompress(data))
            budget.take(len(out))
            return out
        return _unsnappy_raw(data, budget)
    except cramjam.DecompressionError as e:
        raise _Inflate(f"snappy: {e}") from None


def _unsnappy_raw(block, budget):
    import cramjam

    # The declared length is checked before decompressing, which allocates it in one go.
    budget.take(cramjam.snappy.decompress_raw_len(block))
    return bytes(cramjam.snappy.decompress_raw(block))


def _unsnappy_xerial(data, budget):
    if len(data) < XERIAL_HEADER:
        raise _Inflate("snappy stream header is cut short")
    out = []
    pos = XERIAL_HEADER
    while pos < len(data):
        if len(data) - pos < 4:
            raise _Inflate("snappy block length is cut short")
        size = i32(data, pos)[0]
        if not 0 <= size <= len(data) - pos - 4:
            raise _Inflate(f"snappy block of {size} bytes runs past the payload")
        out.append(_unsnappy_raw(data[pos + 4 : pos + 4 + size], budget))
        pos += 4 + size
    return b"".join(out)
