"""Findings of consumer groups, and the generation analysis beneath them, against captures whose
recording scenarios (tools/record_findings_groups.py) know what the group went through: a
leader killed while it assigned a generation that never synced, coordinator errors put in the
broker's answers by a loopback proxy, a consumer falling behind a faster producer."""

from functools import cache
from pathlib import Path

import damage
import pandas as pd
import pytest
from samples import CAPTURES, manifest, table

import dissector
from dissector import analysis as ka
from dissector.analysis.findings import Tables
from dissector.analysis.findings import groups as group_checks

KINDS = ("failed_rebalance", "rebalance_storm", "coordinator_moved", "lag_growing")


def found(name, pairs=None, partitions=None):
    """The group findings of a capture (its pairs and partitions tables unless given)."""
    tables = Tables(
        table(name) if pairs is None else pairs,
        partitions=table(name, "partitions") if partitions is None else partitions,
    )
    return [f for check in group_checks.CHECKS for f in check(tables)]


def frames_of(pairs, rows, side):
    return [int(f) for f in pairs.loc[rows, f"{side}_frame"]]


@cache
def cut_copy(name, tmp):
    """A copy of a capture cut at snap length 200, as `tcpdump -s 200` records it."""
    pcap = damage.read_pcap(CAPTURES / f"{name}.pcap")
    path = Path(tmp) / f"{name}-snap200.pcap"
    damage.snap(pcap.packets, 200).write(path, pcap)
    return path


# --------------------------------------------------------------------------- generations


def test_a_round_that_never_synced_is_a_row_of_its_own():
    known = manifest("findings-group-failed")["group"]
    failed = known["failed_round"]
    gens = ka.group_generations(table("findings-group-failed"))
    # Tansu answers the round after the failed one with the same generation id
    assert list(gens["generation_id"]) == [0, 1, 2, 2]
    assert list(gens["trigger"]) == ["join", "join", "join", "timeout"]
    assert list(gens["outcome"]) == ["completed", "completed", "failed", "completed"]
    bad, again = gens.iloc[2], gens.iloc[3]
    assert bad.generation_id == failed["generation_id"]
    assert bad.leader == failed["leader_member_id"]
    assert bad.leader_client_id == failed["leader"]
    assert sorted(bad.members) == failed["member_ids"]
    assert pd.isna(bad.synced) and pd.isna(bad.rebalance_ms) and bad.assignment == {}
    # the round after it: the two members left, led by one of them, as they saw it
    assert failed["leader_member_id"] not in again.members
    assert again.assignment_by_client == known["generations"]["2"]
    assert again.leader_client_id != failed["leader"] and again.rebalance_ms > 0
    for gen in gens.iloc[:2].itertuples(index=False):
        assert gen.assignment_by_client == known["generations"][str(gen.generation_id)]


def test_triggers_and_outcomes_of_a_clean_group():
    known = manifest("group-rebalance")["group"]
    gens = ka.group_generations(table("group-rebalance"))
    # each generation follows one step of the scenario: three joins, then two leaves
    steps = [s["action"] for s in known["steps"]][: len(gens)]
    assert list(gens["trigger"]) == steps == ["join", "join", "join", "leave", "leave"]
    assert (gens["outcome"] == "completed").all()
    short = ka.rebalances(table("group-rebalance"))
    assert list(short["trigger"]) == steps and (short["outcome"] == "completed").all()


def test_a_capture_cut_at_snap_length_200_gives_what_it_still_shows(tmp_path_factory):
    known = manifest("group-rebalance")["group"]
    path = cut_copy("group-rebalance", str(tmp_path_factory.mktemp("cut")))
    pairs = dissector.read_pcap(path)
    cut = pairs["reason"].str.contains("cut by the capture", na=False)
    assert cut[pairs["api_name"] == "JoinGroup"].any()  # the leaders' answers lost their tail
    gens = ka.group_generations(pairs)
    assert list(gens["generation_id"]) == [g["generation_id"] for g in known["generations"]]
    assert list(gens["leader"]) == [g["leader_member_id"] for g in known["generations"]]
    assert (gens["outcome"] == "completed").all() and gens["rebalance_ms"].gt(0).all()
    assert len(ka.rebalances(pairs)) == len(known["generations"])
    (ax,) = ka.plots.group_gantt(pairs).axes
    assert [t.get_text() for t in ax.get_yticklabels()] == known["members"]
    assert not [f for f in found("group-rebalance", pairs) if f.severity != "info"]


