"""Synthesise a large pcap of mixed Kafka traffic for the benchmark.

Several clients talk to one broker at 10.0.0.1:9092 over concurrent TCP connections. Each
connection opens with a three-way handshake, asks ApiVersions (v3) and Metadata, then runs a
workload that depends on its role:

* producers send Produce (v7 or v8, acks=1) requests carrying magic-2 record batches of a few KB
  to about 1 MB, sometimes pipelining two or three requests before the responses come back;
* one telemetry producer sends small Produce requests with acks=0, which get no response;
* consumers run incremental fetch sessions (Fetch v10 or v11) whose responses carry record
  batches, up to about 1 MB spread over many segments; a few come back empty after a long poll;
* an admin client refreshes the metadata of every topic;
* every client refreshes its metadata (v9) now and then.

Responses follow their requests after 0.2-5 ms of server time (long polls that come back empty
take 20-100 ms). These versions are the newest tshark 4.0 decodes; --newest gives the newer
clients the flexible Produce v9, Fetch v12 and Metadata v12 instead.

Frames are encoded with kafka-python's protocol classes; Ethernet, IPv4 and TCP headers (with
timestamps option and correct checksums) are packed directly. Most connections use an MSS of
1448 bytes; a few run on the broker host itself with loopback-sized segments of 65483 bytes.
The connections stop once the file reaches the requested size and close with FIN.

The expected counts (requests per API key and version, statuses, packets, bytes) and the
traffic's composition are written next to the capture as <name>.expected.json.

    python benchmarks/make_capture.py [--size-mb 320] [--out benchmarks/out/mixed.pcap]
"""

import argparse
import heapq
import ipaddress
import json
import random
import struct
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "out" / "mixed.pcap"

BROKER_IP = "10.0.0.1"
BROKER_PORT = 9092
BROKER_MAC = bytes.fromhex("0242ac110001")
ROUTER_MAC = bytes.fromhex("0242ac11fffe")
LOOPBACK_MAC = bytes(6)
START_NS = 1_741_942_800 * 1_000_000_000  # 2025-03-14 09:00:00 UTC
RECORD_TIME_MS = START_NS // 1_000_000 - 30_000

MSS_ETHERNET = 1448  # MSS 1460 less the 12-byte timestamps option
MSS_LOOPBACK = 65483  # MSS 65495 less the timestamps option
WINDOW = 0x3FFF  # scaled by 2**7 after the handshake

API_PRODUCE, API_FETCH, API_METADATA, API_VERSIONS = 0, 1, 3, 18
API_NAMES = {
    API_PRODUCE: "Produce",
    API_FETCH: "Fetch",
    API_METADATA: "Metadata",
    API_VERSIONS: "ApiVersions",
}

# (name, partitions); partition p is led by broker (p % 3) + 1, so a third are on this broker.
TOPICS = [
    ("orders", 12),
    ("payments", 6),
    ("clickstream", 24),
    ("inventory-updates", 6),
    ("audit-log", 9),
    ("client-metrics", 3),
]
BROKERS = [(1, "10.0.0.1"), (2, "10.0.0.2"), (3, "10.0.0.3")]
BROKER_ID = 1
CLUSTER_ID = "Xp1Zq8kVTz2mW5sYhC3bNw"

# What a 3.x broker advertises: (api_key, min_version, max_version).
# fmt: off
ADVERTISED_APIS = [
    (0, 0, 9), (1, 0, 13), (2, 0, 7), (3, 0, 12), (8, 0, 8), (9, 0, 8), (10, 0, 4), (11, 0, 9),
    (12, 0, 4), (13, 0, 5), (14, 0, 5), (15, 0, 5), (16, 0, 4), (17, 0, 1), (18, 0, 3),
    (19, 0, 7), (20, 0, 6), (21, 0, 2), (22, 0, 4), (23, 0, 4), (24, 0, 3), (25, 0, 3),
    (26, 0, 3), (27, 0, 1), (28, 0, 3), (29, 0, 3), (30, 0, 3), (31, 0, 3), (32, 0, 4),
    (33, 0, 2), (34, 0, 2), (35, 0, 4), (36, 0, 2), (37, 0, 3), (38, 0, 3), (39, 0, 2),
    (40, 0, 2), (41, 0, 3), (42, 0, 2), (43, 0, 2), (44, 0, 1), (45, 0, 0), (46, 0, 0),
    (47, 0, 0), (48, 0, 1), (49, 0, 1), (50, 0, 0), (51, 0, 0), (56, 0, 3), (57, 0, 1),
    (60, 0, 0), (61, 0, 0), (65, 0, 0), (66, 0, 0), (67, 0, 0),
]
# fmt: on

