"""Synthetic TCP conversations for the tests: Kafka frames laid into Ethernet/IPv4/TCP packets.

Used where a test needs exact control over packet boundaries, timing or faults; tests that
need real client behaviour record a real broker instead (see conftest.py).
"""

import socket
import struct

from dissector.capture.packet import Packet

ETH_IPV4 = b"\x00\x00\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x01" + b"\x08\x00"
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


def frame_bytes(body):
    """A Kafka frame: 4-byte size prefix and body."""
    return struct.pack(">i", len(body)) + body


def tcp_packet(src, dst, sport, dport, seq, ack, flags, payload=b""):
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack(
        ">BBHHHBBH4s4s",
        0x45,
        0,
        total,
        0,
        0x4000,
        64,
        6,
        0,
        socket.inet_aton(src),
        socket.inet_aton(dst),
    )
    return ETH_IPV4 + ip + tcp + payload


class Capture:
    """Builds packets in order; `packets` are dissector Packets, numbered from 1."""

    def __init__(self, start_ns=1_700_000_000_000_000_000):
        self.packets = []
        self.now = start_ns

    def add(self, data, after_ns=1000):
        self.now += after_ns
        self.packets.append(Packet(len(self.packets) + 1, self.now, 1, data, len(data)))
        return len(self.packets)

    def write_pcap(self, path):
        with open(path, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
            for p in self.packets:
                sec, ns = divmod(p.ts, 1_000_000_000)
                f.write(struct.pack("<IIII", sec, ns, len(p.data), p.wirelen))
                f.write(p.data)
        return path


class Connection:
    """One TCP connection inside a Capture; client and broker keep their own sequence numbers."""

    def __init__(
        self,
        cap,
        client=("10.0.0.2", 40000),
        broker=("10.0.0.1", 9092),
        handshake=True,
        mss=1448,
        isn=(1000, 5000),
    ):
        self.cap = cap
        self.client, self.broker = client, broker
        self.seq = {"c": isn[0], "b": isn[1]}
        self.mss = mss
        if handshake:
            self._send("c", SYN, b"")
            self.seq["c"] += 1
            self._send("b", SYN | ACK, b"")
            self.seq["b"] += 1
            self._send("c", ACK, b"")

    def _send(self, side, flags, payload, after_ns=1000, seq=None):
        src, dst = (self.client, self.broker) if side == "c" else (self.broker, self.client)
        other = "b" if side == "c" else "c"
        data = tcp_packet(
            src[0],
            dst[0],
            src[1],
            dst[1],
            (self.seq[side] if seq is None else seq) & 0xFFFFFFFF,
            self.seq[other] & 0xFFFFFFFF,
            flags,
            payload,
        )
        return self.cap.add(data, after_ns)

    def send(self, side, data, after_ns=1000, mss=None):
        """Send bytes from 'c' (client) or 'b' (broker) in segments; return their frame numbers."""
        mss = mss or self.mss
        frames = []
        for i in range(0, len(data), mss):
            chunk = data[i : i + mss]
            frames.append(self._send(side, PSH | ACK, chunk, after_ns if i == 0 else 10))
            self.seq[side] += len(chunk)
        return frames

    def request(self, body, **kw):
        return self.send("c", frame_bytes(body), **kw)

    def response(self, body, **kw):
        return self.send("b", frame_bytes(body), **kw)

    def close(self):
        self._send("c", FIN | ACK, b"")
        self.seq["c"] += 1
        self._send("b", FIN | ACK, b"")
        self.seq["b"] += 1
        self._send("c", ACK, b"")
