"""LZ4 frames, parsed here and decompressed block by block.

Parsing the frame ourselves does two things. Kafka 0.8/0.9 clients computed the frame header
checksum over the magic number too, so a strict frame decoder rejects their data: the header
checksum is not checked at all (a corrupt header still fails on its flags or its blocks).
And each block is at most 4 MiB, so output grows in bounded steps that the meter can stop.
"""

import struct

from .common import DecompressionFailed

_MAGIC = 0x184D2204
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE = 0x184D2A50
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_BLOCK_MAX = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_UNCOMPRESSED = 0x80000000
cramjam = None  # loaded on first use, as compression.py says


def _load():
    global cramjam
    import cramjam


def decompress_lz4(data, meter):
    """All frames of ``data`` (concatenated frames are one stream), bounded by ``meter``."""
    mv = memoryview(data)
    n = len(mv)
    out = bytearray()
    pos = 0
    try:
        while pos < n:
            pos = _frame(mv, pos, out, meter)
    except struct.error:
        raise DecompressionFailed("lz4: frame cut short") from None
    return bytes(out)


def _frame(mv, pos, out, meter):
    n = len(mv)
    (magic,) = _U32.unpack_from(mv, pos)
    if magic & _SKIPPABLE_MASK == _SKIPPABLE:
        (size,) = _U32.unpack_from(mv, pos + 4)
        if size > n - pos - 8:
            raise DecompressionFailed("lz4: skippable frame runs past the end")
        return pos + 8 + size
    if magic != _MAGIC:
        raise DecompressionFailed(f"lz4: bad frame magic {magic:#010x} at byte {pos}")
    if n - pos < 7:
        raise struct.error
    flg, bd = mv[pos + 4], mv[pos + 5]
    if flg >> 6 != 1:
        raise DecompressionFailed(f"lz4: frame version {flg >> 6}")
    if flg & 0x02 or bd & 0x8F:
        raise DecompressionFailed("lz4: reserved frame header bits set")
    # Kafka writes independent blocks. Linked ones may refer to the previous block, which block
    # decompression cannot see: such a reference fails the block, never yields wrong bytes.
    linked = not flg & 0x20
    if flg & 0x01:
        raise DecompressionFailed("lz4: frames with a dictionary are not supported")
    block_max = _BLOCK_MAX.get(bd >> 4)
    if block_max is None:
        raise DecompressionFailed(f"lz4: block size code {bd >> 4}")
    p = pos + 6
    if flg & 0x08:
        (declared,) = _U64.unpack_from(mv, p)
        p += 8
        meter.check(len(out) + declared, n)
    p += 1  # header checksum: not checked, see the module docstring
    block_checksums = flg & 0x10
    scratch = None
    if cramjam is None:
        _load()

    while True:
        (word,) = _U32.unpack_from(mv, p)
        p += 4
        if word == 0:  # end mark
            break
        size = word & ~_UNCOMPRESSED
        if size > block_max or size > n - p:
            raise DecompressionFailed(f"lz4: block of {size} bytes at byte {p - 4}")
        block = mv[p : p + size]
        p += size
        if word & _UNCOMPRESSED:
            out += block
        else:
            if scratch is None:
                scratch = bytearray(block_max)
            try:
                k = cramjam.lz4.decompress_block_into(block, scratch)
            except cramjam.DecompressionError:
                if linked:
                    raise DecompressionFailed("lz4: linked blocks are not supported") from None
                raise
            out += memoryview(scratch)[:k]
        if block_checksums:
            p += 4
        meter.check(len(out), p)
    if flg & 0x04:  # content checksum
        p += 4
    if p > n:
        raise struct.error
    return p
