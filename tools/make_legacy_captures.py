"""Build the Kafka 0.7 sample captures byte by byte from the 0.7 wire-format notes.

No 0.7 broker is available to record from, so every request, response and message here is
laid out by hand, field by field, as the notes (seeds 001 and 002, the "Kafka Wire Format"
pages for 0.6/0.7) describe them: REQUEST_LENGTH, REQUEST_TYPE, topic, partition and the
per-type fields; the multi-request header with TOPICPARTITION_COUNT; the 6-byte response
header; messages with magic 0 and magic 1. Two facts come from outside the notes: gzip
payloads are gzip streams, and snappy payloads use snappy-java's stream format (a 16-byte
header, then int32-length-prefixed raw blocks), which is what 0.7's Java client wrote.

A small in-memory log per topic-partition plays the broker: produced message sets are
appended as they are, offsets are byte positions in that log, and a fetch returns up to
MAX_SIZE bytes of it, which may end inside a message, as the notes say a 0.7 broker does.

Writes, next to each capture, <name>.expected.json: per connection, the requests in order
with what they carry, whether a response is due, and the frame (packet) number of the last
packet of each request and of each response.

    python tools/make_legacy_captures.py [--out DIR]
"""

import argparse
import gzip
import json
import struct
import zlib
from pathlib import Path

import cramjam

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ["001_ab32b2bd44bcaab9.txt", "002_9db2112b11bc7b8b.txt"]
BROKER_PORT = 9092  # the 0.7 broker's default port
BROKER_IP, CLIENT_IP = "10.0.7.1", "10.0.7.2"
START = 1_326_196_800  # 2012-01-10, when 0.7 was current
STEP_US = 1000

PRODUCE, FETCH, MULTIFETCH, MULTIPRODUCE, OFFSETS = range(5)
NAMES = {0: "Produce", 1: "Fetch", 2: "MultiFetch", 3: "MultiProduce", 4: "Offsets"}
ERRORS = {0: "NONE", 1: "OFFSET_OUT_OF_RANGE"}
LATEST, EARLIEST = -1, -2
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy"}


# --- 0.7 encoding, field by field ------------------------------------------------------------


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def topic_bytes(topic):
    raw = topic.encode("ascii")
    return i16(len(raw)) + raw


class Msg:
    """One 0.7 message: magic 0 (no attributes byte) or 1 (compression codec in attributes).

    A compressed message's payload is its inner messages, concatenated and compressed.
    """

    def __init__(self, value=b"", magic=1, codec=0, inner=()):
        self.magic, self.codec, self.inner = magic, codec, list(inner)
        self.payload = compress(codec, b"".join(m.encode() for m in inner)) if codec else value
        self.value = value

    def encode(self):
        crc = zlib.crc32(self.payload)  # CHECKSUM covers the payload only
        if self.magic == 0:
            return i32(1 + 4 + len(self.payload)) + b"\x00" + struct.pack(">I", crc) + self.payload
        head = struct.pack(">bbI", 1, self.codec, crc)
        return i32(len(head) + len(self.payload)) + head + self.payload

    def describe(self, offset):
        d = {"offset": offset, "magic": self.magic, "compression": CODEC_NAMES[self.codec]}
        if self.codec:
            # Inner messages have no offset of their own: only the wrapper can be fetched.
            d["messages"] = [m.describe(offset) for m in self.inner]
        else:
            d["value"] = self.value.decode()
        return d


def compress(codec, data):
    if codec == 1:
        return gzip.compress(data, mtime=0)
    if codec == 2:
        block = bytes(cramjam.snappy.compress_raw(data))
        return b"\x82SNAPPY\x00" + i32(1) + i32(1) + i32(len(block)) + block
    raise ValueError(codec)


def message_set(messages):
    """(bytes, [(position, Msg)])."""
    out, placed = b"", []
    for m in messages:
        placed.append((len(out), m))
        out += m.encode()
    return out, placed


def produce_block(topic, partition, set_bytes):
    return topic_bytes(topic) + i32(partition) + i32(len(set_bytes)) + set_bytes


def fetch_block(topic, partition, offset, max_size):
    return topic_bytes(topic) + i32(partition) + i64(offset) + i32(max_size)


def produce_request(topic, partition, set_bytes):
    return i16(PRODUCE) + produce_block(topic, partition, set_bytes)


def fetch_request(topic, partition, offset, max_size):
    return i16(FETCH) + fetch_block(topic, partition, offset, max_size)


def offsets_request(topic, partition, time, max_number):
    return i16(OFFSETS) + topic_bytes(topic) + i32(partition) + i64(time) + i32(max_number)


def multi_request(kind, blocks):
    return i16(kind) + i16(len(blocks)) + b"".join(blocks)


def fetch_response(error, set_bytes):
    return i16(error) + set_bytes


