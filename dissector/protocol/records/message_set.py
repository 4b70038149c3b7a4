"""Magic 0 and 1 messages (Kafka 0.8 to 0.10) and the message sets compressed inside them.

A compressed message's value is itself a message set. Inner offsets follow Kafka's rules:
with magic 0 they are absolute; with magic 1 they are relative, and the wrapper carries the
absolute offset of the last inner message. Kafka nests one level; two are decoded here.
"""

import struct

from . import common
from .common import Allowance, BatchError, Corrupt, TooManyRecords, codec_name
from .compression import decompress
from .crc import crc32

_HEADER = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
LOG_OVERHEAD = 12  # offset and size, before the size counts
_CRC_START = 16  # the CRC covers magic to the end of the value
_MIN_SIZE = {0: 14, 1: 22}  # crc to value, with null key and value
_TIMESTAMP_TYPE = 0x08
MAX_NESTING = 2


class _Message:
    __slots__ = ("offset", "crc", "crc_ok", "magic", "attributes", "timestamp", "key", "value")

    def __init__(self, offset, crc, crc_ok, magic, attributes, timestamp, key, value):
        self.offset = offset
        self.crc = crc
        self.crc_ok = crc_ok
        self.magic = magic
        self.attributes = attributes
        self.timestamp = timestamp
        self.key = key
        self.value = value


class _State:
    """What one top-level message has used so far, across its nested sets."""

    __slots__ = ("used", "count")

    def __init__(self):
        self.used = 0
        self.count = 0


def blank(magic):
    return {
        "magic": magic,
        "offset": None,
        "batch_length": None,
        "crc": None,
        "crc_ok": None,
        "attributes": None,
        "compression": None,
        "timestamp_type": None,
        "timestamp": None,
        "key": None,
        "value": None,
        "record_count": None,
        "records": [],
        "status": common.OK,
        "error": None,
        "compressed_size": None,
        "uncompressed_size": None,
    }


def decode_message(raw, pos, end, limits, allowance=None):
    """The top-level message at ``raw[pos:end]`` as a batch whose records are its contents;
    its decompression, nested levels included, draws on ``allowance`` (common.Allowance)."""
    batch = blank(raw[pos + _CRC_START] if end - pos > _CRC_START else None)
    offset, size = struct.unpack_from(">qi", raw, pos)
    batch.update(offset=offset, batch_length=size)
    try:
        m = _read(raw, pos, end)
    except Corrupt as e:
        batch["status"] = e.status
        batch["error"] = str(e)
        return batch
    codec = m.attributes & 0x07
    batch.update(
        crc=m.crc,
        crc_ok=m.crc_ok,
        attributes=m.attributes,
        compression=codec_name(codec),
        timestamp_type=_timestamp_type(m),
        timestamp=m.timestamp,
        key=m.key,
        value=m.value,
    )
    records = batch["records"]
    if not codec:
        records.append(_record(m, m.offset, m.timestamp))
        batch["record_count"] = 1
        return batch
    batch["compressed_size"] = None if m.value is None else len(m.value)
    if not limits.decompress:
        return batch  # what it wraps stays unknown, by choice
    state = _State()
    if allowance is None:
        allowance = Allowance(limits)
    try:
        _expand(m, m.offset, 1, limits, allowance, state, records)
    except BatchError as e:
        batch["status"] = e.status
        batch["error"] = str(e)
    batch["record_count"] = len(records)
    batch["uncompressed_size"] = state.used
    if not limits.records:
        batch["records"] = []
    return batch


def _timestamp_type(m):
    if m.magic == 0:
        return None
    return "log_append" if m.attributes & _TIMESTAMP_TYPE else "create"


def _record(m, offset, timestamp):
    return {
        "offset": offset,
        "timestamp": timestamp,
        "attributes": m.attributes,
        "key": m.key,
        "value": m.value,
        "headers": [],
        "crc_ok": m.crc_ok,
    }