#: What each scenario knows of its rounds: (generation, leader) -> (trigger, outcome).
ROUNDS = {
    "group-rebalance": {
        (0, "gr-member-1"): ("join", "completed"),
        (1, "gr-member-1"): ("join", "completed"),
        (2, "gr-member-1"): ("join", "completed"),
        (3, "gr-member-1"): ("leave", "completed"),
        (4, "gr-member-1"): ("leave", "completed"),
    },
    "findings-group-failed": {
        (0, "fg-member-1"): ("join", "completed"),
        (1, "fg-member-1"): ("join", "completed"),
        (2, "fg-member-1"): ("join", "failed"),
        (2, "fg-member-2"): ("timeout", "completed"),
    },
}
DAMAGES = {
    "drop 10%": lambda packets: damage.drop(packets, 0.1, 1),
    "drop 30%": lambda packets: damage.drop(packets, 0.3, 3),
    "mid-stream": lambda packets: damage.cut_start(packets, 3),
}


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("name", ROUNDS)
def test_damaged_copies_tell_no_other_story(name, how, tmp_path):
    # a lost answer may leave a trigger or outcome unknown, never a wrong one
    pcap = damage.read_pcap(CAPTURES / f"{name}.pcap")
    DAMAGES[how](pcap.packets).write(tmp_path / "damaged.pcap", pcap)
    pairs = dissector.read_pcap(tmp_path / "damaged.pcap")
    gens = ka.group_generations(pairs)
    assert len(gens) >= len(ROUNDS[name]) - 1
    for gen in gens.itertuples(index=False):
        leader = gen.leader_client_id  # unknown when the leader's answer was lost
        told = [
            told
            for (g, client), told in ROUNDS[name].items()
            if g == gen.generation_id and (client == leader or pd.isna(leader))
        ]
        assert gen.trigger in {t for t, _ in told} | {"unknown"}
        assert gen.outcome in {o for _, o in told} or pd.isna(gen.outcome)
    failed = [f for f in found(name, pairs) if f.kind == "failed_rebalance"]
    expect = [g for (g, _), (_, o) in ROUNDS[name].items() if o == "failed"]
    assert [f.extra["generation_id"] for f in failed] == expect


# --------------------------------------------------------------------------- plot


def test_gantt_draws_the_round_that_never_synced(tmp_path):
    failed = manifest("findings-group-failed")["group"]["failed_round"]
    fig = ka.plots.group_gantt(table("findings-group-failed"))
    (ax,) = fig.axes
    marked = [t.get_text() for t in ax.texts if "failed" in t.get_text()]
    # one bar per member of the failed round, each marked, the leader's with its star
    assert sorted(marked) == sorted(
        f"g{failed['generation_id']}{'*' if m == failed['leader_member_id'] else ''} failed"
        for m in failed["member_ids"]
    )
    hatched = [p for c in ax.containers for p in c if p.get_hatch()]
    assert len(hatched) == len(failed["member_ids"])
    fig.savefig(tmp_path / "gantt.png")
    assert (tmp_path / "gantt.png").stat().st_size > 1000


# --------------------------------------------------------------------------- findings


