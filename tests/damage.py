"""Damaged copies of a capture, which of its Kafka exchanges the damage touched, and how many
of them the dissector and tshark recover.

Damage kinds (each a pure function of the packet list and its parameters, deterministic for a
given seed; packets are read and written as plain pcap records, wire lengths kept):

- ``drop(packets, fraction, seed)``: removes that fraction of the TCP packets carrying payload.
- ``reorder(packets, seed, window)``: swaps data packets of one connection direction that are
  at most ``window`` packets apart, never across a FIN, an RST or a data packet of the peer.
  With ``respect_acks`` (the default) a packet never moves past a packet of the peer
  acknowledging its bytes: an order a capture can show. Without it a packet may come after
  the pure ACK of its own bytes (captures merged from several queues or taps do that).
- ``duplicate(packets, fraction, seed)``: a copy of that fraction of the TCP packets, placed
  right after the packet or up to ``window - 1`` packets later, as retransmissions are.
- ``snap(packets, snaplen)``: every packet cut to ``snaplen`` captured bytes, its wire length
  unchanged, as a capture taken with that snap length is (the file header says so too).
- ``cut_start(packets, n)``: every packet of each connection up to and including its n-th
  data packet removed, handshake included, so those connections start mid-stream; with
  ``keep_handshake`` only the data packets go (a hole at the start of a known stream).

Each returns a ``Damaged``: the new packets, ``origin`` (the original frame number of every
new frame: a duplicate maps to the packet it copies) and ``kept`` (for each original packet
that lost payload, the bytes it kept: removed 0, snapped what the snap length left).
``compose`` chains several damages into one.

Which exchanges a damage touches: a ``Layout`` of the intact capture splits every TCP stream
into Kafka frames (on the size prefix; every sample capture is complete and starts with the
handshake) and knows which packets carry which bytes of each frame. An exchange is *touched*
when a byte of its request frame or of its response frame is missing from the damaged copy
(it was in a dropped or cut packet, or beyond the snap length). Exchanges matched by order
rather than by correlation id (0.7 connections, and the raw SASL tokens after a SaslHandshake
v0) depend on every exchange before them on their connection: they are touched when any byte
of their connection, in either direction, up to their own last packet is missing. Moving or
copying packets loses no byte, so it touches nothing.

Frame numbers: an exchange's ``request_frame`` / ``response_frame`` is the packet that
completed its frame. In a damaged copy the expected one is the packet at which every byte of
the stream up to the end of that frame has arrived (the latest first copy of the packets
carrying them), mapped back to its original number; with nothing moved or copied, that is
the original packet. A side with a missing byte expects frame ``LOST`` (0), which no row has.

``run`` dissects one damaged copy (a ``Trial``); ``versus_tshark`` counts, per capture and
damage, the exchanges each tool recovers.
"""

from __future__ import annotations

import ipaddress
import json
import random
import struct
import time
from bisect import bisect_left
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

import dissector
from dissector.tables import build_table

# -- pcap files ---------------------------------------------------------------------------------

_MAGICS = (0xA1B2C3D4, 0xA1B23C4D)  # microsecond and nanosecond timestamps
ETHERNET = 1


class Packet(NamedTuple):
    sec: int
    frac: int  # microseconds or nanoseconds, as the file says
    data: bytes  # the captured bytes
    wirelen: int  # the packet's length on the wire


@dataclass
class Pcap:
    endian: str
    magic: int
    version: tuple[int, int]
    thiszone: int
    sigfigs: int
    snaplen: int
    linktype: int
    packets: list[Packet]


def read_pcap(path) -> Pcap:
    raw = Path(path).read_bytes()  # the sample captures are small
    (magic,) = struct.unpack_from("<I", raw)
    if magic in _MAGICS:
        e = "<"
    elif struct.unpack_from(">I", raw)[0] in _MAGICS:
        e = ">"
    else:
        raise ValueError(f"{path}: not a pcap file")
    magic, major, minor, zone, sigfigs, snaplen, linktype = struct.unpack_from(e + "IHHiIII", raw)
    if linktype != ETHERNET:
        raise ValueError(f"{path}: link type {linktype}, only Ethernet is handled")
    packets = []
    pos = 24
    record = struct.Struct(e + "IIII")
    while pos + 16 <= len(raw):
        sec, frac, incl, orig = record.unpack_from(raw, pos)
        pos += 16
        packets.append(Packet(sec, frac, raw[pos : pos + incl], orig))
        pos += incl
    return Pcap(e, magic, (major, minor), zone, sigfigs, snaplen, linktype, packets)


