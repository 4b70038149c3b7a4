"""Transport layer: the TCP header."""

import struct

_TCP = struct.Struct("!HHIIBB")  # ports, seq, ack, data offset, flags


def tcp(data: bytes, off: int, end: int) -> tuple[int, int, int, int, int, int] | None:
    """Parse the TCP header at `off` of a datagram ending at `end` (which may exceed the capture).

    Returns (sport, dport, seq, ack, flags, payload offset); None if the header is malformed or
    not fully captured.
    """
    if len(data) < off + 20:
        return None
    sport, dport, seq, ack, doff, flags = _TCP.unpack_from(data, off)
    payload = off + (doff >> 4) * 4
    if payload < off + 20 or payload > end or payload > len(data):
        return None
    return sport, dport, seq, ack, flags, payload
