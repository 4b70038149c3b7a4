"""The analysis of fresh traffic: a kafka-python producer and a one-member consumer group
against the test broker, recorded on loopback; every answer is checked against what the
clients themselves reported."""

import logging
import time
import uuid

import kafka
import pytest

import dissector
from dissector import analysis as ka

RECORDS = 6


@pytest.fixture
def traffic(tansu, record):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    run = uuid.uuid4().hex[:8]
    topic, group = f"live-{run}", f"live-group-{run}"
    admin = KafkaAdminClient(bootstrap_servers=tansu.bootstrap, client_id=f"admin-{run}")
    try:
        admin.create_topics([NewTopic(topic, 2, 1)], timeout_ms=10000)
    finally:
        admin.close()
    known = {"topic": topic, "group": group, "producer": f"prod-{run}", "consumer": f"cons-{run}"}
    with record("live.pcap") as rec:
        producer = KafkaProducer(
            bootstrap_servers=tansu.bootstrap, client_id=known["producer"], linger_ms=0
        )
        try:
            futures = [
                producer.send(topic, key=f"k{i}".encode(), value=b"v", partition=i % 2)
                for i in range(RECORDS)
            ]
            producer.flush(timeout=15)
            sent = [f.get(timeout=15) for f in futures]
        finally:
            producer.close(timeout=10)
        known["sent"] = {(m.topic, m.partition, m.offset) for m in sent}
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=tansu.bootstrap,
            client_id=known["consumer"],
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            max_poll_interval_ms=6000,
        )
        got = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < RECORDS and time.monotonic() < deadline:
                for msgs in consumer.poll(timeout_ms=500).values():
                    got += [(m.topic, m.partition, m.offset) for m in msgs]
            consumer.commit()
            known["assignment"] = sorted(
                f"{tp.topic}/{tp.partition}" for tp in consumer.assignment()
            )
            known["committed"] = {
                (tp.topic, tp.partition): consumer.committed(tp) for tp in consumer.assignment()
            }
        finally:
            consumer.close()
        known["got"] = set(got)
    pairs = dissector.read_pcap(rec.path)
    return known, pairs, rec.path


def test_live_traffic_analysis(traffic):
    known, pairs, path = traffic
    assert known["got"] == known["sent"]

    (gen,) = ka.group_generations(pairs).itertuples(index=False)
    assert gen.group_id == known["group"] and gen.leader_client_id == known["consumer"]
    assert list(gen.assignment_by_client) == [known["consumer"]]
    assert gen.assignment_by_client[known["consumer"]] == known["assignment"]

    matched = ka.delivery(dissector.read_pcap(path, table="records"), pairs)
    assert set(zip(matched.topic, matched.partition, matched.offset, strict=True)) == known["sent"]
    assert set(matched.producer) == {known["producer"]}
    assert set(matched.consumer) == {known["consumer"]}

    lags = ka.lag(dissector.read_pcap(path, table="partitions"), pairs)
    commits = lags[lags.source == "commit"]
    assert set(commits.group_id) == {known["group"]}
    committed = {(r.topic, r.partition): r.offset for r in commits.itertuples()}
    assert committed == known["committed"]
    assert (commits.lag == 0).all()  # everything produced was consumed before the commit

    clients = ka.clients(pairs).set_index("client_id")
    assert {known["producer"], known["consumer"]} <= set(clients.index)
    software = clients.loc[known["consumer"]]
    assert software.software_name == "kafka-python"
    assert software.software_version == kafka.__version__
    assert (
        "JoinGroup" in software.api_versions
        and "Produce" in clients.loc[known["producer"]].api_versions
    )
