"""Stage 2: from captured frames to TCP segments."""

import struct
from _socket import AF_INET, AF_INET6, inet_ntop  # socket's C core: `socket` loads 3 ms more
from collections.abc import Iterable, Iterator

from dissector.capture.packet import Packet
from dissector.net import link
from dissector.net.fragments import Reassembler
from dissector.net.ip import AH, DSTOPTS, PROTO_TCP, ROUTING, fragment6, ipv4, ipv6, skip_extensions
from dissector.net.segment import Segment
from dissector.net.tcp import tcp
from dissector.tuples import new as _new  # a NamedTuple from its fields, a C call

_ADDR_CACHE_MAX = 1 << 16
# What the first header of a fragmented IPv6 payload may be on the way to TCP.
_V6_CARRIERS = frozenset((PROTO_TCP, DSTOPTS, ROUTING, AH))

# The common case, IPv4 without options carrying TCP, read with one unpack: version/IHL,
# total length, flags/fragment offset, protocol, addresses, then the fixed TCP fields.
_V4_TCP = struct.Struct("!BxHxxHxB2x4s4sHHIIBB")
# IPv6 with TCP as the first next header: payload length, addresses, fixed TCP fields.
_V6_TCP = struct.Struct("!4xH2x16s16sHHIIBB")