def write_pcap(path, pcap: Pcap, packets=None, snaplen=None) -> None:
    e = pcap.endian
    out = [
        struct.pack(
            e + "IHHiIII",
            pcap.magic,
            *pcap.version,
            pcap.thiszone,
            pcap.sigfigs,
            snaplen or pcap.snaplen,
            pcap.linktype,
        )
    ]
    record = struct.Struct(e + "IIII")
    for p in pcap.packets if packets is None else packets:
        out.append(record.pack(p.sec, p.frac, len(p.data), p.wirelen))
        out.append(p.data)
    with open(path, "wb") as f:
        f.write(b"".join(out))


# -- TCP headers --------------------------------------------------------------------------------

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10


class Tcp(NamedTuple):
    src: str  # "ip:port", "[ip]:port" for IPv6, as the pairs table writes endpoints
    dst: str
    seq: int
    ack: int
    flags: int
    offset: int  # where the payload starts in the packet's bytes
    length: int  # payload length on the wire (from the IP length)


def _addr(raw):
    return str(ipaddress.ip_address(raw))


def tcp(packet: Packet) -> Tcp | None:
    """The TCP header of an Ethernet packet (802.1Q tags allowed), from its wire length."""
    d = packet.data
    pos = 12
    if len(d) < 14:
        return None
    etype = struct.unpack_from(">H", d, pos)[0]
    while etype in (0x8100, 0x88A8) and len(d) >= pos + 6:
        pos += 4
        etype = struct.unpack_from(">H", d, pos)[0]
    pos += 2
    if etype == 0x0800 and len(d) >= pos + 20:
        ihl = (d[pos] & 0x0F) * 4
        total, frag = struct.unpack_from(">H2xH", d, pos + 2)
        if d[pos + 9] != 6 or frag & 0x3FFF:
            return None
        src, dst = _addr(d[pos + 12 : pos + 16]), _addr(d[pos + 16 : pos + 20])
        end = pos + total
        pos += ihl
    elif etype == 0x86DD and len(d) >= pos + 40:
        if d[pos + 6] != 6:
            return None
        (plen,) = struct.unpack_from(">H", d, pos + 4)
        src, dst = (f"[{_addr(d[pos + 8 : pos + 24])}]", f"[{_addr(d[pos + 24 : pos + 40])}]")
        end = pos + 40 + plen
        pos += 40
    else:
        return None
    if len(d) < pos + 20:
        return None
    sport, dport, seq, ack, off, flags = struct.unpack_from(">HHIIBB", d, pos)
    start = pos + (off >> 4) * 4
    return Tcp(f"{src}:{sport}", f"{dst}:{dport}", seq, ack, flags, start, end - start)


# -- damage -------------------------------------------------------------------------------------


@dataclass
class Damaged:
    kind: str
    packets: list[Packet]
    origin: list[int]  # origin[i]: original frame number of the packet now numbered i + 1
    kept: dict[int, int] = field(default_factory=dict)  # original frame -> payload bytes kept
    snaplen: int | None = None

    def original(self, frame):
        """The original frame number of a frame of the damaged copy (None stays None)."""
        return None if frame is None else self.origin[frame - 1]

    def first_copies(self):
        """Original frame number -> new frame number of its first copy, for packets kept."""
        first = {}
        for new, orig in enumerate(self.origin, start=1):
            first.setdefault(orig, new)
        return first

    def write(self, path, pcap: Pcap):
        write_pcap(path, pcap, self.packets, self.snaplen)


def unchanged(packets) -> Damaged:
    """The capture as it is: for comparisons with the intact capture itself."""
    return Damaged("intact", list(packets), list(range(1, len(packets) + 1)))


