"""Matching requests to responses, end to end through the core, on synthetic connections."""

import struct

import pytest
from kafka_encoder import encode_request, encode_response
from synth import Capture, Connection

from dissector import Dissector


def run(cap, ports=()):
    d = Dissector(ports=ports)
    out = []
    for p in cap.packets:
        out += d.feed(p)
    out += d.finish()
    return sorted(out, key=lambda e: e.first_frame), d


def api_versions(corr, version=3):
    return encode_request(
        18,
        version,
        corr,
        "client-1",
        {"ClientSoftwareName": "test", "ClientSoftwareVersion": "1.0"} if version >= 3 else {},
    )


def api_versions_response(corr, version=3, error=0):
    return encode_response(
        18,
        version,
        corr,
        {
            "ErrorCode": error,
            "ApiKeys": [{"ApiKey": 0, "MinVersion": 0, "MaxVersion": 9}],
            "ThrottleTimeMs": 7,
        },
    )


def metadata_request(corr, topics, version=9):
    return encode_request(
        3,
        version,
        corr,
        "client-1",
        {"Topics": [{"Name": t} for t in topics], "AllowAutoTopicCreation": True},
    )


def metadata_response(corr, topic_errors, version=9):
    return encode_response(
        3,
        version,
        corr,
        {
            "Brokers": [{"NodeId": 1, "Host": "broker", "Port": 9092}],
            "ClusterId": "c1",
            "ControllerId": 1,
            "Topics": [
                {"ErrorCode": err, "Name": name, "Partitions": []} for name, err in topic_errors
            ],
        },
    )


def produce(corr, acks, version=7):
    return encode_request(
        0,
        version,
        corr,
        "producer",
        {
            "Acks": acks,
            "TimeoutMs": 1000,
            "TopicData": [
                {"Name": "orders", "PartitionData": [{"Index": 0, "Records": b"x" * 70}]}
            ],
        },
    )


def test_request_and_response_are_matched_with_latency():
    cap = Capture()
    c = Connection(cap)
    req_frames = c.request(api_versions(1), after_ns=1_000_000)
    resp_frames = c.response(api_versions_response(1), after_ns=2_500_000)
    c.close()
    (e,), d = run(cap)
    assert (e.api_key, e.api_name, e.api_version) == (18, "ApiVersions", 3)
    assert e.correlation_id == 1 and e.client_id == "client-1"
    assert e.request_frame == req_frames[-1] == 4 and e.response_frame == resp_frames[-1] == 5
    assert e.client == "10.0.0.2:40000" and e.broker == "10.0.0.1:9092"
    assert e.latency_ms == pytest.approx(2.5) and e.server_ms == pytest.approx(2.5)
    assert e.status == "ok" and e.error_code == 0 and e.error_name == "NONE"
    assert e.throttle_ms == 7
    assert e.response["ApiKeys"] == [{"ApiKey": 0, "MinVersion": 0, "MaxVersion": 9}]
    assert e.request["ClientSoftwareName"] == "test"
    assert e.request_bytes == len(api_versions(1)) + 4
    assert d.kafka_connections == 1


def test_frames_spanning_packets_report_the_completing_packet_and_first_byte_time():
    cap = Capture()
    c = Connection(cap, mss=10)
    body = metadata_request(5, ["orders", "payments"])
    frames = c.request(body)
    c.response(metadata_response(5, [("orders", 0), ("payments", 3)]), after_ns=4_000_000)
    (e,), _ = run(cap)
    assert len(frames) > 3 and e.request_frame == frames[-1]
    first_ts = cap.packets[frames[0] - 1].ts
    last_ts = cap.packets[frames[-1] - 1].ts
    assert e.request_start == first_ts
    assert e.request_end == last_ts
    assert e.topics == ["orders", "payments"]
    assert (e.status, e.error_code, e.error_name) == ("error", 3, "UNKNOWN_TOPIC_OR_PARTITION")


def test_several_requests_in_one_packet_and_responses_out_of_order_of_ids():
    cap = Capture()
    c = Connection(cap)
    from synth import frame_bytes

    c.send("c", frame_bytes(api_versions(1)) + frame_bytes(metadata_request(2, ["a"])))
    c.send("b", frame_bytes(api_versions_response(1)))
    c.send("b", frame_bytes(metadata_response(2, [("a", 0)])))
    out, _ = run(cap)
    assert [(e.correlation_id, e.request_frame, e.response_frame) for e in out] == [
        (1, 4, 5),
        (2, 4, 6),
    ]


def test_acks_zero_produce_expects_no_response_and_later_ids_still_match():
    cap = Capture()
    c = Connection(cap)
    c.request(produce(1, acks=0))
    c.request(produce(2, acks=1))
    c.response(encode_response(0, 7, 2, {"Responses": [], "ThrottleTimeMs": 0}))
    out, _ = run(cap)
    assert [(e.correlation_id, e.status) for e in out] == [
        (1, "no_response_expected"),
        (2, "ok"),
    ]
    assert out[0].response_frame is None and out[0].latency_ms is None
    records = out[0].request["TopicData"][0]["PartitionData"][0]["Records"]
    assert records["size"] == 70 and records["batches"] == []  # 70 bytes of "x": no batch


