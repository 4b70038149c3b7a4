#!/usr/bin/env python
"""Record the captures behind the connection findings (``captures/findings-conn-*.pcap``).

Each scenario starts a fresh in-memory Tansu broker on loopback, records one port with
tcpdump while a client misbehaves (or is misled) in one known way, and writes beside the
capture a ``.expected.json`` manifest: the scenario's description (its docstring), the
client and broker, and ``facts``, what the scenario knows it did and saw (client ports,
correlation ids, counts from the clients' own logs).

* ``rejected``: kcat cannot parse Tansu's ApiVersions response and reconnects (real client).
* ``versions``: requests Tansu does not serve (socket client).
* ``acks0``: kafka-python producing with acks=0; Tansu answers (real client).
* ``truncated``: requests cut short by their client (socket client).
* ``throttled``: kafka-python through a proxy that sets ThrottleTimeMs (altered bytes).
* ``hol``: Metadata requests behind long-polling Fetches on one connection (socket client).

Usage::

    python tools/record_findings_connections.py [--out captures/] [--only rejected]
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import logging
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.broker import Recorder, Tansu, free_port, record_whole, tcpdump_dropped  # noqa: E402
from tools.record_captures import _link_type, _tansu_version, _version  # noqa: E402

PREFIX = "findings-conn-"
THROTTLE_MS = 250
FETCH_WAIT_MS = 500
HOL_ROUNDS = 3
TRUNCATED_SENT = 20  # bytes of the Metadata request sent before closing

log = logging.getLogger("record_findings_connections")


# --------------------------------------------------------------------------- wire bytes


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def request(
    api_key: int, version: int, correlation_id: int, client_id: str, body: bytes, flexible=False
) -> bytes:
    """A request frame: header v1, or v2 (with empty tagged fields) for flexible versions."""
    header = struct.pack(">hhi", api_key, version, correlation_id) + _string(client_id)
    header += b"\x00" if flexible else b""
    return struct.pack(">i", len(header) + len(body)) + header + body


def metadata_v1(topics: list[str]) -> bytes:
    return struct.pack(">i", len(topics)) + b"".join(_string(t) for t in topics)


def fetch_v4(topic: str, max_wait_ms: int) -> bytes:
    """ReplicaId -1, MaxWaitMs, MinBytes 1, MaxBytes 1 MiB, read_uncommitted, partition 0
    from offset 0."""
    return (
        struct.pack(">iiiib", -1, max_wait_ms, 1, 1 << 20, 0)
        + struct.pack(">i", 1)
        + _string(topic)
        + struct.pack(">i", 1)
        + struct.pack(">iqi", 0, 0, 1 << 20)
    )


def read_frame(sock: socket.socket) -> bytes | None:
    """One whole frame (without its size prefix), or None when the peer closed."""
    head = _read(sock, 4)
    if head is None:
        return None
    return _read(sock, struct.unpack(">i", head)[0])


def _read(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


class RawClient:
    """A socket client that speaks a few requests by hand; what it saw goes to `log`."""

    def __init__(self, broker: Tansu, client_id: str) -> None:
        self.client_id = client_id
        self.sock = socket.create_connection((broker.host, broker.port), timeout=10)
        self.port = self.sock.getsockname()[1]
        self.correlation_id = 0

    def send(self, api_key: int, version: int, body: bytes, flexible=False) -> int:
        self.correlation_id += 1
        frame = request(api_key, version, self.correlation_id, self.client_id, body, flexible)
        self.sock.sendall(frame)
        return self.correlation_id

    def answer(self) -> int | None:
        """The correlation id of the next response, None when the broker closed instead."""
        frame = read_frame(self.sock)
        return None if frame is None else struct.unpack_from(">i", frame)[0]

    def api_versions(self) -> None:
        sent = self.send(18, 0, b"")
        if self.answer() != sent:
            raise RuntimeError("no ApiVersions answer")

    def close(self) -> None:
        self.sock.close()


# --------------------------------------------------------------------------- proxy


def set_throttle(frame: bytes, version: int, throttle_ms: int) -> bytes:
    """A Produce response (v1+) with another ThrottleTimeMs: its last field, before the
    (empty) tagged fields of the flexible versions (v9+)."""
    end = len(frame) - (1 if version >= 9 else 0)
    if version >= 9 and frame[-1] != 0:
        raise ValueError("Produce response with tagged fields: ThrottleTimeMs not last")
    return frame[: end - 4] + struct.pack(">i", throttle_ms) + frame[end:]


class ThrottleProxy:
    """Forwards a client's connections to the broker frame by frame and sets ThrottleTimeMs
    in the broker's Produce responses, counting them."""

    def __init__(self, port: int, broker: Tansu, throttle_ms: int) -> None:
        self.port = port
        self.broker = broker
        self.throttle_ms = throttle_ms
        self.altered: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", port))
        self.threads: list[threading.Thread] = []

    def start(self) -> ThrottleProxy:
        self._spawn(self._accept)
        return self

    def _spawn(self, fn: Callable, *args: Any) -> None:
        thread = threading.Thread(target=fn, args=args, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.server.accept()
                upstream = socket.create_connection((self.broker.host, self.broker.port))
                sent: dict[int, tuple[int, int]] = {}
                self._spawn(self._requests, client, upstream, sent)
                self._spawn(self._responses, upstream, client, sent)

    def _requests(self, client: socket.socket, upstream: socket.socket, sent: dict) -> None:
        with contextlib.suppress(OSError):
            while (frame := read_frame(client)) is not None:
                key, version, corr = struct.unpack_from(">hhi", frame)
                sent[corr] = (key, version)
                upstream.sendall(struct.pack(">i", len(frame)) + frame)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)

    def _responses(self, upstream: socket.socket, client: socket.socket, sent: dict) -> None:
        with contextlib.suppress(OSError):
            while (frame := read_frame(upstream)) is not None:
                (corr,) = struct.unpack_from(">i", frame)
                key, version = sent.pop(corr, (None, None))
                if key == 0 and version >= 1:
                    frame = set_throttle(frame, version, self.throttle_ms)
                    with self.lock:
                        self.altered.append(
                            {"client_port": client.getpeername()[1], "correlation_id": corr}
                        )
                client.sendall(struct.pack(">i", len(frame)) + frame)
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_WR)

    def stop(self) -> None:
        self.server.close()


