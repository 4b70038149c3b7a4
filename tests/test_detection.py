"""Which connections are Kafka and which side is the client, from recorded traffic.

A request its client cut short (part of it, then the client's FIN) is a row, and no loss of
the capture's; a connection whose handshake was not captured is Kafka whatever its port
numbers, the client being the side whose request the other side answers.
"""

import json
import socket
import struct
import time
from pathlib import Path

import damage
import pandas as pd
import pytest
from scapy.layers.inet import TCP
from scapy.layers.l2 import Ether
from synth import Capture
from synth import Connection as Synth

import dissector
from dissector.tables import build_table
from dissector.tables.summary import capture_notes

CAPTURES = Path(__file__).resolve().parent.parent / "captures"

CUT_SENT, CUT_SIZE = 30, 504  # bytes of the Metadata v1 request sent, and its whole frame


def dissect(path, ports=()):
    d = dissector.dissect(path, ports=ports)
    pairs = build_table(list(d), "pairs")
    streams = build_table(d.ended, "streams")
    return pairs, streams, capture_notes(d.stats(), ports)


def counters(row):
    names = ("bytes_delivered", "bytes_framed", "bytes_skipped", "bytes_malformed")
    names += ("bytes_unused", "frames", "malformed_frames", "gaps")
    return {name: int(row[name]) for name in names}


# -- a request cut short by its client --------------------------------------------------------