def compose(*steps: Damaged) -> Damaged:
    """Damages applied one after the other (each to the packets of the one before) as one: new
    frames mapped to the first input's numbering; a packet lost bytes if any of its copies
    did in any step (which may count a packet whose other copy survived: more touched, never
    fewer)."""
    first, *rest = steps
    origin = list(first.origin)
    kept = dict(first.kept)
    for step in rest:
        for number, k in step.kept.items():
            o = origin[number - 1]
            kept[o] = min(k, kept.get(o, k))
        origin = [origin[n - 1] for n in step.origin]
    snaplen = min((d.snaplen for d in steps if d.snaplen), default=None)
    kind = "+".join(d.kind for d in steps)
    return Damaged(kind, steps[-1].packets, origin, kept, snaplen)


def _data_packets(packets):
    """Indexes (0-based) of the TCP packets that carry payload."""
    out = []
    for i, p in enumerate(packets):
        t = tcp(p)
        if t is not None and t.length > 0:
            out.append(i)
    return out


def _remove(kind, packets, gone):
    kept = [i for i in range(len(packets)) if i not in gone]
    lost = {}
    for i in gone:
        t = tcp(packets[i])
        if t is not None and t.length > 0:
            lost[i + 1] = 0
    return Damaged(kind, [packets[i] for i in kept], [i + 1 for i in kept], lost)


def drop(packets, fraction, seed) -> Damaged:
    """Remove round(fraction * n) of the n TCP packets that carry payload, chosen at random."""
    data = _data_packets(packets)
    rng = random.Random(seed)
    return _remove("drop", packets, set(rng.sample(data, round(fraction * len(data)))))


def _connections(packets):
    """Packet indexes of each TCP connection, in capture order; a new SYN on a 4-tuple in use
    starts a new connection."""
    conns = []
    current = {}  # frozenset of both endpoints -> index into conns
    isn = {}
    for i, p in enumerate(packets):
        t = tcp(p)
        if t is None:
            continue
        key = frozenset((t.src, t.dst))
        fresh = t.flags & (SYN | ACK) == SYN and isn.get(key) != t.seq
        if key not in current or fresh:
            current[key] = len(conns)
            conns.append([])
            if t.flags & SYN:
                isn[key] = t.seq
        conns[current[key]].append(i)
    return conns


def reorder(packets, seed, window=4, fraction=0.5, respect_acks=True) -> Damaged:
    """Swap data packets of one connection direction at most `window` packets apart.

    Each data packet not yet moved is, with probability `fraction`, swapped with a later data
    packet of its direction chosen at random among those within the window. No swap crosses a
    FIN, an RST or a data packet of the peer (a response never comes before its request); with
    respect_acks none crosses a packet of the peer that acknowledges a byte of the packet
    moving later, without it a packet may come after the pure ACK of its own bytes.
    """
    rng = random.Random(seed)
    n = len(packets)
    hdr = [tcp(p) for p in packets]
    order = list(range(n))
    moved = set()
    for i in range(n):
        a = hdr[i]
        if a is None or a.length == 0 or i in moved or rng.random() >= fraction:
            continue
        candidates = []
        for j in range(i + 1, min(n, i + 1 + window)):
            b = hdr[j]
            if b is None:
                continue
            if b.flags & (FIN | RST) and {b.src, b.dst} == {a.src, a.dst}:
                break
            if b.src == a.dst and b.dst == a.src:
                acks = b.flags & ACK and 0 < (b.ack - a.seq) & 0xFFFFFFFF < 1 << 31
                if (respect_acks and acks) or b.length > 0:
                    break
                continue
            if b.src == a.src and b.dst == a.dst and b.length > 0 and j not in moved:
                candidates.append(j)
        if candidates:
            j = rng.choice(candidates)
            order[i], order[j] = order[j], order[i]
            moved.update((i, j))
    return Damaged("reorder", [packets[i] for i in order], [i + 1 for i in order])


def duplicate(packets, fraction, seed, window=3) -> Damaged:
    """Copy round(fraction * n) of the n TCP packets; each copy goes right after its packet or
    up to window - 1 packets later."""
    rng = random.Random(seed)
    candidates = [i for i, p in enumerate(packets) if tcp(p) is not None]
    after = defaultdict(list)
    for i in sorted(rng.sample(candidates, round(fraction * len(candidates)))):
        after[min(len(packets) - 1, i + rng.randrange(window))].append(i)
    order = []
    for i in range(len(packets)):
        order.append(i)
        order += after[i]
    return Damaged("duplicate", [packets[i] for i in order], [i + 1 for i in order])


