"""Classic libpcap files: a 24-byte file header, then 16-byte record headers each followed by data.

The parser works on a buffer filled in large chunks by a source (see `reader.Source`), so that
no packet costs a file read of its own.
"""

import struct
from collections.abc import Iterator

from dissector.capture.packet import Packet
from dissector.errors import CaptureError
from dissector.tuples import new as _new  # a NamedTuple from its fields, a C call

MAGIC_USEC = 0xA1B2C3D4
MAGIC_NSEC = 0xA1B23C4D
# The first four bytes of a file as they appear on disk, for sniffing.
# Value: (byte order, nanoseconds per unit of the fractional timestamp field).
MAGICS = {
    struct.pack(bo + "I", magic): (bo, ns)
    for magic, ns in ((MAGIC_USEC, 1_000), (MAGIC_NSEC, 1))
    for bo in "<>"
}

FILE_HEADER_LEN = 24
RECORD_HEADER_LEN = 16
# Upper bits of the link-type field carry FCS information (as libpcap's LT_LINKTYPE masks).
LINKTYPE_MASK = 0x03FFFFFF
# A record claiming more than this is taken as corruption rather than a packet.
MAX_RECORD = 256 * 1024 * 1024

_HEADER = {bo: struct.Struct(bo + "HHiIII") for bo in "<>"}
_RECORD = {bo: struct.Struct(bo + "IIII").unpack_from for bo in "<>"}


def iter_pcap(src, buf: bytes) -> Iterator[Packet]:
    """Check the file header and return an iterator over the packets of a pcap stream.

    `buf` holds the bytes the source already delivered. Header errors raise here, not later.
    """
    path = src.path
    byteorder, frac_ns = MAGICS.get(bytes(buf[:4]), (None, 0))
    if byteorder is None:
        raise CaptureError(path, "not a pcap file (bad magic)", frame=1, offset=0)
    if len(buf) < FILE_HEADER_LEN:
        buf = src.refill(buf, 0, FILE_HEADER_LEN, 1, 0)
        if len(buf) < FILE_HEADER_LEN:
            raise CaptureError(path, "file ends inside the pcap file header", frame=1, offset=0)
    major, _minor, _zone, _sigfigs, _snaplen, network = _HEADER[byteorder].unpack_from(buf, 4)
    if major != 2:
        raise CaptureError(path, f"unsupported pcap version {major}", frame=1, offset=4)
    return Records(src, buf, byteorder, frac_ns, network & LINKTYPE_MASK)


class Records:
    """The packets after the file header: an iterator, a C struct when compiled (pcap.pxd),
    whose record loop keeps positions, counts and the last offset as C integers. That loop
    runs once a packet, the first step of everything."""

    def __init__(self, src, buf: bytes, byteorder: str, frac_ns: int, linktype: int):
        self.src = src
        self.buf = buf
        self.n = len(buf)
        self.pos = FILE_HEADER_LEN
        self.base = src.offset_base  # file offset of buf[0]
        self.frame = src.frame_base  # the frame of the packet last given out
        self.first = self.frame + 1
        self.unpack = _RECORD[byteorder]
        self.frac_ns = frac_ns
        self.linktype = linktype
        self.offset = 0  # file offset of the record of the packet last given out

    def __iter__(self) -> Iterator[Packet]:
        return self

    def __next__(self) -> Packet:
        packet = self._next()
        if packet is None:
            raise StopIteration
        return packet

    def _next(self):
        """The next Packet, or None at the end of the stream."""
        src = self.src
        short = self.n - self.pos < RECORD_HEADER_LEN
        if short and not self._refill(RECORD_HEADER_LEN, "record header"):
            return None
        pos = self.pos
        sec, frac, incl, orig = self.unpack(self.buf, pos)
        if self.n - pos - RECORD_HEADER_LEN < incl:
            if incl > MAX_RECORD:
                offset = self.base + pos
                raise CaptureError(
                    src.path, f"record claims {incl} captured bytes", self.frame + 1, offset
                )
            if not self._refill(RECORD_HEADER_LEN + incl, "record"):
                return None
            pos = self.pos
        start = pos + RECORD_HEADER_LEN
        end = start + incl
        self.frame += 1
        self.offset = self.base + pos
        if self.frame == self.first:
            src.first_of_linktype[self.linktype] = (self.frame, self.offset)
        self.pos = end
        ts = sec * 1_000_000_000 + frac * self.frac_ns
        return _new(Packet, (self.frame, ts, self.linktype, self.buf[start:end], orig))

    def _refill(self, need, unit):
        """Whether the buffer holds `need` bytes from pos once refilled; at the end of the
        stream, False, and the source told what the end cut."""
        pos = self.pos
        self.base += pos
        self.buf = self.src.refill(self.buf, pos, need, self.frame + 1, self.base)
        self.pos = 0
        self.n = len(self.buf)
        if self.n >= need:
            return True
        self.src.end(self.frame + 1, self.base, unit if self.n else "")
        return False
