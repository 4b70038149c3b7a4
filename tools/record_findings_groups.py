#!/usr/bin/env python
"""Record the captures behind the consumer-group findings: ``captures/findings-group-*.pcap``,
each with a ``.expected.json`` manifest of what its scenario knows it did.

Every scenario runs real kafka-python clients against a fresh in-memory Tansu broker on
loopback, recorded with tcpdump (``tools/broker.py``):

* ``failed`` (``failed_rebalance``, ``rebalance_storm``): three consumers join one group in
  turn; when the third joins, the leader is killed (SIGKILL) inside its assignor, after
  the broker named it leader of the new generation and before it sent its SyncGroup. The
  other members' SyncGroups wait for an assignment that never comes and are answered
  REBALANCE_IN_PROGRESS once the leader's session times out; the round never syncs and
  the group rebalances again without the leader (Tansu gives that round the same
  generation id). The three joins rebalance the group 3 to 4 s apart: a storm as well.
* ``coordinator`` (``coordinator_moved``): one consumer talks to the broker through a
  loopback proxy, the broker advertising the proxy's address, so every connection passes
  through it. The proxy forwards the broker's bytes unchanged but for the error code of
  a few answers: the consumer's first FindCoordinator is answered
  COORDINATOR_NOT_AVAILABLE (a coordinator still loading), and two of its Heartbeats
  NOT_COORDINATOR (a coordinator that moved). Tansu, a single broker, answers neither.
* ``lag`` (``lag_growing``): a producer writes ten records a second while a consumer of
  one group reads one record per poll and works half a second on each, committing as it
  goes: its lag grows for the whole capture.

Usage::

    python tools/record_findings_groups.py [--out captures/] [--only failed]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import queue
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.broker import Recorder, Tansu, free_port  # noqa: E402
from tools.record_captures import _read_uvarint, _skip_tagged_fields  # noqa: E402

SESSION_TIMEOUT_MS = 6000
#: Tansu delays a JoinGroup answer by a time tied to the rebalance timeout, which
#: kafka-python takes from max.poll.interval.ms: keep it short.
MAX_POLL_INTERVAL_MS = 6000
TOPIC_PARTITIONS = 4

FAILED_GROUP, FAILED_TOPIC = "fg-group", "fg-orders"
FAILED_MEMBERS = ("fg-member-1", "fg-member-2", "fg-member-3")

COORD_GROUP, COORD_TOPIC, COORD_MEMBER = "fc-group", "fc-orders", "fc-member"
#: Error codes the proxy puts in the broker's answers (Kafka's protocol numbers).
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 15, 16
#: Which Heartbeats of the consumer the proxy answers NOT_COORDINATOR (1-based).
MOVED_HEARTBEATS = (4, 5)

LAG_GROUP, LAG_TOPIC, LAG_MEMBER = "fl-group", "fl-orders", "fl-member"
LAG_PRODUCE_PER_S = 10
LAG_SECONDS = 12.0
LAG_WORK_S = 0.5  # the consumer's work per record


# --------------------------------------------------------------------------- members


def _create_topic(bootstrap: str, topic: str, client_id: str) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id)
    try:
        admin.create_topics([NewTopic(topic, TOPIC_PARTITIONS, 1)], timeout_ms=10000)
    finally:
        admin.close()


def _assignor(client_id: str, events, hold_when: int | None, consumer: dict):
    """A range assignor that reports what its member sees: ``assign`` (leader only) with
    the generation the JoinGroup answer gave and the member ids, ``on_assignment`` with the
    generation. With ``hold_when``, a leader asked to assign that many members reports it
    and waits there to be killed."""
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    class Assignor(RangePartitionAssignor):
        @classmethod
        def assign(cls, cluster, members):
            ids = sorted(m.member_id for m in members)
            gen = consumer["it"]._coordinator._generation
            seen = (client_id, gen.generation_id, gen.member_id, ids, time.time())
            events.put(("leader", *seen))
            if hold_when is not None and len(members) >= hold_when:
                events.put(("holding", *seen))
                time.sleep(3600)  # the scenario kills this process here
            return super().assign(cluster, members)

        @classmethod
        def on_assignment(cls, assignment, generation):
            parts = sorted(f"{tp.topic}/{tp.partition}" for tp in assignment.partitions())
            events.put(("assigned", client_id, generation, parts, time.time()))

    return Assignor


def _member(bootstrap, group, topic, client_id, events, stop, hold_when=None):
    """A consumer process: polls until ``stop`` is set, then closes (LeaveGroup)."""
    from kafka import KafkaConsumer

    holder: dict = {}
    consumer = holder["it"] = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        client_id=client_id,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
        heartbeat_interval_ms=500,
        partition_assignment_strategy=[_assignor(client_id, events, hold_when, holder)],
    )
    try:
        while not stop.is_set():
            consumer.poll(timeout_ms=200)
    finally:
        consumer.close()
        events.put(("closed", client_id, time.time()))


def _wait(events, log, until, timeout):
    """Move events into ``log`` until ``until(event)`` holds for one; that event."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            event = events.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        log.append(event)
        if until(event):
            return event
    raise TimeoutError(f"no awaited group event within {timeout:.0f} s; seen: {log[-5:]}")


