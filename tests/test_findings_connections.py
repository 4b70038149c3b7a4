"""The connection findings against what the recording scenarios know they did
(captures/findings-conn-*.expected.json, tools/record_findings_connections.py) and what the
sample captures show; and nothing false on a copy cut to snap length 200."""

import json
from functools import cache
from pathlib import Path

import damage
import pandas as pd
import pytest

import dissector
from dissector.analysis.findings import Tables, connections, diagnose

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
KINDS = {check.__name__ for check in connections.CHECKS}


@cache
def tables(path):
    path = Path(path)
    return Tables(
        dissector.read_pcap(path, records="none"),
        dissector.read_pcap(path, table="streams", records="none"),
    )


def capture(name):
    return CAPTURES / f"{name}.pcap"


@cache
def facts(name):
    return json.loads((CAPTURES / f"{name}.expected.json").read_text())["facts"]


def findings(path, kind=None, given=None):
    """The findings of the connection checks on a capture's tables, in check order."""
    t = given or tables(str(path))
    found = [f for check in connections.CHECKS for f in check(t)]
    return [f for f in found if kind is None or f.kind == kind]


def one(path, kind):
    found = findings(path, kind)
    assert len(found) == 1, found
    return found[0]


def packet_flags(path, frames):
    """The TCP flags of these frames (1-based), read from the capture's bytes."""
    packets = damage.read_pcap(path).packets
    return [damage.tcp(packets[n - 1]).flags for n in frames]


def port(address):
    return int(address.rsplit(":", 1)[1])


def request_row(pairs, client_port, correlation_id):
    rows = pairs[(pairs["client"].map(port) == client_port)]
    rows = rows[rows["correlation_id"] == correlation_id]
    assert len(rows) == 1
    return rows.iloc[0]


# -- client_rejected_response ---------------------------------------------------------------


def test_kcat_that_cannot_parse_api_versions_is_a_reconnect_loop():
    """kcat 1.7.1 (real client) cannot parse Tansu's ApiVersions v3 response and reconnects;
    the frames are the FINs that close each connection."""
    path = capture("findings-conn-rejected")
    known = facts("findings-conn-rejected")
    assert known["rejected"] == known["connections"] >= 3  # each connection, per kcat's log
    f = one(path, "client_rejected_response")
    assert (f.severity, f.client_id, f.extra["count"]) == ("error", "fc-kcat", known["rejected"])
    assert f.extra["apis"] == ["ApiVersions"]
    t = tables(str(path))
    ends = t.streams[t.streams["direction"] == "request"]
    assert (ends["ended_by"] == "client").all() and (ends["end"] == "fin").all()
    assert f.frames == sorted(ends["end_frame"])
    assert all(flags & damage.FIN for flags in packet_flags(path, f.frames))
    versions = t.pairs[t.pairs["response_frame"].isin(f.extra["response_frames"])]
    assert list(versions["api_name"]) == ["ApiVersions"] * known["rejected"]
    assert (versions["api_version"] == 3).all() and (versions["status"] == "ok").all()


def test_kafka_python_drops_the_connection_of_an_unasked_produce_response():
    """kafka-python (real client, acks=0) drops its connection on each Produce response
    Tansu sends, as its own log says (CorrelationIdError)."""
    path = capture("findings-conn-acks0")
    known = facts("findings-conn-acks0")
    f = one(path, "client_rejected_response")
    assert f.client_id == "fc-acks0" and f.extra["apis"] == ["Produce"]
    assert f.extra["count"] == known["closed_on_unasked_response"] == known["records"]
    assert all(flags & damage.FIN for flags in packet_flags(path, f.frames))
    ends = tables(str(path)).streams.set_index("end_frame")
    assert set(ends.loc[f.frames, "ended_by"]) == {"client"}


# -- unexpected_response --------------------------------------------------------------------