def test_unanswered_request_and_orphan_response():
    cap = Capture()
    c = Connection(cap)
    c.request(api_versions(1))
    c.response(api_versions_response(99))
    out, _ = run(cap)
    by_status = {e.status: e for e in out}
    assert set(by_status) == {"unanswered", "orphan_response"}
    assert by_status["unanswered"].correlation_id == 1
    orphan = by_status["orphan_response"]
    assert orphan.correlation_id == 99 and orphan.response_frame == 5
    assert orphan.api_key is None and orphan.request_frame is None


def test_undecodable_response_body_is_malformed_with_reason():
    cap = Capture()
    c = Connection(cap)
    c.request(api_versions(1))
    c.response(api_versions_response(1)[:-3])
    (e,), d = run(cap)
    assert e.status == "malformed" and "response body" in e.reason
    assert e.response_frame == 5 and e.latency_ms is not None


def test_non_kafka_connection_is_ignored_when_detecting():
    cap = Capture()
    http = Connection(cap, client=("10.0.0.3", 50000), broker=("10.0.0.1", 80))
    http.send("c", b"GET / HTTP/1.1\r\nHost: example\r\n\r\n")
    http.send("b", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    kafka = Connection(cap, client=("10.0.0.2", 40001), broker=("10.0.0.1", 19092))
    kafka.request(api_versions(1))
    kafka.response(api_versions_response(1))
    out, d = run(cap)
    assert [(e.broker, e.status) for e in out] == [("10.0.0.1:19092", "ok")]
    assert d.connections == 2 and d.kafka_connections == 1


def test_ports_restrict_and_force():
    cap = Capture()
    a = Connection(cap, broker=("10.0.0.1", 9092))
    a.request(api_versions(1))
    a.response(api_versions_response(1))
    b = Connection(cap, client=("10.0.0.2", 40002), broker=("10.0.0.1", 9093))
    b.request(api_versions(1))
    b.response(api_versions_response(1))
    out, _ = run(cap, ports=(9093,))
    assert [e.broker for e in out] == ["10.0.0.1:9093"]


def test_client_side_from_traffic_when_no_handshake_and_no_port():
    cap = Capture()
    c = Connection(cap, broker=("10.0.0.1", 31000), handshake=False)
    c.request(api_versions(1, version=4))
    c.response(api_versions_response(1, version=4))
    (e,), d = run(cap)
    assert e.client == "10.0.0.2:40000" and e.status == "ok" and e.api_version == 4


def test_correlation_id_reused_is_matched_in_order():
    cap = Capture()
    c = Connection(cap)
    c.request(api_versions(7))
    c.request(metadata_request(7, ["t"]))
    c.response(api_versions_response(7))
    c.response(metadata_response(7, [("t", 0)]))
    out, _ = run(cap)
    assert [(e.api_name, e.status) for e in out] == [("ApiVersions", "ok"), ("Metadata", "ok")]


def test_acks_zero_produce_answered_anyway_is_matched():
    # Some brokers (Tansu among them) answer acks=0 produce requests; pair them like Wireshark.
    cap = Capture()
    c = Connection(cap)
    c.request(produce(1, acks=0))
    c.request(produce(2, acks=0))
    c.response(encode_response(0, 7, 2, {"Responses": [], "ThrottleTimeMs": 0}))
    c.request(produce(3, acks=0))
    out, _ = run(cap)
    assert [(e.correlation_id, e.status, e.response_frame) for e in out] == [
        (1, "no_response_expected", None),
        (2, "ok", 6),
        (3, "no_response_expected", None),
    ]


def test_trailing_bytes_after_a_request_body_are_kept_not_fatal():
    cap = Capture()
    c = Connection(cap)
    c.request(api_versions(1))
    c.response(api_versions_response(1))
    c.request(metadata_request(2, ["t"], version=12) + b"\x01\x00\x00")
    c.response(metadata_response(2, [("t", 0)], version=12))
    out, _ = run(cap)
    assert out[1].status == "ok" and out[1].request["_trailing_bytes"] == b"\x01\x00\x00"


def test_an_api_key_the_schema_does_not_know_is_named_by_its_number():
    # A v2 request header (api key, version, correlation id, client id) for key 999.
    header = struct.pack(">hhih", 999, 0, 5, 8) + b"client-1"
    cap = Capture()
    c = Connection(cap)
    c.request(api_versions(1))
    c.response(api_versions_response(1))
    c.request(header + b"\x00\x00")
    c.close()
    out, _ = run(cap)
    unknown = [e for e in out if e.api_key == 999]
    assert len(unknown) == 1
    assert (unknown[0].api_name, unknown[0].correlation_id) == ("Unknown(999)", 5)
    assert "unknown API key 999" in unknown[0].reason