def multi_fetch_response(parts):
    """parts: fetch response bodies; each is sent with its own int32 length."""
    return i16(0) + b"".join(i32(len(p)) + p for p in parts)


def offsets_response(error, offsets):
    return i16(error) + i32(len(offsets)) + b"".join(i64(o) for o in offsets)


def frame(body):
    return i32(len(body)) + body


# --- 0.8+ encoding, for the mixed capture ----------------------------------------------------


def string(s):
    return topic_bytes(s)


def modern_request(api_key, version, correlation_id, client_id, body):
    return struct.pack(">hhi", api_key, version, correlation_id) + string(client_id) + body


# --- the broker's log ------------------------------------------------------------------------


class Log:
    """A topic-partition's log: appended message sets; offsets are byte positions."""

    def __init__(self):
        self.data = b""
        self.placed = []  # (offset, Msg)

    def append(self, set_bytes, placed):
        self.placed += [(len(self.data) + pos, m) for pos, m in placed]
        self.data += set_bytes

    def read(self, offset, max_size):
        """(bytes, described messages, partial bytes) of a fetch at offset."""
        chunk = self.data[offset : offset + max_size]
        end = offset + len(chunk)
        whole = [(o, m) for o, m in self.placed if offset <= o and o + len(m.encode()) <= end]
        used = sum(len(m.encode()) for _, m in whole)
        return chunk, [m.describe(o) for o, m in whole], len(chunk) - used


# --- packets ---------------------------------------------------------------------------------


class Capture:
    def __init__(self):
        self.packets = []

    def add(self, pkt):
        pkt.time = START + len(self.packets) * STEP_US / 1e6
        self.packets.append(pkt)
        return len(self.packets)  # frame numbers count from 1

    def write(self, path):
        from scapy.utils import wrpcap

        wrpcap(str(path), self.packets, linktype=1)


class Connection:
    """A client-broker TCP connection; records its exchanges for the manifest."""

    MACS = {"c": "02:00:00:00:07:02", "b": "02:00:00:00:07:01"}

    def __init__(self, cap, client_port, protocol):
        self.cap = cap
        self.ends = {"c": (CLIENT_IP, client_port), "b": (BROKER_IP, BROKER_PORT)}
        self.seq = {"c": 100_000 + client_port, "b": 900_000 + client_port}
        self.ip_id = {"c": 1, "b": 1}
        self.entry = {
            "client": f"{CLIENT_IP}:{client_port}",
            "broker": f"{BROKER_IP}:{BROKER_PORT}",
            "protocol": protocol,
            "requests": [],
        }
        self.unanswered = []

    def _packet(self, side, flags, payload=b"", options=()):
        from scapy.layers.inet import IP, TCP
        from scapy.layers.l2 import Ether
        from scapy.packet import Raw

        other = "b" if side == "c" else "c"
        (src, sport), (dst, dport) = self.ends[side], self.ends[other]
        pkt = (
            Ether(src=self.MACS[side], dst=self.MACS[other])
            / IP(src=src, dst=dst, id=self.ip_id[side], flags="DF", ttl=64)
            / TCP(
                sport=sport,
                dport=dport,
                seq=self.seq[side],
                ack=self.seq[other] if "A" in flags else 0,
                flags=flags,
                window=65535,
                options=list(options),
            )
        )
        if payload:
            pkt = pkt / Raw(payload)
        self.ip_id[side] += 1
        self.seq[side] += len(payload) + (1 if "S" in flags or "F" in flags else 0)
        return self.cap.add(pkt)

    def open(self):
        self._packet("c", "S", options=[("MSS", 1460)])
        self._packet("b", "SA", options=[("MSS", 1460)])
        self._packet("c", "A")
        return self

    def close(self):
        self._packet("c", "FA")
        self._packet("b", "FA")
        self._packet("c", "A")

    def send(self, side, data, cuts=()):
        """Send data in one segment, or split at the given positions; last frame number."""
        edges = [0, *cuts, len(data)]
        last = None
        for a, b in zip(edges, edges[1:], strict=False):
            last = self._packet(side, "PA", data[a:b])
        return last

    # Requests are sent as whole frames; several may share a segment (pipelining).
    def requests(self, items, cuts=()):
        last = self.send("c", b"".join(frame(body) for body, _ in items), cuts)
        for _, desc in items:
            desc["request_last_frame"] = last
            self.entry["requests"].append(desc)
            if desc["response"] is not None:
                self.unanswered.append(desc)
        return last

    def responses(self, bodies, cuts=()):
        """Answer the oldest unanswered requests in order, as 0.7 brokers do."""
        last = self.send("b", b"".join(frame(b) for b in bodies), cuts)
        for _ in bodies:
            self.unanswered.pop(0)["response"]["last_frame"] = last
        return last


