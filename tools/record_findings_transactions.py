#!/usr/bin/env python
"""Record the captures behind the findings of transactions and idempotence
(``captures/findings-txn-*.pcap``), each with its ``.expected.json`` manifest.

Every scenario runs real clients against a fresh in-memory Tansu broker on loopback,
recorded with tcpdump by ``tools/record_captures.record`` (which also writes the manifest's
common fields and its scan of the request headers):

* ``findings-txn-aborted``: a confluent-kafka transactional producer commits, aborts (five
  records in two batches, one per partition) and commits again; a confluent-kafka and a
  kafka-python consumer read both partitions with isolation level read_committed, a
  confluent-kafka one with read_uncommitted. Tansu lists no AbortedTransactions in its
  Fetch responses, so the read_committed consumers hand the aborted records to the
  application (``aborted_received``).
* ``findings-txn-fenced``: two confluent-kafka producers with one transactional.id; the
  second initialises while the first has a transaction open, then the first produces again
  and, told it is fenced, tries to abort (Tansu closes the connection on each of its EndTxn
  requests of the old epoch); the second commits a transaction of its own, and a
  read_uncommitted consumer reads the partition.
* ``findings-txn-sequence``: a confluent-kafka idempotent producer sends records in order;
  then a producer on a raw socket, its requests built with the tests' schema encoder
  (``tests/kafka_encoder.py``) and its record batches with kafka-python's batch builder,
  takes a producer id from InitProducerId and sends batches with a sequence gap, a repeated
  sequence and an unknown producer id, and one in order (no client library sends these on
  purpose). ``raw_produce`` holds each batch and the error code the broker answered.

Usage::

    python tools/record_findings_transactions.py [--out captures/] [--only findings-txn-fenced]
"""

from __future__ import annotations

