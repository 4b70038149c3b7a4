"""Counting a record set without decoding it: batches, records, codecs, bytes.

What the summary needs of every Produce and Fetch, read from the fixed offsets of each
entry's header: no dicts, no CRC, no decompression. A compressed magic 0/1 message hides how
many messages it wraps, so its count is unknown (None) here.
"""

from .common import codec_name

_LOG_OVERHEAD = 12  # offset (int64) and length (int32) of every batch and message
_BATCH_HEADER = 61  # a magic 2 batch's header, to the end of its record count


class Census:
    __slots__ = ("batches", "records", "control_records", "codecs")

    def __init__(self):
        self.batches = 0
        self.records = 0  # data records; None once a count is unknown
        self.control_records = 0
        self.codecs = {}  # codec -> bytes of compressed batch bodies


def census(buf, start, end):
    """The Census of the record set at buf[start:end] (bytes; a partial last entry is left
    out, as a Fetch response may end in one). Big-endian fields are read byte by byte: a
    census runs for every record set, and compiled (census.pxd) this is plain C."""
    c = Census()
    p = buf
    pos = start
    while end - pos >= _LOG_OVERHEAD:
        length = p[pos + 8]  # widened before the shift: 24 bits up overflows a C int
        length = length << 24 | p[pos + 9] << 16 | p[pos + 10] << 8 | p[pos + 11]
        stop = pos + _LOG_OVERHEAD + length  # a negative length reads huge: past the end
        if length < 5 or stop > end:
            break
        magic = p[pos + 16]
        c.batches += 1
        if magic == 2 and length >= _BATCH_HEADER - _LOG_OVERHEAD:
            attributes = p[pos + 22]  # the low byte of the int16 holds codec and control bit
            count = p[pos + 57]
            count = count << 24 | p[pos + 58] << 16 | p[pos + 59] << 8 | p[pos + 60]
            if count >= 0x80000000:
                count -= 0x100000000
            codec = attributes & 0x07
            if attributes & 0x20:
                c.control_records += count
            elif c.records is not None:
                c.records += count
            if codec:
                name = codec_name(codec)
                c.codecs[name] = c.codecs.get(name, 0) + stop - pos - _BATCH_HEADER
        elif magic in (0, 1):
            codec = p[pos + 17] & 0x07
            if codec:
                c.records = None
                name = codec_name(codec)
                c.codecs[name] = c.codecs.get(name, 0) + length
            elif c.records is not None:
                c.records += 1
        pos = stop
    return c