# --------------------------------------------------------------------------- scenarios


def create_topic(bootstrap: str, topic: str) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="fc-setup")
    try:
        admin.create_topics([NewTopic(topic, 1, 1)], timeout_ms=10000)
    finally:
        admin.close()


def scenario_rejected(broker: Tansu, facts: dict) -> None:
    """kcat 1.7.1 (librdkafka 2.0.2) with default settings cannot parse Tansu's ApiVersions v3
    response (librdkafka logs a read underflow), closes the connection and reconnects every
    300 ms until its one-second metadata timeout. `rejected` counts the read underflows in
    kcat's own debug log, `connections` its connections."""
    client_id = "fc-kcat"
    proc = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-X", f"client.id={client_id}"]
        + ["-X", "reconnect.backoff.ms=300", "-X", "reconnect.backoff.max.ms=300"]
        + ["-m", "1", "-L", "-d", "broker"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    lines = proc.stderr.splitlines()
    rejected = [ln for ln in lines if "Protocol read buffer underflow for ApiVersion" in ln]
    facts.update(
        client_id=client_id,
        kcat_exit=proc.returncode,
        connections=sum("Connected (#" in ln for ln in lines),
        rejected=len(rejected),
        rejection=re.sub(r"^%\d\|[\d.]+\|", "", rejected[0]) if rejected else None,
    )


#: (api key, version, name, flexible, body) of each request the broker does not serve.
UNSERVED = (
    # Metadata v13: all topics (null compact array), auto-create on, no authorized operations
    (3, 13, "Metadata", True, b"\x00\x01\x00\x00"),
    (23, 0, "OffsetForLeaderEpoch", False, struct.pack(">i", 0)),  # no topics
    (200, 0, None, False, b""),  # no API has key 200
)


def scenario_versions(broker: Tansu, facts: dict) -> None:
    """A socket client opens three connections and sends on each, after a good ApiVersions
    v0 exchange, one request Tansu does not serve: Metadata v13 (Tansu advertises v0 to
    v12; it answers with a response that does not decode as v13), OffsetForLeaderEpoch v0
    (key 23, which Tansu does not advertise) and API key 200 (no such API); Tansu closes
    the last two connections without an answer. `answered`: whether a response came."""
    sent = []
    for api_key, version, name, flexible, body in UNSERVED:
        client = RawClient(broker, "fc-versions")
        client.api_versions()
        corr = client.send(api_key, version, body, flexible)
        answered = client.answer() is not None
        client.close()
        sent.append(
            {
                "client_port": client.port,
                "api_key": api_key,
                "api_name": name,
                "api_version": version,
                "correlation_id": corr,
                "answered": answered,
            }
        )
    facts.update(client_id="fc-versions", requests=sent)


class _Count(logging.Handler):
    """Counts the log records whose message holds `text`."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.DEBUG)
        self.text, self.count = text, 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += self.text in record.getMessage()


def scenario_acks0(broker: Tansu, facts: dict) -> None:
    """A kafka-python producer with acks=0 sends three records, one Produce request each.
    Tansu answers every one (a Kafka broker sends nothing back), and kafka-python drops the
    connection on each answer (CorrelationIdError: no in-flight request) and reconnects.
    `closed_on_unasked_response` counts those drops in kafka-python's log."""
    from kafka import KafkaProducer

    topic = "fc-acks0"
    create_topic(broker.bootstrap, topic)
    # kafka-python drops a connection that brings a response it did not ask for
    unasked = _Count("Connection lost: CorrelationIdError: No in-flight-request")
    kafka_log = logging.getLogger("kafka.net.connection")
    kafka_log.addHandler(unasked)
    level, kafka_log.propagate = kafka_log.level, False
    kafka_log.setLevel(logging.ERROR)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, client_id="fc-acks0", acks=0, linger_ms=0
    )
    try:
        for i in range(3):
            producer.send(topic, value=f"acks0 record {i}".encode(), partition=0)
            producer.flush()
            time.sleep(0.1)  # one Produce request per record
    finally:
        producer.close()
        kafka_log.removeHandler(unasked)
        kafka_log.setLevel(level)
        kafka_log.propagate = True
    facts.update(
        client_id="fc-acks0",
        topic=topic,
        records=3,
        acks=0,
        closed_on_unasked_response=unasked.count,
    )


