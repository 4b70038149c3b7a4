"""Recording live traffic: the Tansu broker fixture and the tcpdump recorder."""

from __future__ import annotations

import shutil
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from tools.broker import (
    BrokerError,
    Recorder,
    RecorderError,
    Tansu,
    api_versions_ok,
    free_port,
    port_is_free,
)

scapy_inet = pytest.importorskip("scapy.layers.inet")
scapy_utils = pytest.importorskip("scapy.utils")
TCP = scapy_inet.TCP
rdpcap = scapy_utils.rdpcap

PCAP_MAGICS = {
    "pcap": b"\xd4\xc3\xb2\xa1",  # microseconds, little-endian
    "pcap-ns": b"\x4d\x3c\xb2\xa1",  # nanoseconds, little-endian
    "pcapng": b"\x0a\x0d\x0d\x0a",  # section header block
}


def _payload_to(packets, port: int) -> bytes:
    return b"".join(bytes(p[TCP].payload) for p in packets if TCP in p and p[TCP].dport == port)


def test_tansu_answers_api_versions(tansu):
    assert tansu.bootstrap == f"127.0.0.1:{tansu.port}"
    assert api_versions_ok("127.0.0.1", tansu.port)
    assert not port_is_free(tansu.port)


def test_tansu_stops_and_frees_its_port(fresh_tansu):
    port = fresh_tansu.port
    proc = fresh_tansu.proc
    fresh_tansu.stop()
    assert proc.poll() is not None
    deadline = time.monotonic() + 5
    while not port_is_free(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert port_is_free(port)
    assert not api_versions_ok("127.0.0.1", port, timeout=0.2)


def test_tansu_refuses_a_taken_port_without_fallback(tansu):
    with pytest.raises(BrokerError, match="in use"), Tansu(port=tansu.port, fallback=False):
        pass


def test_tansu_startup_failure_reports_log_tail(tmp_path):
    fake = tmp_path / "fake-tansu"
    fake.write_text("#!/bin/sh\necho 'cannot bind: boom' >&2\nexit 3\n")
    fake.chmod(0o755)
    broker = Tansu(binary=str(fake), startup_timeout=5)
    with pytest.raises(BrokerError, match="status 3") as info:
        broker.start()
    assert "cannot bind: boom" in str(info.value)
    assert broker.proc is None


def test_tansu_falls_back_to_a_free_port(tansu):
    with Tansu(port=tansu.port, fallback=True) as other:
        assert other.port != tansu.port
        assert api_versions_ok("127.0.0.1", other.port)


def _echo_server(port_holder: list[int], ready: threading.Event, stop: threading.Event) -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        srv.settimeout(0.1)
        port_holder.append(srv.getsockname()[1])
        ready.set()
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            with conn:
                data = conn.recv(65536)
                conn.sendall(data)


@pytest.mark.parametrize("fmt", ["pcap", "pcap-ns", "pcapng"])
def test_recorder_captures_plain_tcp(record_port, fmt):
    if fmt == "pcapng" and shutil.which("editcap") is None:
        pytest.skip("editcap not installed")
    holder: list[int] = []
    ready, stop = threading.Event(), threading.Event()
    server = threading.Thread(target=_echo_server, args=(holder, ready, stop), daemon=True)
    server.start()
    try:
        assert ready.wait(5)
        port = holder[0]
        with (
            record_port(f"echo.{fmt}", port=port, fmt=fmt) as rec,
            socket.create_connection(("127.0.0.1", port), timeout=5) as sock,
        ):
            sock.sendall(b"hello recorder")
            assert sock.recv(100) == b"hello recorder"
        assert rec.path.read_bytes()[:4] == PCAP_MAGICS[fmt]
        packets = rdpcap(str(rec.path))
        assert _payload_to(packets, port) == b"hello recorder"
        assert any(p[TCP].flags.S for p in packets if TCP in p)
        assert any(p[TCP].flags.F for p in packets if TCP in p)
        assert rec.packets_captured == len(packets)
        assert rec.packets_dropped == 0
    finally:
        stop.set()
        server.join(5)


def test_recorder_rejects_unknown_format(tmp_path):
    with pytest.raises(ValueError):
        Recorder(9, tmp_path / "x", fmt="erf")


def test_recorder_reports_tcpdump_failure(tmp_path):
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump not installed")
    rec = Recorder(free_port(), tmp_path / "x.pcap", interface="no-such-interface0")
    with pytest.raises(RecorderError, match="tcpdump"):
        rec.start()
    assert rec.proc is None


def test_records_kafka_python_exchange(tansu, record):
    kafka = pytest.importorskip("kafka")
    from kafka.admin import NewTopic

    topic = "recording-test"
    values = [b"first value", b"second value", b"third value"]
    with record("exchange.pcap") as rec:
        admin = kafka.KafkaAdminClient(bootstrap_servers=tansu.bootstrap, client_id="rec-admin")
        try:
            admin.create_topics([NewTopic(topic, 1, 1)], timeout_ms=10000)
        finally:
            admin.close()
        producer = kafka.KafkaProducer(
            bootstrap_servers=tansu.bootstrap, client_id="rec-producer", acks=1
        )
        try:
            for i, value in enumerate(values):
                producer.send(topic, key=b"k%d" % i, value=value, partition=0).get(timeout=10)
        finally:
            producer.close()
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=tansu.bootstrap, client_id="rec-consumer", group_id=None
        )
        got = []
        try:
            tp = kafka.TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            deadline = time.monotonic() + 15
            while len(got) < len(values) and time.monotonic() < deadline:
                for msgs in consumer.poll(timeout_ms=200).values():
                    got += [m.value for m in msgs]
        finally:
            consumer.close()
    assert got == values

    assert rec.path.stat().st_size > 24  # more than the pcap file header
    packets = rdpcap(str(rec.path))
    tcp = [p for p in packets if TCP in p]
    assert tcp
    assert all(tansu.port in (p[TCP].sport, p[TCP].dport) for p in tcp)
    to_broker = _payload_to(packets, tansu.port)
    from_broker = b"".join(bytes(p[TCP].payload) for p in tcp if p[TCP].sport == tansu.port)
    assert topic.encode() in to_broker
    for value in values:
        assert value in to_broker  # in the Produce requests
        assert value in from_broker  # in the Fetch responses
    # The first request on every connection is ApiVersions (api key 18).
    first = to_broker[:8]
    assert struct.unpack(">ih", first[:6])[1] == 18