class NetDecoder:
    """Decodes link, IP and TCP headers of one capture's packets into Segments.

    A class rather than a function so that per-capture state has a home:

    - IPv4 and IPv6 fragments of TCP are reassembled (see `fragments`); the segment of a
      reassembled datagram has the frame number and timestamp of the fragment that completed
      it, as Wireshark reports reassembled datagrams. `fragments` holds the counters.
    - Frames of link types it cannot decode are counted, for the caller to warn about:
      `unsupported` maps each such link type to [packets, frame number of the first],
      `unsupported_linktypes` is the set of them and `unsupported_packets` their total.

    `on_fragment`, if given, takes the IP fragments of TCP instead: it is called with the raw
    source and destination addresses of each, and no fragment is reassembled (for a driver
    that only needs to know which hosts a fragment is between).

    `in_place`: a payload that runs to the end of its packet stays in the packet's bytes, as
    `payload` from `start` (Segment), instead of being copied out: one copy and one object a
    packet fewer, for a consumer that reads `start` (the core's own pipeline).
    """

    def __init__(self, on_fragment=None, in_place=False) -> None:
        self.on_fragment = on_fragment
        self.in_place = in_place
        self.unsupported: dict[int, list[int]] = {}
        self.unsupported_linktypes: set[int] = set()
        self.unsupported_packets = 0
        self.fragments = Reassembler()
        self._handlers = dict(link.HANDLERS)
        self._addrs: dict[bytes, str] = {}
        self._pairs: dict[bytes, tuple[str, str]] = {}

    def _addr(self, raw: bytes) -> str:
        addrs = self._addrs
        if len(addrs) >= _ADDR_CACHE_MAX:
            addrs.clear()
        family = AF_INET if len(raw) == 4 else AF_INET6
        text = addrs[raw] = inet_ntop(family, raw)
        return text

    def _pair(self, pair: bytes) -> tuple[str, str]:
        """Both IPv4 addresses of a header as text, cached by their 8 raw bytes."""
        pairs = self._pairs
        if len(pairs) >= _ADDR_CACHE_MAX:
            pairs.clear()
        addrs = self._addrs
        src, dst = pair[:4], pair[4:]
        text = pairs[pair] = (addrs.get(src) or self._addr(src), addrs.get(dst) or self._addr(dst))
        return text

    def decode(self, pkt: Packet) -> Segment | None:
        """The TCP segment `pkt` carries, or None if it carries none or its headers are bad."""
        frame, ts, linktype, data, _wirelen = pkt
        n = len(data)
        p = data  # read byte by byte: compiled (decode.pxd), through a pointer
        # The common case: IPv4 without options behind an untagged Ethernet header. Total
        # lengths below 40 (0 under segmentation offload) take the general path.
        if linktype == 1 and n >= 54 and p[12] == 0x08 and p[13] == 0 and p[14] == 0x45:
            total = p[16] << 8 | p[17]
            if total >= 40:
                if p[23] != PROTO_TCP or p[20] & 0x3F or p[21]:  # not TCP, or a fragment
                    if p[23] == PROTO_TCP:
                        return self._ipv4_fragment(frame, ts, data, 14)
                    return None
                off = 34 + (p[46] >> 4) * 4
                end = 14 + total
                if off < 54 or off > end or off > n:
                    return None
                if end > n:
                    missing = end - n
                    end = n
                else:
                    missing = 0
                pair = data[26:34]
                src, dst = self._pairs.get(pair) or self._pair(pair)
                seq = p[38]  # widened before the shift: 24 bits up overflows a C int
                seq = seq << 24 | p[39] << 16 | p[40] << 8 | p[41]
                ack = p[42]
                ack = ack << 24 | p[43] << 16 | p[44] << 8 | p[45]
                sport = p[34] << 8 | p[35]
                dport = p[36] << 8 | p[37]
                if self.in_place and end == n:
                    payload, start = data, off  # left where it lies
                else:
                    payload, start = data[off:end], 0
                fields = (frame, ts, src, sport, dst, dport, seq, ack, p[47],
                          payload, missing, start)  # fmt: skip
                return _new(Segment, fields)

        handler = self._handlers.get(linktype)
        if handler is None:
            self._unsupported(linktype, frame)
            return None
        version, off = handler(data)
        ip_off = off
        if version == link.IPV4:
            if n >= off + 34 and data[off] == 0x45:
                vihl, total, frag, proto, src, dst, sport, dport, seq, ack, doff, flags = (
                    _V4_TCP.unpack_from(data, off)
                )
                if total >= 40:
                    if proto != PROTO_TCP or frag & 0x3FFF:
                        if proto == PROTO_TCP:
                            return self._ipv4_fragment(frame, ts, data, off)
                        return None
                    end = off + total
                    off += 20 + (doff >> 4) * 4
                    if doff < 0x50 or off > end or off > n:
                        return None
                    return self._segment(
                        frame, ts, src, dst, sport, dport, seq, ack, flags, data, off, end
                    )
            ip = ipv4(data, off)
        elif version == link.IPV6:
            if n >= off + 54 and data[off + 6] == PROTO_TCP and data[off] >> 4 == 6:
                plen, src, dst, sport, dport, seq, ack, doff, flags = _V6_TCP.unpack_from(data, off)
                # Payload length 0: a jumbogram or an offloaded send; the capture is all there is.
                end = off + 40 + plen if plen else n
                off += 40 + (doff >> 4) * 4
                if doff < 0x50 or off > end or off > n:
                    return None
                return self._segment(
                    frame, ts, src, dst, sport, dport, seq, ack, flags, data, off, end
                )
            ip = ipv6(data, off)
        else:
            return None
        if ip is None:
            return None
        proto, src, dst, off, end, fragment = ip
        if fragment:
            if version == link.IPV4:
                return self._ipv4_fragment(frame, ts, data, ip_off) if proto == PROTO_TCP else None
            return self._ipv6_fragment(frame, ts, data, fragment, end, src, dst)
        if proto != PROTO_TCP:
            return None
        th = tcp(data, off, end)
        if th is None:
            return None
        sport, dport, seq, ack, flags, off = th
        return self._segment(frame, ts, src, dst, sport, dport, seq, ack, flags, data, off, end)

    def _segment(self, frame, ts, src, dst, sport, dport, seq, ack, flags, data, off, end):
        n = len(data)
        if end > n:
            missing = end - n
            end = n
        else:
            missing = 0
        addrs = self._addrs
        src = addrs.get(src) or self._addr(src)
        dst = addrs.get(dst) or self._addr(dst)
        if self.in_place and end == n:
            payload, start = data, off  # left where it lies
        else:
            payload, start = data[off:end], 0
        fields = (frame, ts, src, sport, dst, dport, seq, ack, flags, payload, missing, start)
        return _new(Segment, fields)

    def _unsupported(self, linktype: int, frame: int) -> None:
        self.unsupported_packets += 1
        seen = self.unsupported.get(linktype)
        if seen is None:
            self.unsupported[linktype] = [1, frame]
            self.unsupported_linktypes.add(linktype)
        else:
            seen[0] += 1

    def _ipv4_fragment(self, frame: int, ts: int, data: bytes, off: int) -> Segment | None:
        """Add the IPv4 fragment of a TCP segment, header at `off`; the segment once whole."""
        ip = ipv4(data, off)
        if ip is None:
            return None
        proto, src, dst, start, end, frag = ip
        if self.on_fragment is not None:
            self.on_fragment(src, dst)
            return None
        ident = data[off + 4] << 8 | data[off + 5]
        done = self.fragments.add(
            (src, dst, ident, proto),
            (frag & 0x1FFF) * 8,
            bool(frag & 0x2000),
            data[start:end],
            end - start,
            frame,
            ts,
        )
        if done is None:
            return None
        return self._whole(frame, ts, src, dst, *done, 0)

    def _ipv6_fragment(
        self, frame: int, ts: int, data: bytes, fh: int, end: int, src: bytes, dst: bytes
    ) -> Segment | None:
        """Add the IPv6 fragment whose fragment header is at `fh`; the TCP segment once whole."""
        nxt, offset, more, ident = fragment6(data, fh)
        if nxt not in _V6_CARRIERS:
            return None
        if self.on_fragment is not None:
            self.on_fragment(src, dst)
            return None
        start = fh + 8
        done = self.fragments.add(
            (src, dst, ident, nxt), offset, more, data[start:end], end - start, frame, ts
        )
        if done is None:
            return None
        payload, missing = done
        found = skip_extensions(nxt, payload, 0, len(payload) + missing)
        if found is None or found[0] != PROTO_TCP:
            return None
        return self._whole(frame, ts, src, dst, payload, missing, found[1])

    def _whole(self, frame, ts, src, dst, payload, missing, off):
        """The segment of a reassembled datagram: TCP header at `off` of `payload`."""
        th = tcp(payload, off, len(payload) + missing)
        if th is None:
            return None
        sport, dport, seq, ack, flags, off = th
        addrs = self._addrs
        src = addrs.get(src) or self._addr(src)
        dst = addrs.get(dst) or self._addr(dst)
        fields = (frame, ts, src, sport, dst, dport, seq, ack, flags, payload[off:], missing, 0)
        return _new(Segment, fields)

    def segments(self, packets: Iterable[Packet]) -> Iterator[Segment]:
        """The TCP segments among `packets`, in order."""
        decode = self.decode
        for pkt in packets:
            seg = decode(pkt)
            if seg is not None:
                yield seg


def segments(packets: Iterable[Packet], decoder: NetDecoder | None = None) -> Iterator[Segment]:
    """The TCP segments among `packets`; pass a decoder to read its counters afterwards."""
    return (decoder or NetDecoder()).segments(packets)
