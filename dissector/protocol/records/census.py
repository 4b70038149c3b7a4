"""Counting a record set without decoding it: batches, records, codecs, bytes.

What the summary needs of every Produce and Fetch, read from the fixed offsets of each
entry's header: no dicts, no CRC, no decompression. A compressed magic 0/1 message hides how
many messages it wraps, so its count is unknown (None) here.
"""

import struct

from .common import codec_name

_ENTRY = struct.Struct(">qi")  # offset, length: the start of every batch and message
_BATCH_COUNTS = struct.Struct(">h")  # magic 2 attributes at byte 21
_RECORD_COUNT = struct.Struct(">i")  # magic 2 record count at byte 57
_LOG_OVERHEAD = 12
_BATCH_HEADER = 61


class Census:
    __slots__ = ("batches", "records", "control_records", "codecs")

    def __init__(self):
        self.batches = 0
        self.records = 0  # data records; None once a count is unknown
        self.control_records = 0
        self.codecs = {}  # codec -> bytes of compressed batch bodies


def census(buf, start, end):
    """The Census of the record set at buf[start:end] (a partial last entry is left out,
    as a Fetch response may end in one)."""
    c = Census()
    pos = start
    while end - pos >= _LOG_OVERHEAD:
        length = _ENTRY.unpack_from(buf, pos)[1]
        stop = pos + _LOG_OVERHEAD + length
        if length < 5 or stop > end:
            break
        magic = buf[pos + 16]
        c.batches += 1
        if magic == 2 and length >= _BATCH_HEADER - _LOG_OVERHEAD:
            attributes = _BATCH_COUNTS.unpack_from(buf, pos + 21)[0]
            count = _RECORD_COUNT.unpack_from(buf, pos + 57)[0]
            codec = attributes & 0x07
            if attributes & 0x20:
                c.control_records += count
            elif c.records is not None:
                c.records += count
            if codec:
                name = codec_name(codec)
                c.codecs[name] = c.codecs.get(name, 0) + stop - pos - _BATCH_HEADER
        elif magic in (0, 1):
            codec = buf[pos + 17] & 0x07
            if codec:
                c.records = None
                name = codec_name(codec)
                c.codecs[name] = c.codecs.get(name, 0) + length
            elif c.records is not None:
                c.records += 1
        pos = stop
    return c