def snap(packets, snaplen) -> Damaged:
    """Every packet cut to snaplen captured bytes, its wire length kept."""
    out = []
    kept = {}
    for number, p in enumerate(packets, start=1):
        t = tcp(p)
        if t is not None and t.length > 0:
            if t.offset > snaplen:
                raise ValueError(f"snap length {snaplen} cuts the TCP header of frame {number}")
            if t.offset + t.length > snaplen:
                kept[number] = snaplen - t.offset
        out.append(Packet(p.sec, p.frac, p.data[:snaplen], p.wirelen))
    return Damaged("snap", out, list(range(1, len(packets) + 1)), kept, snaplen)


def cut_start(packets, n, keep_handshake=False) -> Damaged:
    """Each connection loses its first n data packets and, unless keep_handshake, every packet
    before them (the handshake): the capture starts mid-stream for it."""
    gone = set()
    for conn in _connections(packets):
        data = [i for i in conn if tcp(packets[i]).length > 0][:n]
        if not data:
            continue
        if keep_handshake:
            gone.update(data)
        else:
            gone.update(i for i in conn if i <= data[-1])
    return _remove("cut_start", packets, gone)


def reset_after(packets, number, sender) -> Damaged:
    """The connection of packet `number` reset by `sender` ("ip:port") right after that
    packet: a RST (its sequence number the next byte `sender` would send, acknowledging what
    it has) goes in after it, and the connection's later packets go. The RST is made from
    `sender`'s last packet of the connection before it (its addresses), checksums unchanged."""
    conns = _connections(packets)
    conn = next(c for c in conns if number - 1 in c)
    last = max(i for i in conn if i < number and tcp(packets[i]).src == sender)
    t = tcp(packets[last])
    seq = (t.seq + t.length) & 0xFFFFFFFF
    ack = t.ack
    for i in conn:
        p = tcp(packets[i])
        if i < number and p.dst == sender and p.length:
            ack = (p.seq + p.length) & 0xFFFFFFFF
    p = packets[last]
    head = bytearray(p.data[: t.offset])
    tcp_at = _tcp_start(head)
    struct.pack_into(">II", head, tcp_at + 4, seq, ack)
    head[tcp_at + 13] = RST | ACK
    _set_ip_length(head, tcp_at, len(head))
    at = packets[number - 1]
    rst = Packet(at.sec, at.frac, bytes(head), len(head))
    gone = {i for i in conn if i >= number}
    kept = [i for i in range(len(packets)) if i not in gone or i == number - 1]
    out = []
    origin = []
    for i in kept:
        out.append(packets[i])
        origin.append(i + 1)
        if i == number - 1:
            out.append(rst)
            origin.append(number)  # the RST stands in the numbering of the packet before it
    lost = {i + 1: 0 for i in gone if i != number - 1 and tcp(packets[i]).length > 0}
    return Damaged("reset", out, origin, lost)


def _ip_start(head):
    """(where the IP header starts in an Ethernet packet's bytes, its EtherType), VLAN tags
    stepped over."""
    pos = 12
    etype = struct.unpack_from(">H", head, pos)[0]
    while etype in (0x8100, 0x88A8):
        pos += 4
        etype = struct.unpack_from(">H", head, pos)[0]
    return pos + 2, etype


def _tcp_start(head):
    """Where the TCP header starts in an Ethernet packet's bytes (IPv4 or IPv6)."""
    pos, etype = _ip_start(head)
    return pos + (head[pos] & 0x0F) * 4 if etype == 0x0800 else pos + 40


def _set_ip_length(head, tcp_at, end):
    """The IP length field of a packet whose bytes now end at `end` (no payload)."""
    pos, etype = _ip_start(head)
    if etype == 0x0800:
        struct.pack_into(">H", head, pos + 2, end - pos)
    else:
        struct.pack_into(">H", head, pos + 4, end - pos - 40)


# -- what the damage touched --------------------------------------------------------------------


class KafkaFrame(NamedTuple):
    conn: int  # connection index in the intact capture
    client: str
    broker: str
    to_broker: bool
    start: int  # stream offset of the size prefix
    end: int
    head: bytes  # the first 8 body bytes
    packets: tuple[int, ...]  # original numbers of the packets carrying its bytes
    last: int  # the packet that carried its last byte


