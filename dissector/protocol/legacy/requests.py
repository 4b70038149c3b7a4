"""Kafka 0.7 requests: REQUEST_TYPE int16, then one topic-partition block or, for the multi
requests, TOPICPARTITION_COUNT int16 and that many blocks. There is no correlation id or
client id: responses answer requests in order.

Every function takes the bytes after REQUEST_LENGTH, which the framing layer strips.
"""

import struct

from ...errors import DecodeError
from ..primitives import i16, i32, i64
from .messages import decode_message_set

PRODUCE, FETCH, MULTIFETCH, MULTIPRODUCE, OFFSETS = range(5)
REQUEST_TYPES = {
    PRODUCE: "Produce",
    FETCH: "Fetch",
    MULTIFETCH: "MultiFetch",
    MULTIPRODUCE: "MultiProduce",
    OFFSETS: "Offsets",
}

# Smallest block of each kind (empty topic): bounds a count before any block is read.
_FETCH_BLOCK = 2 + 4 + 8 + 4
_PRODUCE_BLOCK = 2 + 4 + 4
_MIN_MESSAGE = 4 + 1 + 4  # length, magic 0, crc
# 0.7 names a directory after each topic-partition; longer names cannot exist on a broker.
_MAX_TOPIC = 255


def expects_response(request_type):
    """Produce and Multi-Produce are never answered in 0.7."""
    return request_type in (FETCH, MULTIFETCH, OFFSETS)


def _need(buf, pos, n, what):
    if len(buf) - pos < n:
        raise DecodeError(f"{what} runs past the end of the request", pos)


def _topic_partition(buf, pos):
    _need(buf, pos, 2, "topic length")
    n = i16(buf, pos)[0]
    if n < 0:
        raise DecodeError(f"negative topic length {n}", pos)
    _need(buf, pos + 2, n + 4, "topic and partition")
    topic = bytes(buf[pos + 2 : pos + 2 + n]).decode("utf-8", "replace")
    return topic, i32(buf, pos + 2 + n)[0], pos + 6 + n


def _produce_block(buf, pos):
    topic, partition, pos = _topic_partition(buf, pos)
    _need(buf, pos, 4, "messages length")
    size = i32(buf, pos)[0]
    pos += 4
    if not 0 <= size <= len(buf) - pos:
        raise DecodeError(f"message set of {size} bytes cannot fit in {len(buf) - pos}", pos - 4)
    # The broker assigns offsets on append: positions here are relative to the set.
    messages, _ = decode_message_set(buf, pos, pos + size)
    return {"Topic": topic, "Partition": partition, "Messages": messages}, pos + size


def _fetch_block(buf, pos):
    topic, partition, pos = _topic_partition(buf, pos)
    _need(buf, pos, 12, "offset and max size")
    block = {
        "Topic": topic,
        "Partition": partition,
        "Offset": i64(buf, pos)[0],
        "MaxSize": i32(buf, pos + 8)[0],
    }
    return block, pos + 12


def _offsets_block(buf, pos):
    topic, partition, pos = _topic_partition(buf, pos)
    _need(buf, pos, 12, "time and max number")
    block = {
        "Topic": topic,
        "Partition": partition,
        "Time": i64(buf, pos)[0],
        "MaxNumber": i32(buf, pos + 8)[0],
    }
    return block, pos + 12


_BLOCKS = {
    PRODUCE: _produce_block,
    FETCH: _fetch_block,
    MULTIFETCH: _fetch_block,
    MULTIPRODUCE: _produce_block,
    OFFSETS: _offsets_block,
}