# One entry per connection (cycled when more are asked for): role, MSS, client generation.
# fmt: off
CONNECTION_PLAN = [
    ("producer", MSS_ETHERNET, "new"), ("consumer", MSS_ETHERNET, "new"),
    ("producer", MSS_ETHERNET, "old"), ("consumer", MSS_ETHERNET, "old"),
    ("producer", MSS_LOOPBACK, "new"), ("consumer", MSS_LOOPBACK, "new"),
    ("telemetry", MSS_ETHERNET, "new"), ("producer", MSS_ETHERNET, "new"),
    ("consumer", MSS_ETHERNET, "new"), ("admin", MSS_ETHERNET, "new"),
    ("producer", MSS_ETHERNET, "old"), ("consumer", MSS_ETHERNET, "old"),
    ("producer", MSS_LOOPBACK, "old"), ("consumer", MSS_ETHERNET, "new"),
    ("producer", MSS_ETHERNET, "new"), ("consumer", MSS_ETHERNET, "old"),
]
# fmt: on

# Versions per client generation: software version, {api_key: version}. The default set is one
# tshark 4.0 decodes completely (it knows Produce up to v8, Fetch up to v11, Metadata up to v9);
# --newest switches to flexible Produce v9 and Fetch v12 and to Metadata v12.
VERSIONS = {
    "old": ("2.8.2", {API_PRODUCE: 7, API_FETCH: 10, API_METADATA: 9}),
    "new": ("3.1.2", {API_PRODUCE: 8, API_FETCH: 11, API_METADATA: 9}),
}
NEWEST_VERSIONS = {
    "old": ("2.8.2", {API_PRODUCE: 7, API_FETCH: 11, API_METADATA: 9}),
    "new": ("3.4.1", {API_PRODUCE: 9, API_FETCH: 12, API_METADATA: 12}),
}

FIN, SYN, PSH, ACK = 0x01, 0x02, 0x08, 0x10

_PCAP_FILE = struct.Struct("<IHHiIII")
_PCAP_RECORD = struct.Struct("<IIII")
# Ethernet, IPv4 (no options), TCP with NOP NOP TIMESTAMPS: 14 + 20 + 32 bytes.
_DATA_HEADERS = struct.Struct("!6s6sH BBHHHBBH4s4s HHIIBBHHH BBBBII")
# SYN options: MSS, SACK permitted, TIMESTAMPS, NOP, window scale 7 (20 bytes).
_SYN_HEADERS = struct.Struct("!6s6sH BBHHHBBH4s4s HHIIBBHHH BBH BB BBII B BBB")


def _words(data):
    """Sum of 16-bit big-endian words of data (odd length padded), modulo 0xFFFF."""
    value = int.from_bytes(data, "big")
    if len(data) & 1:
        value <<= 8
    return value % 0xFFFF


def _fold(total):
    """The Internet checksum of words summing to total."""
    rest = total % 0xFFFF
    return 0xFFFF - rest if rest else 0


class Side:
    """The sending state of one direction of a TCP connection."""

    __slots__ = ("head", "addresses", "ports", "seq", "ip_id", "ts_base", "ip_sum", "pseudo_sum")

    def __init__(self, mac_src, mac_dst, ip_src, ip_dst, sport, dport, rng):
        self.head = (mac_dst, mac_src, 0x0800)
        self.ports = (sport, dport)
        self.seq = rng.getrandbits(32)
        self.ip_id = rng.getrandbits(16)
        self.ts_base = rng.getrandbits(32)
        src, dst = ipaddress.IPv4Address(ip_src).packed, ipaddress.IPv4Address(ip_dst).packed
        self.addresses = (src, dst)
        addr_sum = _words(src) + _words(dst)
        # Constant IPv4 header words: version/IHL, DF flag, TTL/protocol, addresses.
        self.ip_sum = 0x4500 + 0x4000 + (64 << 8 | 6) + addr_sum
        self.pseudo_sum = addr_sum + 6 + sport + dport


