"""Counting a record set without decoding it: batches, records, codecs, bytes.

What the summary needs of every Produce and Fetch, read from the fixed offsets of each
entry's header: no dicts, no CRC, no decompression. A compressed magic 0/1 message hides how
many messages it wraps, so its count is unknown (None) here.
"""

from .common import CODEC_NAMES

_LOG_OVERHEAD = 12  # offset (int64) and length (int32) of every batch and message
_BATCH_HEADER = 61  # a magic 2 batch's header, to the end of its record count
_CODEC_NAMES = CODEC_NAMES  # a C-typed tuple when compiled (census.pxd)


def census(buf, start, end):
    """(batches, records, control records, codecs) of the record set at buf[start:end]
    (bytes; a partial last entry is left out, as a Fetch response may end in one). `records`
    counts data records, None once a count is unknown; `codecs` maps each codec to the bytes
    of its compressed batch bodies (None when no batch is compressed). Big-endian fields are
    read byte by byte: a census runs for every record set, and compiled (census.pxd) this is
    plain C."""
    batches = records = control = 0
    known = True  # whether records is a count
    codecs = None
    p = buf
    pos = start
    while end - pos >= _LOG_OVERHEAD:
        length = p[pos + 8]  # widened before the shift: 24 bits up overflows a C int
        length = length << 24 | p[pos + 9] << 16 | p[pos + 10] << 8 | p[pos + 11]
        stop = pos + _LOG_OVERHEAD + length  # a negative length reads huge: past the end
        if length < 5 or stop > end:
            break
        magic = p[pos + 16]
        batches += 1
        size = 0  # bytes of a compressed body
        if magic == 2 and length >= _BATCH_HEADER - _LOG_OVERHEAD:
            attributes = p[pos + 22]  # the low byte of the int16 holds codec and control bit
            count = p[pos + 57]
            count = count << 24 | p[pos + 58] << 16 | p[pos + 59] << 8 | p[pos + 60]
            if count >= 0x80000000:
                count -= 0x100000000
            codec = attributes & 0x07
            if attributes & 0x20:
                control += count
            else:
                records += count
            if codec:
                size = stop - pos - _BATCH_HEADER
        elif magic in (0, 1):
            codec = p[pos + 17] & 0x07
            if codec:
                known = False  # a compressed message hides how many it wraps
                size = length
            else:
                records += 1
        else:
            codec = 0
        if codec:
            if codecs is None:
                codecs = {}
            name = _CODEC_NAMES[codec]
            codecs[name] = codecs.get(name, 0) + size
        pos = stop
    return batches, records if known else None, control, codecs
