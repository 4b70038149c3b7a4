"""Which packets belong together: the shuffle key of a packet.

Every packet of one TCP connection (both directions, and every later connection reusing its
4-tuple) must reach the same task, since the core follows a connection packet by packet. The
key is a 32-bit hash of the unordered endpoint pair; two pairs sharing a hash only share a
task. IP fragments carry no ports: they are keyed by their address pair, so a connection whose
segments come fragmented is only whole when all its packets are (see the README).
"""

import zlib

from ..net.decode import NetDecoder
from ..net.ip import ipv4


class KeyDecoder(NetDecoder):
    """The core's link, IP and TCP decoding, with fragments keyed instead of reassembled."""

    def __init__(self):
        super().__init__()
        self.fragment_pair = None

    def _ipv4_fragment(self, frame, ts, data, off):
        ip = ipv4(data, off)
        if ip is not None:
            self.fragment_pair = (ip[1], ip[2])
        return None

    def _ipv6_fragment(self, frame, ts, data, fh, end, src, dst):
        self.fragment_pair = (src, dst)
        return None


def _hash(a, b):
    lo, hi = (a, b) if a <= b else (b, a)
    return zlib.crc32(hi, zlib.crc32(lo))


def connection_key(decoder, packet):
    """The shuffle key of a packet, or None for one the core would not read as TCP."""
    decoder.fragment_pair = None
    seg = decoder.decode(packet)
    if seg is not None:
        a = f"{seg.src}|{seg.sport}".encode()
        b = f"{seg.dst}|{seg.dport}".encode()
        return _hash(a, b)
    if decoder.fragment_pair is not None:
        src, dst = decoder.fragment_pair
        return _hash(bytes(src), bytes(dst))
    return None