import argparse
import gc
import logging
import socket
import struct
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
for path in (REPO, REPO / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import kafka_encoder  # noqa: E402

from tools.broker import Tansu, record_whole  # noqa: E402
from tools.record_captures import (  # noqa: E402
    CONSUME_DEADLINE_S,
    TIMESTAMP_BASE_MS,
    Manifest,
    Rec,
    Scenario,
    capture_holes,
    record,
)

ERROR_NAMES = {
    45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    46: "DUPLICATE_SEQUENCE_NUMBER",
    59: "UNKNOWN_PRODUCER_ID",
}


def _create_topic(bootstrap: str, m: Manifest, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": m.client_id("txn-admin")})
    try:
        m.call(
            "create_topics",
            ["CreateTopics"],
            lambda: {
                t: f.result(timeout=15) is None
                for t, f in admin.create_topics([NewTopic(topic, partitions, 1)]).items()
            },
            lambda r: r,
        )
    finally:
        admin = None  # librdkafka closes its connections when the client is collected
        gc.collect()
    m.data["topics_created"].append(
        {"name": topic, "partitions": partitions, "replication_factor": 1}
    )


def _send_transaction(m: Manifest, producer, cid: str, recs: list[Rec]) -> list[dict]:
    """Produce `recs` in the open transaction and flush; their offsets as reported."""
    reports: list[Any] = [None] * len(recs)
    for i, rec in enumerate(recs):

        def cb(err, msg, i=i):
            reports[i] = (err, msg.offset())

        producer.produce(
            rec.topic,
            key=rec.key,
            value=rec.value,
            partition=rec.partition,
            timestamp=rec.timestamp_ms,
            on_delivery=cb,
        )
    producer.flush(15)
    out = []
    for rec, report in zip(recs, reports, strict=True):
        err, offset = report or ("no delivery report", None)
        offset = offset if offset is not None and offset >= 0 else None
        m.produced(rec, "all", cid, offset=offset, error=None if err is None else str(err))
        out.append(
            {
                "topic": rec.topic,
                "partition": rec.partition,
                "key": rec.key.decode(),
                "offset": offset,
                "error": None if err is None else err.name(),
            }
        )
    return out


# --------------------------------------------------------------------------- aborted reads

ABORTED_TOPIC, ABORTED_TXN_ID = "fa-orders", "fa-producer"
#: (outcome, [(partition, key)]): the aborted one is five records, three and two a partition.
ABORTED_TRANSACTIONS = (
    ("commit", [(0, "c1-a"), (1, "c1-b")]),
    ("abort", [(0, "a-1"), (0, "a-2"), (0, "a-3"), (1, "a-4"), (1, "a-5")]),
    ("commit", [(0, "c2-a"), (1, "c2-b")]),
)


def scenario_aborted(broker: Tansu, m: Manifest) -> None:
    """A transactional producer commits, aborts and commits; two read_committed consumers
    (confluent-kafka, kafka-python) and a read_uncommitted one read both partitions."""
    from confluent_kafka import Producer

    m.expect("InitProducerId", "AddPartitionsToTxn", "Produce", "EndTxn", "Fetch")
    _create_topic(broker.bootstrap, m, ABORTED_TOPIC, 2)
    cid = m.client_id(ABORTED_TXN_ID)
    # a long linger puts each partition's records of a transaction in one batch
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": cid,
            "transactional.id": ABORTED_TXN_ID,
            "linger.ms": 100,
        }
    )
    done, n = [], 0
    try:
        producer.init_transactions(15)
        for outcome, spec in ABORTED_TRANSACTIONS:
            producer.begin_transaction()
            recs = []
            for partition, key in spec:
                ts = TIMESTAMP_BASE_MS + n
                recs.append(Rec(ABORTED_TOPIC, partition, key.encode(), outcome.encode(), [], ts))
                n += 1
            records = _send_transaction(m, producer, cid, recs)
            (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(15)
            done.append(
                {"transactional_id": ABORTED_TXN_ID, "outcome": outcome, "records": records}
            )
    finally:
        producer = None
        gc.collect()
    m.data["transactions"] = done

    fetched = {
        m.client_id("fa-reader-confluent"): _read_confluent(
            broker.bootstrap, "fa-reader-confluent", "read_committed"
        ),
        m.client_id("fa-reader-python"): _read_kafka_python(broker.bootstrap, "fa-reader-python"),
        m.client_id("fa-reader-uncommitted"): _read_confluent(
            broker.bootstrap, "fa-reader-uncommitted", "read_uncommitted"
        ),
    }
    m.data["fetched"] = fetched
    aborted = {
        (r["partition"], r["offset"]) for t in done if t["outcome"] == "abort" for r in t["records"]
    }
    m.data["isolation"] = {
        "fa-reader-confluent": "read_committed",
        "fa-reader-python": "read_committed",
        "fa-reader-uncommitted": "read_uncommitted",
    }
    m.data["aborted_received"] = {
        reader: [r for r in rows if (r["partition"], r["offset"]) in aborted]
        for reader, rows in fetched.items()
    }
    m.note(
        "Tansu sends no AbortedTransactions in its Fetch responses (and a last stable offset "
        "equal to the high watermark): read_committed consumers receive the aborted records"
    )


def _read_confluent(
    bootstrap: str, cid: str, isolation: str, topic: str = ABORTED_TOPIC, partitions=(0, 1)
) -> list[dict]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": cid,
            "group.id": "fa-unused",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    got = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        quiet, deadline = time.monotonic() + 3.0, time.monotonic() + CONSUME_DEADLINE_S
        while time.monotonic() < min(quiet, deadline):
            msg = consumer.poll(0.3)
            if msg is None or msg.error():
                continue
            quiet = time.monotonic() + 3.0
            got.append(
                {"partition": msg.partition(), "offset": msg.offset(), "key": msg.key().decode()}
            )
    finally:
        consumer.close()
    return sorted(got, key=lambda r: (r["partition"], r["offset"]))


def _read_kafka_python(bootstrap: str, cid: str) -> list[dict]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=cid,
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    got = []
    try:
        parts = [TopicPartition(ABORTED_TOPIC, p) for p in (0, 1)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        quiet, deadline = time.monotonic() + 3.0, time.monotonic() + CONSUME_DEADLINE_S
        while time.monotonic() < min(quiet, deadline):
            for rows in consumer.poll(timeout_ms=300).values():
                quiet = time.monotonic() + 3.0
                got += [
                    {"partition": r.partition, "offset": r.offset, "key": r.key.decode()}
                    for r in rows
                ]
    finally:
        consumer.close()
    return sorted(got, key=lambda r: (r["partition"], r["offset"]))


# --------------------------------------------------------------------------- fenced producer

FENCED_TOPIC, FENCED_TXN_ID = "ff-orders", "ff-shared-id"


def scenario_fenced(broker: Tansu, m: Manifest) -> None:
    """Two transactional producers share a transactional.id: the newer one initialises while
    the older one's transaction is open, which fences the older one."""
    from confluent_kafka import KafkaException, Producer

    m.expect("FindCoordinator", "InitProducerId", "AddPartitionsToTxn", "Produce", "EndTxn")
    _create_topic(broker.bootstrap, m, FENCED_TOPIC, 1)
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "transactional.id": FENCED_TXN_ID,
        "linger.ms": 5,
    }
    old_id, new_id = m.client_id("ff-old-instance"), m.client_id("ff-new-instance")
    old = Producer({**conf, "client.id": old_id})
    new = Producer({**conf, "client.id": new_id})
    steps: list[dict[str, Any]] = []

    def step(client: str, action: str, fn) -> None:
        entry: dict[str, Any] = {"client_id": client, "action": action}
        try:
            fn()
            entry["error"] = None
        except KafkaException as exc:
            err = exc.args[0]
            entry.update(error=err.name(), fatal=err.fatal(), abortable=err.txn_requires_abort())
        steps.append(entry)

    def rec(i: int) -> Rec:
        return Rec(FENCED_TOPIC, 0, f"ff-{i}".encode(), b"value", [], TIMESTAMP_BASE_MS + i)

    try:
        step(old_id, "init_transactions", lambda: old.init_transactions(15))
        step(old_id, "begin_transaction", old.begin_transaction)
        step(old_id, "produce", lambda: _send_transaction(m, old, old_id, [rec(0)]))
        step(new_id, "init_transactions", lambda: new.init_transactions(15))
        # the old instance carries on in its transaction, unaware of the new one
        step(old_id, "produce", lambda: _send_transaction(m, old, old_id, [rec(1)]))
        step(old_id, "commit_transaction", lambda: old.commit_transaction(15))
        step(old_id, "abort_transaction", lambda: old.abort_transaction(5))
        step(new_id, "begin_transaction", new.begin_transaction)
        step(new_id, "produce", lambda: _send_transaction(m, new, new_id, [rec(2)]))
        step(new_id, "commit_transaction", lambda: new.commit_transaction(15))
    finally:
        old = new = None
        gc.collect()
    m.data["fenced"] = {
        "transactional_id": FENCED_TXN_ID,
        "old_client_id": old_id,
        "new_client_id": new_id,
        "steps": steps,
    }
    # the log as it stands: the old instance's record, the markers, the new one's record
    reader = m.client_id("ff-reader")
    m.data["fetched"] = {
        reader: _read_confluent(broker.bootstrap, reader, "read_uncommitted", FENCED_TOPIC, (0,))
    }


# --------------------------------------------------------------------------- sequence errors

SEQUENCE_TOPIC = "fs-events"
RAW_CLIENT_ID = "fs-raw-producer"
PRODUCE_VERSION, INIT_PRODUCER_ID_VERSION = 8, 4


class RawClient:
    """A Kafka connection that sends requests built by the tests' schema encoder."""

    def __init__(self, bootstrap: str, client_id: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.client_id = client_id
        self.correlation_id = 0

    def call(self, api_key: int, version: int, body: dict) -> bytes:
        """Send a request and return its response after the correlation id."""
        self.correlation_id += 1
        data = kafka_encoder.encode_request(
            api_key, version, self.correlation_id, self.client_id, body
        )
        self.sock.sendall(struct.pack(">i", len(data)) + data)
        (size,) = struct.unpack(">i", self._read(4))
        response = self._read(size)
        (got,) = struct.unpack_from(">i", response)
        assert got == self.correlation_id, (got, self.correlation_id)
        return response[4:]

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def _batch(producer_id: int, epoch: int, sequence: int, keys: list[str]) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 20,
    )
    for i, key in enumerate(keys):
        builder.append(
            i, timestamp=TIMESTAMP_BASE_MS + sequence + i, key=key.encode(), value=b"v", headers=[]
        )
    return bytes(builder.build())


def _produce_error(response: bytes) -> tuple[int, int]:
    """(error code, base offset) of a one-partition Produce v8 response."""
    pos = 4  # topic count
    (name_len,) = struct.unpack_from(">h", response, pos)
    pos += 2 + name_len + 4 + 4  # name, partition count, partition index
    return struct.unpack_from(">hq", response, pos)


def scenario_sequence(broker: Tansu, m: Manifest) -> None:
    """An idempotent confluent-kafka producer in order; then a raw producer with a sequence
    gap, a repeated sequence and an unknown producer id."""
    from confluent_kafka import Producer

    m.expect("InitProducerId", "Produce")
    _create_topic(broker.bootstrap, m, SEQUENCE_TOPIC, 1)
    cid = m.client_id("fs-idempotent")
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "client.id": cid, "enable.idempotence": True}
    )
    try:
        for i in range(4):
            rec = Rec(SEQUENCE_TOPIC, 0, f"in-order-{i}".encode(), b"v", [], TIMESTAMP_BASE_MS + i)

            def cb(err, msg, rec=rec):
                m.produced(
                    rec, "all", cid, offset=msg.offset(), error=None if err is None else str(err)
                )

            producer.produce(
                rec.topic,
                key=rec.key,
                value=rec.value,
                partition=0,
                timestamp=rec.timestamp_ms,
                on_delivery=cb,
            )
            producer.flush(15)
    finally:
        producer = None
        gc.collect()

    raw = RawClient(broker.bootstrap, m.client_id(RAW_CLIENT_ID))
    sent = []
    try:
        answer = raw.call(
            22,
            INIT_PRODUCER_ID_VERSION,
            {
                "TransactionalId": None,
                "TransactionTimeoutMs": 60000,
                "ProducerId": -1,
                "ProducerEpoch": -1,
            },
        )
        # v4 is flexible: throttle time, error code, producer id, epoch
        _throttle, code, producer_id, epoch = struct.unpack_from(">ihqh", answer, 1)
        m.data["raw_producer"] = {
            "client_id": RAW_CLIENT_ID,
            "producer_id": producer_id,
            "producer_epoch": epoch,
            "init_error": code,
        }
        plan = [
            ("in order", producer_id, 0, 3),
            ("in order", producer_id, 3, 2),
            ("gap: 5 expected", producer_id, 9, 1),
            ("repeat of sequence 3", producer_id, 3, 2),
            ("unknown producer id", producer_id + 1000, 0, 1),
            ("in order", producer_id, 5, 1),
        ]
        for what, pid, sequence, count in plan:
            keys = [f"raw-{sequence + i}" for i in range(count)]
            body = {
                "TransactionalId": None,
                "Acks": -1,
                "TimeoutMs": 5000,
                "TopicData": [
                    {
                        "Name": SEQUENCE_TOPIC,
                        "PartitionData": [
                            {"Index": 0, "Records": _batch(pid, epoch, sequence, keys)}
                        ],
                    }
                ],
            }
            code, base_offset = _produce_error(raw.call(0, PRODUCE_VERSION, body))
            sent.append(
                {
                    "what": what,
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "base_sequence": sequence,
                    "records": count,
                    "error_code": code,
                    "error_name": ERROR_NAMES.get(code, "NONE" if code == 0 else str(code)),
                    "base_offset": base_offset,
                }
            )
    finally:
        raw.close()
    m.data["raw_produce"] = sent
    m.note(
        "Tansu checks producer sequences: a gap is OUT_OF_ORDER_SEQUENCE_NUMBER, a repeated "
        "batch DUPLICATE_SEQUENCE_NUMBER (Apache Kafka answers a repeat of one of the last "
        "five batches with success and their offset), an unknown producer id "
        "UNKNOWN_PRODUCER_ID"
    )


# --------------------------------------------------------------------------- main

SCENARIOS = {
    s.name: s
    for s in (
        Scenario("findings-txn-aborted", "confluent-kafka", scenario_aborted),
        Scenario("findings-txn-fenced", "confluent-kafka", scenario_fenced),
        Scenario("findings-txn-sequence", "confluent-kafka", scenario_sequence),
    )
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "captures")
    parser.add_argument("--port", type=int, default=9092, help="falls back to a free one")
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    failures = 0
    for name in args.only or list(SCENARIOS):
        try:
            data = record_whole(
                name, capture_holes, record, SCENARIOS[name], args.out.resolve(), args.port, "pcap"
            )
        except Exception:
            failures += 1
            print(f"{name}: FAILED", file=sys.stderr)
            traceback.print_exc()
            continue
        skipped = len(data["skipped"])
        print(f"{name}: {data['capture']} {data['capture_bytes']} bytes, {skipped} skipped")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
