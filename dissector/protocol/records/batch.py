"""Magic 2 record batches (Kafka 0.11 and later).

A batch is a fixed 61-byte header, then ``record_count`` records, compressed together when
the codec says so. Records use zig-zag varints; every length is checked against the record's
own size before it is used, so no hostile value can make the decoder read or allocate past it.
"""

import struct

from . import common
from .common import CODEC_NAMES, BatchError, Corrupt
from .compression import decompress
from .crc import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
_unpack_header = HEADER.unpack_from
CRC_START = 21  # the CRC covers attributes to the end of the batch
MIN_RECORD = 7  # length, attributes, timestamp, offset, key, value, header count: 1 byte each

_TIMESTAMP_TYPE = 0x08
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_DELETE_HORIZON = 0x40

_CONTROL_KEY = struct.Struct(">hh")  # ControlRecordType: version, type
_END_TXN_MARKER = struct.Struct(">hi")  # EndTxnMarker: version, coordinator epoch
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}
_CODEC_NAMES = CODEC_NAMES  # a C-typed tuple when compiled (batch.pxd)


def blank(magic=2):
    """A batch with every field unknown, for batches whose header cannot be read."""
    return {
        "magic": magic,
        "base_offset": None,
        "batch_length": None,
        "partition_leader_epoch": None,
        "crc": None,
        "crc_ok": None,
        "attributes": None,
        "compression": None,
        "timestamp_type": None,
        "transactional": None,
        "control": None,
        "has_delete_horizon": None,
        "last_offset_delta": None,
        "base_timestamp": None,
        "max_timestamp": None,
        "producer_id": None,
        "producer_epoch": None,
        "base_sequence": None,
        "record_count": None,
        "records": [],
        "status": common.OK,
        "error": None,
        "compressed_size": None,
        "uncompressed_size": None,
    }


def decode_batch(raw, view, pos, end, limits, allowance=None):
    """The batch at ``raw[pos:end]`` (``view`` is a memoryview of raw), where ``end`` follows
    from its length field; its decompression draws on ``allowance`` (common.Allowance)."""
    batch, data, start, stop = open_batch(raw, view, pos, end, limits, allowance)
    if data is not None:
        read_records(batch, data, start, stop)
    return batch


def read_records(batch, data, start, stop):
    """The records of a batch open_batch gave, from data[start:stop] into its `records`; a
    record that does not parse ends them, and sets the batch's status."""
    try:
        parse_records(
            data,
            start,
            stop,
            batch["record_count"],
            batch["base_offset"],
            batch["base_timestamp"],
            fixed_timestamp(batch),
            batch["control"],
            batch["records"],
        )
    except BatchError as e:
        batch["status"] = e.status
        batch["error"] = str(e)


def fixed_timestamp(batch):
    """The timestamp of every record of a log-append batch (the broker's time,
    max_timestamp), else None: each record has its own."""
    return batch["max_timestamp"] if batch["timestamp_type"] == "log_append" else None


