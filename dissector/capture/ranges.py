"""Byte ranges of one capture file, read by independent tasks with Wireshark's frame numbers.

A capture is cut into ranges of about `split_bytes`. A range owns exactly the packet records
(pcap) or blocks (pcapng) that START inside it. Reading one takes two steps:

1. `survey(path, head, start, end)`: find the first record boundary at or after `start`
   without reading anything before it, then walk the record headers to the first boundary at
   or after `end`, counting packets and keeping the pcapng header blocks (section headers and
   interface descriptions) met on the way. A boundary is only taken where a chain of
   consistent headers starts: for pcap, CHAIN record headers in a row with sane lengths,
   sub-second fields and times near the file's first packet; for pcapng, CHAIN blocks whose
   lengths are multiples of 4 and match their trailing copies. The chain may end exactly at
   the end of the file.
2. `stitch(surveys)`: in file order, check that each range starts where the previous one
   stopped (else survey it again from there: a chain found inside packet data is never
   trusted), and give each range the number of packets before it and the header bytes it
   needs: the pcap file header, or the pcapng section header and interface blocks in force
   at its start.

`range_packets(piece)` then yields a range's packets, parsed by the same readers as a whole
file, with frame numbers counted from the start of the file. gzip-compressed files cannot be
entered in the middle: they are one range, read from the start.
"""

import os
import struct
from dataclasses import dataclass, field

from dissector.capture import pcap, pcapng
from dissector.capture.reader import GZIP_MAGIC, Inflated, Source, parse
from dissector.capture.walk import step_pcap
from dissector.errors import CaptureError

CHAIN = 8  # consecutive consistent headers that make a boundary
NO_MARK = 1 << 63  # beyond any offset: a walk that notes no marks
WINDOW = 4 << 20  # bytes read at a time while walking headers
# A pcap record time further than this from the file's first packet breaks a chain.
TIME_SLACK = 10 * 365 * 86400
PACKET_BLOCKS = (pcapng.EPB, pcapng.PB, pcapng.SPB)


def open_input(path, buffered=True):
    """A binary file object for a local path or any URI pyarrow's filesystems reach.
    `buffered=False` for a reader whose reads are all large: Python's buffer would only copy
    them once more."""
    if "://" not in str(path):
        return open(path, "rb", buffering=-1 if buffered else 0)  # noqa: SIM115 - the caller closes it
    from pyarrow import fs

    filesystem, inner = fs.FileSystem.from_uri(str(path))
    return filesystem.open_input_file(inner)


def file_size(path):
    if "://" not in str(path):
        return os.path.getsize(path)
    from pyarrow import fs

    filesystem, inner = fs.FileSystem.from_uri(str(path))
    return filesystem.get_file_info(inner).size


# -- the file head ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Head:
    """What every range of a file needs to know from its first bytes."""

    format: str  # "pcap", "pcapng" or "gzip"
    size: int
    byteorder: str = "<"  # pcap: of the file; pcapng: of the first section
    frac_limit: int = 0  # pcap: 10**6 or 10**9, the bound of the sub-second field
    first_sec: int | None = None  # pcap: the first record's seconds, to judge candidates
    header: bytes = b""  # pcap: the 24-byte file header


def read_head(path):
    """The format and first facts of a capture; CaptureError if it is not one."""
    size = file_size(path)
    with open_input(path) as f:
        head = f.read(64 * 1024)
    if not head:
        raise CaptureError(path, "empty file, not a capture", frame=1, offset=0)
    if head[:2] == GZIP_MAGIC:
        return Head("gzip", size)
    magic = bytes(head[:4])
    if magic in pcap.MAGICS:
        if len(head) < pcap.FILE_HEADER_LEN:
            raise CaptureError(path, "file ends inside the pcap file header", frame=1, offset=0)
        bo, frac_ns = pcap.MAGICS[magic]
        first_sec = None
        if len(head) >= pcap.FILE_HEADER_LEN + 4:
            first_sec = struct.unpack_from(bo + "I", head, pcap.FILE_HEADER_LEN)[0]
        limit = 1_000_000_000 // frac_ns
        return Head("pcap", size, bo, limit, first_sec, bytes(head[: pcap.FILE_HEADER_LEN]))
    if magic == pcapng.SHB_MAGIC:
        bom = head[8:12]
        return Head("pcapng", size, ">" if bom == b"\x1a\x2b\x3c\x4d" else "<")
    raise CaptureError(path, f"not a capture file (unknown magic {magic.hex()})", frame=1, offset=0)


def plan(size, split_bytes, head):
    """(start, end) byte ranges covering a file; one range for gzip or a small file."""
    if head.format == "gzip" or split_bytes <= 0 or size <= split_bytes:
        return [(0, size)]
    bounds = list(range(0, size, split_bytes)) + [size]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


