"""pcapng files: a sequence of sections, each a Section Header Block followed by other blocks.

Every packet block (EPB, SPB, obsolete PB) is one frame. Interfaces are per section; each has
its own link type and timestamp resolution. A Decryption Secrets Block of TLS key log lines
goes to the Source's `on_secrets` as it is read, before the packets after it. Blocks of other
types are skipped.
"""

import struct
from collections.abc import Iterator

from dissector.capture.packet import TS_MAX, TS_MIN, Packet
from dissector.errors import CaptureError

SHB_MAGIC = b"\x0a\x0d\x0d\x0a"
SHB = 0x0A0D0D0A
IDB = 1
PB = 2  # obsolete Packet Block
SPB = 3
EPB = 6
DSB = 0x0000000A  # Decryption Secrets Block
TLS_KEY_LOG = 0x544C534B  # "TLSK": a DSB holding NSS key log lines
BOM = 0x1A2B3C4D

OPT_ENDOFOPT = 0
OPT_IF_TSRESOL = 9
OPT_IF_TSOFFSET = 14

# Smallest legal total length per block type; anything shorter is a corrupt header.
MIN_LEN = {SHB: 28, IDB: 20, PB: 32, SPB: 16, EPB: 32, DSB: 20}
MAX_BLOCK = 256 * 1024 * 1024

_U32 = {bo: struct.Struct(bo + "I") for bo in "<>"}
_BLOCK = {bo: struct.Struct(bo + "II") for bo in "<>"}
_SHB_VER = {bo: struct.Struct(bo + "HH") for bo in "<>"}
_IDB = {bo: struct.Struct(bo + "HHI") for bo in "<>"}
_OPT = {bo: struct.Struct(bo + "HH") for bo in "<>"}
_I64 = {bo: struct.Struct(bo + "q") for bo in "<>"}
_EPB = {bo: struct.Struct(bo + "IIIII") for bo in "<>"}  # body starting at the interface id
_EPB_FULL = {bo: struct.Struct(bo + "IIIIIII") for bo in "<>"}  # block header and EPB fields
_PB = {bo: struct.Struct(bo + "HHIIII") for bo in "<>"}
_SPB = {bo: struct.Struct(bo + "I") for bo in "<>"}


def _interface(body: bytes, bo: str, idb_off: int, end: int) -> tuple[int, int, int, int, int]:
    """Parse an IDB at `idb_off` (block start); returns (linktype, snaplen, mul, div, offset_ns).

    A timestamp of `units` ticks is `units * mul // div + offset_ns` nanoseconds.
    """
    linktype, _reserved, snaplen = _IDB[bo].unpack_from(body, idb_off + 8)
    resol = 6  # default: microseconds
    offset_s = 0
    unpack_opt = _OPT[bo].unpack_from
    o = idb_off + 16
    opts_end = end - 4
    # Options are lenient: a malformed list just ends the scan, the packets stay readable.
    while o + 4 <= opts_end:
        code, length = unpack_opt(body, o)
        o += 4
        if code == OPT_ENDOFOPT or o + length > opts_end:
            break
        if code == OPT_IF_TSRESOL and length >= 1:
            resol = body[o]
        elif code == OPT_IF_TSOFFSET and length >= 8:
            offset_s = _I64[bo].unpack_from(body, o)[0]
        o += (length + 3) & ~3
    if resol & 0x80:
        mul, div = 1_000_000_000, 1 << (resol & 0x7F)
    elif resol <= 9:
        mul, div = 10 ** (9 - resol), 1
    else:
        mul, div = 1, 10 ** (resol - 9)
    return linktype, snaplen, mul, div, offset_s * 1_000_000_000


