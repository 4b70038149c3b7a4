"""Counting a record set without decoding it: batches, records, codecs, bytes.

What the summary needs of every Produce and Fetch, read from the fixed offsets of each
entry's header: no dicts, no CRC, no decompression (`census`). A compressed magic 0/1
message hides how many messages it wraps, so its count is unknown (None) there.

`measure` gives what the summary shows with --decompress: each compressed batch decompressed
only to know its size, as the decoder would, with no dict made of anything.
"""

from .batch import records_bytes
from .common import CODEC_NAMES, BatchError

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


def measure(buf, start, end, limits, allowance):
    """(batches, records, control records, uncompressed size, codecs) of the record set at
    buf[start:end] (bytes), as partitions.record_summary gives them of the set decode_record_set
    decodes with `limits` and `allowance`: each compressed magic 2 batch is decompressed in
    the same order, drawing on the same allowance, and only measured. `codecs` maps each codec
    to [compressed bytes, uncompressed bytes]; a size is None where one batch's could not be
    known (its status, in the decoded set, says why), `records` where a batch's header could
    not be read. None where the set holds a magic 0 or 1 message: its nesting is the
    decoder's to read."""
    view = memoryview(buf)
    batches = control = records = 0
    known = True  # whether records is a count
    total = end - start  # the set's size as it would be uncompressed, while it is known
    codecs = {}
    p = buf
    pos = start
    while end - pos >= _LOG_OVERHEAD:
        length = p[pos + 8]
        length = length << 24 | p[pos + 9] << 16 | p[pos + 10] << 8 | p[pos + 11]
        if length >= 0x80000000:  # negative: nothing tells where the next would start
            break
        stop = pos + _LOG_OVERHEAD + length
        if stop > end:  # a Fetch response may end in part of a batch: left out
            break
        batches += 1
        magic = p[pos + 16] if length > 4 else -1
        if magic == 0 or magic == 1:
            return None
        if magic != 2 or length < _BATCH_HEADER - _LOG_OVERHEAD:
            known = False  # no header read: no count
            pos = stop
            continue
        count = p[pos + 57]
        count = count << 24 | p[pos + 58] << 16 | p[pos + 59] << 8 | p[pos + 60]
        if count >= 0x80000000:
            count -= 0x100000000
        attributes = p[pos + 22]
        if attributes & 0x20:
            control += count
        else:
            records += count
        codec = attributes & 0x07
        if 0 < codec < 5:  # named codecs; the decoder fails the others, counted nowhere
            size = stop - pos - _BATCH_HEADER
            raw = None  # the batch is not decompressed where its count fails it first
            if 0 <= count <= limits.max_records and limits.decompress:
                try:
                    _, first, last = records_bytes(buf, view, pos, stop, codec, limits, allowance)
                    raw = last - first
                except BatchError:
                    pass
            sizes = codecs.get(_CODEC_NAMES[codec])
            if sizes is None:
                sizes = codecs[_CODEC_NAMES[codec]] = [0, 0]
            sizes[0] += size
            if raw is None:
                sizes[1] = total = None
            else:
                if sizes[1] is not None:
                    sizes[1] += raw
                if total is not None:
                    total += raw - size
        pos = stop
    return batches, records if known else None, control, total, codecs
