"""Live traffic: real clients against a Tansu broker on loopback, recorded and dissected."""

import asyncio
import uuid

import pytest
import tshark_oracle
from test_tshark import agreement

import dissector


def topic_name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_kafka_python_produce_and_fetch(tansu, record):
    kafka = pytest.importorskip("kafka")
    topic = topic_name("live")
    values = [f"value-{i}".encode() for i in range(5)]
    with record("kp.pcap") as rec:
        admin = kafka.KafkaAdminClient(bootstrap_servers=tansu.bootstrap, client_id="live-admin")
        admin.create_topics([kafka.admin.NewTopic(topic, 1, 1)])
        admin.close()
        producer = kafka.KafkaProducer(
            bootstrap_servers=tansu.bootstrap, client_id="live-producer", acks=1, linger_ms=0
        )
        for v in values:
            producer.send(topic, key=b"k", value=v, partition=0).get(timeout=10)
        producer.close()
    pairs = dissector.parse_bodies(dissector.read_pcap(rec.path))
    produce = pairs[pairs.api_name == "Produce"]
    # One request per record: each send waited for its acknowledgement.
    assert len(produce) == len(values)
    assert set(produce.client_id) == {"live-producer"}
    assert (produce.status == "ok").all() and (produce.error_code == 0).all()
    assert all(t == [topic] for t in produce.topics)
    assert (produce.request.map(lambda r: r["Acks"]) == 1).all()
    ids = list(produce.correlation_id)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    # Latency is measured from the request's first byte to the response's last byte.
    expected = (produce.response_end - produce.request_start).dt.total_seconds() * 1000
    assert (produce.latency_ms - expected).abs().max() < 1e-6
    assert (produce.latency_ms > 0).all() and (produce.server_ms >= 0).all()
    assert (produce.response_frame > produce.request_frame).all()
    create = pairs[pairs.api_name == "CreateTopics"]
    assert [t["Name"] for t in create.iloc[0].request["Topics"]] == [topic]
    assert create.iloc[0].client_id == "live-admin"
    if tshark_oracle.available():
        stats = agreement(pairs, tshark_oracle.kafka_pdus(rec.path, tansu.port), tansu.port)
        assert stats["differences"] == [] and stats["requests"] == (pairs.request_frame > 0).sum()


def test_confluent_kafka_acks_all_and_zero(tansu, record):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = topic_name("ck")
    with record("ck.pcap", fmt="pcapng") as rec:
        admin = AdminClient({"bootstrap.servers": tansu.bootstrap, "client.id": "ck-admin"})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
        for acks in ("all", "0"):
            p = ck.Producer(
                {
                    "bootstrap.servers": tansu.bootstrap,
                    "client.id": f"ck-acks-{acks}",
                    "acks": acks,
                    "enable.idempotence": False,
                    "linger.ms": 0,
                }
            )
            p.produce(topic, key=b"k", value=b"v", partition=0)
            assert p.flush(10) == 0
    pairs = dissector.parse_bodies(dissector.read_pcap(rec.path))
    produce = pairs[pairs.api_name == "Produce"]
    acks = dict(zip(produce.client_id, produce.request.map(lambda r: r["Acks"]), strict=True))
    assert acks == {"ck-acks-all": -1, "ck-acks-0": 0}
    assert (pairs.status.isin(["ok", "no_response_expected"])).all()


def test_aiokafka_metadata(tansu, record):
    aiokafka = pytest.importorskip("aiokafka")

    async def run():
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=tansu.bootstrap, client_id="aio-live"
        )
        await producer.start()
        await producer.stop()

    with record("aio.pcap") as rec:
        asyncio.run(run())
    pairs = dissector.parse_bodies(dissector.read_pcap(rec.path))
    assert {"ApiVersions", "Metadata"} <= set(pairs.api_name)
    assert set(pairs.client_id) == {"aio-live"}
    assert (pairs.status == "ok").all()