def metadata_v1(corr, client_id):
    """A Metadata v1 request frame of CUT_SIZE bytes: two long topic names."""
    header = struct.pack(">hhih", 3, 1, corr, len(client_id)) + client_id.encode()
    left = CUT_SIZE - 4 - len(header) - 4 - 2 * 2
    names = [b"a" * (left // 2), b"b" * (left - left // 2)]
    body = struct.pack(">i", 2) + b"".join(struct.pack(">h", len(n)) + n for n in names)
    frame = struct.pack(">i", len(header) + len(body)) + header + body
    assert len(frame) == CUT_SIZE
    return frame


def send_cut(broker, api_versions_first, reset=False):
    """A socket client: (an ApiVersions v0 exchange, then) the first CUT_SENT bytes of a
    Metadata v1 request, then its FIN, reading until the broker closes; or, `reset`, a RST
    (SO_LINGER 0) right after those bytes. Its port."""
    sock = socket.create_connection((broker.host, broker.port), timeout=5)
    port = sock.getsockname()[1]
    try:
        corr = 1
        if api_versions_first:
            sock.sendall(struct.pack(">ihhih", 10 + 3, 18, 0, 1, 3) + b"cut")
            (size,) = struct.unpack(">i", _read(sock, 4))
            assert struct.unpack(">i", _read(sock, size)[:4])[0] == 1
            corr = 2
        sock.sendall(metadata_v1(corr, "cut")[:CUT_SENT])
        if reset:
            time.sleep(0.05)  # the bytes leave in a packet of their own before the RST
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return port
        sock.shutdown(socket.SHUT_WR)
        try:
            while sock.recv(4096):
                pass
        except TimeoutError:
            pass
    finally:
        sock.close()
    return port


def _read(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the broker closed"
        data += chunk
    return data


def cut_packet(path, port):
    """The number of the packet that carried the cut request's bytes."""
    pcap = damage.read_pcap(path)
    for number, packet in enumerate(pcap.packets, 1):
        t = damage.tcp(packet)
        if t and t.src.endswith(f":{port}") and t.length == CUT_SENT:
            return number
    raise AssertionError("no packet with the cut request")


@pytest.fixture(scope="module")
def cut_capture(tmp_path_factory, tansu):
    """Recorded against Tansu: three connections, each ending with a Metadata v1 request of
    504 bytes of which the client sent 30 before its FIN; the first after an ApiVersions
    exchange, the second as its only request; the third as its only request, then a RST."""
    from tools.broker import Recorder

    path = tmp_path_factory.mktemp("cut") / "cut.pcap"
    recorder = Recorder(tansu.port, path)
    try:
        recorder.start()
    except Exception as exc:  # noqa: BLE001 - no capture on loopback here
        pytest.skip(f"cannot capture on loopback: {exc}")
    try:
        ports = (send_cut(tansu, True), send_cut(tansu, False), send_cut(tansu, False, True))
    finally:
        recorder.stop()
    return path, tansu.port, ports


REASON = f"request cut short by the client: {CUT_SENT} of {CUT_SIZE} bytes, then FIN"


@pytest.mark.parametrize("named", [True, False], ids=["port", "detected"])
def test_a_request_cut_short_by_its_client_is_a_row(cut_capture, named):
    path, broker_port, (first, only, reset) = cut_capture
    pairs, streams, notes = dissect(path, (broker_port,) if named else ())
    rows = {port: pairs[pairs.client == f"127.0.0.1:{port}"] for port in (first, only)}
    assert list(rows[first].api_name) == ["ApiVersions", "Metadata"]
    assert rows[first].iloc[0].status == "ok"
    # the connection whose only request is cut: named with --port, or to a broker the
    # first connection proved
    for port, corr in ((first, 2), (only, 1)):
        row = rows[port].iloc[-1]
        assert (row.api_key, row.api_version, row.correlation_id, row.client_id) == (
            3,
            1,
            corr,
            "cut",
        )
        assert row.status == "malformed" and row.reason == REASON
        assert row.request_frame == cut_packet(path, port) and pd.isna(row.response_frame)
        assert row.request_bytes == CUT_SENT
        # decoded as far as it was sent: the header, the topics' count, a name cut short
        assert json.loads(row.request) == {"Topics": [{}], "_stopped_at": 19}
    requests = streams[streams.direction == "request"].set_index("client")
    assert set(streams.kafka) == {True}
    assert set(streams.client_side_from) == {"syn"}
    assert counters(requests.loc[f"127.0.0.1:{only}"]) == {
        "bytes_delivered": CUT_SENT,
        "bytes_framed": CUT_SENT,
        "bytes_skipped": 0,
        "bytes_malformed": CUT_SENT,
        "bytes_unused": 0,
        "frames": 1,
        "malformed_frames": 1,
        "gaps": 0,
    }
    assert counters(requests.loc[f"127.0.0.1:{first}"]) == {
        "bytes_delivered": 17 + CUT_SENT,
        "bytes_framed": 17 + CUT_SENT,
        "bytes_skipped": 0,
        "bytes_malformed": CUT_SENT,
        "bytes_unused": 0,
        "frames": 2,
        "malformed_frames": 1,
        "gaps": 0,
    }
    # the client that reset the connection after its 30 bytes cut its request short too
    row = pairs[pairs.client == f"127.0.0.1:{reset}"].iloc[-1]
    assert (row.correlation_id, row.status, row.request_bytes) == (1, "malformed", CUT_SENT)
    assert row.reason == REASON.replace("then FIN", "then RST")
    assert row.request_frame == cut_packet(path, reset)
    assert set(requests.ended_by) == {"client"}
    assert list(requests.end.loc[[f"127.0.0.1:{p}" for p in (first, only, reset)]]) == [
        "fin",
        "fin",
        "rst",
    ]
    assert notes == []  # nothing lost, nothing not Kafka


def test_a_lone_cut_request_is_not_kafka_without_port_and_no_loss(cut_capture, tmp_path):
    """Alone in its capture, to a broker nothing proved: not Kafka without --port (what was
    sent does not decode), a row with it; the capture lost nothing either way."""
    path, broker_port, (_, only, _) = cut_capture
    pcap = damage.read_pcap(path)
    alone = [p for p in pcap.packets if f":{only}" in (damage.tcp(p).src + damage.tcp(p).dst)]
    lone = tmp_path / "lone.pcap"
    damage.write_pcap(lone, pcap, alone)
    pairs, streams, notes = dissect(lone)
    assert pairs.empty and set(streams.kafka) == {False}
    assert notes[0] == f"not Kafka: 1 TCP connections (ports {broker_port})"
    assert not any("lost data" in line for line in notes)
    request = streams[streams.direction == "request"].iloc[0]
    assert (request.bytes_skipped, request.bytes_unused) == (0, CUT_SENT)
    pairs, _, notes = dissect(lone, (broker_port,))
    assert list(pairs.reason) == [REASON] and notes == []


def test_a_response_cut_short_by_the_broker_pairs_with_its_request():
    cap = Capture()
    c = Synth(cap)
    c.request(struct.pack(">hhih", 18, 0, 7, 1) + b"x")
    whole = struct.pack(">ihhi", 7, 0, 1, 18) + struct.pack(">hhh", 18, 0, 3)
    c.send("b", struct.pack(">i", len(whole)) + whole[:6])
    c._send("b", 0x11, b"")  # FIN|ACK
    c.seq["b"] += 1
    c.close()
    d = dissector.Dissector()
    out = [e for p in cap.packets for e in d.feed(p)] + d.finish()
    (row,) = out
    assert (row.api_name, row.correlation_id, row.status) == ("ApiVersions", 7, "malformed")
    assert row.reason == "response cut short by the broker: 10 of 22 bytes, then FIN"
    assert row.response_frame == 5


# -- the broker on a high port, the handshake not captured -------------------------------------


CLIENT_PORT, BROKER_PORT = 30120, 36333


def high_port_capture(path):
    """From the recorded group-rebalance capture: the JoinGroup v7 (correlation id 3) and
    SyncGroup v5 (4) exchanges of the consumer on client port 53260 and nothing before them
    (no handshake), the client's port rewritten to 30120 and the broker's (9092) to 36333:
    the client is on the lower port."""
    pcap = damage.read_pcap(CAPTURES / "group-rebalance.pcap")
    ports = {53260: CLIENT_PORT, 9092: BROKER_PORT}
    kept = []
    for number, packet in enumerate(pcap.packets, 1):
        t = damage.tcp(packet)
        if t is None or "127.0.0.1:53260" not in (t.src, t.dst) or not 195 <= number <= 231:
            continue
        e = Ether(packet.data)
        e[TCP].sport, e[TCP].dport = ports[e[TCP].sport], ports[e[TCP].dport]
        del e[TCP].chksum
        kept.append(packet._replace(data=bytes(e)))
    damage.write_pcap(path, pcap, kept)
    return path


def test_a_broker_on_a_higher_port_than_its_client_is_found(tmp_path):
    path = high_port_capture(tmp_path / "high.pcap")
    pairs, streams, notes = dissect(path)
    got = pairs[["api_key", "api_name", "api_version", "correlation_id", "status"]]
    assert got.values.tolist() == [[11, "JoinGroup", 7, 3, "ok"], [14, "SyncGroup", 5, 4, "ok"]]
    assert set(pairs.client) == {f"127.0.0.1:{CLIENT_PORT}"}
    assert set(pairs.broker) == {f"127.0.0.1:{BROKER_PORT}"}
    assert list(pairs.request_frame) == [1, 4] and list(pairs.response_frame) == [3, 6]
    assert list(pairs.client_id) == ["gr-member-2"] * 2
    assert notes == []  # no "not Kafka", no loss
    rows = streams.set_index("direction")
    assert set(rows.client_side_from) == {"traffic"} and set(rows.kafka) == {True}
    assert counters(rows.loc["request"]) == {
        "bytes_delivered": 239,
        "bytes_framed": 239,
        "bytes_skipped": 0,
        "bytes_malformed": 0,
        "bytes_unused": 0,
        "frames": 2,
        "malformed_frames": 0,
        "gaps": 0,
    }
    assert counters(rows.loc["response"]) == {
        "bytes_delivered": 199,
        "bytes_framed": 199,
        "bytes_skipped": 0,
        "bytes_malformed": 0,
        "bytes_unused": 0,
        "frames": 2,
        "malformed_frames": 0,
        "gaps": 0,
    }
    named, _, _ = dissect(path, (BROKER_PORT,))
    columns = ["api_key", "api_version", "correlation_id", "request_frame", "response_frame"]
    assert named[columns].values.tolist() == pairs[columns].values.tolist()


def test_a_high_port_broker_found_when_the_capture_starts_inside_a_response(tmp_path):
    """The same exchanges behind the tail of the previous JoinGroup response (corr 2): its
    bytes are passed over, then the requests and their answers are found."""
    path = high_port_capture(tmp_path / "high.pcap")
    pcap = damage.read_pcap(path)
    source = damage.read_pcap(CAPTURES / "group-rebalance.pcap")
    tail = source.packets[192 - 1]  # the broker's JoinGroup response to corr 2
    e = Ether(tail.data)
    e[TCP].sport, e[TCP].dport = BROKER_PORT, CLIENT_PORT
    payload = bytes(e[TCP].payload)
    e[TCP].seq += 20
    e[TCP].remove_payload()
    e = e / payload[20:]
    del e[TCP].chksum, e["IP"].len, e["IP"].chksum
    first = tail._replace(data=bytes(e), wirelen=len(bytes(e)))
    damage.write_pcap(path, pcap, [first, *pcap.packets])
    pairs, streams, notes = dissect(path)
    assert pairs[["api_name", "correlation_id", "status"]].values.tolist() == [
        ["JoinGroup", 3, "ok"],
        ["SyncGroup", 4, "ok"],
    ]
    response = streams[streams.direction == "response"].iloc[0]
    assert response.bytes_skipped == len(payload) - 20
    assert response.bytes_delivered == response.bytes_framed + response.bytes_skipped


# -- not Kafka, on high ports, without a handshake ---------------------------------------------


@pytest.mark.parametrize(
    "client_bytes, broker_bytes",
    [
        (
            b"GET /index.html HTTP/1.1\r\nHost: example\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        ),
        (  # TLS application data records, both ways
            b"\x17\x03\x03\x00\x20" + bytes(range(32)),
            b"\x17\x03\x03\x00\x40" + bytes(range(64, 128)),
        ),
        (
            bytes((i * 37 + 11) % 256 for i in range(3000)),
            bytes((i * 91 + 5) % 256 for i in range(5000)),
        ),
    ],
    ids=["http", "tls", "random"],
)
def test_other_traffic_on_high_ports_is_not_kafka(client_bytes, broker_bytes):
    cap = Capture()
    c = Synth(cap, client=("10.0.0.2", 30120), broker=("10.0.0.1", 36333), handshake=False)
    for _ in range(3):
        c.send("c", client_bytes)
        c.send("b", broker_bytes)
    c.close()
    d = dissector.Dissector()
    out = [e for p in cap.packets for e in d.feed(p)] + d.finish()
    assert out == [] and d.stats()["kafka_connections"] == 0
