"""Agreement with Wireshark's Kafka dissector (tshark) on every sample capture: headers.

Headers (api key, version, correlation id, client id, frame number) are compared on every
request: tshark reads them right at every version. Responses are compared on the request
tshark paired them with. Bodies are compared in test_tshark_bodies.py where tshark decodes
them; where it cannot (versions and keys newer than it knows), the recording script's
manifest of what it sent is the oracle here.
"""

import json
from collections import Counter

import pytest
import synth
import tshark_oracle

import dissector

CAPTURES, SAMPLES = tshark_oracle.CAPTURES, tshark_oracle.SAMPLES

pytestmark = [
    pytest.mark.tshark,
    pytest.mark.skipif(not tshark_oracle.available(), reason="tshark is not installed"),
]


@pytest.fixture(scope="module", params=SAMPLES, ids=[p.stem for p in SAMPLES])
def sample(request):
    path = request.param
    m = tshark_oracle.manifest(path)
    exchanges = list(dissector.dissect(path))
    pdus = tshark_oracle.kafka_pdus(path, m["broker_port"])
    return path, m, exchanges, pdus


def rows(exchanges):
    """Exchanges from dissect(), or the rows of a pairs DataFrame (bodies as JSON text)."""
    return list(exchanges.itertuples()) if hasattr(exchanges, "itertuples") else list(exchanges)


def _body(value):
    return json.loads(value) if isinstance(value, str) else value


def raw_sasl_frames(exchanges):
    """Frames of the bare SASL tokens that follow a SaslHandshake v0."""
    return {
        frame
        for e in rows(exchanges)
        if isinstance(_body(e.request), dict) and _body(e.request).get("raw")
        for frame in (e.request_frame, e.response_frame)
    }


def agreement(exchanges, pdus, port):
    """Counts of compared requests and responses, and the differences found."""
    exchanges = rows(exchanges)
    by_request = {(e.request_frame, e.correlation_id): e for e in exchanges}
    by_response = {(e.response_frame, e.correlation_id): e for e in exchanges}
    stats = {
        "requests": 0,
        "responses": 0,
        "undecoded_by_tshark": 0,
        "misread_by_tshark": 0,
        "differences": [],
    }
    raw_sasl = raw_sasl_frames(exchanges)
    for p in pdus:
        if p.frame in raw_sasl:
            # After a SaslHandshake v0 the client sends bare SASL tokens with no Kafka header;
            # tshark reads them as requests with garbage headers.
            stats["misread_by_tshark"] += 1
            continue
        # Headers are compared even where tshark fails in the body (malformed or unsupported).
        if p.dstport == port:
            stats["requests"] += 1
            stats["undecoded_by_tshark"] += p.unsupported or p.malformed
            ours = by_request.get((p.frame, p.correlation_id))
            theirs = (p.api_key, p.api_version, p.client_id)
            if ours is None or (ours.api_key, ours.api_version, ours.client_id) != theirs:
                stats["differences"].append(("request", p.frame, theirs, ours))
        elif p.request_frame is not None:
            stats["responses"] += 1
            ours = by_response.get((p.frame, p.correlation_id))
            if ours is None or ours.request_frame != p.request_frame:
                stats["differences"].append(("response", p.frame, p.request_frame, ours))
    return stats


def test_every_request_and_paired_response_agrees_with_tshark(sample):
    path, m, exchanges, pdus = sample
    stats = agreement(exchanges, pdus, m["broker_port"])
    print(
        f"{path.name}: {stats['requests']} requests ({stats['undecoded_by_tshark']} with "
        f"bodies tshark cannot decode), {stats['responses']} responses compared, "
        f"{stats['misread_by_tshark']} raw SASL tokens tshark misreads"
    )
    assert stats["requests"] > 0 and stats["responses"] > 0
    assert stats["differences"] == []