class Layout:
    """The Kafka frames of an intact capture and the packets that carry them."""

    def __init__(self, packets):
        self.frames = defaultdict(list)  # (client, broker, to_broker, last) -> [KafkaFrame]
        self.pieces = {}  # (conn, to_broker) -> sorted [(start, end, number)]
        self.conn_of = {}  # original frame number -> connection index
        for c, conn in enumerate(_connections(packets)):
            self._connection(c, packets, conn)

    def _connection(self, c, packets, conn):
        syn = next((i for i in conn if tcp(packets[i]).flags & (SYN | ACK) == SYN), None)
        if syn is None:
            return  # no handshake: the stream offsets are unknown
        first = tcp(packets[syn])
        client, broker = first.src, first.dst
        base = {}
        streams = {True: bytearray(), False: bytearray()}
        pieces = {True: [], False: []}
        for i in conn:
            t = tcp(packets[i])
            to_broker = t.src == client
            self.conn_of[i + 1] = c
            if t.flags & SYN:
                base[to_broker] = (t.seq + 1) & 0xFFFFFFFF
            if t.length == 0 or to_broker not in base:
                continue
            start = (t.seq - base[to_broker]) & 0xFFFFFFFF
            payload = packets[i].data[t.offset : t.offset + t.length]
            if len(payload) != t.length:
                raise ValueError(f"frame {i + 1}: the intact capture is cut short")
            s = streams[to_broker]
            if start + t.length <= len(s):
                continue  # a retransmission
            if start != len(s):
                raise ValueError(f"frame {i + 1}: the intact capture misses bytes")
            s += payload
            pieces[to_broker].append((start, start + t.length, i + 1))
        for to_broker in (True, False):
            self.pieces[(c, to_broker)] = pieces[to_broker]
            starts = [p[0] for p in pieces[to_broker]]
            s = streams[to_broker]
            pos = 0
            while pos + 4 <= len(s):
                (size,) = struct.unpack_from(">i", s, pos)
                end = pos + 4 + size
                if size < 0 or end > len(s):
                    break
                lo = max(0, bisect_left(starts, pos + 1) - 1)
                carrying = []
                for a, b, number in pieces[to_broker][lo:]:
                    if a >= end:
                        break
                    if b > pos:
                        carrying.append(number)
                f = KafkaFrame(
                    c, client, broker, to_broker, pos, end, bytes(s[pos + 4 : pos + 12]),
                    tuple(carrying), carrying[-1],
                )  # fmt: skip
                self.frames[(client, broker, to_broker, f.last)].append(f)
                pos = end

    def frame(self, client, broker, to_broker, last, corr=None, used=()):
        """The frame that packet `last` completed; with several, the one with that correlation
        id, else the first not in `used`."""
        found = self.frames.get((client, broker, to_broker, last), [])
        if corr is not None:
            at = 4 if to_broker else 0
            by_corr = [
                f
                for f in found
                if len(f.head) >= at + 4 and struct.unpack_from(">i", f.head, at)[0] == corr
            ]
            if by_corr:
                found = by_corr
        rest = [f for f in found if f not in used]
        return (rest or found or [None])[0]


def missing_bytes(layout: Layout, damaged: Damaged, frame: KafkaFrame) -> bool:
    """Whether a byte of the frame is missing from the damaged copy."""
    lo, hi = frame.start, frame.end
    for a, b, number in layout.pieces[(frame.conn, frame.to_broker)]:
        if number in damaged.kept and max(a + damaged.kept[number], lo) < min(b, hi):
            return True
    return False


def captured_prefix(layout: Layout, damaged: Damaged, frame: KafkaFrame) -> int:
    """How many of the frame's bytes, from its first, the damaged copy holds without a hole."""
    pos = frame.start
    for a, b, number in layout.pieces[(frame.conn, frame.to_broker)]:
        if b <= pos:
            continue
        if a > pos or pos >= frame.end:
            break
        pos = b if number not in damaged.kept else max(pos, a + damaged.kept[number])
        if number in damaged.kept:
            break
    return min(pos, frame.end) - frame.start