def test_produce_with_acks_0_answered_by_the_broker():
    path = capture("findings-conn-acks0")
    known = facts("findings-conn-acks0")
    f = one(path, "unexpected_response")
    assert (f.severity, f.client_id, f.extra["count"]) == ("warning", "fc-acks0", known["records"])
    pairs = tables(str(path)).pairs
    produce = pairs[pairs["api_name"] == "Produce"]
    assert [json.loads(r)["Acks"] for r in produce["request"]] == [0] * known["records"]
    assert f.extra["response_frames"] == sorted(produce["response_frame"])
    assert f.frames == sorted([*produce["request_frame"], *produce["response_frame"]])


# -- unsupported_version --------------------------------------------------------------------


def test_requests_the_broker_does_not_serve():
    """A socket client's deliberately wrong requests to the real broker: Metadata v13
    (Tansu serves v0 to v12), OffsetForLeaderEpoch (not served) and API key 200 (none)."""
    path = capture("findings-conn-versions")
    known = facts("findings-conn-versions")["requests"]
    pairs = tables(str(path)).pairs
    found = findings(path, "unsupported_version")
    found = {(f.extra["api_key"], f.extra["api_version"]): f for f in found}
    assert sorted(found) == sorted((r["api_key"], r["api_version"]) for r in known)
    for sent in known:
        f = found[sent["api_key"], sent["api_version"]]
        row = request_row(pairs, sent["client_port"], sent["correlation_id"])
        assert (f.severity, f.client_id, f.client) == ("error", "fc-versions", row.client)
        assert row.request_frame in f.frames and f.extra["count"] == 1
    metadata = found[3, 13]
    assert (metadata.extra["min_version"], metadata.extra["max_version"]) == (0, 12)
    evidence = pairs[pairs["response_frame"] == metadata.extra["advertised_frame"]]
    assert list(evidence["api_name"]) == ["ApiVersions"]
    assert metadata.extra["advertised_frame"] in metadata.frames
    assert "does not serve at all" in found[23, 0].detail
    assert found[23, 0].extra["advertised_frame"] is None
    assert "no Kafka version has" in found[200, 0].detail


def test_unsupported_requests_the_broker_dropped_are_unanswered():
    path = capture("findings-conn-versions")
    known = facts("findings-conn-versions")["requests"]
    pairs = tables(str(path)).pairs
    dropped = [r for r in known if not r["answered"]]
    assert [r["api_key"] for r in dropped] == [23, 200]
    found = findings(path, "unanswered")
    assert len(found) == len(dropped)
    for f, sent in zip(found, dropped, strict=True):
        row = request_row(pairs, sent["client_port"], sent["correlation_id"])
        assert (f.severity, f.frames, f.extra["count"]) == ("warning", [row.request_frame], 1)
        assert "ended by the broker (FIN)" in f.detail


# -- truncated_request ----------------------------------------------------------------------


def test_requests_cut_short_by_their_client():
    """A socket client sends 20 of the 50 bytes of a Metadata request and closes. The core
    gives each a malformed row (the whole stream seen, no gap, the client's FIN): the second
    connection, whose only request is cut, is Kafka as its broker is the first one's."""
    path = capture("findings-conn-truncated")
    known = facts("findings-conn-truncated")["connections"]
    found = findings(path, "truncated_request")
    assert [port(f.client) for f in found] == [c["client_port"] for c in known]
    for f, cut in zip(found, known, strict=True):
        assert f.severity == "warning" and f.extra["bytes"] == cut["bytes_sent"]
        assert f.extra["kafka"] is True
        assert packet_flags(path, f.frames)[0] & damage.FIN
    assert "after 1 complete request(s)" in found[0].detail
    assert "complete request" not in found[1].detail
    assert found[0].client_id == "fc-truncated"  # known from its ApiVersions request
    assert findings(path, "unanswered") == []


# -- throttled ------------------------------------------------------------------------------


