"""Classic libpcap files: a 24-byte file header, then 16-byte record headers each followed by data.

The parser works on a buffer filled in large chunks by a source (see `reader.Source`), so that
no packet costs a file read of its own.
"""

import struct
from collections.abc import Iterator

from dissector.capture.packet import Packet
from dissector.errors import CaptureError

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
_RECORD = {bo: struct.Struct(bo + "IIII") for bo in "<>"}


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
    return _records(src, buf, byteorder, frac_ns, network & LINKTYPE_MASK)


def _records(src, buf: bytes, byteorder: str, frac_ns: int, linktype: int) -> Iterator[Packet]:
    path = src.path
    unpack = _RECORD[byteorder].unpack_from
    new = tuple.__new__
    refill = src.refill
    pos = FILE_HEADER_LEN
    base = 0  # file offset of buf[0]
    n = len(buf)
    frame = 0
    while True:
        if n - pos < RECORD_HEADER_LEN:
            base += pos
            buf = refill(buf, pos, RECORD_HEADER_LEN, frame + 1, base)
            pos = 0
            n = len(buf)
            if n < RECORD_HEADER_LEN:
                src.end(frame + 1, base, "record header" if n else "")
                return
        sec, frac, incl, orig = unpack(buf, pos)
        start = pos + RECORD_HEADER_LEN
        end = start + incl
        if end > n:
            if incl > MAX_RECORD:
                raise CaptureError(
                    path, f"record claims {incl} captured bytes", frame=frame + 1, offset=base + pos
                )
            base += pos
            buf = refill(buf, pos, RECORD_HEADER_LEN + incl, frame + 1, base)
            pos = 0
            n = len(buf)
            start = RECORD_HEADER_LEN
            end = start + incl
            if end > n:
                src.end(frame + 1, base, "record")
                return
        frame += 1
        src.offset = base + pos
        if frame == 1:
            src.first_of_linktype[linktype] = (1, base + pos)
        yield new(
            Packet, (frame, sec * 1_000_000_000 + frac * frac_ns, linktype, buf[start:end], orig)
        )
        pos = end
