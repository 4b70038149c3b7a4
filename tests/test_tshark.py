"""Agreement with Wireshark's Kafka dissector (tshark) on every sample capture.

Headers (api key, version, correlation id, client id, frame number) are compared on every
request: tshark reads them right at every version. Responses are compared on the request
tshark paired them with. Bodies tshark cannot check: Debian's tshark 4.0 stops at older
versions (it flags newer ones "unsupported" and leaves their bodies undecoded) and mis-pairs
nothing we rely on. For those, the recording script's manifest of what it sent is the oracle.
"""

import json
from pathlib import Path

import pandas as pd
import pytest
import tshark_oracle

import dissector

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
# Captures recorded from a broker; the 0.7 ones are built from the seed documents and have
# their own tests (tshark reads 0.7 requests as if they were 0.8 ones).
SAMPLES = sorted(
    p
    for p in CAPTURES.glob("*.pcap")
    if p.with_suffix(".expected.json").exists() and not p.name.startswith("legacy-")
)

pytestmark = [
    pytest.mark.tshark,
    pytest.mark.skipif(not tshark_oracle.available(), reason="tshark is not installed"),
]


def manifest(path):
    return json.loads(path.with_suffix(".expected.json").read_text())


@pytest.fixture(scope="module", params=SAMPLES, ids=[p.stem for p in SAMPLES])
def sample(request):
    path = request.param
    m = manifest(path)
    pairs = dissector.read_pcap(path)
    pdus = tshark_oracle.kafka_pdus(path, m["broker_port"])
    return path, m, pairs, pdus


def raw_sasl_frames(pairs):
    """Frames of the bare SASL tokens that follow a SaslHandshake v0."""
    return {
        frame
        for r in pairs.itertuples()
        if isinstance(r.request, dict) and r.request.get("raw")
        for frame in (r.request_frame, r.response_frame)
    }


def agreement(pairs, pdus, port):
    """Counts of compared requests and responses, and the differences found."""
    by_request = {(r.request_frame, r.correlation_id): r for r in pairs.itertuples()}
    by_response = {(r.response_frame, r.correlation_id): r for r in pairs.itertuples()}
    stats = {
        "requests": 0,
        "responses": 0,
        "undecoded_by_tshark": 0,
        "misread_by_tshark": 0,
        "differences": [],
    }
    raw_sasl = raw_sasl_frames(pairs)
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
                stats["differences"].append(("request", p, ours))
        elif p.request_frame is not None:
            stats["responses"] += 1
            ours = by_response.get((p.frame, p.correlation_id))
            if ours is None or ours.request_frame != p.request_frame:
                stats["differences"].append(("response", p, ours))
    return stats


def test_every_request_and_paired_response_agrees_with_tshark(sample):
    path, m, pairs, pdus = sample
    stats = agreement(pairs, pdus, m["broker_port"])
    print(
        f"{path.name}: {stats['requests']} requests ({stats['undecoded_by_tshark']} with "
        f"bodies tshark cannot decode), {stats['responses']} responses compared, "
        f"{stats['misread_by_tshark']} raw SASL tokens tshark misreads"
    )
    assert stats["requests"] > 0 and stats["responses"] > 0
    assert stats["differences"] == []


def test_every_request_tshark_saw_is_a_row_and_nothing_more(sample):
    path, m, pairs, pdus = sample
    raw_sasl = raw_sasl_frames(pairs)
    tshark_requests = {
        (p.frame, p.correlation_id)
        for p in pdus
        if p.dstport == m["broker_port"] and p.frame not in raw_sasl
    }
    ours = {
        (r.request_frame, r.correlation_id)
        for r in pairs.itertuples()
        if r.request_frame is not pd.NA and r.request_frame not in raw_sasl
    }
    assert ours == tshark_requests


def produce_requests(pairs):
    for r in pairs[pairs.api_name == "Produce"].itertuples():
        for topic in r.request["TopicData"]:
            name = topic.get("Name") or topic.get("TopicId")
            for part in topic["PartitionData"]:
                yield r.client_id, name, part["Index"], r.request["Acks"], r.status


def test_bodies_match_what_the_recording_script_sent(sample):
    """Where tshark 4.0 cannot decode bodies, check them against the manifest."""
    path, m, pairs, _ = sample
    requests = pairs[pairs.request_frame.notna()]
    observed = {  # the recording script's own reassembly: requests per API key and version
        (int(key), version)
        for key, o in m["observed"]["requests"].items()
        for version in o["versions"]
    }
    counts = requests.groupby(["api_key", "api_version"]).size()
    assert set(counts.index) == set(observed)
    for key, o in m["observed"]["requests"].items():
        assert counts.loc[int(key)].sum() == o["count"], o["name"]
    undecoded = requests[requests.request.isna()]
    assert undecoded.empty, undecoded[["request_frame", "api_name", "reason"]]
    acks = {"0": 0, "1": 1, "all": -1, "-1": -1}
    sent = {
        (p["client_id"], p["topic"], acks[str(p["acks"])])
        for p in m.get("produce", [])
        if p.get("error") is None
    }
    seen = {(client, topic, ack) for client, topic, _, ack, _ in produce_requests(pairs)}
    assert sent <= seen
    created = {
        t["name"] for t in m.get("topics_created", []) if not t.get("created_before_recording")
    }
    create = pairs[pairs.api_name == "CreateTopics"]
    assert created == {t["Name"] for r in create.request for t in r["Topics"]}
    deleted = set(m.get("topics_deleted", []))
    delete = pairs[pairs.api_name == "DeleteTopics"]
    names = set()
    for r in delete.request:
        names |= set(r.get("TopicNames") or [t["Name"] for t in r.get("Topics", [])])
    assert deleted == names
    group = m.get("consumer_group")
    if group:
        joins = pairs[pairs.api_name == "JoinGroup"]
        assert {r["GroupId"] for r in joins.request} == {group["group_id"]}
        commits = pairs[(pairs.api_name == "OffsetCommit") & (pairs.status == "ok")]
        committed = {
            f"{t['Name']}/{p['PartitionIndex']}": p["CommittedOffset"]
            for r in commits.request
            for t in r["Topics"]
            for p in t["Partitions"]
        }
        assert committed == group["committed"]