def test_several_pdus_in_one_packet_stay_apart(tmp_path):
    """Three pipelined Produce requests in one segment, their three responses in another, and
    the same again cut into 50-byte segments: tshark and this dissector both see three PDUs
    each way, with the same frames, correlation ids and bodies."""
    path = CAPTURES / "aiokafka.pcap"
    exchanges = [e for e in dissector.dissect(path) if e.api_name == "Produce" and e.response]
    pdus = {(p.frame, p.correlation_id): p for p in tshark_oracle.kafka_pdus(path, 9092)}
    three = exchanges[-3:]
    requests = b"".join(pdus[e.request_frame, e.correlation_id].raw for e in three)
    responses = b"".join(pdus[e.response_frame, e.correlation_id].raw for e in three)
    capture = synth.Capture()
    whole = synth.Connection(capture, client=("10.0.0.2", 40000))
    whole.send("c", requests)
    whole.send("b", responses)
    cut = synth.Connection(capture, client=("10.0.0.3", 40001))
    cut.send("c", requests, mss=50)
    cut.send("b", responses, mss=50)
    synthetic = capture.write_pcap(tmp_path / "pipelined.pcap")

    theirs = tshark_oracle.kafka_pdus(synthetic, 9092)
    ours = list(dissector.dissect(synthetic))
    assert len(theirs) == 12 and len(ours) == 6
    by_packet = Counter(p.frame for p in theirs[:6])
    assert sorted(by_packet.values()) == [3, 3]  # the unsegmented connection
    for p in theirs:
        e = next(
            e
            for e in ours
            if p.frame in (e.request_frame, e.response_frame)
            and e.correlation_id == p.correlation_id
        )
        original = next(o for o in three if o.correlation_id == p.correlation_id)
        side = "request" if p.dstport == 9092 else "response"
        assert (
            p.raw
            == pdus[
                (original.request_frame if side == "request" else original.response_frame),
                p.correlation_id,
            ].raw
        )
        assert (e.request if side == "request" else e.response) == (
            original.request if side == "request" else original.response
        )
        if side == "response":
            assert p.request_frame == e.request_frame


def test_every_request_tshark_saw_is_a_row_and_nothing_more(sample):
    _, m, exchanges, pdus = sample
    raw_sasl = raw_sasl_frames(exchanges)
    tshark_requests = {
        (p.frame, p.correlation_id)
        for p in pdus
        if p.dstport == m["broker_port"] and p.frame not in raw_sasl
    }
    ours = {
        (e.request_frame, e.correlation_id)
        for e in exchanges
        if e.request_frame is not None and e.request_frame not in raw_sasl
    }
    assert ours == tshark_requests


def produce_requests(exchanges):
    for e in exchanges:
        if e.api_name != "Produce":
            continue
        for topic in e.request["TopicData"]:
            name = topic.get("Name") or topic.get("TopicId")
            for part in topic["PartitionData"]:
                yield e.client_id, name, part["Index"], e.request["Acks"], e.status


def test_bodies_match_what_the_recording_script_sent(sample):
    """Where tshark 4.0 cannot decode bodies, check them against the manifest."""
    _, m, exchanges, _ = sample
    requests = [e for e in exchanges if e.request_frame is not None]
    observed = {  # the recording script's own reassembly: requests per API key and version
        (int(key), version)
        for key, o in m["observed"]["requests"].items()
        for version in o["versions"]
    }
    # the bare SASL tokens after SaslHandshake v0 have no version: not Kafka requests
    counts = Counter((e.api_key, e.api_version) for e in requests if e.api_version is not None)
    assert set(counts) == observed
    for key, o in m["observed"]["requests"].items():
        assert sum(n for (k, _), n in counts.items() if k == int(key)) == o["count"], o["name"]
    undecoded = [(e.request_frame, e.api_name, e.reason) for e in requests if e.request is None]
    assert undecoded == []
    acks = {"0": 0, "1": 1, "all": -1, "-1": -1}
    sent = {
        (p["client_id"], p["topic"], acks[str(p["acks"])])
        for p in m.get("produce", [])
        if p.get("error") is None
    }
    seen = {(client, topic, ack) for client, topic, _, ack, _ in produce_requests(exchanges)}
    assert sent <= seen
    created = {
        t["name"] for t in m.get("topics_created", []) if not t.get("created_before_recording")
    }
    bodies = {name: [e.request for e in requests if e.api_name == name] for name in API_NAMES}
    assert created == {t["Name"] for r in bodies["CreateTopics"] for t in r["Topics"]}
    deleted = set(m.get("topics_deleted", []))
    names = set()
    for r in bodies["DeleteTopics"]:
        names |= set(r.get("TopicNames") or [t["Name"] for t in r.get("Topics", [])])
    assert deleted == names
    group = m.get("consumer_group")
    if group:
        assert {r["GroupId"] for r in bodies["JoinGroup"]} == {group["group_id"]}
        committed = {
            f"{t['Name']}/{p['PartitionIndex']}": p["CommittedOffset"]
            for e in requests
            if e.api_name == "OffsetCommit" and e.status == "ok"
            for t in e.request["Topics"]
            for p in t["Partitions"]
        }
        assert committed == group["committed"]


API_NAMES = ("CreateTopics", "DeleteTopics", "JoinGroup")
