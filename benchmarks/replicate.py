#!/usr/bin/env python
"""Make a large capture out of a real recording: N copies of it played at once.

Copy k (k = 0 .. N-1) is the recording as if a set of clients of its own had run it against
the same broker at the same time: every client-side IPv4 address (any address of a packet
other than the broker's endpoint) becomes a loopback address of that copy, 127.1.k.i (copy
k, i-th client address of the recording; past k = 255 the second octet goes on: 127.2.0.i),
client ports unchanged, the broker's address and port unchanged. Its timestamps are shifted
by k * ``--shift`` milliseconds, so the copies interleave rather than coincide. The IPv4 header
checksum is recomputed, and the TCP (or UDP) checksum recomputed over the whole segment when
the packet was captured whole (loopback captures carry checksums the kernel never filled in),
else updated for the new addresses (RFC 1624). Packets that are not IPv4 pass unchanged.

The copies are merged in timestamp order (ties keep copy order) by a k-way merge over N
readers of the file, so memory stays bounded whatever the size. The output is pcap with the
input's link type, snaplen and timestamp resolution. Link types: Ethernet (VLAN tags too),
Linux cooked SLL and SLL2, raw IP, BSD loopback.

The broker is ``--broker IP:PORT`` when given, else the ``broker`` of ``<stem>.expected.json``
beside the capture (written by record_real.py or make_capture.py), else the endpoint that
receives the capture's SYNs. Beside the output goes ``<stem>.expected.json``: the source, the
broker, the copies and each copy's addresses.

    python benchmarks/replicate.py benchmarks/out/real.pcap --copies 8 \\
        -o benchmarks/out/real8x.pcap [--shift 0.37] [--broker 127.0.0.1:9092]
"""

from __future__ import annotations

import argparse
import heapq
import ipaddress
import json
import struct
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

try:
    import numpy as np
except ImportError:  # the slower pure-Python sum below
    np = None

MAGICS = {  # pcap magic as read little-endian: (byte order, ticks per second)
    0xA1B2C3D4: ("<", 1_000_000),
    0xD4C3B2A1: (">", 1_000_000),
    0xA1B23C4D: ("<", 1_000_000_000),
    0x4D3CB2A1: (">", 1_000_000_000),
}
ETHERNET, NULL, RAW, RAW_OPENBSD, LINUX_SLL, IPV4_RAW, LINUX_SLL2 = 1, 0, 101, 12, 113, 228, 276
VLAN_TYPES = (0x8100, 0x88A8, 0x9100)
TCP, UDP = 6, 17
READ_BUFFER = 1 << 20


class ReplicateError(Exception):
    """The capture cannot be replicated; the message says why."""


# --------------------------------------------------------------------------- pcap


def read_header(f) -> tuple[bytes, str, int, int]:
    """The 24-byte global header, its byte order, ticks per second and link type."""
    header = f.read(24)
    if len(header) < 24:
        raise ReplicateError("not a pcap file (too short)")
    magic = struct.unpack("<I", header[:4])[0]
    if magic not in MAGICS:
        if magic == 0x0A0D0D0A:
            raise ReplicateError("pcapng: convert it first (editcap -F pcap IN OUT)")
        raise ReplicateError(f"not a pcap file (magic {magic:#010x})")
    order, ticks = MAGICS[magic]
    linktype = struct.unpack(order + "I", header[20:24])[0] & 0x0FFFFFFF
    return header, order, ticks, linktype


