"""Which packets belong together: the shuffle key of a packet.

Every packet of one TCP connection (both directions, and every later connection reusing its
4-tuple) must reach the same task, since the core follows a connection packet by packet. The
key is a 32-bit hash of the unordered endpoint pair; two pairs sharing a hash only share a
task. IP fragments carry no ports: they are keyed by their address pair, so a connection whose
segments come fragmented is only whole when all its packets are (see the README).
"""

import zlib

from ..net.decode import NetDecoder


class ConnectionKeys:
    """Shuffle keys of one capture's packets: the core's link, IP and TCP decoding (`net`,
    whose counters of unreadable link types stay available), with IP fragments only noted,
    by their address pair, instead of reassembled."""

    def __init__(self):
        self.fragment_pair = None
        self.net = NetDecoder(on_fragment=self._fragment)

    def _fragment(self, src, dst):
        self.fragment_pair = (bytes(src), bytes(dst))

    def key(self, packet):
        """The shuffle key of a packet, or None for one the core would not read as TCP."""
        self.fragment_pair = None
        seg = self.net.decode(packet)
        if seg is not None:
            a = f"{seg.src}|{seg.sport}".encode()
            b = f"{seg.dst}|{seg.dport}".encode()
            return _hash(a, b)
        if self.fragment_pair is not None:
            return _hash(*self.fragment_pair)
        return None


def _hash(a, b):
    lo, hi = (a, b) if a <= b else (b, a)
    return zlib.crc32(hi, zlib.crc32(lo))