def describe_request(kind, parts, answered):
    return {
        "request_type": kind,
        "api_name": NAMES[kind],
        "topic_partitions": parts,
        "expects_response": answered,
        "request_last_frame": None,
        "response": {"last_frame": None} if answered else None,
    }


# --- scenarios -------------------------------------------------------------------------------


class Broker:
    def __init__(self):
        self.logs = {}

    def log(self, topic, partition):
        return self.logs.setdefault((topic, partition), Log())


def produce(broker, kind, sets):
    """Produce or Multi-Produce of [(topic, partition, [Msg])]: (request bytes, description)."""
    blocks, parts = [], []
    for topic, partition, messages in sets:
        data, placed = message_set(messages)
        broker.log(topic, partition).append(data, placed)
        blocks.append(produce_block(topic, partition, data))
        parts.append(
            {
                "topic": topic,
                "partition": partition,
                # A produced message has no offset: 0.7 tells the producer nothing.
                "messages": [m.describe(None) for _, m in placed],
            }
        )
    body = i16(PRODUCE) + blocks[0] if kind == PRODUCE else multi_request(kind, blocks)
    return body, describe_request(kind, parts, answered=False)


def fetch(broker, kind, wanted):
    """Fetch or Multi-Fetch of [(topic, partition, offset, max_size)] and its answer."""
    blocks, parts, answers, results = [], [], [], []
    for topic, partition, offset, max_size in wanted:
        blocks.append(fetch_block(topic, partition, offset, max_size))
        parts.append(
            {"topic": topic, "partition": partition, "offset": offset, "max_size": max_size}
        )
        log = broker.log(topic, partition)
        if offset > len(log.data):
            code, chunk, described, partial = 1, b"", [], 0  # OFFSET_OUT_OF_RANGE, no messages
        else:
            code = 0
            chunk, described, partial = log.read(offset, max_size)
        answers.append(fetch_response(code, chunk))
        results.append(
            {
                "error_code": code,
                "error_name": ERRORS[code],
                "messages": described,
                "partial_message_bytes": partial,
            }
        )
    req = describe_request(kind, parts, answered=True)
    if kind == FETCH:
        req["response"].update(results[0])
        return i16(FETCH) + blocks[0], req, answers[0]
    req["response"].update(error_code=0, error_name="NONE")
    req["response"]["topic_partitions"] = [
        {"topic": p["topic"], "partition": p["partition"], **r}
        for p, r in zip(parts, results, strict=True)
    ]
    return multi_request(MULTIFETCH, blocks), req, multi_fetch_response(answers)


def offsets(broker, topic, partition, time, max_number):
    log = broker.log(topic, partition)
    # EARLIEST is the first segment's start; LATEST the high water mark.
    found = [0] if time == EARLIEST else [len(log.data)]
    found = found[:max_number]
    part = {"topic": topic, "partition": partition, "time": time, "max_number": max_number}
    req = describe_request(OFFSETS, [part], answered=True)
    req["response"].update(error_code=0, error_name="NONE", offsets=found)
    return offsets_request(topic, partition, time, max_number), req, offsets_response(0, found)


def producer_session(cap, broker, port):
    conn = Connection(cap, port, "0.7").open()
    sets = [
        [("dogs", 0, [Msg(b"woof", magic=0), Msg(b"arf", magic=0)])],
        [("dogs", 0, [Msg(b"bark", magic=1)])],
        [("dogs", 0, [Msg(codec=1, inner=[Msg(b"howl"), Msg(b"yip")])])],
        [("dogs", 0, [Msg(codec=2, inner=[Msg(b"growl"), Msg(b"whine")])])],
    ]
    for s in sets:
        conn.requests([produce(broker, PRODUCE, s)])
    multi = [("cats", 1, [Msg(b"meow"), Msg(b"purr", magic=0)]), ("dogs", 1, [Msg(b"ruff")])]
    body, desc = produce(broker, MULTIPRODUCE, multi)
    conn.requests([(body, desc)], cuts=[40])  # one request over two segments
    conn.close()
    return conn.entry


def consumer_session(cap, broker, port):
    conn = Connection(cap, port, "0.7").open()
    # Two Offsets requests pipelined in one segment, answered in order in one segment.
    a, b = offsets(broker, "dogs", 0, EARLIEST, 1), offsets(broker, "dogs", 0, LATEST, 1)
    conn.requests([a[:2], b[:2]])
    conn.responses([a[2], b[2]])

    body, desc, answer = fetch(broker, FETCH, [("dogs", 0, 0, 1 << 20)])
    conn.requests([(body, desc)])
    conn.responses([answer], cuts=[64])  # one response over two segments

    # Multi-Fetch from the gzip message on, with a MAX_SIZE that ends inside the snappy one.
    dogs = broker.log("dogs", 0)
    gz_at = next(o for o, m in dogs.placed if m.codec == 1)
    sn_at = next(o for o, m in dogs.placed if m.codec == 2)
    wanted = [("dogs", 0, gz_at, sn_at - gz_at + 10), ("cats", 1, 0, 4096)]
    body, desc, answer = fetch(broker, MULTIFETCH, wanted)
    conn.requests([(body, desc)])
    conn.responses([answer])

    body, desc, answer = fetch(broker, FETCH, [("dogs", 0, 999_999, 4096)])
    conn.requests([(body, desc)])
    conn.responses([answer])
    conn.close()
    return conn.entry