def header_size(key, request: bool) -> int:
    """Bytes of the request header (key, version, correlation id, client id, tags) or the
    response header of an exchange (client ids of one-byte characters in the samples)."""
    from dissector.protocol import messages

    api_key, version, client_id = key[2], key[3], key[5]
    if version is None:  # a raw SASL token: no Kafka header, paired by order
        return 0
    if request:
        hv = messages.request_header_version(api_key, version)
        return 8 if hv == 0 else 10 + len((client_id or "").encode()) + (hv == 2)
    return 4 + messages.response_header_version(api_key, version)


def completion(layout: Layout, damaged: Damaged, frame: KafkaFrame, first=None) -> int | None:
    """Original number of the packet that completes the frame in the damaged copy: the one
    whose first copy comes last among those carrying the stream's bytes up to the frame's end;
    for a frame whose last bytes were in packets removed, the first packet kept after them
    (where the sequence numbers show the hole)."""
    first = damaged.first_copies() if first is None else first
    latest = None
    pieces = layout.pieces[(frame.conn, frame.to_broker)]
    for i, (a, b, number) in enumerate(pieces):
        if a >= frame.end:
            break
        if number in first and (latest is None or first[number] > first[latest]):
            latest = number
        if b >= frame.end and damaged.kept.get(number) == 0:  # the frame ends in a hole
            return next((n for _, _, n in pieces[i + 1 :] if damaged.kept.get(n) != 0), None)
    return latest


def bounded(layout: Layout, damaged: Damaged, frame: KafkaFrame) -> bool:
    """Whether every hole in the frame has a known size: bytes past a snap length always do;
    packets removed do when a later packet of the frame's direction was kept."""
    pieces = layout.pieces[(frame.conn, frame.to_broker)]
    last = None  # index of the last packet of the frame that lost bytes
    for i, (a, b, number) in enumerate(pieces):
        if a >= frame.end:
            break
        if b > frame.start and number in damaged.kept:
            last = i
    if last is None or damaged.kept[pieces[last][2]] > 0:
        return True
    return any(damaged.kept.get(n) != 0 for _, _, n in pieces[last + 1 :])


# -- exchanges ----------------------------------------------------------------------------------

FIELDS = (
    "client",
    "broker",
    "api_key",
    "api_version",
    "correlation_id",
    "client_id",
    "status",
    "request_frame",
    "response_frame",
)


def _value(v):
    if v is None or v is pd.NA or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, (float, np.integer)):
        return int(v)
    return v


def row_key(row, origin=None) -> tuple:
    """The compared fields of a pairs row; frame numbers mapped back through `origin`."""
    values = [_value(getattr(row, name)) for name in FIELDS]
    if origin is not None:
        for k in (-2, -1):
            if values[k] is not None:
                values[k] = origin[values[k] - 1]
    return tuple(values)


@dataclass
class Exchange:
    """One row of the intact capture, with the frames it was made of."""

    key: tuple
    protocol: str
    request: KafkaFrame | None
    response: KafkaFrame | None
    by_order: bool  # paired by order (0.7, raw SASL), not by correlation id


def exchanges(pairs, layout: Layout) -> list[Exchange]:
    out = []
    used = set()
    for row in pairs.itertuples():
        key = row_key(row)
        client, broker, corr = key[0], key[1], key[4]
        req = resp = None
        if key[7] is not None:
            req = layout.frame(client, broker, True, key[7], corr, used)
            used.add(req)
        if key[8] is not None:
            resp = layout.frame(client, broker, False, key[8], corr, used)
            used.add(resp)
        request = dissector.tables.parse_body(row.request)
        raw = isinstance(request, dict) and bool(request.get("raw"))
        out.append(Exchange(key, row.protocol, req, resp, raw or row.protocol == "0.7"))
    return out


LOST = 0  # the frame number expected for a side with a missing byte: no packet has it


@dataclass
class Expectation:
    exchange: Exchange
    touched: bool
    key: tuple  # the row expected in the damaged copy, frames as original numbers (or LOST)
    lost_sides: tuple[bool, bool]  # (request, response) has a missing byte


