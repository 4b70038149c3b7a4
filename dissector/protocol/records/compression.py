"""Bounded decompression of record payloads, for every codec Kafka has used.

The codecs themselves come from cramjam, isal (zlib's interface, twice as fast at gzip)
and zstandard; this module holds the framing Kafka clients wrap them in and the bounds:
output is produced piece by piece and checked against a byte budget and a compression
ratio, so a bomb stops after a little output. Where a frame declares its size (zstd's
content size, snappy's preamble), the declaration is checked first and the output is made
in one piece, no larger.

A batch produced once crosses the wire again in every fetch of it (each consumer group,
each follower), the same bytes: the outputs of the last few are kept (`Recent`), and the
same bytes are not decompressed again where the output they gave passes every check of
this decompression whatever its input (`_fits`), as it then passes them all as it is made.
"""

import io
import struct
import threading
import zlib
from collections import OrderedDict

from .common import (
    RATIO_FLOOR,
    Allowance,
    DecompressionBomb,
    DecompressionFailed,
    UnknownCodec,
    codec_name,
)
from .crc import crc32c
from .lz4frame import decompress_lz4

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4

_IN_CHUNK = 64 * 1024  # compressed bytes handed to zlib at a time
# Largest output asked for at a time. zstd's reader allocates all of it for each read: it
# stays under glibc's mmap threshold (128 KiB, fixed once a program sets the heap's
# parameters, as heap.keep_top does), past which each buffer is mapped and faulted in afresh.
_OUT_CHUNK = 127 * 1024
_ZSTD_READ = 4096  # small reads keep the consumed-input count, hence the ratio, precise

# Java clients (snappy-java's SnappyOutputStream) frame snappy: this magic, two int32
# versions, then int32-length-prefixed raw snappy chunks.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16
_I32 = struct.Struct(">i")


class Meter:
    """Stops one decompression once the output passes what its Allowance has left, or the
    output so far of the body, or of its run, passes the allowed ratio to its input so far."""

    __slots__ = ("allowance", "nested")

    def __init__(self, allowance, nested):
        self.allowance = allowance
        self.nested = nested  # inside a message set already decompressed: no input of its own

    def check(self, out, consumed):
        a = self.allowance
        if out > a.left:
            raise DecompressionBomb(
                f"output passes the limit of {a.limit} bytes"
                + ("" if a.left == a.limit else " of the body's record sets, all together")
            )
        consumed = 0 if self.nested else consumed
        _ratio(a.out + out, a.taken + consumed, a.ratio, "")
        if a.run is not None:
            _ratio(a.run.out + out, a.run.taken + consumed, a.ratio, " over the run")

    def room(self, out):
        """How much to ask for next: one byte past the budget is enough to see it passed."""
        return max(1, min(_OUT_CHUNK, self.allowance.left - out + 1))  # 0: unbounded to zlib


def _within(total, taken, ratio):
    """Whether `total` bytes out of `taken` compressed ones keep to the ratio (under the
    floor, any ratio does)."""
    return total <= RATIO_FLOOR or total <= ratio * max(taken, 1)


def _ratio(total, taken, ratio, where):
    if not _within(total, taken, ratio):
        raise DecompressionBomb(
            f"{total} bytes from {taken} compressed bytes passes the ratio {ratio}{where}"
        )


def decompress(codec, data, limits, allowance=None, nested=False):
    """The decompressed bytes of ``data``; raises a DecompressionFailed subclass.

    ``allowance`` (default: one of its own) is shared by the record sets of a body and
    the levels of nested message sets; ``nested``: ``data`` came out of a decompression.
    """
    if allowance is None:
        allowance = Allowance(limits)
    recent = key = None
    # A nested level's output is counted without its input: not kept. Nor is a large input,
    # which its copy as a key would double.
    if not nested and len(data) <= RECENT_LARGEST:
        recent = _recent()
        key = (codec, len(data), crc32c(data))  # a fingerprint; the bytes are compared too
        out = recent.get(key, data)
        if out is not None and _fits(allowance, len(out)):
            allowance.spend(len(out), len(data))
            return out
    if isal_zlib is None:
        _load()
    meter = Meter(allowance, nested)
    try:
        out = _decompress(codec, data, meter)
    except (zlib.error, isal_zlib.error, cramjam.DecompressionError, zstandard.ZstdError) as e:
        raise DecompressionFailed(f"{codec_name(codec)}: {e}") from None
    allowance.spend(len(out), 0 if nested else len(data))
    if recent is not None:
        recent.keep(key, data, out)
    return out


# Outputs kept, per thread: the fetches of a batch follow its produce closely (on real
# traffic, 1 MiB of them already spares two decompressions in three).
RECENT_BYTES = 8 << 20  # compressed and decompressed bytes held, all together
RECENT_LARGEST = 1 << 20  # a larger output, or input, is not kept


class Recent:
    """The outputs of the last decompressions, by codec and compressed bytes (found by their
    length and CRC-32C), least recently used first out; holds at most RECENT_BYTES."""

    __slots__ = ("entries", "size")

    def __init__(self):
        self.entries = OrderedDict()  # key -> (compressed bytes, output)
        self.size = 0

    def get(self, key, data):
        """The output kept for `data` (compressed, under `key`), or None."""
        kept = self.entries.get(key)
        if kept is None or kept[0] != bytes(data):  # the same fingerprint, other bytes
            return None
        self.entries.move_to_end(key)
        return kept[1]

    def keep(self, key, data, out):
        if len(out) > RECENT_LARGEST or key in self.entries:
            return
        self.entries[key] = (bytes(data), out)
        self.size += len(data) + len(out)
        while self.size > RECENT_BYTES:
            _key, (old_data, old_out) = self.entries.popitem(last=False)
            self.size -= len(old_data) + len(old_out)