def test_failed_rebalance():
    known = manifest("findings-group-failed")["group"]
    failed = known["failed_round"]
    pairs = table("findings-group-failed")
    (finding,) = [f for f in found("findings-group-failed") if f.kind == "failed_rebalance"]
    assert finding.severity == "error"
    assert finding.extra["group_id"] == known["group_id"]
    assert finding.extra["generation_id"] == failed["generation_id"]
    assert finding.extra["leader"] == failed["leader_member_id"]
    assert finding.extra["leader_left"] is True
    assert finding.client_id == failed["leader"]
    # evidence: the JoinGroup answers that formed the round, the SyncGroups answered
    # REBALANCE_IN_PROGRESS (the killed leader sent none)
    bodies = [ka.body(r) for r in pairs["response"]]
    joins = (pairs["api_name"] == "JoinGroup") & pd.Series(
        [b.get("Leader") == failed["leader_member_id"] for b in bodies], index=pairs.index
    )
    joins &= pd.Series(
        [b.get("GenerationId") == failed["generation_id"] for b in bodies], index=pairs.index
    )
    syncs = (pairs["api_name"] == "SyncGroup") & (pairs["error_name"] == "REBALANCE_IN_PROGRESS")
    assert syncs.sum() == len(failed["member_ids"]) - 1
    assert not (pairs.loc[syncs, "client_id"] == failed["leader"]).any()
    expect = sorted(frames_of(pairs, joins, "response") + frames_of(pairs, syncs, "response"))
    assert finding.frames == expect
    assert finding.extra["sync_errors"] == {"REBALANCE_IN_PROGRESS": int(syncs.sum())}
    assert "REBALANCE_IN_PROGRESS" in finding.detail and failed["leader"] in finding.detail
    # the round began with the third member's join; its SyncGroups were answered after the
    # leader had been killed
    step = {(s["action"], s["client_id"]): s["time"] for s in known["steps"]}
    joined = pd.Timestamp(step["join", known["members"][2]], unit="s", tz="UTC")
    killed = pd.Timestamp(step["killed", failed["leader"]], unit="s", tz="UTC")
    assert joined < finding.time < killed
    assert (pairs.loc[syncs, "response_end"] > killed).all()


def test_rebalance_storm():
    known = manifest("findings-group-failed")["group"]
    pairs = table("findings-group-failed")
    (storm,) = [f for f in found("findings-group-failed") if f.kind == "rebalance_storm"]
    assert storm.severity == "warning"
    # the three members' joins came 3 to 4 s apart: three rebalances within two session
    # timeouts (12 s); the round after the leader died came 8 s after the last of them
    assert storm.extra["count"] == 3
    assert storm.extra["generations"] == [0, 1, 2]
    assert storm.extra["window_ms"] == 2 * known["session_timeout_ms"]
    assert "12 s" in storm.detail and "6000 ms" in storm.detail
    gens = ka.group_generations(pairs)
    first_joins = []
    for gen in gens.iloc[:3].itertuples(index=False):
        rows = pairs[(pairs["api_name"] == "JoinGroup") & (pairs["request_start"] == gen.started)]
        first_joins.append(int(rows["response_frame"].iloc[0]))
    assert storm.frames == first_joins


def test_coordinator_moved():
    known = manifest("findings-group-coordinator")
    pairs = table("findings-group-coordinator")
    (moved,) = [f for f in found("findings-group-coordinator") if f.kind == "coordinator_moved"]
    assert moved.severity == "warning"
    assert moved.client_id == known["group"]["member"]
    assert moved.extra["group_id"] == known["group"]["group_id"]
    # Tansu, a single broker, never moves its coordinator: the loopback proxy between the
    # consumer and the broker put these error codes in the broker's answers
    altered = known["altered"]
    assert moved.extra["count"] == len(altered) == 3
    assert moved.extra["errors"] == {"COORDINATOR_NOT_AVAILABLE": 1, "NOT_COORDINATOR": 2}
    assert moved.extra["apis"] == {"FindCoordinator": 1, "Heartbeat": 2}
    # the evidence: the answers the proxy altered, found by their correlation ids
    names = {10: "FindCoordinator", 12: "Heartbeat"}
    expect = []
    for a in altered:
        rows = pairs[
            (pairs["client_id"] == a["client_id"])
            & (pairs["api_name"] == names[a["api_key"]])
            & (pairs["correlation_id"] == a["correlation_id"])
        ]
        expect += frames_of(pairs, rows.index, "response")
    assert moved.frames == sorted(expect)
    # the consumer found the coordinator again each time and kept its partitions
    gens = ka.group_generations(pairs)
    assert list(gens["outcome"]) == ["completed"]
    assert sorted(gens["assignment_by_client"].iloc[0][known["group"]["member"]]) == sorted(
        known["assignment"]
    )