class Connection:
    """One client's TCP connection to the broker; packets collect in `pending`."""

    def __init__(self, index, client_ip, client_port, mss, rng, loopback):
        self.index = index
        self.mss = mss
        self.rng = rng
        self.loopback = loopback
        if loopback:
            client_ip = BROKER_IP  # a client on the broker's host
            cmac = smac = LOOPBACK_MAC
        else:
            cmac, smac = ROUTER_MAC, BROKER_MAC
        self.client_ip = client_ip
        self.client = Side(cmac, smac, client_ip, BROKER_IP, client_port, BROKER_PORT, rng)
        self.server = Side(smac, cmac, BROKER_IP, client_ip, BROKER_PORT, client_port, rng)
        # Transmission time per payload byte, in ns: ~1-1.6 Gbit/s, or ~16-32 Gbit/s locally.
        self.ns_per_byte = rng.uniform(0.25, 0.5) if loopback else rng.uniform(5.0, 8.0)
        self.rtt_ns = 20_000 if loopback else rng.randint(60_000, 250_000)
        self.pending = []
        self.packets = 0
        self.bytes = 0

    def _peer(self, side):
        return self.server if side is self.client else self.client

    def emit(self, ts, side, flags, payload=b""):
        """One data or ACK segment with the timestamps option."""
        peer = self._peer(side)
        ms = ts // 1_000_000
        tsval = (side.ts_base + ms) & 0xFFFFFFFF
        tsecr = (peer.ts_base + ms) & 0xFFFFFFFF if flags & ACK else 0
        plen = len(payload)
        tcp_len = 32 + plen
        total_len = 20 + tcp_len
        ip_id = side.ip_id
        side.ip_id = (ip_id + 1) & 0xFFFF
        seq = side.seq
        ack = peer.seq if flags & ACK else 0
        side.seq = (seq + plen + (flags & FIN)) & 0xFFFFFFFF
        ip_csum = _fold(side.ip_sum + total_len + ip_id)
        # fmt: off
        tcp_sum = (
            side.pseudo_sum + tcp_len + (seq >> 16) + (seq & 0xFFFF) + (ack >> 16) + (ack & 0xFFFF)
            + (0x8000 | flags) + WINDOW + 0x0101 + 0x080A
            + (tsval >> 16) + (tsval & 0xFFFF) + (tsecr >> 16) + (tsecr & 0xFFFF)
        )
        if plen:
            tcp_sum += _words(payload)
        header = _DATA_HEADERS.pack(
            *side.head,
            0x45, 0, total_len, ip_id, 0x4000, 64, 6, ip_csum, *side.addresses,
            *side.ports, seq, ack, 0x80, flags, WINDOW, _fold(tcp_sum), 0,
            1, 1, 8, 10, tsval, tsecr,
        )
        # fmt: on
        caplen = 14 + total_len
        record = _PCAP_RECORD.pack(ts // 1_000_000_000, ts % 1_000_000_000 // 1000, caplen, caplen)
        self.pending.append((ts, self.index, record + header, payload))
        self.packets += 1
        self.bytes += 16 + caplen

    def emit_syn(self, ts, side, flags, window):
        """SYN or SYN-ACK with MSS, SACK permitted, timestamps and window scale options."""
        peer = self._peer(side)
        ms = ts // 1_000_000
        tsval = (side.ts_base + ms) & 0xFFFFFFFF
        tsecr = (peer.ts_base + ms) & 0xFFFFFFFF if flags & ACK else 0
        ip_id = side.ip_id
        side.ip_id = (ip_id + 1) & 0xFFFF
        seq = side.seq
        ack = peer.seq if flags & ACK else 0
        side.seq = (seq + 1) & 0xFFFFFFFF
        mss_option = self.mss + 12
        # fmt: off
        fields = [
            *side.head,
            0x45, 0, 60, ip_id, 0x4000, 64, 6, 0, *side.addresses,
            *side.ports, seq, ack, 0xA0, flags, window, 0, 0,
            2, 4, mss_option, 4, 2, 8, 10, tsval, tsecr, 1, 3, 3, 7,
        ]
        # fmt: on
        raw = _SYN_HEADERS.pack(*fields)
        fields[10] = _fold(side.ip_sum + 60 + ip_id)
        fields[20] = _fold(side.pseudo_sum + 40 + _words(raw[34:]) - sum(side.ports))
        header = _SYN_HEADERS.pack(*fields)
        record = _PCAP_RECORD.pack(ts // 1_000_000_000, ts % 1_000_000_000 // 1000, 74, 74)
        self.pending.append((ts, self.index, record + header, b""))
        self.packets += 1
        self.bytes += 16 + 74

    def handshake(self, t):
        self.emit_syn(t, self.client, SYN, 65495 if self.loopback else 64240)
        t += self.rtt_ns // 2
        self.emit_syn(t, self.server, SYN | ACK, 65483 if self.loopback else 65160)
        t += self.rtt_ns // 2
        self.emit(t, self.client, ACK)
        return t + 1000

    def send(self, t, from_client, data, final_ack=True):
        """Segments of one message starting at t; returns the time its last segment left.

        The receiver ACKs every second segment, and the rest shortly after the last one unless
        final_ack is false (more pipelined data follows).
        """
        side = self.client if from_client else self.server
        peer = self._peer(side)
        view = memoryview(data)
        mss = self.mss
        rng = self.rng
        rate = self.ns_per_byte
        n = len(data)
        unacked = 0
        last = t
        for off in range(0, n, mss):
            end = min(off + mss, n)
            self.emit(t, side, ACK | PSH if end == n else ACK, view[off:end])
            last = t
            unacked += 1
            if unacked == 2 and end < n:
                self.emit(t + rng.randint(1000, 2000), peer, ACK)
                unacked = 0
            t += max(3000, int((end - off) * rate * rng.uniform(0.9, 1.3)))
        if unacked and final_ack:
            self.emit(last + rng.randint(20_000, 60_000), peer, ACK)
        return last

    def close(self, t):
        self.emit(t, self.client, FIN | ACK)
        t += self.rtt_ns // 2
        self.emit(t, self.server, FIN | ACK)
        t += self.rtt_ns // 2
        self.emit(t, self.client, ACK)

    def flush(self):
        """The pending packets in time order (every item a merge key), emptying the list."""
        out = self.pending
        out.sort(key=_by_time)
        self.pending = []
        return out


def _by_time(item):
    return item[0]


class RecordPool:
    """Pre-built magic-2 record batches of sizes from ~200 bytes to ~1 MB, reused by reference."""

    def __init__(self, rng, variants=2):
        self.rng = rng
        sizes = []
        size = 200.0
        while size <= 1_100_000:
            sizes.append(int(size))
            size *= 1.35
        self.entries = []  # (length, batch bytes, record count)
        for target in sizes:
            for _ in range(variants):
                self.entries.append(self._build(target))
        self.entries.sort(key=lambda e: e[0])
        self.lengths = [e[0] for e in self.entries]

    def _build(self, target):
        rng = self.rng
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 30,
        )
        offset = 0
        stamp = RECORD_TIME_MS + rng.randint(0, 20_000)
        built = 61
        while built < target:
            key, value = _event(rng)
            headers = [("trace-id", rng.randbytes(8).hex().encode())] if rng.random() < 0.3 else []
            meta = builder.append(offset, timestamp=stamp, key=key, value=value, headers=headers)
            built += meta.size
            offset += 1
            stamp += rng.randint(0, 3)
        batch = bytes(builder.build())
        return len(batch), batch, offset

    def pick(self, size):
        """A batch of about `size` bytes (the largest not above it, or the smallest)."""
        lo, hi = 0, len(self.lengths)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.lengths[mid] <= size:
                lo = mid + 1
            else:
                hi = mid
        i = max(0, lo - 1)
        # Two variants per size: take either neighbour of the same size class.
        if i > 0 and self.rng.random() < 0.5 and self.lengths[i - 1] * 1.2 > self.lengths[i]:
            i -= 1
        return self.entries[i]


# fmt: off
_WORDS = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
]
# fmt: on