# -- reading headers -----------------------------------------------------------------------


class Window:
    """Random reads served from a large cached window of the file. The window is read into
    one buffer, reused: a fresh 4 MB object a read cost the kernel's faulting in and zeroing
    of its pages, a third of a walk. `buf` (a view of what the last read got) changes with
    every read that moves the window."""

    def __init__(self, f, size, chunk=WINDOW):
        self.f = f
        self.size = size
        self.chunk = chunk
        self.base = 0
        self._store = bytearray()
        self.buf = memoryview(self._store)

    def index(self, off, n):
        """Where the bytes at [off, off + n) lie in `buf` (the window moved there if need
        be), or -1 when the file ends before them."""
        if off < self.base or off + n > self.base + len(self.buf):
            want = max(n, self.chunk)
            if len(self._store) < want:
                self._store = bytearray(want)
            self.f.seek(off)
            got = self.f.readinto(memoryview(self._store)[:want])
            self.buf = memoryview(self._store)[:got]
            self.base = off
        i = off - self.base
        return i if i + n <= len(self.buf) else -1

    def read(self, off, n):
        """The bytes at [off, off + n), fewer at the file's end."""
        self.index(off, n)
        i = off - self.base
        return bytes(self.buf[i : i + n])


@dataclass
class Survey:
    """One range walked: where its first and next-after-last records start, what it holds."""

    start: int  # the range as planned
    end: int
    first: int | None  # offset of the first record starting in the range (None: none does)
    stop: int  # offset of the first record at or after `end` (or where the walk stopped)
    packets: int = 0
    headers: list = field(default_factory=list)  # pcapng: (offset, block type, raw bytes)
    cut: str = ""  # "record"/"block"/...: the file ends inside one, at `stop`
    error: tuple | None = None  # (packets before it in the range, offset, reason)
    # With a chunk size: the first record at or after each multiple of it inside the range,
    # and the packets of the range before it: [(offset, packets)].
    marks: list = field(default_factory=list)


def survey(path, head, start, end, known_start=None, chunk=0):
    """Walk the records starting in [start, end); see the module docstring. chunk: also note
    where the first record at or after every `chunk` bytes from `start` begins (`marks`),
    so that one walk cuts the range into smaller pieces."""
    with open_input(path) as f:
        # A small range reads little more than itself: enough for the chains after it.
        win = Window(f, head.size, min(WINDOW, end - start + (64 << 10)))
        walk = _survey_pcap if head.format == "pcap" else _survey_pcapng
        return walk(win, head, start, end, known_start, chunk)


def _first_mark(start, chunk):
    """Where the walk looks for its first mark (see Survey.marks): nowhere without a chunk."""
    return start + chunk if chunk else NO_MARK