def decode_request(data):
    """{"request_type", "api_name", "body"}; raises DecodeError on bytes that do not fit.

    Bytes after the last field are kept under body["_trailing_bytes"], as for 0.8+ requests.
    """
    buf = data
    _need(buf, 0, 2, "request type")
    kind = i16(buf, 0)[0]
    if kind not in REQUEST_TYPES:
        raise DecodeError(f"unknown 0.7 request type {kind}", 0)
    block = _BLOCKS[kind]
    try:
        if kind in (MULTIFETCH, MULTIPRODUCE):
            _need(buf, 2, 2, "topic-partition count")
            count = i16(buf, 2)[0]
            least = _FETCH_BLOCK if kind == MULTIFETCH else _PRODUCE_BLOCK
            if count < 0 or count * least > len(buf) - 4:
                raise DecodeError(f"{count} topic-partitions cannot fit in {len(buf) - 4}", 2)
            parts = []
            pos = 4
            for _ in range(count):
                part, pos = block(buf, pos)
                parts.append(part)
            body = {"TopicPartitions": parts}
        else:
            body, pos = block(buf, 2)
    except struct.error:
        raise DecodeError("request ends before its fields do", len(buf)) from None
    if pos != len(buf):
        body["_trailing_bytes"] = bytes(buf[pos:])
    return {"request_type": kind, "api_name": REQUEST_TYPES[kind], "body": body}


# --- shape check -----------------------------------------------------------------------------


def _plausible_topic(buf, pos):
    """End of a non-empty, printable topic name at pos, or None."""
    if len(buf) - pos < 2:
        return None
    n = i16(buf, pos)[0]
    end = pos + 2 + n
    if not 1 <= n <= _MAX_TOPIC or end > len(buf):
        return None
    # Topics are directory names: printable ASCII, no separators.
    for b in buf[pos + 2 : end]:
        if not 0x21 <= b <= 0x7E or b in b"/\\":
            return None
    return end


def _plausible_block(kind, buf, pos):
    """End of a plausible block of this kind at pos, or None."""
    pos = _plausible_topic(buf, pos)
    if pos is None or len(buf) - pos < 4:
        return None
    # -1 asks a 0.7 broker to pick a partition; no other negative number is meaningful.
    if i32(buf, pos)[0] < -1:
        return None
    pos += 4
    if kind in (PRODUCE, MULTIPRODUCE):
        if len(buf) - pos < 4:
            return None
        size = i32(buf, pos)[0]
        pos += 4
        end = pos + size
        if not _MIN_MESSAGE <= size <= len(buf) - pos:
            return None
        # A produced set holds whole messages: their lengths must tile it exactly.
        while pos < end:
            if end - pos < _MIN_MESSAGE:
                return None
            n, magic = i32(buf, pos)[0], buf[pos + 4]
            # magic 0: magic + crc; magic 1 adds the attributes byte
            if magic not in (0, 1) or n < 5 + magic or n > end - pos - 4:
                return None
            pos += 4 + n
        return end
    if len(buf) - pos < 12:
        return None
    first, second = i64(buf, pos)[0], i32(buf, pos + 8)[0]
    # Fetch: a byte offset and a size; Offsets: a time (-1 latest, -2 earliest) and a count.
    if second < 0 or first < (-2 if kind == OFFSETS else 0):
        return None
    return pos + 12


def plausible_request(data):
    """Whether a whole frame (bytes after REQUEST_LENGTH) has the shape of a 0.7 request.

    Cheap: no messages are decoded. It needs a request type 0-4, non-empty printable topics,
    sane partitions, offsets and sizes, and blocks that add up to the frame length exactly.
    """
    buf = data
    if len(buf) < 4:
        return False
    kind = i16(buf, 0)[0]
    if kind not in REQUEST_TYPES:
        return False
    if kind in (MULTIFETCH, MULTIPRODUCE):
        count = i16(buf, 2)[0]
        least = _FETCH_BLOCK if kind == MULTIFETCH else _PRODUCE_BLOCK
        if count < 1 or count * least > len(buf) - 4:
            return False
        pos = 4
        for _ in range(count):
            pos = _plausible_block(kind, buf, pos)
            if pos is None:
                return False
    else:
        pos = _plausible_block(kind, buf, 2)
    return pos == len(buf)


def topic_partitions(body):
    """The topic-partition blocks of a decoded 0.7 request or response body: a multi body
    lists them, a single one is its own block."""
    return body.get("TopicPartitions") or [body]