def test_throttled_responses_per_client():
    """Tansu never throttles: a loopback proxy between kafka-python and Tansu sets
    ThrottleTimeMs to 250 in Tansu's real Produce responses (the manifest lists them)."""
    path = capture("findings-conn-throttled")
    known = facts("findings-conn-throttled")
    pairs = tables(str(path)).pairs
    f = one(path, "throttled")
    assert (f.severity, f.client_id) == ("warning", "fc-throttled")
    assert f.extra == {"count": len(known["altered"]), "max_throttle_ms": known["throttle_ms"]}
    altered = [request_row(pairs, a["client_port"], a["correlation_id"]) for a in known["altered"]]
    assert f.frames == sorted(r.response_frame for r in altered)
    assert {r.api_name for r in altered} == {"Produce"}


# -- head_of_line_blocking ------------------------------------------------------------------


def test_requests_behind_a_long_poll():
    """A socket client pipelines a Metadata request behind a Fetch with MaxWaitMs 500 on an
    empty topic, three times; the real broker holds each Fetch its full wait."""
    path = capture("findings-conn-hol")
    known = facts("findings-conn-hol")
    pairs = tables(str(path)).pairs.set_index("correlation_id")
    f = one(path, "head_of_line_blocking")
    rounds = known["rounds"]
    assert all(r["answered_in_order"] for r in rounds)
    assert (f.severity, f.client_id, f.extra["count"]) == ("warning", "fc-hol", len(rounds))
    fetches = pairs.loc[[r["fetch"] for r in rounds]]
    assert f.extra["fetch_frames"] == list(fetches["request_frame"])
    for r in fetches["request"]:
        assert json.loads(r)["MaxWaitMs"] == known["max_wait_ms"]
    behind = pairs.loc[[r["metadata"] for r in rounds]]
    assert f.frames == sorted([*fetches["request_frame"], *behind["request_frame"]])
    assert f.extra["worst_queue_ms"] == behind["queue_ms"].max()
    assert (
        0.8 * known["max_wait_ms"]
        < f.extra["worst_queue_ms"]
        <= max(r["waited_ms"] for r in rounds)
    )


# -- sample captures ------------------------------------------------------------------------