@pytest.mark.tshark
def test_tshark_sees_kafka_requests(tansu, record):
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed")
    kafka = pytest.importorskip("kafka")
    with record("tshark.pcap") as rec:
        producer = kafka.KafkaProducer(
            bootstrap_servers=tansu.bootstrap, client_id="rec-tshark", acks=1
        )
        try:
            producer.send("recording-tshark", b"value").get(timeout=10)
        finally:
            producer.close()
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(rec.path),
            "-d",
            f"tcp.port=={tansu.port},kafka",
            "-Y",
            "kafka.request_key",
            "-T",
            "fields",
            "-e",
            "kafka.request_key",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert {"18", "3", "0"} <= set(out)  # ApiVersions, Metadata, Produce


@pytest.mark.parametrize("case", ["SIGINT", "SIGINT ignored by its parent", "unheeded"])
def test_tls_proxy_stops_with_a_client_still_connected(tmp_path, monkeypatch, case):
    """The TLS proxy of tools/record_tls.py stops on SIGINT, though its client never hung up
    and though its parent ignored SIGINT when it started it (a shell's background job does),
    and reports the connection with the version and suite it negotiated; one that does not
    end on SIGINT (here: sent a signal it ignores) is killed, its report still read."""
    import ssl

    from tools import record_tls

    upstream = socket.create_server(("127.0.0.1", 0))  # a broker that accepts and holds
    held = []
    threading.Thread(target=lambda: held.append(upstream.accept()), daemon=True).start()
    broker = type("Upstream", (), {"port": upstream.getsockname()[1]})()
    cert, key = record_tls.make_certificate(tmp_path)
    before = signal.getsignal(signal.SIGINT)
    if case == "SIGINT ignored by its parent":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proxy = record_tls.Proxy(free_port(), broker, cert, key, "1.3", "TLS_AES_128_GCM_SHA256")
    finally:
        signal.signal(signal.SIGINT, before)
    client = ssl.create_default_context(cafile=str(cert)).wrap_socket(
        socket.create_connection(("127.0.0.1", proxy.port)), server_hostname="127.0.0.1"
    )
    try:
        client.sendall(b"ping")  # through the proxy to the broker: the connection is up
        deadline = time.monotonic() + 10
        while not held and time.monotonic() < deadline:
            time.sleep(0.02)
        assert held, "the proxy never connected upstream"
        if case == "unheeded":
            monkeypatch.setattr(record_tls.signal, "SIGINT", record_tls.signal.SIGCONT)
            monkeypatch.setattr(record_tls.Proxy, "STOP_WAIT", 0.5)
        started = time.monotonic()
        connections = proxy.stop()
        assert time.monotonic() - started < 5
        assert proxy.proc.returncode == (-9 if case == "unheeded" else 0)
        assert [(c["version"], c["cipher"]) for c in connections] == [
            ("TLSv1.3", "TLS_AES_128_GCM_SHA256")
        ]
    finally:
        client.close()
        upstream.close()
        for conn, _ in held:
            conn.close()