def _event(rng):
    """A JSON-ish event of 80 to ~1500 bytes, with a customer key."""
    customer = rng.randint(1, 50_000)
    items = ",".join(
        f'{{"sku":"SKU-{rng.randint(1000, 99999)}","qty":{rng.randint(1, 9)},'
        f'"price":{rng.randint(100, 99999) / 100:.2f}}}'
        for _ in range(rng.choice((0, 1, 1, 2, 3, 5, 8, 16)))
    )
    note = " ".join(rng.choices(_WORDS, k=rng.randint(0, 24)))
    value = (
        f'{{"event_id":"{uuid.UUID(int=rng.getrandbits(128))}","customer":{customer},'
        f'"status":"{rng.choice(("created", "paid", "shipped", "cancelled"))}",'
        f'"items":[{items}],"note":"{note}"}}'
    )
    return f"customer-{customer}".encode(), value.encode()


class Stats:
    """What was generated: the expected counts, and the traffic's composition."""

    def __init__(self):
        self.requests = Counter()  # (api_key, api_version) -> count
        self.no_response = 0
        self.responses = 0
        self.request_bytes = Counter()  # api_key -> Kafka bytes (length prefixes included)
        self.response_bytes = Counter()
        self.large_responses = 0  # responses of 256 KB or more
        self.largest = {"request": 0, "response": 0}

    def exchange(self, key, version, request, response):
        self.requests[(key, version)] += 1
        self.request_bytes[key] += len(request)
        self.largest["request"] = max(self.largest["request"], len(request))
        if response is None:
            self.no_response += 1
            return
        self.responses += 1
        self.response_bytes[key] += len(response)
        self.largest["response"] = max(self.largest["response"], len(response))
        if len(response) >= 256 * 1024:
            self.large_responses += 1