#: What each sample capture shows, kind -> count, and why:
SAMPLES = {
    # Tansu answers the acks=0 Produce; kafka-python drops that connection on the answer
    "kafka-python": {"unexpected_response": 1, "client_rejected_response": 1},
    # Tansu answers the three acks=0 Produce requests; librdkafka keeps the connection
    "confluent-kafka": {"unexpected_response": 3},
    # Tansu answers two of aiokafka's three acks=0 Produce requests
    "aiokafka": {"unexpected_response": 2},
    # clean; a consumer closing during its long poll is an `info`
    "compression": {},
    "group-rebalance": {},
    # clean; a reader closing with a Metadata request out is an `info`
    "transactions": {},
    # kcat cannot parse ApiVersions v3 (3 connections); Tansu drops its Produce v1
    "kcat": {"client_rejected_response": 3, "unanswered": 1},
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_sample_captures(name):
    serious = [f for f in findings(capture(name)) if f.severity != "info"]
    assert {f.kind: f.extra["count"] for f in serious} == SAMPLES[name]
    assert len(serious) == len(SAMPLES[name])


def test_shutdowns_are_info():
    for name in ("compression", "transactions"):
        (f,) = findings(capture(name))
        assert (f.kind, f.severity, f.extra["count"]) == ("unanswered", "info", 1)
        assert "ended by the client" in f.detail


def test_diagnose_runs_the_connection_checks():
    t = tables(str(capture("findings-conn-hol")))
    found = diagnose(t.pairs, streams=t.streams)
    mine = found[found["kind"].isin(KINDS)]
    assert list(mine["kind"]) == ["head_of_line_blocking"]
    assert mine["count"].iloc[0] == 3


# -- damaged and missing tables -------------------------------------------------------------


def summary(found):
    return sorted((f.kind, f.severity, tuple(f.frames), f.extra.get("count")) for f in found)


CUT = [*SAMPLES, "findings-conn-rejected", "findings-conn-acks0", "findings-conn-truncated"]
CUT += ["findings-conn-throttled", "findings-conn-hol"]


@pytest.mark.parametrize("name", CUT)
def test_snap_length_200_finds_what_the_intact_capture_does(name, tmp_path):
    pcap = damage.read_pcap(capture(name))
    cut = damage.snap(pcap.packets, 200)
    path = tmp_path / "cut.pcap"
    damage.write_pcap(path, pcap, cut.packets, snaplen=200)
    assert summary(findings(path)) == summary(findings(capture(name)))


def test_snap_length_200_hides_what_the_broker_advertised(tmp_path):
    """ApiVersions responses longer than the snap length list only part of the API keys:
    they prove nothing, and only the unknown API key is left."""
    pcap = damage.read_pcap(capture("findings-conn-versions"))
    path = tmp_path / "cut.pcap"
    damage.write_pcap(path, pcap, damage.snap(pcap.packets, 200).packets, snaplen=200)
    t = tables(str(path))
    assert t.pairs["reason"].str.contains("cut by the capture").any()
    found = findings(path, "unsupported_version")
    assert [(f.extra["api_key"], f.extra["api_version"]) for f in found] == [(200, 0)]


def test_missing_tables_find_nothing():
    t = tables(str(capture("findings-conn-truncated")))
    assert findings(None, given=Tables(t.pairs.iloc[0:0])) == []
    assert findings(None, given=Tables(pd.DataFrame())) == []
    # without the streams table, how connections ended is unknown
    alone = findings(None, given=Tables(tables(str(capture("findings-conn-rejected"))).pairs))
    assert alone == []


LOSSY = ["kafka-python", "confluent-kafka", "group-rebalance", "findings-conn-throttled"]
LOSSY += ["findings-conn-acks0", "findings-conn-rejected", "findings-conn-hol"]


@pytest.mark.parametrize("name", LOSSY)
def test_packets_lost_by_the_capture_make_no_new_problem(name, tmp_path):
    """With 30% of the data packets gone, what is left at warning or error level is what
    the intact capture shows (fewer, never new); responses the capture lost are `info`."""
    pcap = damage.read_pcap(capture(name))
    lossy = damage.drop(pcap.packets, 0.3, seed=1)
    path = tmp_path / "lossy.pcap"
    damage.write_pcap(path, pcap, lossy.packets)
    intact = {}
    for f in findings(capture(name)):
        intact.setdefault(f.kind, set()).update(f.frames)
    for f in findings(path):
        if f.severity == "info":
            continue
        assert {lossy.origin[n - 1] for n in f.frames} <= intact.get(f.kind, set()), f
    lost = [f for f in findings(path, "unanswered") if "lost in a capture gap" in f.detail]
    assert all(f.severity == "info" for f in lost)


def test_bodies_missing():
    """Without decoded bodies (a table written without them) acks are unknown: no
    unexpected response, and the rest still found."""
    t = tables(str(capture("findings-conn-acks0")))
    bare = Tables(t.pairs.assign(request=None, response=None), t.streams)
    assert findings(None, "unexpected_response", bare) == []
    assert findings(None, "client_rejected_response", bare) == []
    hol = tables(str(capture("findings-conn-hol")))
    bare = Tables(hol.pairs.drop(columns=["request", "response"]), hol.streams)
    assert [f.extra["count"] for f in findings(None, given=bare)] == [3]


def test_capture_set():
    """Tables of several captures, told apart by their `capture` column (row labels
    repeat, as in frames concatenated as they are)."""
    names = ["kcat", "findings-conn-versions", "findings-conn-truncated", "findings-conn-hol"]
    parts = {n: tables(str(capture(n))) for n in names}
    joined = Tables(
        pd.concat([t.pairs.assign(capture=n) for n, t in parts.items()]),
        pd.concat([t.streams.assign(capture=n) for n, t in parts.items()]),
    )
    found = findings(None, given=joined)
    got = sorted((f.extra["capture"], f.kind, tuple(f.frames)) for f in found)
    alone = sorted((n, f.kind, tuple(f.frames)) for n in names for f in findings(capture(n)))
    assert got == alone
