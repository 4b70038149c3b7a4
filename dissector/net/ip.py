"""Network layer: IPv4 and IPv6 headers, down to the transport protocol they carry."""

import struct

PROTO_TCP = 6

# IPv6 extension headers walked over on the way to the transport header.
HOPOPTS, ROUTING, FRAGMENT, AH, DSTOPTS = 0, 43, 44, 51, 60

_IPV4 = struct.Struct("!BxHxxHxB2x4s4s")  # ver/ihl, total length, flags/fragment, proto, addrs
_IPV6 = struct.Struct("!4xHBx16s16s")  # payload length, next header, addresses
_FRAG6 = struct.Struct("!BxH")  # next header, fragment offset (13 bits) | reserved | M
_FRAG6_FULL = struct.Struct("!BxHI")  # the same and the identification


def ipv4(data: bytes, off: int) -> tuple[int, bytes, bytes, int, int, int] | None:
    """Parse the IPv4 header at `off`.

    Returns (protocol, src, dst, transport offset, end, fragment) where `end` is the offset the
    total length points to (it may lie beyond the captured data, or before its end when the link
    layer pads) and `fragment` is non-zero for any fragment: the MF flag and the fragment offset
    field (in 8-byte units) as the header has them (mask 0x2000 and 0x1FFF).
    None if the header is not a valid, fully captured IPv4 header.
    """
    if len(data) < off + 20:
        return None
    vihl, total, frag, proto, src, dst = _IPV4.unpack_from(data, off)
    hlen = (vihl & 0x0F) * 4
    if vihl >> 4 != 4 or hlen < 20 or len(data) < off + hlen:
        return None
    if total == 0:
        # Captured before TCP segmentation offload split it: the length is not filled in yet.
        total = len(data) - off
    elif total < hlen:
        return None
    return proto, src, dst, off + hlen, off + total, frag & 0x3FFF


def ipv6(data: bytes, off: int) -> tuple[int, bytes, bytes, int, int, int] | None:
    """Parse the IPv6 header at `off` and walk its extension headers; same result as ipv4().

    For a fragment (a fragment header with a non-zero offset or M set) the walk stops at the
    fragment header: `fragment` is then its offset in `data` (never 0), and the protocol and
    transport offset are those the fragment header names, meaningful only for the first
    fragment. An atomic fragment (offset 0, M clear) is the whole packet and is walked over.
    """
    if len(data) < off + 40 or data[off] >> 4 != 6:
        return None
    plen, nxt, src, dst = _IPV6.unpack_from(data, off)
    o = off + 40
    # Payload length 0 means a jumbogram or an offloaded send: the capture is all there is.
    end = o + plen if plen else len(data)
    n = len(data)
    while True:
        if nxt in (HOPOPTS, ROUTING, DSTOPTS):
            if n < o + 2:
                return None
            nxt, hlen = data[o], (data[o + 1] + 1) * 8
        elif nxt == FRAGMENT:
            if n < o + 8 or o + 8 > end:
                return None
            nxt, offm = _FRAG6.unpack_from(data, o)
            if offm & 0xFFF9:
                return nxt, src, dst, o + 8, end, o
            hlen = 8
        elif nxt == AH:
            if n < o + 2:
                return None
            nxt, hlen = data[o], (data[o + 1] + 2) * 4
        else:
            return nxt, src, dst, o, end, 0
        o += hlen
        if o > end:
            return None


def fragment6(data: bytes, o: int) -> tuple[int, int, bool, int]:
    """The IPv6 fragment header at `o`: (next header, byte offset, more fragments, id)."""
    nxt, offm, ident = _FRAG6_FULL.unpack_from(data, o)
    return nxt, offm & 0xFFF8, bool(offm & 1), ident


def skip_extensions(nxt: int, data: bytes, o: int, end: int) -> tuple[int, int] | None:
    """Walk the IPv6 extension headers starting at `o` (of type `nxt`) in a reassembled payload.

    Returns (transport protocol, its offset); None if a header runs past `end` or the capture.
    """
    n = min(len(data), end)
    while True:
        if nxt in (HOPOPTS, ROUTING, DSTOPTS):
            if n < o + 2:
                return None
            nxt, hlen = data[o], (data[o + 1] + 1) * 8
        elif nxt == AH:
            if n < o + 2:
                return None
            nxt, hlen = data[o], (data[o + 1] + 2) * 4
        else:
            return nxt, o
        o += hlen
        if o > n:
            return None