class Client:
    """The Kafka behaviour of one connection; `run` yields its packets in time order."""

    def __init__(self, conn, role, software, versions, state, rng, pool):
        self.conn = conn
        self.role = role
        self.software = software
        self.versions = versions
        self.state = state
        self.rng = rng
        self.pool = pool
        self.correlation_id = rng.randint(0, 3)
        self.exchanges = 0
        self.client_id = {
            "producer": f"producer-{conn.index + 1}",
            "consumer": f"consumer-analytics-{conn.index + 1}",
            "telemetry": "metrics-reporter",
            "admin": "adminclient-1",
        }[role]
        topics = TOPICS[:5]
        rng.shuffle(topics)
        self.topics = topics[:2] if role != "telemetry" else [TOPICS[5]]
        # Partitions this broker leads, per topic.
        self.partitions = {
            name: [p for p in range(count) if p % 3 == BROKER_ID - 1] for name, count in self.topics
        }

    # -- frames ------------------------------------------------------------------------------

    def _next_id(self):
        cid = self.correlation_id
        self.correlation_id += 1
        return cid

    def _request(self, message, cid):
        message.with_header(correlation_id=cid, client_id=self.client_id)
        return bytes(message.encode(header=True, framed=True))

    @staticmethod
    def _response(message, cid):
        message.with_header(correlation_id=cid)
        return bytes(message.encode(header=True, framed=True))

    def api_versions(self):
        cid = self._next_id()
        req = ApiVersionsRequest[3](
            client_software_name="apache-kafka-java", client_software_version=self.software
        )
        resp = ApiVersionsResponse[3](
            error_code=0,
            api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, lo, hi in ADVERTISED_APIS
            ],
            throttle_time_ms=0,
        )
        return API_VERSIONS, 3, self._request(req, cid), self._response(resp, cid)

    def metadata(self, all_topics=False):
        cid = self._next_id()
        v = self.versions[API_METADATA]
        names = [name for name, _ in (TOPICS if all_topics else self.topics)]
        wanted = [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
        req = MetadataRequest[v](
            topics=None if all_topics else wanted,
            allow_auto_topic_creation=not all_topics,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        counts = dict(TOPICS)
        part = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition
        topics = []
        for name in names:
            partitions = []
            for p in range(counts[name]):
                leader = p % 3 + 1
                replicas = [leader, leader % 3 + 1, (leader + 1) % 3 + 1]
                partitions.append(
                    part(
                        error_code=0,
                        partition_index=p,
                        leader_id=leader,
                        leader_epoch=7 + p % 4,
                        replica_nodes=replicas,
                        isr_nodes=replicas,
                        offline_replicas=[],
                    )
                )
            topics.append(
                MetadataResponse.MetadataResponseTopic(
                    error_code=0,
                    name=name,
                    is_internal=False,
                    partitions=partitions,
                    authorized_operations=None,
                )
            )
        broker = MetadataResponse.MetadataResponseBroker
        resp = MetadataResponse[v](
            throttle_time_ms=0,
            brokers=[broker(node_id=n, host=h, port=BROKER_PORT, rack=None) for n, h in BROKERS],
            cluster_id=CLUSTER_ID,
            controller_id=2,
            topics=topics,
            authorized_operations=None,
        )
        return API_METADATA, v, self._request(req, cid), self._response(resp, cid)

    def produce(self, size, acks=1):
        cid = self._next_id()
        v = self.versions[API_PRODUCE]
        rng = self.rng
        name = rng.choice(self.topics)[0]
        chosen = rng.sample(
            self.partitions[name], min(rng.choice((1, 1, 2, 3, 4)), len(self.partitions[name]))
        )
        data_cls = ProduceRequest.TopicProduceData
        batches = [self.pool.pick(size / len(chosen)) for _ in chosen]
        parts = [
            data_cls.PartitionProduceData(index=p, records=batch)
            for p, (_, batch, _) in zip(chosen, batches, strict=True)
        ]
        req = ProduceRequest[v](
            transactional_id=None,
            acks=acks,
            timeout_ms=30_000,
            topic_data=[data_cls(name=name, partition_data=parts)],
        )
        if acks == 0:
            return API_PRODUCE, v, self._request(req, cid), None
        resp_cls = ProduceResponse.TopicProduceResponse
        base = self.state.offsets
        responses = []
        for p, (_, _, count) in zip(chosen, batches, strict=True):
            # fmt: off
            responses.append(resp_cls.PartitionProduceResponse(
                index=p, error_code=0, base_offset=base.get((name, p), 0), log_append_time_ms=-1,
                log_start_offset=0, record_errors=[], error_message=None,
            ))
            # fmt: on
            base[(name, p)] = base.get((name, p), 0) + count
        resp = ProduceResponse[v](
            responses=[resp_cls(name=name, partition_responses=responses)], throttle_time_ms=0
        )
        return API_PRODUCE, v, self._request(req, cid), self._response(resp, cid)

    def fetch(self, session, size):
        """One round of an incremental fetch session; size 0 gives an empty response."""
        cid = self._next_id()
        v = self.versions[API_FETCH]
        rng = self.rng
        fp = FetchRequest.FetchTopic.FetchPartition
        if session["epoch"] == 0:
            wanted = session["offsets"]  # full request: every partition of the session
        else:
            wanted = {tp: session["offsets"][tp] for tp in session["changed"]}
        by_topic = {}
        for (name, p), offset in sorted(wanted.items()):
            by_topic.setdefault(name, []).append(
                fp(
                    partition=p,
                    current_leader_epoch=7 + p % 4,
                    fetch_offset=offset,
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=1_048_576,
                )
            )
        req = FetchRequest[v](
            replica_id=-1,
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=52_428_800,
            isolation_level=0,
            session_id=session["id"] if session["epoch"] else 0,
            session_epoch=session["epoch"],
            topics=[FetchRequest.FetchTopic(topic=n, partitions=ps) for n, ps in by_topic.items()],
            forgotten_topics_data=[],
            rack_id="",
        )
        session["epoch"] += 1
        session["changed"] = []
        # The response lists the partitions that have new data; the session's first response
        # lists every partition of the session.
        pd = FetchResponse.FetchableTopicResponse.PartitionData
        keys = sorted(session["offsets"])
        with_data = set(rng.sample(keys, min(len(keys), rng.choice((1, 1, 2, 3))))) if size else ()
        listed = keys if session["epoch"] == 1 else sorted(with_data)
        per_part = size / max(1, len(with_data))
        out = {}
        for tp in listed:
            name, p = tp
            offset = session["offsets"][tp]
            pieces, got = [], 0
            while tp in with_data and got < per_part:
                length, batch, count = self.pool.pick(min(per_part - got, 1_000_000))
                # The broker's copy: real base offset and partition leader epoch (outside the CRC).
                pieces.append(
                    struct.pack(">q", offset) + batch[8:12] + struct.pack(">i", 7 + p % 4)
                    + batch[16:]
                )  # fmt: skip
                offset += count
                got += length
                if got + self.pool.lengths[0] > per_part:
                    break
            hw = offset + rng.randint(0, 5000)
            # fmt: off
            out.setdefault(name, []).append(pd(
                partition_index=p, error_code=0, high_watermark=hw, last_stable_offset=hw,
                log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
                records=b"".join(pieces),
            ))
            # fmt: on
            if pieces:
                session["offsets"][tp] = offset
                session["changed"].append(tp)
        resp = FetchResponse[v](
            throttle_time_ms=0,
            error_code=0,
            session_id=session["id"],
            responses=[
                FetchResponse.FetchableTopicResponse(topic=n, partitions=ps)
                for n, ps in out.items()
            ],
        )
        return API_FETCH, v, self._request(req, cid), self._response(resp, cid)

    # -- timing ------------------------------------------------------------------------------

    def _exchange(self, t, frames, server_ms=None):
        key, version, request, response = frames
        conn = self.conn
        self.state.stats.exchange(*frames)
        self.exchanges += 1
        end = conn.send(t, True, request)
        if response is None:
            return end
        server = int((server_ms or self.rng.uniform(0.2, 5.0)) * 1_000_000)
        return conn.send(end + server, False, response)

    def _pipeline(self, t, batch):
        """Requests sent back to back, then their responses in order."""
        conn = self.conn
        ends = []
        self.state.pipelined += len(batch)
        for i, frames in enumerate(batch):
            self.state.stats.exchange(*frames)
            self.exchanges += 1
            t = conn.send(t, True, frames[2], final_ack=i == len(batch) - 1)
            ends.append(t)
            t += self.rng.randint(3000, 8000)
        last_request = t
        for end, (_, _, _, response) in zip(ends, batch, strict=True):
            start = max(end + int(self.rng.uniform(0.2, 5.0) * 1_000_000), last_request + 100_000)
            t = conn.send(start, False, response)
            last_request = t + 3000
        return t

    def _think(self, mean_ms):
        return int(max(0.1, self.rng.expovariate(1 / mean_ms)) * 1_000_000)

    def _size(self, lo, hi):
        """Log-uniform size between lo and hi bytes."""
        return int(lo * (hi / lo) ** self.rng.random())

    def run(self, t):
        conn = self.conn
        rng = self.rng
        state = self.state
        t = conn.handshake(t)
        t = self._exchange(t + 200_000, self.api_versions(), rng.uniform(0.1, 0.4))
        t = self._exchange(t + self._think(0.5), self.metadata(), rng.uniform(0.3, 1.5))
        yield from conn.flush()
        session = None
        if self.role == "consumer":
            session = {
                "id": rng.randint(1, 2**31 - 1),
                "epoch": 0,
                "changed": [],
                "offsets": {
                    (n, p): rng.randint(0, 10**7) for n, ps in self.partitions.items() for p in ps
                },
            }
        while state.written < state.target:
            t += self._think(
                {"producer": 2.0, "consumer": 1.0, "telemetry": 15.0, "admin": 40.0}[self.role]
            )
            if self.role != "admin" and rng.random() < 0.02:
                t = self._exchange(t, self.metadata(), rng.uniform(0.3, 2.0))
            elif self.role == "producer":
                n = 1 if rng.random() < 0.75 else rng.choice((2, 3))
                if n == 1:
                    t = self._exchange(t, self.produce(self._size(2_000, 1_000_000)))
                else:
                    t = self._pipeline(
                        t, [self.produce(self._size(2_000, 300_000)) for _ in range(n)]
                    )
            elif self.role == "telemetry":
                t = self._exchange(t, self.produce(self._size(1_000, 8_000), acks=0))
            elif self.role == "consumer":
                if rng.random() < 0.1 and session["epoch"] > 0:
                    state.empty_fetches += 1
                    t = self._exchange(t, self.fetch(session, 0), rng.uniform(20, 100))
                else:
                    t = self._exchange(t, self.fetch(session, self._size(4_000, 1_000_000)))
            else:
                t = self._exchange(t, self.metadata(all_topics=True), rng.uniform(0.5, 3.0))
            yield from conn.flush()
        conn.close(t + self._think(1.0))
        yield from conn.flush()


class State:
    def __init__(self, target):
        self.target = target
        self.written = 0
        self.stats = Stats()
        self.offsets = {}  # (topic, partition) -> next offset of the produced log
        self.pipelined = 0
        self.empty_fetches = 0
        self.clients = []
        self.last_ns = START_NS


def _client_addresses(count, rng):
    """(client IP, port) for each connection: a handful of hosts, distinct ephemeral ports."""
    hosts = [f"10.0.0.{h}" for h in (11, 12, 13, 14, 21, 22)]
    ports = rng.sample(range(32768, 61000), count)
    return [(hosts[i % len(hosts)], ports[i]) for i in range(count)]


def make_capture(out, size_mb, connections=16, seed=1, newest=False):
    rng = random.Random(seed)
    target = int(size_mb * 1_000_000)
    state = State(target)
    pool = RecordPool(random.Random(seed + 1))
    gens = []
    addresses = _client_addresses(connections, rng)
    for i in range(connections):
        role, mss, generation = CONNECTION_PLAN[i % len(CONNECTION_PLAN)]
        software, versions = (NEWEST_VERSIONS if newest else VERSIONS)[generation]
        crng = random.Random(rng.getrandbits(64))
        ip, port = addresses[i]
        conn = Connection(i, ip, port, mss, crng, loopback=mss == MSS_LOOPBACK)
        client = Client(conn, role, software, versions, state, crng, pool)
        state.clients.append(client)
        # Connections open within the first 50 ms, in index order.
        gens.append(client.run(START_NS + i * 3_000_000 + crng.randint(0, 2_000_000)))

    packets = 0
    with open(out, "wb") as f:
        f.write(_PCAP_FILE.pack(0xA1B2C3D4, 2, 4, 0, 0, 262_144, 1))
        state.written = _PCAP_FILE.size
        chunk = []
        for ts, _index, header, payload in heapq.merge(*gens):
            state.last_ns = ts
            chunk.append(header)
            chunk.append(payload)
            state.written += len(header) + len(payload)
            packets += 1
            if len(chunk) >= 4096:
                f.writelines(chunk)
                chunk = []
        f.writelines(chunk)
    return state, packets


def expected_path(capture):
    capture = Path(capture)
    return capture.with_name(capture.stem + ".expected.json")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=320, help="capture size (default 320)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="pcap to write")
    parser.add_argument("--connections", type=int, default=16, help="client connections")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--newest",
        action="store_true",
        help="flexible Produce v9 / Fetch v12 / Metadata v12 for the newer clients "
        "(tshark 4.0 cannot decode these)",
    )
    args = parser.parse_args(argv)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    state, packets = make_capture(out, args.size_mb, args.connections, args.seed, args.newest)
    elapsed = time.perf_counter() - started
    size = out.stat().st_size
    stats = state.stats

    by_api = Counter()
    for (key, _version), n in stats.requests.items():
        by_api[key] += n
    expected = {
        "capture": out.name,
        "bytes": size,
        "packets": packets,
        "connections": args.connections,
        "broker": f"{BROKER_IP}:{BROKER_PORT}",
        "seed": args.seed,
        "exchanges": sum(stats.requests.values()),
        "responses": stats.responses,
        "statuses": {"ok": stats.responses, "no_response_expected": stats.no_response},
        "requests_by_api": {API_NAMES[k]: n for k, n in sorted(by_api.items())},
        "requests_by_api_key": {str(k): n for k, n in sorted(by_api.items())},
        "requests_by_api_version": [
            {"api_key": k, "api_name": API_NAMES[k], "api_version": v, "requests": n}
            for (k, v), n in sorted(stats.requests.items())
        ],
        "composition": {
            "kafka_bytes": {
                API_NAMES[k]: {
                    "requests": stats.request_bytes[k],
                    "responses": stats.response_bytes[k],
                }
                for k in sorted(by_api)
            },
            "largest_request_bytes": stats.largest["request"],
            "largest_response_bytes": stats.largest["response"],
            "responses_256k_or_more": stats.large_responses,
            "pipelined_requests": state.pipelined,
            "empty_fetches": state.empty_fetches,
            "duration_s": round((state.last_ns - START_NS) / 1e9, 3),
        },
        "clients": [
            {
                "client": f"{c.conn.client_ip}:{c.conn.client.ports[0]}",
                "client_id": c.client_id,
                "role": c.role,
                "mss": c.conn.mss,
                "exchanges": c.exchanges,
                "packets": c.conn.packets,
                "bytes": c.conn.bytes,
            }
            for c in state.clients
        ],
    }
    expected_path(out).write_text(json.dumps(expected, indent=2) + "\n")
    mb = size / 1e6
    print(
        f"wrote {out}: {mb:.1f} MB, {packets} packets, {expected['exchanges']} exchanges "
        f"({', '.join(f'{k} {n}' for k, n in expected['requests_by_api'].items())}; "
        f"{stats.no_response} without response) in {elapsed:.1f} s ({mb / elapsed:.0f} MB/s)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