def records(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(timestamp in ticks, wire length, bytes) of each packet of a pcap file."""
    with open(path, "rb", buffering=READ_BUFFER) as f:
        _, order, ticks, _ = read_header(f)
        unpack = struct.Struct(order + "IIII").unpack
        read = f.read
        while True:
            head = read(16)
            if len(head) < 16:
                return
            sec, frac, caplen, wirelen = unpack(head)
            data = read(caplen)
            if len(data) < caplen:
                return  # a truncated last packet, as tcpdump leaves when killed
            yield sec * ticks + frac, wirelen, data


def ip_offset(linktype: int, data: bytes) -> int | None:
    """Where the IPv4 header starts in a frame of this link type, or None if not IPv4."""
    if linktype == ETHERNET:
        offset, kind = 14, data[12:14]
        while len(kind) == 2 and int.from_bytes(kind, "big") in VLAN_TYPES:
            offset, kind = offset + 4, data[offset + 2 : offset + 4]
        return offset if kind == b"\x08\x00" else None
    if linktype == LINUX_SLL:
        return 16 if data[14:16] == b"\x08\x00" else None
    if linktype == LINUX_SLL2:
        return 20 if data[0:2] == b"\x08\x00" else None
    if linktype in (RAW, RAW_OPENBSD, IPV4_RAW):
        return 0 if data[:1] and data[0] >> 4 == 4 else None
    if linktype == NULL:  # the address family in the capturing host's byte order
        return 4 if data[:4] in (b"\x02\x00\x00\x00", b"\x00\x00\x00\x02") else None
    raise ReplicateError(f"link type {linktype} not supported")


# --------------------------------------------------------------------------- checksums


def ones_sum(data) -> int:
    """The ones'-complement sum of ``data`` as 16-bit big-endian words (0 .. 0xFFFF)."""
    if len(data) & 1:
        data = bytes(data) + b"\x00"
    if np is not None and len(data) > 256:
        total = int(np.frombuffer(data, ">u2").sum(dtype=np.uint64))
    else:
        total = int.from_bytes(data, "big")  # 2^16 = 1 (mod 0xFFFF): words add up the same
    return 0 if total == 0 else (total % 0xFFFF or 0xFFFF)


def updated(checksum: int, old: bytes, new: bytes) -> int:
    """RFC 1624, eqn. 3: the checksum once the words ``old`` are replaced by ``new``."""
    total = (~checksum & 0xFFFF) + ones_sum(new) + (~ones_sum(old) & 0xFFFF)
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


# --------------------------------------------------------------------------- one copy


class Copy:
    """Rewrites the packets of copy ``k``: client addresses, checksums, timestamps."""

    def __init__(self, k: int, broker: tuple[bytes, int], clients: dict[bytes, int], linktype):
        self.k, self.broker, self.linktype = k, broker, linktype
        self.clients = clients  # original client address -> its number, shared by the copies
        self.addresses: dict[bytes, bytes] = {}  # original -> this copy's

    def address(self, original: bytes) -> bytes:
        new = self.addresses.get(original)
        if new is None:
            i = self.clients.setdefault(original, len(self.clients) + 1)
            if i > 255:
                raise ReplicateError("more than 255 client addresses in the capture")
            host = 0x7F010000 + self.k * 256 + i  # 127.1.k.i, then 127.2.0.i ...
            if host >> 24 != 0x7F:
                raise ReplicateError("too many copies for 127.0.0.0/8")
            new = self.addresses[original] = host.to_bytes(4, "big")
        return new

    def rewrite(self, data: bytes, wirelen: int) -> bytes:
        at = ip_offset(self.linktype, data)
        if at is None or len(data) < at + 20 or data[at] >> 4 != 4:
            return data
        ihl = (data[at] & 0x0F) * 4
        total_length = int.from_bytes(data[at + 2 : at + 4], "big")
        proto = data[at + 9]
        src, dst = data[at + 12 : at + 16], data[at + 16 : at + 20]
        first_fragment = int.from_bytes(data[at + 6 : at + 8], "big") & 0x1FFF == 0
        l4 = at + ihl
        has_ports = proto in (TCP, UDP) and first_fragment and len(data) >= l4 + 4
        broker_ip, broker_port = self.broker
        if has_ports:
            sport = int.from_bytes(data[l4 : l4 + 2], "big")
            dport = int.from_bytes(data[l4 + 2 : l4 + 4], "big")
            src_is_broker = src == broker_ip and sport == broker_port
            dst_is_broker = dst == broker_ip and dport == broker_port
        else:
            src_is_broker, dst_is_broker = src == broker_ip, dst == broker_ip
        new_src = src if src_is_broker else self.address(src)
        new_dst = dst if dst_is_broker else self.address(dst)
        out = bytearray(data)
        out[at + 12 : at + 16], out[at + 16 : at + 20] = new_src, new_dst
        out[at + 10 : at + 12] = b"\x00\x00"
        out[at + 10 : at + 12] = (~ones_sum(out[at : at + ihl]) & 0xFFFF).to_bytes(2, "big")
        if not first_fragment or proto not in (TCP, UDP):
            return bytes(out)
        where = l4 + (16 if proto == TCP else 6)  # the checksum field
        if len(data) < where + 2:
            return bytes(out)
        old = int.from_bytes(data[where : where + 2], "big")
        if proto == UDP and old == 0:
            return bytes(out)  # no UDP checksum: keep none
        end = at + total_length
        whole = wirelen == len(data) and ihl <= total_length and end <= len(data)
        if whole:  # recomputed: the pseudo-header, then the segment
            segment = end - l4
            out[where : where + 2] = b"\x00\x00"
            pseudo = new_src + new_dst + bytes((0, proto)) + segment.to_bytes(2, "big")
            total = ones_sum(pseudo) + ones_sum(memoryview(out)[l4:end])
            checksum = ~((total & 0xFFFF) + (total >> 16)) & 0xFFFF
        else:  # cut short by the snaplen: only the addresses' share changes
            checksum = updated(old, src + dst, new_src + new_dst)
        if proto == UDP and checksum == 0:
            checksum = 0xFFFF
        out[where : where + 2] = checksum.to_bytes(2, "big")
        return bytes(out)

    def packets(self, path: Path, shift_ticks: int) -> Iterator[tuple[int, int, bytes]]:
        offset = self.k * shift_ticks
        rewrite = self.rewrite
        for ts, wirelen, data in records(path):
            yield ts + offset, wirelen, rewrite(data, wirelen)


# --------------------------------------------------------------------------- the broker


def parse_endpoint(text: str) -> tuple[bytes, int]:
    host, _, port = text.rpartition(":")
    try:
        return ipaddress.IPv4Address(host).packed, int(port)
    except ValueError as exc:
        raise ReplicateError(f"broker {text!r}: expected IPv4:PORT") from exc


def manifest_of(capture: Path) -> dict:
    path = capture.with_name(capture.stem + ".expected.json")
    return json.loads(path.read_text()) if path.exists() else {}


def broker_of(capture: Path, given: str | None, linktype: int) -> tuple[tuple[bytes, int], str]:
    """The broker's (address, port) and where it was found."""
    if given:
        return parse_endpoint(given), "--broker"
    broker = manifest_of(capture).get("broker")
    if isinstance(broker, dict):  # record_real.py: {"address": "127.0.0.1:9092", "port": ...}
        host = str(broker.get("address", "127.0.0.1")).rpartition(":")
        host = host[0] or host[2]
        return parse_endpoint(f"{host}:{broker['port']}"), "manifest"
    if isinstance(broker, str):  # make_capture.py: "10.0.0.1:9092"
        return parse_endpoint(broker), "manifest"
    # The endpoint receiving SYNs (without ACK), over the first packets.
    syns: Counter[tuple[bytes, int]] = Counter()
    for n, (_, _, data) in enumerate(records(capture)):
        at = ip_offset(linktype, data)
        if at is not None and len(data) >= at + 20 and data[at + 9] == TCP:
            l4 = at + (data[at] & 0x0F) * 4
            if len(data) >= l4 + 14 and data[l4 + 13] & 0x12 == 0x02:
                syns[data[at + 16 : at + 20], int.from_bytes(data[l4 + 2 : l4 + 4], "big")] += 1
        if n >= 200_000:
            break
    if not syns:
        raise ReplicateError("no manifest and no SYN in the capture: give --broker IP:PORT")
    return syns.most_common(1)[0][0], "SYNs"


# --------------------------------------------------------------------------- the merge


def replicate(capture: Path, out: Path, copies: int, shift_ms: float, broker_arg: str | None):
    with open(capture, "rb") as f:
        header, order, ticks, linktype = read_header(f)
    broker, found = broker_of(capture, broker_arg, linktype)
    shift_ticks = round(shift_ms * ticks / 1000)
    clients: dict[bytes, int] = {}
    parts = [Copy(k, broker, clients, linktype) for k in range(copies)]
    streams = [part.packets(capture, shift_ticks) for part in parts]
    pack = struct.Struct(order + "IIII").pack
    packets = written = 0
    partial = out.with_name(out.stem + ".partial" + out.suffix)
    with open(partial, "wb", buffering=READ_BUFFER) as f:
        f.write(header)
        write = f.write
        # heapq.merge is stable: on equal timestamps the earlier copy comes first.
        for ts, wirelen, data in heapq.merge(*streams, key=lambda p: p[0]):
            sec, frac = divmod(ts, ticks)
            write(pack(sec, frac, len(data), wirelen))
            write(data)
            packets += 1
            written += 16 + len(data)
    partial.replace(out)
    ip = str(ipaddress.IPv4Address(broker[0]))
    return {
        "capture": out.name,
        "source": capture.name,
        "copies": copies,
        "shift_ms": shift_ms,
        "broker": {"address": f"{ip}:{broker[1]}", "port": broker[1], "found_in": found},
        "packets": packets,
        "size_bytes": 24 + written,
        "addresses": {
            str(ipaddress.IPv4Address(original)): [
                str(ipaddress.IPv4Address(part.address(original))) for part in parts
            ]
            for original in clients
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("capture", type=Path, help="the recording (pcap)")
    parser.add_argument("--copies", type=int, default=8, help="copies played at once (8)")
    parser.add_argument("-o", "--out", type=Path, help="output pcap (default <stem><N>x.pcap)")
    parser.add_argument(
        "--shift", type=float, default=0.37, help="ms between copy k and k+1 (0.37)"
    )
    parser.add_argument("--broker", help="IP:PORT of the broker (default: manifest, or SYNs)")
    args = parser.parse_args(argv)
    if args.copies < 1:
        parser.error("--copies must be at least 1")
    out = args.out or args.capture.with_name(f"{args.capture.stem}{args.copies}x.pcap")
    if out.resolve() == args.capture.resolve():
        parser.error("the output would overwrite the capture")
    started = time.monotonic()
    try:
        manifest = replicate(args.capture, out, args.copies, args.shift, args.broker)
    except (ReplicateError, OSError) as exc:
        print(f"replicate.py: error: {exc}", file=sys.stderr)
        return 2
    seconds = time.monotonic() - started
    manifest["seconds"] = round(seconds, 1)
    out.with_name(out.stem + ".expected.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(
        f"{out}: {args.copies} copies of {args.capture.name}, {manifest['packets']:,} packets, "
        f"{manifest['size_bytes'] / 1e6:.1f} MB in {seconds:.1f} s; broker "
        f"{manifest['broker']['address']} ({manifest['broker']['found_in']})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