def expectations(xs: list[Exchange], layout: Layout, damaged: Damaged) -> list[Expectation]:
    first = damaged.first_copies()
    lost_at = defaultdict(list)  # connection -> original numbers of packets that lost bytes
    for number in damaged.kept:
        if number in layout.conn_of:
            lost_at[layout.conn_of[number]].append(number)
    out = []
    for x in xs:
        sides = [
            f is not None and missing_bytes(layout, damaged, f) for f in (x.request, x.response)
        ]
        touched = any(sides)
        frames = [f for f in (x.request, x.response) if f is not None]
        if x.by_order and frames:
            last = max(f.last for f in frames)
            touched |= any(n <= last for n in lost_at[frames[0].conn])
        key = list(x.key)
        for k, f, lost in ((7, x.request, sides[0]), (8, x.response, sides[1])):
            if f is not None:
                # A frame the snap length cut is still found, at the packet carrying its end,
                # when its header was captured: the frame's bounds are known.
                # So is one with a hole where packets were removed, when the header was
                # captured and a later packet of its direction bounds the hole.
                found = not lost or (
                    damaged.kind in ("snap", "drop")
                    and x.protocol != "0.7"
                    and captured_prefix(layout, damaged, f) >= 4 + header_size(x.key, k == 7)
                    and bounded(layout, damaged, f)
                )
                key[k] = completion(layout, damaged, f, first) if found else LOST
        out.append(Expectation(x, touched, tuple(key), tuple(sides)))
    return out


def damaged_keys(pairs, damaged: Damaged) -> Counter:
    return Counter(row_key(r, damaged.origin) for r in pairs.itertuples())


# -- tshark -------------------------------------------------------------------------------------


def tshark_recovered(expected: list[Expectation], pdus, damaged: Damaged, port) -> list[bool]:
    """For each expected exchange, whether tshark found it in the damaged copy: the request PDU
    at the expected frame with the same header (API key, version, correlation id, client id),
    and, when the exchange has a response, a response PDU at the expected frame that tshark
    matched to that request."""
    requests = set()
    responses = set()
    for p in pdus:
        frame = damaged.original(p.frame)
        if p.dstport == port:
            requests.add(
                (p.srcport, frame, p.api_key, p.api_version, p.correlation_id, p.client_id)
            )
        elif p.request_frame is not None:
            responses.add((p.dstport, frame, p.correlation_id, damaged.original(p.request_frame)))
    out = []
    for e in expected:
        k = e.key
        cport = int(k[0].rsplit(":", 1)[1])
        ok = k[7] is not None and (cport, k[7], k[2], k[3], k[4], k[5]) in requests
        if ok and k[8] is not None:
            ok = (cport, k[8], k[4], k[7]) in responses
        out.append(ok)
    return out


# -- trials -------------------------------------------------------------------------------------

CASES = {  # name -> (kind, damage of a packet list)
    **{f"drop-10%-s{s}": ("drop", lambda p, s=s: drop(p, 0.1, s)) for s in (1, 2, 3)},
    "drop-30%-s1": ("drop", lambda p: drop(p, 0.3, 1)),
    **{f"reorder-w4-s{s}": ("reorder", lambda p, s=s: reorder(p, s, 4)) for s in (1, 2, 3)},
    **{
        f"reorder-past-ack-s{s}": (
            "reorder",
            lambda p, s=s: reorder(p, s, 4, respect_acks=False),
        )
        for s in (1, 2, 3)
    },
    **{
        f"duplicate-20%-s{s}": ("duplicate", lambda p, s=s: duplicate(p, 0.2, s)) for s in (1, 2, 3)
    },
    "snap-200": ("snap", lambda p: snap(p, 200)),
    "snap-128": ("snap", lambda p: snap(p, 128)),
    "cut_start-1": ("cut_start", lambda p: cut_start(p, 1)),
    "cut_start-2": ("cut_start", lambda p: cut_start(p, 2)),
    "cut_start-2-keep-handshake": ("cut_start", lambda p: cut_start(p, 2, keep_handshake=True)),
}
MODES = {"auto": False, "port": True}  # broker detected from traffic / given as --port


class Intact:
    """A sample capture, its layout, and its exchanges as the dissector finds them."""

    def __init__(self, path):
        self.path = Path(path)
        self.pcap = read_pcap(self.path)
        self.layout = Layout(self.pcap.packets)
        manifest = json.loads(self.path.with_suffix(".expected.json").read_text())
        self.port = manifest["broker_port"]
        self._exchanges = {}

    def ports(self, mode):
        return [self.port] if MODES[mode] else []

    def exchanges(self, mode):
        if mode not in self._exchanges:
            pairs = dissector.read_pcap(self.path, ports=self.ports(mode))
            self._exchanges[mode] = exchanges(pairs, self.layout)
        return self._exchanges[mode]