def scenario_truncated(broker: Tansu, facts: dict) -> None:
    """A socket client sends the first 20 of the 50 bytes of a Metadata v1 request and closes
    its connection, twice: after a complete ApiVersions exchange, then on a new connection
    as its first request."""
    cut = []
    for handshake in (True, False):
        client = RawClient(broker, "fc-truncated")
        if handshake:
            client.api_versions()
        corr = client.correlation_id + 1
        whole = request(3, 1, corr, client.client_id, metadata_v1(["fc-truncated-topic"]))
        client.sock.sendall(whole[:TRUNCATED_SENT])
        time.sleep(0.05)
        client.close()
        cut.append(
            {
                "client_port": client.port,
                "after_api_versions": handshake,
                "request": {"api_key": 3, "api_version": 1, "correlation_id": corr},
                "request_bytes": len(whole),
                "bytes_sent": TRUNCATED_SENT,
            }
        )
    facts.update(client_id="fc-truncated", connections=cut)


def scenario_throttled(broker: Tansu, facts: dict) -> None:
    """A kafka-python producer (acks=1) sends three records, one Produce request each,
    through a loopback proxy that sets ThrottleTimeMs to 250 in Tansu's Produce responses
    (Tansu has no quotas and never throttles): these are real responses with altered bytes.
    The capture is of the client's side of the proxy; Tansu advertises the proxy's address,
    so every connection goes through it. `altered`: the responses the proxy changed."""
    from kafka import KafkaProducer

    proxy = broker.proxy
    bootstrap = f"127.0.0.1:{proxy.port}"
    topic = "fc-throttled"
    create_topic(bootstrap, topic)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id="fc-throttled",
        acks=1,
        linger_ms=0,
    )
    offsets = []
    try:
        for i in range(3):
            md = producer.send(topic, value=f"throttled {i}".encode(), partition=0).get(10)
            offsets.append(md.offset)
    finally:
        producer.close()
    facts.update(
        client_id="fc-throttled",
        topic=topic,
        offsets=offsets,
        throttle_ms=THROTTLE_MS,
        altered=list(proxy.altered),
        proxy_port=proxy.port,
        broker_port=broker.port,
    )