def _next_mark(at, start, chunk):
    """Where the walk looks for the mark after the record marked at `at`."""
    return start + ((at - start) // chunk + 1) * chunk


def _pcap_header_ok(win, head, off, unpack):
    """The offset after the record whose header is at `off`, or None if that header is not
    plausible. `unpack`: the header's unpack_from."""
    i = win.index(off, pcap.RECORD_HEADER_LEN)
    if i < 0:
        return None
    sec, frac, incl, orig = unpack(win.buf, i)
    if frac >= head.frac_limit or incl > pcap.MAX_RECORD or incl > max(orig, 65535):
        return None
    if head.first_sec is not None and abs(sec - head.first_sec) > TIME_SLACK:
        return None
    nxt = off + pcap.RECORD_HEADER_LEN + incl
    return None if nxt > win.size else nxt


def _pcap_chain(win, head, off, unpack):
    for _ in range(CHAIN):
        if off == win.size:
            return True
        off = _pcap_header_ok(win, head, off, unpack)
        if off is None:
            return False
    return True


def _survey_pcap(win, head, start, end, known_start, chunk):
    unpack = struct.Struct(head.byteorder + "IIII").unpack_from
    size = win.size
    if known_start is not None:
        pos = known_start
    elif start <= pcap.FILE_HEADER_LEN:
        pos = pcap.FILE_HEADER_LEN
    else:
        pos = next(
            (o for o in range(start, min(end, size)) if _pcap_chain(win, head, o, unpack)), None
        )
        if pos is None:
            return Survey(start, end, None, end)
    first = pos if pos < end else None
    count = 0
    marks, mark = [], _first_mark(start, chunk)
    incl_at = struct.Struct(head.byteorder + "I").unpack_from
    big = head.byteorder == ">"
    # The record headers are read in place from the window's buffer (a slice each cost half
    # the walk), stepped over in bulk (walk.py); one at a time here, the first and those
    # that end past the file.
    hdr = pcap.RECORD_HEADER_LEN
    buf, base, have = win.buf, win.base, len(win.buf)
    while pos < end:
        if pos >= mark and count:
            marks.append((pos, count))
            mark = _next_mark(pos, start, chunk)
        i = pos - base
        if i < 0 or i + hdr > have:
            i = win.index(pos, hdr)
            if i < 0:
                cut = "record header" if pos < size else ""
                return Survey(start, end, first, pos, count, cut=cut, marks=marks)
            buf, base, have = win.buf, win.base, len(win.buf)
        if count:  # whole records, up to the next mark, the range's end or the window's
            j, n = step_pcap(buf, i, min(end, mark) - base, size - base, big)
            if n:
                pos, count = base + j, count + n
                continue
        incl = incl_at(buf, i + 8)[0]
        nxt = pos + hdr + incl
        if nxt > size:
            if incl > pcap.MAX_RECORD:
                why = f"record claims {incl} captured bytes"
                return Survey(start, end, first, pos, count, error=(count, pos, why), marks=marks)
            return Survey(start, end, first, pos, count, cut="record", marks=marks)
        count += 1
        pos = nxt
    return Survey(start, end, first, pos, count, marks=marks)


_BLOCK = {bo: struct.Struct(bo + "II") for bo in "<>"}
_U32 = {bo: struct.Struct(bo + "I") for bo in "<>"}


def _block_ok(win, off, bo):
    """(block type, length, byte order) of a consistent pcapng block at `off`, else None."""
    raw = win.read(off, 12)
    if len(raw) < 12:
        return None
    btype, blen = _BLOCK[bo].unpack_from(raw)
    if btype == pcapng.SHB:
        bom = raw[8:12]
        if bom not in (b"\x4d\x3c\x2b\x1a", b"\x1a\x2b\x3c\x4d"):
            return None
        bo = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">"
        blen = _U32[bo].unpack_from(raw, 4)[0]
    if blen & 3 or blen < pcapng.MIN_LEN.get(btype, 12) or blen > pcapng.MAX_BLOCK:
        return None
    if off + blen > win.size or _U32[bo].unpack(win.read(off + blen - 4, 4))[0] != blen:
        return None
    if btype in (pcapng.EPB, pcapng.PB):
        caplen = _U32[bo].unpack(win.read(off + 20, 4))[0]
        if caplen > blen - 32:
            return None
    return btype, blen, bo


def _pcapng_chain(win, off, bo):
    for _ in range(CHAIN):
        if off == win.size:
            return True
        found = _block_ok(win, off, bo)
        if found is None:
            return False
        off += found[1]
        bo = found[2]
    return True


def _survey_pcapng(win, head, start, end, known_start, chunk):
    size = win.size
    if known_start is not None:
        pos, bo = known_start
    elif start == 0:
        pos, bo = 0, head.byteorder
    else:
        pos = bo = None
        for o in range((start + 3) & ~3, min(end, size), 4):
            bo = next((b for b in "<>" if _pcapng_chain(win, o, b)), None)
            if bo is not None:
                pos = o
                break
        if pos is None:
            return Survey(start, end, None, end)
    first = (pos, bo) if pos < end else None
    count = 0
    headers = []
    marks, mark = [], _first_mark(start, chunk)
    while pos < end:
        raw = win.read(pos, 12)
        if len(raw) < 12:
            cut = "block header" if raw else ""
            return Survey(start, end, first, (pos, bo), count, headers, cut, marks=marks)
        found = _block_ok(win, pos, bo)
        if found is None:
            btype, blen = _BLOCK[bo].unpack_from(raw)
            if pos + blen > size and not blen & 3 and blen <= pcapng.MAX_BLOCK:
                cut = "block"
                return Survey(start, end, first, (pos, bo), count, headers, cut, marks=marks)
            why = f"block of type {btype:#x} is corrupt (length {blen})"
            error = (count, pos, why)
            return Survey(start, end, first, (pos, bo), count, headers, error=error, marks=marks)
        btype, blen, bo = found
        if btype in PACKET_BLOCKS:
            if pos >= mark and count:
                marks.append(((pos, bo), count))
                mark = _next_mark(pos, start, chunk)
            count += 1
        elif btype in (pcapng.SHB, pcapng.IDB):
            headers.append((pos, btype, win.read(pos, blen)))
        pos += blen
    return Survey(start, end, first, (pos, bo), count, headers, marks=marks)


# -- stitching the ranges together -----------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """A range ready to read: its records lie in [start, stop); `frames` packets precede it."""

    path: str
    start: int
    stop: int
    frames: int
    prefix: bytes  # header bytes to parse it with: pcap file header, or pcapng SHB + IDBs
    compressed: bool = False


def stitch(path, head, surveys, chunk=0):
    """Pieces in file order from the surveys of consecutive ranges, checked against each
    other; a range whose re-found start disagrees with where the previous walk stopped is
    surveyed again from there. With `chunk` (the surveys' own), a range is cut into a piece
    at each of its marks. Returns (pieces, warnings). Raises CaptureError for a file whose
    records or blocks are corrupt, naming the frame and offset as a whole-file read would."""
    pieces, warnings = [], []
    frames = 0
    section = b""  # pcapng: the SHB in force and the IDBs after it
    interfaces = []
    expected = None  # where the previous walk stopped
    for s in surveys:
        if expected is not None:
            if _offset(expected) >= s.end:
                continue  # the previous range's last record covers this one: it owns none
            if s.first != expected:
                s = survey(path, head, s.start, s.end, known_start=expected, chunk=chunk)
        if s.first is None:
            continue
        stop = _offset(s.stop)
        starts = [(_offset(s.first), 0)] + [(_offset(w), n) for w, n in s.marks]
        ends = [at for at, _ in starts[1:]] + [stop]
        headers = list(s.headers)
        for (at, before), end in zip(starts, ends, strict=True):
            while headers and headers[0][0] < at:  # the blocks in force where it starts
                _, btype, raw = headers.pop(0)
                section, interfaces = _section(section, interfaces, btype, raw)
            prefix = head.header if head.format == "pcap" else section + b"".join(interfaces)
            pieces.append(Piece(path, at, end, frames + before, prefix))
        for _off, btype, raw in headers:
            section, interfaces = _section(section, interfaces, btype, raw)
        if s.error is not None:
            count, offset, why = s.error
            raise CaptureError(path, why, frame=frames + count + 1, offset=offset)
        frames += s.packets
        if s.cut:
            warnings.append(
                f"{path}: frame {frames + 1}, offset {stop}: truncated capture: file ends "
                f"inside a {s.cut}; decoded up to the cut"
            )
            break
        expected = s.stop
    return pieces, warnings


def _offset(where):
    return where[0] if isinstance(where, tuple) else where


def _section(section, interfaces, btype, raw):
    """The section header and interface blocks in force after one more of them."""
    if btype == pcapng.SHB:
        return raw, []
    return section, [*interfaces, raw]


def whole_file(path):
    """The one piece of a file read from its start (gzip, or not worth splitting)."""
    return Piece(path, 0, -1, 0, b"", compressed=True)


# -- packets of a piece ----------------------------------------------------------------------


class _PieceStream:
    """The header prefix, then the file's bytes in [start, stop)."""

    def __init__(self, f, prefix, start, stop):
        self.f = f
        self.prefix = prefix
        self.left = stop - start
        f.seek(start)

    def read(self, n=-1):
        if self.prefix:
            out, self.prefix = self.prefix[:n], self.prefix[n:]
            return out
        if self.left <= 0:
            return b""
        data = self.f.read(min(n, self.left) if n and n > 0 else self.left)
        self.left -= len(data)
        return data


def range_packets(piece, warnings=None, first_of_linktype=None):
    """The packets of a piece, numbered as Wireshark numbers them in the whole file. The
    reader's warnings are added to `warnings`; once all are read, `first_of_linktype` (a
    dict) gets each link type's first frame and offset in the piece, as in the whole file."""
    warnings = [] if warnings is None else warnings
    with open_input(piece.path, buffered=False) as f:
        if piece.compressed:
            raw = f.read(2)
            f.seek(0)
            stream = Inflated(f, f.tell) if raw == GZIP_MAGIC else f
            shift = 0
        else:
            stream = _PieceStream(f, piece.prefix, piece.start, piece.stop)
            shift = piece.start - len(piece.prefix)
        src = Source(piece.path, stream, warnings)
        src.frame_base, src.offset_base = piece.frames, shift
        head = src.refill(b"", 0, pcap.FILE_HEADER_LEN, 1, 0)
        if not head:
            raise CaptureError(piece.path, "empty file, not a capture", frame=1, offset=0)
        _, packets = parse(src, head)
        yield from packets
        if first_of_linktype is not None:
            first_of_linktype.update(src.first_of_linktype)


def pieces(path, split_bytes):
    """Every piece of one file, surveyed here in one process; returns (pieces, warnings)."""
    head = read_head(path)
    if head.format == "gzip":
        return [whole_file(path)], []
    surveys = [survey(path, head, a, b) for a, b in plan(head.size, split_bytes, head)]
    return stitch(path, head, surveys)