def _generations(log):
    """Per generation the members saw assigned: {generation: {client id: partitions}}."""
    gens: dict[int, dict[str, list[str]]] = {}
    for event in log:
        if event[0] == "assigned":
            gens.setdefault(event[2], {})[event[1]] = event[3]
    return {str(g): gens[g] for g in sorted(gens)}


def scenario_failed(bootstrap: str) -> dict[str, Any]:
    _create_topic(bootstrap, FAILED_TOPIC, "fg-admin")
    ctx = multiprocessing.get_context("fork")
    events = ctx.Queue()
    stops = {c: ctx.Event() for c in FAILED_MEMBERS}
    log: list = []
    steps: list[dict[str, Any]] = []
    procs = {}

    def start(client_id, hold_when=None):
        steps.append({"action": "join", "client_id": client_id, "time": time.time()})
        args = (bootstrap, FAILED_GROUP, FAILED_TOPIC, client_id, events, stops[client_id])
        procs[client_id] = ctx.Process(target=_member, args=(*args, hold_when))
        procs[client_id].start()

    def assigned(clients):
        seen = set()

        def until(event):
            if event[0] == "assigned" and event[1] in clients:
                seen.add(event[1])
            return seen == set(clients)

        return until

    first, second, third = FAILED_MEMBERS
    try:
        start(first, hold_when=3)
        _wait(events, log, assigned({first}), 30)
        start(second)
        _wait(events, log, assigned({first, second}), 30)
        start(third)
        held = _wait(events, log, lambda e: e[0] == "holding", 30)
        os.kill(procs[first].pid, signal.SIGKILL)
        steps.append({"action": "killed", "client_id": first, "time": time.time()})
        procs[first].join(10)
        _wait(events, log, assigned({second, third}), 60)
        time.sleep(2.0)  # a few heartbeats of the group that formed without the leader
        for client_id in (second, third):
            steps.append({"action": "leave", "client_id": client_id, "time": time.time()})
            stops[client_id].set()
            procs[client_id].join(30)
            with contextlib.suppress(TimeoutError):
                _wait(events, log, lambda e, c=client_id: e[:2] == ("closed", c), 10)
    finally:
        for proc in procs.values():
            if proc.is_alive():
                proc.kill()
                proc.join(5)
    while True:
        try:
            log.append(events.get_nowait())
        except queue.Empty:
            break
    _client, generation, leader_member_id, member_ids, held_at = held[1:]
    return {
        "group": {
            "group_id": FAILED_GROUP,
            "topic": FAILED_TOPIC,
            "members": list(FAILED_MEMBERS),
            "session_timeout_ms": SESSION_TIMEOUT_MS,
            "steps": steps,
            "generations": _generations(log),
            # the round the leader was assigning when it was killed: it never synced
            "failed_round": {
                "generation_id": generation,
                "leader": first,
                "leader_member_id": leader_member_id,
                "member_ids": member_ids,
                "held_at": held_at,
            },
        },
        "notes": [
            "generations are what the members saw: on_assignment() with the generation id "
            "after each SyncGroup; the leader's assign() reported the member ids it was "
            "asked to assign when it was held and killed",
            "Tansu builds member ids as the client id followed by a uuid",
            "Tansu answers the round after the failed one with the same generation id "
            "(Apache Kafka would bump it): the members' on_assignment() for that generation "
            "is the round without the killed leader",
        ],
    }


# --------------------------------------------------------------------------- proxy