def scenario_hol(broker: Tansu, facts: dict) -> None:
    """A socket client sends three times on one connection a Fetch v4 with MaxWaitMs 500 for
    the empty topic fc-hol (created before recording) and at once a Metadata v1 request
    behind it. Tansu holds each Fetch for its wait and answers in order, so each Metadata
    waits about 500 ms behind its Fetch. `waited_ms`: from sending the pair to the second
    answer, as the client timed it."""
    topic = "fc-hol"
    client = RawClient(broker, "fc-hol")
    client.api_versions()
    rounds = []
    for _ in range(HOL_ROUNDS):
        fetch = client.send(1, 4, fetch_v4(topic, FETCH_WAIT_MS))
        meta = client.send(3, 1, metadata_v1([topic]))
        started = time.monotonic()
        got = [client.answer(), client.answer()]
        rounds.append(
            {
                "fetch": fetch,
                "metadata": meta,
                "answered_in_order": got == [fetch, meta],
                "waited_ms": round((time.monotonic() - started) * 1000),
            }
        )
    client.close()
    facts.update(client_id=client.client_id, topic=topic, max_wait_ms=FETCH_WAIT_MS, rounds=rounds)


def setup_hol(broker: Tansu) -> None:
    create_topic(broker.bootstrap, "fc-hol")


SCENARIOS: dict[str, tuple[Callable, str, Callable | None]] = {
    "rejected": (scenario_rejected, "kcat", None),
    "versions": (scenario_versions, "socket", None),
    "acks0": (scenario_acks0, "kafka-python", None),
    "truncated": (scenario_truncated, "socket", None),
    "throttled": (scenario_throttled, "kafka-python", None),
    "hol": (scenario_hol, "socket", setup_hol),
}


# --------------------------------------------------------------------------- recording


@contextlib.contextmanager
def broker_for(name: str):
    """The broker of a scenario, and the port to record: the proxy's for `throttled`."""
    if name != "throttled":
        with Tansu() as broker:
            yield broker, broker.port
        return
    port = free_port()
    with Tansu(advertised_port=port) as broker:
        broker.proxy = ThrottleProxy(port, broker, THROTTLE_MS).start()
        try:
            yield broker, port
        finally:
            broker.proxy.stop()


def record(name: str, out: Path) -> dict:
    run, library, setup = SCENARIOS[name]
    capture = out / f"{PREFIX}{name}.pcap"
    facts: dict[str, Any] = {}
    manifest: dict[str, Any] = {
        "name": PREFIX + name,
        "capture": capture.name,
        "client": {"library": library, "version": "" if library == "socket" else _version(library)},
        "scenario": inspect.cleandoc(run.__doc__ or ""),
        "facts": facts,
    }
    started = time.monotonic()
    with broker_for(name) as (broker, port):
        manifest["broker"] = {
            "implementation": "tansu",
            "version": _tansu_version(broker.binary),
            "port": broker.port,
            "command": ["tansu", *broker.command()[1:]],
        }
        manifest["recorded_port"] = port
        if setup is not None:
            setup(broker)
        with Recorder(port, capture) as rec:
            run(broker, facts)
    manifest["seconds"] = round(time.monotonic() - started, 1)
    manifest["tcpdump"] = {"captured": rec.packets_captured, "dropped": rec.packets_dropped}
    manifest["capture_bytes"] = capture.stat().st_size
    manifest["link_type"] = _link_type(capture)
    path = out / f"{PREFIX}{name}.expected.json"
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "captures")
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    if shutil.which("tcpdump") is None:
        print("tcpdump is required", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    failures = 0
    for name in args.only or list(SCENARIOS):
        try:
            manifest = record_whole(name, tcpdump_dropped, record, name, args.out.resolve())
        except Exception:
            failures += 1
            print(f"{name}: FAILED", file=sys.stderr)
            traceback.print_exc()
            continue
        print(f"{name}: {manifest['capture']} {manifest['capture_bytes']} bytes")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