def open_batch(raw, view, pos, end, limits, allowance=None):
    """(batch, data, start, stop): the batch at ``raw[pos:end]`` with its header read and its
    records not yet (an empty ``records`` list), and where they lie: ``data[start:stop]``,
    decompressed if they were compressed. ``data`` is None where the records are not to be
    read: not wanted (Limits.records), or the batch's status says why it cannot be."""
    if end - pos < HEADER_SIZE:
        batch = blank()
        offset, length, epoch = struct.unpack_from(">qii", raw, pos)
        batch.update(base_offset=offset, batch_length=length, partition_leader_epoch=epoch)
        batch["status"] = common.CORRUPT_RECORDS
        batch["error"] = f"batch of {end - pos} bytes is shorter than its {HEADER_SIZE}-byte header"
        return batch, None, 0, 0
    (
        base_offset,
        length,
        epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _unpack_header(raw, pos)
    codec = attributes & 0x07
    log_append = attributes & _TIMESTAMP_TYPE
    control = attributes & _CONTROL != 0
    # One literal, the hot path of "batches" mode: every header field, in blank()'s order.
    batch = {
        "magic": magic,
        "base_offset": base_offset,
        "batch_length": length,
        "partition_leader_epoch": epoch,
        "crc": crc,
        # A bad CRC is reported, never a reason to drop the batch.
        "crc_ok": crc_matches(view, pos, end, crc),
        "attributes": attributes,
        "compression": _CODEC_NAMES[codec],
        "timestamp_type": "log_append" if log_append else "create",
        "transactional": attributes & _TRANSACTIONAL != 0,
        "control": control,
        "has_delete_horizon": attributes & _DELETE_HORIZON != 0,
        "last_offset_delta": last_offset_delta,
        "base_timestamp": base_timestamp,
        "max_timestamp": max_timestamp,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "base_sequence": base_sequence,
        "record_count": count,
        "records": [],
        "status": common.OK,
        "error": None,
        "compressed_size": end - pos - HEADER_SIZE,
        "uncompressed_size": None,
    }
    try:
        if count < 0:
            raise Corrupt(f"negative record count {count}")
        if count > limits.max_records:
            raise common.TooManyRecords(f"{count} records passes the limit of {limits.max_records}")
        if codec and not limits.decompress:
            return batch, None, 0, 0  # uncompressed size unknown, by choice
        data, start, stop = records_bytes(raw, view, pos, end, codec, limits, allowance)
        batch["uncompressed_size"] = stop - start
        if not limits.records:
            return batch, None, 0, 0
        if count > (stop - start) // MIN_RECORD:
            raise Corrupt(f"{count} records cannot fit in {stop - start} bytes")
    except BatchError as e:
        batch["status"] = e.status
        batch["error"] = str(e)
        return batch, None, 0, 0
    return batch, data, start, stop


def records_bytes(raw, view, pos, end, codec, limits, allowance=None):
    """(data, start, stop): where the records of the batch at ``raw[pos:end]`` lie, in
    ``data[start:stop]``, decompressed into the allowance when ``codec`` is not 0 (its
    BatchError where they cannot be)."""
    if codec:
        data = decompress(codec, view[pos + HEADER_SIZE : end], limits, allowance)
        return data, 0, len(data)
    return raw, pos + HEADER_SIZE, end


def crc_matches(view, pos, end, crc):
    """Whether the CRC-32C of the batch at ``view[pos:end]`` is ``crc``."""
    return crc32c(view[pos + CRC_START : end]) == crc


def _varint(buf, p):
    """Zig-zag varint of at most 5 bytes (int32); IndexError past the buffer."""
    b = buf[p]
    value = b & 0x7F
    shift = 7
    while b & 0x80:
        if shift > 28:
            raise Corrupt(f"varint longer than 5 bytes at byte {p}")
        p += 1
        b = buf[p]
        value |= (b & 0x7F) << shift
        shift += 7
    return (value >> 1) ^ -(value & 1), p + 1


def _varlong(buf, p):
    """Zig-zag varint of at most 10 bytes (int64)."""
    b = buf[p]
    value = b & 0x7F
    shift = 7
    while b & 0x80:
        if shift > 63:
            raise Corrupt(f"varlong longer than 10 bytes at byte {p}")
        p += 1
        b = buf[p]
        value |= (b & 0x7F) << shift
        shift += 7
    return (value >> 1) ^ -(value & 1), p + 1


def parse_records(buf, p, end, count, base_offset, base_ts, fixed_ts, control, out):
    """Append ``count`` records from ``buf[p:end]`` to ``out``; raises Corrupt where they stop.

    Single-byte varints, the common case in small records, are decoded inline (about 10%
    faster in this loop, the hot one of the package).
    """
    append = out.append
    try:
        for i in range(count):
            b = buf[p]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                size, p = _varint(buf, p)
            if size < 0 or size > end - p:
                raise Corrupt(f"record {i}: length {size} with {end - p} bytes left")
            rend = p + size
            attributes = buf[p]
            b = buf[p + 1]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 2
            else:
                ts_delta, p = _varlong(buf, p + 1)
            b = buf[p]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                offset_delta, p = _varint(buf, p)
            b = buf[p]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                n, p = _varint(buf, p)
            if n < 0:
                if n != -1:
                    raise Corrupt(f"record {i}: key length {n}")
                key = None
            elif n > rend - p:
                raise Corrupt(f"record {i}: key of {n} bytes overruns the record")
            else:
                key = buf[p : p + n]
                p += n
            b = buf[p]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                n, p = _varint(buf, p)
            if n < 0:
                if n != -1:
                    raise Corrupt(f"record {i}: value length {n}")
                value = None
            elif n > rend - p:
                raise Corrupt(f"record {i}: value of {n} bytes overruns the record")
            else:
                value = buf[p : p + n]
                p += n
            n, p = _varint(buf, p)
            if n == 0:
                headers = []
            elif n < 0 or n > (rend - p) // 2:  # a header takes at least 2 bytes
                raise Corrupt(f"record {i}: {n} headers")
            else:
                headers, p = _headers(buf, p, rend, n, i)
            if p != rend:
                raise Corrupt(f"record {i}: fields end at {p - rend:+d} bytes from its length")
            record = {
                "offset": base_offset + offset_delta,
                "timestamp": base_ts + ts_delta if fixed_ts is None else fixed_ts,
                "attributes": attributes - 256 if attributes > 127 else attributes,
                "key": key,
                "value": value,
                "headers": headers,
            }
            if control:
                record["control"] = _control(key, value, i)
            append(record)
    except IndexError:
        raise Corrupt(f"record {len(out)} runs past the end of the batch") from None
    if p != end:
        raise Corrupt(f"{end - p} bytes after the last of {count} records")


def _headers(buf, p, rend, count, i):
    headers = []
    for _ in range(count):
        n, p = _varint(buf, p)
        if n < 0 or n > rend - p:
            raise Corrupt(f"record {i}: header key length {n}")
        hkey = buf[p : p + n].decode("utf-8", "replace")
        p += n
        n, p = _varint(buf, p)
        if n < 0:
            if n != -1:
                raise Corrupt(f"record {i}: header value length {n}")
            hvalue = None
        elif n > rend - p:
            raise Corrupt(f"record {i}: header value of {n} bytes overruns the record")
        else:
            hvalue = buf[p : p + n]
            p += n
        headers.append((hkey, hvalue))
    return headers, p


def _control(key, value, i):
    """The marker a control record carries (its key says which, its value for whom)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise Corrupt(f"record {i}: control record key shorter than 4 bytes")
    version, kind = _CONTROL_KEY.unpack_from(key)
    epoch = None
    if kind in _CONTROL_TYPES and value is not None and len(value) >= _END_TXN_MARKER.size:
        epoch = _END_TXN_MARKER.unpack_from(value)[1]
    return {"type": _CONTROL_TYPES.get(kind, kind), "version": version, "coordinator_epoch": epoch}