def legacy_capture():
    cap, broker = Capture(), Broker()
    conns = [producer_session(cap, broker, 40701), consumer_session(cap, broker, 40702)]
    return cap, conns


class ModernConnection(Connection):
    def request(self, api_key, name, correlation_id, body, extra):
        client_id = "mixed-client"
        desc = {
            "api_key": api_key,
            "api_name": name,
            "api_version": 0,
            "correlation_id": correlation_id,
            "client_id": client_id,
            **extra,
            "expects_response": True,
            "request_last_frame": None,
            "response": {"last_frame": None},
        }
        self.requests([(modern_request(api_key, 0, correlation_id, client_id, body), desc)])
        return desc


def api_versions_response(correlation_id, api_keys):
    entries = b"".join(struct.pack(">hhh", *k) for k in api_keys)
    return i32(correlation_id) + i16(0) + i32(len(api_keys)) + entries


def metadata_response(correlation_id, brokers, topics):
    out = i32(correlation_id) + i32(len(brokers))
    for node, host, port in brokers:
        out += i32(node) + string(host) + i32(port)
    out += i32(len(topics))
    for t in topics:
        out += i16(t["error_code"]) + string(t["name"]) + i32(len(t["partitions"]))
        for p in t["partitions"]:
            out += i16(p["error_code"]) + i32(p["partition"]) + i32(p["leader"])
            out += i32(len(p["replicas"])) + b"".join(i32(r) for r in p["replicas"])
            out += i32(len(p["isr"])) + b"".join(i32(r) for r in p["isr"])
    return out


def mixed_capture():
    """A 0.7 and a 0.8+ connection to the same broker port, their packets interleaved."""
    cap, broker = Capture(), Broker()
    # Give the 0.7 broker something to serve, without capturing its production.
    data, placed = message_set([Msg(b"woof", magic=0), Msg(b"bark")])
    broker.log("dogs", 0).append(data, placed)

    old = Connection(cap, 40711, "0.7").open()
    new = ModernConnection(cap, 40712, "0.8+").open()

    off = offsets(broker, "dogs", 0, LATEST, 1)
    old.requests([off[:2]])
    versions = new.request(18, "ApiVersions", 1, b"", {})
    old.responses([off[2]])
    api_keys = [[0, 0, 2], [1, 0, 2], [2, 0, 1], [3, 0, 1], [18, 0, 0]]
    versions["response"].update(error_code=0, api_keys=api_keys)
    new.responses([api_versions_response(1, api_keys)])

    body, desc, answer = fetch(broker, FETCH, [("dogs", 0, 0, 4096)])
    old.requests([(body, desc)])
    meta = new.request(3, "Metadata", 2, i32(1) + string("dogs"), {"topics": ["dogs"]})
    old.responses([answer])
    brokers = [[1, BROKER_IP, BROKER_PORT]]
    partition = {"error_code": 0, "partition": 0, "leader": 1, "replicas": [1], "isr": [1]}
    topics = [{"error_code": 0, "name": "dogs", "partitions": [partition]}]
    meta["response"].update(brokers=brokers, topics=topics)
    new.responses([metadata_response(2, brokers, topics)])
    old.close()
    new.close()
    return cap, [old.entry, new.entry]


def write(out, name, cap, conns):
    pcap = out / f"{name}.pcap"
    cap.write(pcap)
    manifest = {
        "name": name,
        "capture": pcap.name,
        "built_from": "the Kafka 0.7 wire-format notes (seeds " + ", ".join(SEEDS) + ")",
        "broker_port": BROKER_PORT,
        # Lets readers of every manifest tell 0.7 captures apart from recorded 0.8+ ones.
        "protocols": sorted({c["protocol"] for c in conns}),
        "packets": len(cap.packets),
        "connections": conns,
    }
    path = out / f"{name}.expected.json"
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return pcap, path


def build(out):
    out.mkdir(parents=True, exist_ok=True)
    return [
        write(out, "legacy-0.7", *legacy_capture()),
        write(out, "legacy-0.7-mixed", *mixed_capture()),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "captures")
    args = parser.parse_args(argv)
    for pcap, manifest in build(args.out):
        print(f"wrote {pcap} and {manifest.name}")


if __name__ == "__main__":
    main()
