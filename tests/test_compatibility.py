"""Upgrade planning: what an Apache Kafka release would refuse of the requests in real
captures, and facts of the releases' data."""

import json
from functools import cache
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest

import dissector
from dissector import analysis as ka
from dissector.analysis.compatibility import COLUMNS, releases, served
from tools import gen_releases

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
DEFINITIONS = gen_releases.ROOT.parent / "shared" / "kafka-protocol" / "messages"
KNOWN = ["3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "3.9", "4.0", "4.1"]


@cache
def pairs(name):
    return dissector.read_pcap(CAPTURES / f"{name}.pcap")


def requests(table, api, version):
    sent = table[(table["api_name"] == api) & table["request_frame"].notna()]
    return sent[sent["api_version"] == version]


def span(release, api):
    row = served(release).set_index("api_name").loc[api]
    return row["min_version"], row["max_version"]


# --------------------------------------------------------------------------- the releases


def test_the_releases_known():
    assert releases() == KNOWN
    files = resources.files("dissector.protocol.releases")
    for release in KNOWN:
        doc = json.loads(files.joinpath(f"{release}.json").read_text())
        assert doc["release"] == release and doc["tag"] == f"{release}.0"
        assert len(doc["commit"]) == 40 and doc["source"]
    notice = files.joinpath("NOTICE").read_text()
    assert "The Apache Software Foundation" in notice and "Apache License" in notice


def test_kip_896_removed_old_versions_in_4_0():
    assert span("4.0", "Produce") == (3, 12)
    assert span("4.0", "ListOffsets") == (1, 10)
    assert span("4.0", "Fetch") == (4, 17)
    assert span("4.0", "JoinGroup") == (2, 9)
    assert span("3.9", "Produce") == (0, 11)
    assert span("3.9", "ListOffsets") == (0, 9)
    # the ZooKeeper-era inter-broker APIs are gone
    assert 4 in set(served("3.9")["api_key"]) and 4 not in set(served("4.0")["api_key"])
    # 4.1 took back JoinGroup v0-1 (KAFKA-19444) and made share groups stable at v1
    assert span("4.1", "JoinGroup") == (0, 9)
    assert span("4.1", "ShareGroupHeartbeat") == (1, 1)
    assert "ShareGroupHeartbeat" not in set(served("4.0")["api_name"])


def test_no_release_lowers_a_maximum():
    for old, new in zip(KNOWN, KNOWN[1:], strict=False):
        before = served(old).set_index("api_key")["max_version"]
        after = served(new).set_index("api_key")["max_version"]
        common = before.index.intersection(after.index)
        assert (after[common] >= before[common]).all(), (old, new)
    for release in KNOWN:
        table = served(release)
        assert (table["min_version"] <= table["max_version"]).all()
        assert table["api_key"].is_unique and table["api_name"].is_unique


def test_release_names():
    assert served("4.0.0").equals(served("4.0"))
    assert served(" 3.9 ").equals(served("3.9.0"))
    for bad in ["2.8", "4.0.1", "5", "latest"]:
        with pytest.raises(ValueError, match=r"known: 3\.0, 3\.1, .*, 4\.1\)"):
            ka.compatibility(pairs("kcat"), broker=bad)
    with pytest.raises(ValueError, match="'2.8'"):
        ka.compatibility(pairs("kcat").iloc[0:0], broker="2.8")


@pytest.mark.skipif(not DEFINITIONS.is_dir(), reason="kafka-protocol definitions absent")
def test_which_definitions_a_broker_serves():
    def read(name):
        return json.loads(gen_releases.strip_comments((DEFINITIONS / name).read_text()))

    assert gen_releases.served(read("VoteRequest.json")) is None  # controller only
    assert gen_releases.served(read("LeaderAndIsrRequest.json")) == (4, "LeaderAndIsr", 0, 7)
    unstable = read("InitProducerIdRequest.json")
    assert unstable["validVersions"] == "0-6" and unstable["latestVersionUnstable"]
    assert gen_releases.served(unstable) == (22, "InitProducerId", 0, 5)


# --------------------------------------------------------------------------- captures


def test_kcat_uses_versions_4_0_refuses():
    table = pairs("kcat")
    out = ka.compatibility(table, broker="4.0")
    assert list(out.columns) == COLUMNS
    produce = requests(table, "Produce", 1)
    offsets = requests(table, "ListOffsets", 0)
    assert len(produce) == 1 and len(offsets) == 1
    first = produce["request_frame"].min(), offsets["request_frame"].min()
    expect = [
        ("kc-producer", "127.0.0.1", "Produce", 1, 1, "3–12", "0–11", first[0]),
        ("kc-consumer", "127.0.0.1", "ListOffsets", 0, 1, "1–10", "0–9", first[1]),
    ]
    assert [tuple(r) for r in out.itertuples(index=False)] == expect
    # what the broker of the capture advertised, from its ApiVersions response
    advertised = ka.advertised(table).set_index("api_key")
    assert advertised.loc[0, "max_version"] == 11 and advertised.loc[2, "max_version"] == 9
    # 3.9 still serves every version kcat used
    assert ka.compatibility(table, broker="3.9").empty


def test_kafka_python_is_ready_for_4_0_but_too_new_for_3_0():
    table = pairs("kafka-python")
    assert ka.compatibility(table, broker="4.0").empty
    assert set(requests(table, "Produce", 9)["client_id"]) == {
        "kp-producer-acks0",
        "kp-producer-acks1",
        "kp-producer-acksall",
    }
    out = ka.compatibility(table, broker="3.0").set_index(["client_id", "api_name"])
    row = out.loc[("kp-consumer", "ListOffsets")]
    assert row["api_version"] == 9 and row["supported"] == "0–7" and row["advertised"] == "0–9"
    assert row["requests"] == len(requests(table, "ListOffsets", 9))
    assert row["first_frame"] == requests(table, "ListOffsets", 9)["request_frame"].min()
    # kafka-python negotiates with ApiVersions: only versions above 3.0's maximum are refused
    ranges = served("3.0").set_index("api_name")
    for (_, api), r in out.iterrows():
        assert r["api_version"] > ranges.loc[api, "max_version"]
    assert out.loc[("kp-admin", "DescribeCluster"), "supported"] == "0–0"


def test_apis_a_release_does_not_have():
    table = pairs("confluent-kafka")
    out = ka.compatibility(table, broker="3.6")
    missing = out[out["supported"] == "none"]
    assert set(missing["api_name"]) == {"GetTelemetrySubscriptions", "ConsumerGroupDescribe"}
    telemetry = missing[missing["api_name"] == "GetTelemetrySubscriptions"]
    sent = requests(table, "GetTelemetrySubscriptions", 0)
    assert telemetry["requests"].sum() == len(sent)
    assert set(telemetry["client_id"]) == set(sent["client_id"])
    assert set(telemetry["advertised"]) == {"0–0"}
    assert ka.compatibility(table, broker="3.8").empty


def test_kafka_0_7_is_served_by_no_release():
    table = pairs("legacy-0.7")
    assert ka.advertised(table).empty
    out = ka.compatibility(table, broker="4.0")
    assert out["requests"].sum() == table["request_frame"].notna().sum() == 10
    assert dict(zip(out["api_name"], out["requests"], strict=True)) == {
        "Produce": 4,
        "MultiProduce": 1,
        "Offsets": 2,
        "Fetch": 2,
        "MultiFetch": 1,
    }
    assert set(out["supported"]) == {"none"} and out["advertised"].isna().all()
    assert out["api_version"].isna().all() and out["first_frame"].is_monotonic_increasing


def test_mixed_capture_keeps_0_7_types_apart_from_api_keys():
    table = pairs("legacy-0.7-mixed")
    assert not ka.advertised(table).empty  # the 0.8 client's broker answered ApiVersions
    out = ka.compatibility(table, broker="3.9")
    # Offsets is 0.7 request type 4, not LeaderAndIsr (API key 4), which 3.9 serves
    assert list(out["api_name"]) == ["Offsets", "Fetch"]
    assert out["advertised"].isna().all() and set(out["supported"]) == {"none"}


def test_a_capture_set_is_checked_capture_by_capture():
    both = pd.concat(
        [pairs("kcat").assign(capture="kcat"), pairs("kafka-python").assign(capture="kp")],
        ignore_index=True,
    )
    out = ka.compatibility(both, broker="4.0")
    assert list(out.columns) == ["capture", *COLUMNS]
    assert list(out["capture"]) == ["kcat", "kcat"]
    assert list(out["api_name"]) == ["Produce", "ListOffsets"]