def _read(buf, pos, end):
    """The message at ``buf[pos:end]`` (``end - pos`` is 12 plus its size field)."""
    if end - pos <= _CRC_START:
        raise Corrupt(f"message at byte {pos}: {end - pos} bytes hold no magic byte")
    magic = buf[pos + _CRC_START]
    min_size = _MIN_SIZE.get(magic)
    if min_size is None:
        raise Corrupt(f"message at byte {pos}: magic {magic}")
    size = end - pos - LOG_OVERHEAD
    if size < min_size:
        raise Corrupt(
            f"message at byte {pos}: size {size} is below the {min_size} of magic {magic}"
        )
    offset, _, crc, _, attributes = _HEADER.unpack_from(buf, pos)
    p = pos + _HEADER.size
    timestamp = None
    if magic:
        (timestamp,) = _I64.unpack_from(buf, p)
        p += 8
    key, p = _bytes(buf, p, end, pos, "key")
    value, p = _bytes(buf, p, end, pos, "value")
    if p != end:
        raise Corrupt(f"message at byte {pos}: {end - p} bytes after the value")
    crc_ok = crc32(memoryview(buf)[pos + _CRC_START : end]) == crc
    return _Message(offset, crc, crc_ok, magic, attributes, timestamp, key, value)


def _bytes(buf, p, end, pos, what):
    if end - p < 4:
        raise Corrupt(f"message at byte {pos}: {what} length cut short")
    (n,) = _I32.unpack_from(buf, p)
    p += 4
    if n == -1:
        return None, p
    if n < 0 or n > end - p:
        raise Corrupt(f"message at byte {pos}: {what} length {n} with {end - p} bytes left")
    return buf[p : p + n], p + n


def _expand(wrapper, wrapper_offset, depth, limits, allowance, state, out):
    """Append the records compressed in ``wrapper`` to ``out``, recursing into nested sets."""
    if wrapper.value is None:
        raise Corrupt("compressed message without a value")
    data = decompress(wrapper.attributes & 0x07, wrapper.value, limits, allowance, depth > 1)
    state.used += len(data)
    messages = []
    error = None
    try:
        _parse_set(data, limits, state, messages)
    except BatchError as e:
        error = e  # place the messages read so far, then report
    if messages:
        # Magic 1: the wrapper holds the absolute offset of the last inner message.
        base = wrapper_offset - messages[-1].offset if wrapper.magic else 0
        log_append = wrapper.magic and wrapper.attributes & _TIMESTAMP_TYPE
        for m in messages:
            if m.magic != wrapper.magic:
                raise Corrupt(f"magic {m.magic} message inside a magic {wrapper.magic} one")
            offset = base + m.offset
            timestamp = wrapper.timestamp if log_append else m.timestamp
            if not m.attributes & 0x07:
                out.append(_record(m, offset, timestamp))
            elif depth < MAX_NESTING:
                _expand(m, offset, depth + 1, limits, allowance, state, out)
            else:
                raise Corrupt(f"compressed messages nested deeper than {MAX_NESTING} levels")
    if error is not None:
        raise error


def _parse_set(data, limits, state, messages):
    """Messages of a decompressed message set; it must hold whole messages only."""
    n = len(data)
    pos = 0
    while pos < n:
        if n - pos < LOG_OVERHEAD:
            raise Corrupt(f"inner message set ends in {n - pos} stray bytes")
        (size,) = _I32.unpack_from(data, pos + 8)
        if size < 0 or size > n - pos - LOG_OVERHEAD:
            raise Corrupt(f"inner message at byte {pos}: size {size} with {n - pos} bytes left")
        state.count += 1
        if state.count > limits.max_records:
            raise TooManyRecords(f"more than {limits.max_records} inner messages")
        end = pos + LOG_OVERHEAD + size
        messages.append(_read(data, pos, end))
        pos = end