def _recv_frame(sock: socket.socket) -> bytes | None:
    head = _recv_exact(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    body = _recv_exact(sock, size)
    return None if body is None else head + body


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        try:
            chunk = sock.recv(size - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _error_offsets(api_key: int, version: int, frame: bytes) -> list[int]:
    """Where the error codes of a FindCoordinator or Heartbeat response frame lie."""
    flexible = (api_key == 10 and version >= 3) or (api_key == 12 and version >= 4)
    pos = 8  # size prefix, correlation id
    if flexible:
        pos = _skip_tagged_fields(frame, pos)
    if version >= 1:
        pos += 4  # throttle time
    if api_key == 12 or version < 4:
        return [pos]
    # FindCoordinator v4+: one entry per key (key, node id, host, port, error code, ...)
    count, pos = _read_uvarint(frame, pos)
    out = []
    for _ in range(count - 1):
        size, pos = _read_uvarint(frame, pos)
        pos += size - 1 + 4  # key, node id
        size, pos = _read_uvarint(frame, pos)
        pos += size - 1 + 4  # host, port
        out.append(pos)
        size, pos = _read_uvarint(frame, pos + 2)  # error message
        pos = _skip_tagged_fields(frame, pos + max(size - 1, 0))
    return out


class AlteringProxy:
    """A loopback TCP proxy in front of a broker that passes every frame on, and puts the
    error code ``rewrite(client_id, api_key, nth) -> code | None`` in the nth answer of that
    API to that client id (FindCoordinator and Heartbeat only)."""

    def __init__(self, broker_port: int, port: int, rewrite) -> None:
        self.broker_port, self.port, self.rewrite = broker_port, port, rewrite
        self.counts: dict[tuple[str, int], int] = {}
        self.altered: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", port))
        self.closing = False

    def __enter__(self) -> AlteringProxy:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing = True
        self.server.close()

    def _accept(self) -> None:
        while not self.closing:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            broker = socket.create_connection(("127.0.0.1", self.broker_port))
            pending: dict[int, tuple[int, int, str]] = {}
            args = (client, broker, pending)
            threading.Thread(target=self._requests, args=args, daemon=True).start()
            threading.Thread(target=self._responses, args=args, daemon=True).start()

    def _requests(self, client, broker, pending) -> None:
        while (frame := _recv_frame(client)) is not None:
            api_key, version, corr, size = struct.unpack_from(">hhih", frame, 4)
            client_id = frame[14 : 14 + size].decode() if size >= 0 else ""
            with self.lock:
                pending[corr] = (api_key, version, client_id)
            broker.sendall(frame)
        with contextlib.suppress(OSError):
            broker.shutdown(socket.SHUT_WR)

    def _responses(self, client, broker, pending) -> None:
        while (frame := _recv_frame(broker)) is not None:
            (corr,) = struct.unpack_from(">i", frame, 4)
            with self.lock:
                api_key, version, client_id = pending.pop(corr, (-1, -1, ""))
            if api_key in (10, 12):
                frame = self._alter(frame, api_key, version, client_id, corr)
            client.sendall(frame)
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_WR)

    def _alter(self, frame, api_key, version, client_id, corr) -> bytes:
        with self.lock:
            nth = self.counts[client_id, api_key] = self.counts.get((client_id, api_key), 0) + 1
        code = self.rewrite(client_id, api_key, nth)
        if code is None:
            return frame
        out = bytearray(frame)
        for pos in _error_offsets(api_key, version, frame):
            struct.pack_into(">h", out, pos, code)
        self.altered.append(
            {
                "client_id": client_id,
                "api_key": api_key,
                "api_version": version,
                "correlation_id": corr,
                "nth": nth,
                "error_code": code,
                "time": time.time(),
            }
        )
        return bytes(out)


def _moved(client_id: str, api_key: int, nth: int) -> int | None:
    if client_id != COORD_MEMBER:
        return None
    if api_key == 10 and nth == 1:
        return COORDINATOR_NOT_AVAILABLE
    if api_key == 12 and nth in MOVED_HEARTBEATS:
        return NOT_COORDINATOR
    return None


def scenario_coordinator(bootstrap: str, proxy: AlteringProxy) -> dict[str, Any]:
    from kafka import KafkaConsumer

    _create_topic(bootstrap, COORD_TOPIC, "fc-admin")
    consumer = KafkaConsumer(
        COORD_TOPIC,
        bootstrap_servers=bootstrap,
        client_id=COORD_MEMBER,
        group_id=COORD_GROUP,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
        heartbeat_interval_ms=500,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
            if sum(a["api_key"] == 12 for a in proxy.altered) == len(MOVED_HEARTBEATS):
                break
        end = time.monotonic() + 2.0  # heartbeats to the rediscovered coordinator
        while time.monotonic() < end:
            consumer.poll(timeout_ms=200)
        assignment = sorted(f"{tp.topic}/{tp.partition}" for tp in consumer.assignment())
    finally:
        consumer.close()
    return {
        "group": {"group_id": COORD_GROUP, "topic": COORD_TOPIC, "member": COORD_MEMBER},
        "assignment": assignment,
        "altered": proxy.altered,
        "notes": [
            "the broker's answers reach the clients through a loopback proxy that changed "
            "only the error codes listed in 'altered' (FindCoordinator: the entry's "
            "ErrorCode; Heartbeat: ErrorCode); Tansu advertises the proxy's port, so every "
            "connection of the capture passes through it",
        ],
    }


# --------------------------------------------------------------------------- lag


def scenario_lag(bootstrap: str) -> dict[str, Any]:
    from kafka import KafkaConsumer, KafkaProducer

    _create_topic(bootstrap, LAG_TOPIC, "fl-admin")
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="fl-producer", acks=1)
    stop = threading.Event()
    produced: list[dict[str, Any]] = []

    def produce() -> None:
        n = 0
        while not stop.is_set():
            meta = producer.send(LAG_TOPIC, f"order-{n}".encode(), partition=0).get(10)
            produced.append({"offset": meta.offset, "time": time.time()})
            n += 1
            time.sleep(1 / LAG_PRODUCE_PER_S)

    consumer = KafkaConsumer(
        LAG_TOPIC,
        bootstrap_servers=bootstrap,
        client_id=LAG_MEMBER,
        group_id=LAG_GROUP,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
        heartbeat_interval_ms=500,
        max_poll_records=1,
        # a record or two per Fetch, so each answer shows how far behind the reader is
        max_partition_fetch_bytes=128,
    )
    consumed: list[dict[str, Any]] = []
    writer = threading.Thread(target=produce)
    try:
        while not consumer.assignment():
            consumer.poll(timeout_ms=200)
        writer.start()
        end = time.monotonic() + LAG_SECONDS
        while time.monotonic() < end:
            for msgs in consumer.poll(timeout_ms=200).values():
                for msg in msgs:
                    time.sleep(LAG_WORK_S)
                    consumed.append({"offset": msg.offset, "time": time.time()})
                    consumer.commit()
    finally:
        stop.set()
        if writer.is_alive():
            writer.join(10)
        producer.close(timeout=10)
        consumer.close()
    return {
        "group": {"group_id": LAG_GROUP, "topic": LAG_TOPIC, "member": LAG_MEMBER},
        "partition": 0,
        "produce_per_s": LAG_PRODUCE_PER_S,
        "work_per_record_s": LAG_WORK_S,
        "produced": len(produced),
        "consumed": len(consumed),
        "first_consumed_offset": consumed[0]["offset"] if consumed else None,
        "last_consumed_offset": consumed[-1]["offset"] if consumed else None,
        "last_produced_offset": produced[-1]["offset"] if produced else None,
    }


# --------------------------------------------------------------------------- recording


def _client_version() -> str:
    from importlib.metadata import version

    return version("kafka-python")


def record(name: str, out_dir: Path) -> dict[str, Any]:
    capture = out_dir / f"findings-group-{name}.pcap"
    started = time.time()
    if name == "coordinator":
        proxy_port = free_port()
        with Tansu(advertised_port=proxy_port) as broker:
            with (
                AlteringProxy(broker.port, proxy_port, _moved) as proxy,
                Recorder(proxy_port, capture) as rec,
            ):
                data = scenario_coordinator(f"127.0.0.1:{proxy_port}", proxy)
            port = proxy_port
    else:
        run = {"failed": scenario_failed, "lag": scenario_lag}[name]
        with Tansu() as broker, Recorder(broker.port, capture) as rec:
            data = run(broker.bootstrap)
        port = broker.port
    manifest = {
        "name": f"findings-group-{name}",
        "capture": capture.name,
        "client": {"library": "kafka-python", "version": _client_version()},
        "broker_port": port,
        "started": started,
        "tcpdump": {
            "packets_captured": rec.packets_captured,
            "packets_dropped": rec.packets_dropped,
        },
        "capture_bytes": capture.stat().st_size,
        **data,
    }
    path = out_dir / f"findings-group-{name}.expected.json"
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


SCENARIOS = ("failed", "coordinator", "lag")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "captures")
    parser.add_argument("--only", choices=SCENARIOS, action="append")
    args = parser.parse_args(argv)
    for name in args.only or SCENARIOS:
        manifest = record(name, args.out)
        print(f"{manifest['capture']}: {manifest['capture_bytes']} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