@dataclass
class Trial:
    intact: Intact
    case: str
    mode: str
    damaged: Damaged
    path: Path
    pairs: pd.DataFrame
    streams: pd.DataFrame
    expected: list[Expectation]
    keys: Counter
    seconds: float

    def recovered(self, e: Expectation) -> bool:
        return self.keys[e.key] > 0

    @property
    def missing_untouched(self):
        return [e for e in self.expected if not e.touched and not self.recovered(e)]


def run(intact: Intact, case: str, mode: str, workdir) -> Trial:
    """Damage a sample capture, write it, dissect it."""
    damaged = CASES[case][1](intact.pcap.packets)
    path = Path(workdir) / f"{intact.path.stem}-{case}.pcap"
    if not path.exists():
        damaged.write(path, intact.pcap)
    start = time.perf_counter()
    dissection = dissector.dissect(path, ports=intact.ports(mode))
    rows = list(dissection)
    pairs = build_table(rows, "pairs")
    streams = build_table(dissection.ended, "streams")
    seconds = time.perf_counter() - start
    expected = expectations(intact.exchanges(mode), intact.layout, damaged)
    return Trial(
        intact, case, mode, damaged, path, pairs, streams, expected,
        damaged_keys(pairs, damaged), seconds,
    )  # fmt: skip


# -- versus tshark ------------------------------------------------------------------------------

TSHARK_CASES = [
    "drop-10%-s1",
    "drop-30%-s1",
    "reorder-w4-s1",
    "reorder-past-ack-s1",
    "duplicate-20%-s1",
    "snap-200",
    "cut_start-1",
    "cut_start-2",
    "cut_start-2-keep-handshake",
]


@dataclass
class Count:
    exchanges: int
    touched: int
    ours: dict  # mode -> exchanges the dissector recovered as in the intact capture
    tshark: int  # exchanges tshark recovered (tshark_recovered)
    # exchanges whose every frame can be found: none lost, or lost only in holes whose place
    # and size the capture tells, the frame's size prefix and header captured (expectations)
    findable: int = 0


def findable(e: Expectation) -> bool:
    """Whether every frame of the expected exchange can be found in the damaged copy."""
    return LOST not in (e.key[7], e.key[8])


def versus_tshark(samples, cases, workdir, modes=("port", "auto"), cache=None) -> dict:
    """(capture, case) -> Count, the intact capture as case "intact"; tshark runs in parallel.

    The dissector's exchanges of the intact capture (with the broker port given) are the
    reference for both tools; tshark gets the broker port too."""
    import tshark_oracle

    cache = {} if cache is None else cache
    intacts = {path: Intact(path) for path in samples}
    jobs = []
    for path, base in intacts.items():
        jobs.append((path, "intact", base.path, {}))
        for case in cases:
            trials = {}
            for mode in modes:
                key = (path, case, mode)
                if key not in cache:
                    cache[key] = run(base, case, mode, workdir)
                trials[mode] = cache[key]
            jobs.append((path, case, trials[modes[0]].path, trials))
    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(lambda j: tshark_oracle.kafka_pdus(j[2], intacts[j[0]].port), jobs))
    table = {}
    for (path, case, _, trials), pdus in zip(jobs, found, strict=True):
        base = intacts[path]
        if trials:
            damaged = trials[modes[0]].damaged
            expected = trials[modes[0]].expected
            ours = {m: sum(t.recovered(e) for e in t.expected) for m, t in trials.items()}
        else:
            damaged = unchanged(base.pcap.packets)
            expected = expectations(base.exchanges(modes[0]), base.layout, damaged)
            ours = {m: len(base.exchanges(m)) for m in modes}
        touched = sum(e.touched for e in expected)
        theirs = sum(tshark_recovered(expected, pdus, damaged, base.port))
        can = sum(findable(e) for e in expected)
        table[(path.stem, case)] = Count(len(expected), touched, ours, theirs, can)
    return table