_RECENT = threading.local()


def _recent():
    recent = getattr(_RECENT, "recent", None)
    if recent is None:
        recent = _RECENT.recent = Recent()
    return recent


def _fits(a, out):
    """Whether `out` bytes more pass every check a Meter makes on the way to them, however
    few of the input's bytes it has counted: within what is left, and within the ratio
    without this input (the body's, and the run's)."""
    run = a.run
    return (
        out <= a.left
        and _within(a.out + out, a.taken, a.ratio)
        and (run is None or _within(run.out + out, run.taken, a.ratio))
    )


# The codec libraries, loaded on first use: 3 ms at start, for runs that decompress nothing.
# Held here once loaded: an import statement in a function looks the module up on every
# call, about 1 µs a batch, a seventh of a batch's decompression on real traffic.
cramjam = zstandard = isal_zlib = None


def _load():
    global cramjam, zstandard, isal_zlib
    import cramjam
    import zstandard
    from isal import isal_zlib


def _decompress(codec, data, meter):
    if codec == GZIP:
        return _gzip(data, meter)
    if codec == SNAPPY:
        return _snappy(data, meter)
    if codec == LZ4:
        return decompress_lz4(data, meter)
    if codec == ZSTD:
        return _zstd(data, meter)
    raise UnknownCodec(f"unknown compression codec {codec}")


def _gzip(data, meter):
    mv = memoryview(data)
    n = len(mv)
    parts = []
    made = 0
    start = 0
    # Concatenated gzip members are one stream, as GZIPInputStream reads them.
    while True:
        d = isal_zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
        i = start
        pending = b""
        while not d.eof:
            if not pending and i < n:
                pending = mv[i : i + _IN_CHUNK]
                i += len(pending)
            before = len(pending)
            chunk = d.decompress(pending, meter.room(made))
            pending = d.unconsumed_tail
            if not chunk and len(pending) == before:
                raise DecompressionFailed("gzip: stream ends early")
            parts.append(chunk)
            made += len(chunk)
            meter.check(made, i - len(pending))
        start = i - len(pending) - len(d.unused_data)
        # Bytes after the last member that are not another member are ignored, as Java does.
        if mv[start : start + 2] != b"\x1f\x8b":
            return parts[0] if len(parts) == 1 else b"".join(parts)


def _snappy(data, meter):
    if len(data) >= _XERIAL_HEADER and data[:8] == _XERIAL_MAGIC:
        return _xerial(memoryview(data), meter)
    return bytes(_snappy_raw(data, meter, 0, len(data)))


def _xerial(mv, meter):
    n = len(mv)
    pos = _XERIAL_HEADER
    out = bytearray()
    while pos < n:
        if n - pos < 4:
            raise DecompressionFailed("snappy: xerial chunk length cut short")
        (size,) = _I32.unpack_from(mv, pos)
        pos += 4
        if size < 0 or size > n - pos:
            raise DecompressionFailed(f"snappy: xerial chunk of {size} bytes at byte {pos - 4}")
        pos += size
        out += _snappy_raw(mv[pos - size : pos], meter, len(out), pos)
    return bytes(out)


def _snappy_raw(chunk, meter, already, consumed):
    # Raw snappy starts with the uncompressed length: check it before anything is allocated.
    declared = shift = 0
    for i in range(5):
        if i >= len(chunk):
            raise DecompressionFailed("snappy: length preamble cut short")
        b = chunk[i]
        declared |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    else:
        raise DecompressionFailed("snappy: length preamble longer than 5 bytes")
    meter.check(already + declared, consumed)
    return cramjam.snappy.decompress_raw(chunk)


# A zstd decompression context per thread: making one costs more than a small batch's
# decompression, and one may not serve two threads at once.
_ZSTD = threading.local()


def _zstd(data, meter):
    dctx = getattr(_ZSTD, "dctx", None)
    if dctx is None:
        dctx = _ZSTD.dctx = zstandard.ZstdDecompressor()
    data = bytes(data)
    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError:
        raise DecompressionFailed("zstd: not a zstd frame") from None
    if declared >= 0:  # -1: the frame does not say
        meter.check(declared, len(data))
        try:  # one frame of the size it declares, made in one piece (an error if it lies)
            return dctx.decompress(data, max_output_size=declared, allow_extra_data=False)
        except zstandard.ZstdError:
            pass  # more frames than one, or damage the reader below names
    src = io.BytesIO(data)
    parts = []
    made = 0
    # stream_reader bounds each read's output, so frames without a content size stay bounded.
    with dctx.stream_reader(src, read_size=_ZSTD_READ, read_across_frames=True) as reader:
        while True:
            chunk = reader.read(meter.room(made))
            if not chunk:
                return parts[0] if len(parts) == 1 else b"".join(parts)
            parts.append(chunk)
            made += len(chunk)
            meter.check(made, src.tell())