def test_lag_growing():
    known = manifest("findings-group-lag")
    (grows,) = [f for f in found("findings-group-lag") if f.kind == "lag_growing"]
    assert grows.severity == "warning"
    assert grows.client_id == known["group"]["member"]
    assert grows.extra["group_id"] == known["group"]["group_id"]
    assert (grows.extra["topic"], grows.extra["partition"]) == (
        known["group"]["topic"],
        known["partition"],
    )
    # the consumer read a record each half second while ten a second came in: it started
    # level with the producer and fell far behind
    assert grows.extra["first_lag"] <= 1
    assert grows.extra["last_lag"] >= 30
    assert grows.extra["last_lag"] <= known["produced"] - known["first_consumed_offset"]
    parts = table("findings-group-lag", "partitions")
    fetches = parts[(parts["api_name"] == "Fetch") & (parts["partition"] == known["partition"])]
    fetches = fetches[fetches["lag"].notna()]
    assert grows.extra["source"] == "fetch"
    assert grows.frames == [
        int(fetches["response_frame"].iloc[0]),
        int(fetches["response_frame"].iloc[-1]),
    ]
    assert grows.extra["first_lag"] == fetches["lag"].iloc[0]
    assert grows.extra["last_lag"] == fetches["lag"].iloc[-1]


@pytest.mark.parametrize(
    "name",
    ["kafka-python", "group-rebalance", "confluent-kafka", "aiokafka", "transactions"],
)
def test_clean_captures_give_no_warning(name):
    assert [(f.kind, f.severity) for f in found(name) if f.severity != "info"] == []


def test_group_rebalance_is_no_storm():
    # its five generations follow the scenario's steps, 7 s apart (GROUP_STEP_S) or more:
    # never three within two session timeouts (12 s)
    pairs = table("group-rebalance")
    gens = ka.group_generations(pairs)
    gaps = gens["started"].diff().dropna().dt.total_seconds()
    assert (gaps > 6.5).all()
    assert not (gens["started"].shift(-2) - gens["started"]).dt.total_seconds().lt(12).any()


def test_each_kind_only_where_its_scenario_made_it():
    kinds = {
        name: {f.kind for f in found(name)}
        for name in ("findings-group-failed", "findings-group-coordinator", "findings-group-lag")
    }
    assert kinds == {
        "findings-group-failed": {"failed_rebalance", "rebalance_storm"},
        "findings-group-coordinator": {"coordinator_moved"},
        "findings-group-lag": {"lag_growing"},
    }


def test_diagnose_lists_them_most_severe_first():
    pairs = table("findings-group-failed")
    out = ka.diagnose(pairs, partitions=table("findings-group-failed", "partitions"))
    mine = out[out["kind"].isin(KINDS)]
    assert list(mine["kind"]) == ["failed_rebalance", "rebalance_storm"]
    assert {"group_id", "generation_id", "count"} <= set(out.columns)


@pytest.mark.parametrize(
    "name", ["findings-group-failed", "findings-group-coordinator", "findings-group-lag"]
)
def test_checks_on_cut_captures_never_raise(name, tmp_path_factory):
    path = cut_copy(name, str(tmp_path_factory.mktemp("cut")))
    pairs = dissector.read_pcap(path)
    parts = dissector.read_pcap(path, table="partitions")
    kinds = {f.kind for f in found(name, pairs, parts)}
    assert kinds <= set(KINDS)
    # the cut keeps every header and the first bytes of each body: the failure stays in view
    if name == "findings-group-failed":
        assert "failed_rebalance" in kinds
    assert found(name, pairs.iloc[0:0], parts.iloc[0:0]) == []


def test_no_tables_no_findings():
    assert [f for c in group_checks.CHECKS for f in c(Tables(table("findings-group-lag")))] == [
        f for f in found("findings-group-lag") if f.kind != "lag_growing"
    ]