def iter_pcapng(src, buf: bytes) -> Iterator[Packet]:
    """Yield the packets of a pcapng stream; `buf` holds the bytes the source already delivered."""
    path = src.path
    if bytes(buf[:4]) != SHB_MAGIC:
        raise CaptureError(path, "not a pcapng file (no section header)", frame=1, offset=0)
    new = tuple.__new__
    refill = src.refill
    first_of_linktype = src.first_of_linktype
    pos = 0
    base = start = src.offset_base  # file offset of buf[0]; of the stream's start
    n = len(buf)
    frame = src.frame_base  # the frame of the packet last given out
    bo = "<"
    ifaces: list[tuple[int, int, int, int, int]] = []
    unpack_block = _BLOCK[bo].unpack_from
    unpack_u32 = _U32[bo].unpack_from
    unpack_epb = _EPB[bo].unpack_from
    unpack_epb_full = _EPB_FULL[bo].unpack_from
    # The interface of the last EPB, so that the common run of EPBs on one interface skips the
    # general block handling: id, link type, timestamp factors.
    last = -1
    last_linktype = last_mul = last_div = last_off = 0

    while True:
        if n - pos < 12:
            base += pos
            buf = refill(buf, pos, 12, frame + 1, base)
            pos = 0
            n = len(buf)
            if n < 12:
                if n and base == start:
                    raise CaptureError(
                        path, "file ends inside the section header block", frame + 1, start
                    )
                src.end(frame + 1, base, "block header" if n else "")
                return
        if n - pos >= 28:
            btype, blen, iface, hi, lo, caplen, wirelen = unpack_epb_full(buf, pos)
            end = pos + blen
            if (
                btype == EPB
                and iface == last
                and not blen & 3
                and caplen + 32 <= blen <= MAX_BLOCK
                and end <= n
                and unpack_u32(buf, end - 4)[0] == blen
            ):
                ts = (hi << 32 | lo) * last_mul
                if last_div != 1:
                    ts //= last_div
                ts += last_off
                frame += 1
                src.offset = base + pos
                if ts > TS_MAX or ts < TS_MIN:
                    ts = src.clamp_ts(ts, frame, base + pos)
                data = buf[pos + 28 : pos + 28 + caplen]
                yield new(Packet, (frame, ts, last_linktype, data, wirelen))
                pos = end
                continue
        btype, blen = unpack_block(buf, pos)
        if btype == SHB:
            # The byte-order magic decides how this section, including its own length, reads.
            magic = buf[pos + 8 : pos + 12]
            if magic == b"\x4d\x3c\x2b\x1a":
                bo = "<"
            elif magic == b"\x1a\x2b\x3c\x4d":
                bo = ">"
            else:
                raise CaptureError(
                    path, "section header with a bad byte-order magic", frame + 1, base + pos
                )
            unpack_block = _BLOCK[bo].unpack_from
            unpack_u32 = _U32[bo].unpack_from
            unpack_epb = _EPB[bo].unpack_from
            unpack_epb_full = _EPB_FULL[bo].unpack_from
            blen = unpack_u32(buf, pos + 4)[0]
            ifaces = []
            last = -1
        if blen & 3 or blen < MIN_LEN.get(btype, 12) or blen > MAX_BLOCK:
            raise CaptureError(
                path, f"block of type {btype:#x} has a bad length {blen}", frame + 1, base + pos
            )
        end = pos + blen
        if end > n:
            base += pos
            buf = refill(buf, pos, blen, frame + 1, base)
            pos = 0
            n = len(buf)
            end = blen
            if end > n:
                if base == start:
                    raise CaptureError(
                        path, "file ends inside the section header block", frame + 1, start
                    )
                src.end(frame + 1, base, "block")
                return
        if unpack_u32(buf, end - 4)[0] != blen:
            raise CaptureError(
                path,
                f"block of type {btype:#x}: trailing length differs from {blen}",
                frame + 1,
                base + pos,
            )

        if btype in (EPB, PB):  # PB: the obsolete form, with a drops count
            if btype == EPB:
                iface, hi, lo, caplen, wirelen = unpack_epb(buf, pos + 8)
            else:
                iface, _drops, hi, lo, caplen, wirelen = _PB[bo].unpack_from(buf, pos + 8)
            if caplen > blen - 32:
                raise CaptureError(
                    path,
                    f"packet block claims {caplen} captured bytes in {blen}",
                    frame + 1,
                    base + pos,
                )
            try:
                linktype, _snap, mul, div, off = ifaces[iface]
            except IndexError:
                raise CaptureError(
                    path, f"packet block refers to unknown interface {iface}", frame + 1, base + pos
                ) from None
            last, last_linktype, last_mul, last_div, last_off = iface, linktype, mul, div, off
            ts = (hi << 32 | lo) * mul // div + off
            frame += 1
            src.offset = base + pos
            if linktype not in first_of_linktype:
                first_of_linktype[linktype] = (frame, base + pos)
            if ts > TS_MAX or ts < TS_MIN:
                ts = src.clamp_ts(ts, frame, base + pos)
            yield new(Packet, (frame, ts, linktype, buf[pos + 28 : pos + 28 + caplen], wirelen))
        elif btype == IDB:
            ifaces.append(_interface(buf, bo, pos, end))
        elif btype == SPB:
            if not ifaces:
                raise CaptureError(
                    path, "simple packet block before any interface", frame + 1, base + pos
                )
            linktype, snaplen, _mul, _div, _off = ifaces[0]
            wirelen = _SPB[bo].unpack_from(buf, pos + 8)[0]
            caplen = min(wirelen, blen - 16)
            if snaplen:
                caplen = min(caplen, snaplen)
            frame += 1
            src.offset = base + pos
            if linktype not in first_of_linktype:
                first_of_linktype[linktype] = (frame, base + pos)
            # SPBs carry no timestamp.
            yield new(Packet, (frame, 0, linktype, buf[pos + 12 : pos + 12 + caplen], wirelen))
        elif btype == DSB:
            kind, size = _BLOCK[bo].unpack_from(buf, pos + 8)
            if kind == TLS_KEY_LOG and size <= blen - 20 and src.on_secrets is not None:
                src.on_secrets(bytes(buf[pos + 16 : pos + 16 + size]))
        elif btype == SHB:
            major, _minor = _SHB_VER[bo].unpack_from(buf, pos + 12)
            if major != 1:
                raise CaptureError(
                    path, f"unsupported pcapng version {major}", frame + 1, base + pos
                )
        pos = end
