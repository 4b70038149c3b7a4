"""The analysis layer against what the recording scenarios know they did: the group's
generations, leaders and assignments, the transactions committed and aborted, the records
produced and fetched (captures/*.expected.json)."""

import json
from collections import Counter

import pandas as pd
import pytest
import samples
from samples import CAPTURES, manifest

import dissector
from dissector import analysis as ka
from dissector.analysis.latency import STATS

RECORDED = ["kafka-python", "confluent-kafka", "aiokafka", "kcat", "compression", "sasl"]
ALL = [*RECORDED, "group-rebalance", "transactions", "legacy-0.7", "legacy-0.7-mixed"]


def table(name, which="pairs"):
    options = {"records": "full"} if which != "records" else {}
    return samples.table(name, which, **options)


# --------------------------------------------------------------------------- groups


def test_group_generations_match_what_the_members_saw():
    known = manifest("group-rebalance")["group"]
    gens = ka.group_generations(table("group-rebalance"))
    assert list(gens["generation_id"]) == [g["generation_id"] for g in known["generations"]]
    for gen, expect in zip(gens.itertuples(index=False), known["generations"], strict=True):
        assert gen.group_id == known["group_id"]
        assert gen.protocol_type == "consumer" and gen.protocol == known["assignor"]
        assert gen.leader == expect["leader_member_id"]
        assert gen.leader_client_id == expect["leader"]
        assert sorted(gen.members) == sorted(expect["members"].values())
        assert gen.member_client_ids == {m: c for c, m in expect["members"].items()}
        by_client = {gen.member_client_ids[m]: parts for m, parts in gen.assignment.items()}
        assert by_client == expect["assignment"]
        for topics in gen.subscriptions.values():
            assert topics == [known["topic"]]
        assert gen.started <= gen.joined <= gen.synced
        assert gen.rebalance_ms > 0


def test_group_timeline_shows_every_round_and_leave():
    known = manifest("group-rebalance")["group"]
    events = ka.group_timeline(table("group-rebalance"))
    assert events["time"].is_monotonic_increasing
    # kafka-python joins with an empty member id: one MEMBER_ID_REQUIRED per member
    first = events[events["error_name"] == "MEMBER_ID_REQUIRED"]
    assert Counter(first["client_id"]) == Counter(known["members"])
    leaves = [s["client_id"] for s in known["steps"] if s["action"] == "leave"]
    assert list(events.loc[events["api_name"] == "LeaveGroup", "client_id"]) == leaves
    # each member's SyncGroup brings the partitions it was told of, in that generation
    syncs = events[(events["api_name"] == "SyncGroup") & (events["error_name"] == "NONE")]
    for gen in known["generations"]:
        rows = syncs[syncs["generation_id"] == gen["generation_id"]]
        got = {
            r.client_id: r.detail.removeprefix("assigned ").split(", ") for r in rows.itertuples()
        }
        assert got == gen["assignment"]
        assert rows["rebalance_ms"].gt(0).all()
    # members already in the group are told of each rebalance by their heartbeats
    rebalancing = events[events["error_name"] == "REBALANCE_IN_PROGRESS"]
    assert set(rebalancing["api_name"]) <= {"Heartbeat", "OffsetCommit", "SyncGroup"}
    assert known["members"][0] in set(rebalancing["client_id"])


@pytest.mark.parametrize("name", ["kafka-python", "confluent-kafka", "aiokafka"])
def test_single_member_groups(name):
    group = manifest(name)["consumer_group"]
    gens = ka.group_generations(table(name))
    assert list(gens["group_id"]) == [group["group_id"]]
    (gen,) = gens.itertuples(index=False)
    assert gen.leader_client_id == group["client_id"]
    (parts,) = gen.assignment.values()
    assert parts == sorted(group["assignment"])


# --------------------------------------------------------------------------- lag


def test_lag_from_commits_and_fetches():
    known = manifest("group-rebalance")
    lags = ka.lag(table("group-rebalance", "partitions"), table("group-rebalance"))
    assert set(lags["group_id"]) == {known["group"]["group_id"]}
    produced = Counter((p["topic"], p["partition"]) for p in known["produce"])
    consumed = {}
    for c in known["consumed"]:
        key = (c["topic"], c["partition"])
        consumed[key] = max(consumed.get(key, -1), c["offset"])
    for (topic, partition), rows in lags.groupby(["topic", "partition"]):
        # offsets are 0-based and dense: the last high watermark is the records produced
        assert rows["high_watermark"].max() == produced[(topic, partition)]
        commits = rows[rows["source"] == "commit"]
        # kafka-python commits the position: the offset after the last record consumed
        assert commits["offset"].max() == consumed[(topic, partition)] + 1
        assert (rows["lag"] == rows["high_watermark"] - rows["offset"]).all()
        assert rows["lag"].min() >= 0
    # members process two records a poll while bursts of twelve arrive: commits trail
    assert lags.loc[lags["source"] == "commit", "lag"].max() > 0
    # the partitions table works out the same committed lag on its own
    parts = table("group-rebalance", "partitions")
    if "committed_lag" in parts:
        theirs = parts.loc[parts["api_name"] == "OffsetCommit", "committed_lag"]
        ours = lags.loc[lags["source"] == "commit", "lag"]
        assert sorted(theirs.dropna()) == sorted(ours.dropna())


@pytest.mark.parametrize("name", ["group-rebalance", "kafka-python"])
def test_commit_lag_is_the_partitions_tables_row_for_row(name):
    parts, pairs = table(name, "partitions"), table(name)
    known = manifest(name)
    group = (known.get("group") or known["consumer_group"])["group_id"]
    commits = ka.lag(parts, pairs).query("source == 'commit'").reset_index(drop=True)
    theirs = parts[parts["api_name"].eq("OffsetCommit") & parts["committed_offset"].notna()]
    theirs = theirs.sort_values("response_end", kind="stable").reset_index(drop=True)
    columns = ["client_id", "topic", "partition"]
    pd.testing.assert_frame_equal(commits[columns], theirs[columns], check_dtype=False)
    assert list(commits["offset"]) == list(theirs["committed_offset"])
    assert list(commits["lag"]) == list(theirs["committed_lag"])
    assert commits["lag"].notna().all() and commits["lag"].min() >= 0
    # the newest high watermark a Fetch response gave before the commit completed
    fetched = parts[parts["api_name"].eq("Fetch") & parts["high_watermark"].ge(0)]
    newest = pd.merge_asof(
        theirs[["response_end", "topic", "partition"]],
        fetched[["response_end", "topic", "partition", "high_watermark"]].sort_values(
            "response_end"
        ),
        on="response_end",
        by=["topic", "partition"],
    )
    assert list(commits["high_watermark"]) == list(newest["high_watermark"])
    # every commit names its group in the request; the commits' requests say which
    assert set(commits["group_id"]) == {group}
    requested = {
        body["GroupId"]
        for body in pairs.loc[pairs["api_name"].eq("OffsetCommit"), "request"].map(ka.body)
    }
    assert requested == {group}


# --------------------------------------------------------------------------- transactions


def test_transactions_committed_and_aborted():
    known = manifest("transactions")
    txns = ka.transactions(table("transactions"))
    assert list(txns["outcome"]) == [t["outcome"] for t in known["transactions"]]
    assert (txns["ended_by"] == "EndTxn").all()
    for txn, expect in zip(txns.itertuples(index=False), known["transactions"], strict=True):
        assert txn.transactional_id == expect["transactional_id"]
        assert txn.client_id == expect["transactional_id"]
        spans = {}
        for r in expect["records"]:
            key = f"{r['topic']}/{r['partition']}"
            lo, hi = spans.get(key, (r["offset"], r["offset"]))
            spans[key] = [min(lo, r["offset"]), max(hi, r["offset"])]
        assert txn.offsets == spans
        assert sorted(txn.partitions) == sorted(spans)
        assert txn.records == len(expect["records"])
        # the broker's marker follows each partition's records, with the outcome's type
        for key, marker in txn.markers.items():
            kind, offset = marker.split("@")
            assert kind == txn.outcome.upper()
            assert int(offset) == spans[key][1] + 1
        assert txn.start < txn.end
    assert txns["producer_id"].nunique() == 1


@pytest.mark.parametrize(
    "name", ["transactions.pcap", "findings-txn-fenced.pcap", "kafka-python.pcap"]
)
def test_transactions_of_json_text_as_of_decoded_bodies(name):
    """Bodies as the tables hold them (JSON text) give the transactions that decoded bodies
    give, where a capture without a transactional id is passed over without reading one."""
    pairs = dissector.read_pcap(CAPTURES / name)
    found = ka.transactions(pairs)
    pd.testing.assert_frame_equal(found, ka.transactions(dissector.parse_bodies(pairs)))
    assert len(found) == {"transactions.pcap": 3, "findings-txn-fenced.pcap": 2}.get(name, 0)


def test_transaction_outcome_from_markers_without_end_txn():
    pairs = table("transactions")
    txns = ka.transactions(pairs[pairs["api_name"] != "EndTxn"])
    known = manifest("transactions")["transactions"]
    assert list(txns["outcome"]) == [t["outcome"] for t in known]
    assert (txns["ended_by"] == "marker").all()


def test_aborted_records_sent_to_read_committed_consumer():
    known = manifest("transactions")
    reads = ka.aborted_reads(table("transactions"))
    got = {
        (r.topic, r.partition, o)
        for r in reads.itertuples()
        for o in range(r.first_offset, r.last_offset + 1)
    }
    expect = {
        (r["topic"], r["partition"], r["offset"])
        for r in known["aborted_received_by_read_committed"]
    }
    assert got == expect and expect
    assert set(reads["client_id"]) == {"tx-reader-committed"}
    assert not reads["listed_as_aborted"].any()  # Tansu lists no aborted transactions


# --------------------------------------------------------------------------- delivery


def test_delivery_matches_produced_and_fetched():
    known = manifest("transactions")
    matched = ka.delivery(table("transactions", "records"), table("transactions"))
    expect = {
        (r["topic"], r["partition"], r["offset"], reader)
        for reader, rows in known["fetched"].items()
        for r in rows
    }
    got = set(
        zip(
            matched["topic"],
            matched["partition"],
            matched["offset"],
            matched["consumer"],
            strict=True,
        )
    )
    assert got == expect
    keys = {(p["topic"], p["partition"], p["offset"]): p["key"]["text"] for p in known["produce"]}
    for r in matched.itertuples():
        assert r.key.decode() == keys[(r.topic, r.partition, r.offset)]
        assert r.producer == "tx-producer"
        assert r.produced < r.acknowledged < r.fetched and r.delay_ms > 0
    summary = ka.delivery_summary(matched)
    assert list(summary["topic"]) == ["tx-orders"] and summary["records"].sum() == len(expect)


@pytest.mark.parametrize("name", ["group-rebalance", "compression", "kafka-python"])
def test_delivery_covers_every_record_consumed(name):
    known = manifest(name)
    matched = ka.delivery(table(name, "records"), table(name))
    got = set(zip(matched["topic"], matched["partition"], matched["offset"], strict=True))
    # every record the application consumed was fetched; a record can also be fetched and
    # never handed over (a member that leaves with records still buffered)
    assert {(c["topic"], c["partition"], c["offset"]) for c in known["consumed"]} <= got
    produced = {(p["topic"], p["key"]["text"]) for p in known["produce"]}
    for r in matched.itertuples():
        assert (r.topic, None if pd.isna(r.key) else r.key.decode()) in produced
    assert (matched["delay_ms"] > 0).all()


# --------------------------------------------------------------------------- latency


@pytest.mark.parametrize("name", ["confluent-kafka", "group-rebalance"])
def test_latency_counts_every_answered_request(name):
    observed = manifest(name)["observed"]
    expect = {v["name"]: v["count"] - v["unanswered"] for v in observed["requests"].values()}
    got = ka.latency(table(name))
    assert dict(zip(got["api_name"], got["requests"], strict=True)) == expect
    assert (got["p50_ms"] <= got["p95_ms"]).all() and (got["p95_ms"] <= got["max_ms"]).all()
    parts = got["network_p50_ms"] + got["queue_p50_ms"] + got["broker_p50_ms"]
    assert (parts > 0).all()


def test_latency_groupings_and_windows():
    pairs = table("group-rebalance")
    by_client = ka.latency(pairs, by="client_id")
    members = manifest("group-rebalance")["client_ids"]
    assert set(by_client["client_id"]) == set(members)
    windows = ka.latency(pairs, by=["api", "topic"], freq="5s")
    fetches = windows[windows["api_name"] == "Fetch"]
    assert set(fetches["topic"]) == {"gr-orders"}
    assert fetches["requests"].sum() == (pairs["api_name"] == "Fetch").sum()
    assert (fetches["window"].dt.second % 5 == 0).all()
    by_connection = ka.latency(pairs, by="connection")
    assert by_connection["requests"].sum() == pairs["latency_ms"].notna().sum()


def test_slowest_are_the_delayed_join_groups():
    # Tansu holds each JoinGroup until the rebalance settles: seconds, not milliseconds
    top = ka.slowest(table("group-rebalance"), 5)
    assert list(top["api_name"]) == ["JoinGroup"] * 5
    assert top["latency_ms"].is_monotonic_decreasing
    assert (top["latency_ms"] > 1000).all()


def test_queue_time_on_pipelined_requests():
    t0 = pd.Timestamp("2024-01-01", tz="UTC")
    ms = pd.Timedelta(milliseconds=1)
    # two requests sent back to back on one connection; the broker answers the second only
    # after the first (10 ms of work each)
    pairs = pd.DataFrame(
        {
            "stream": [0, 0],
            "request_start": [t0, t0 + ms],
            "request_end": [t0 + ms, t0 + 2 * ms],
            "response_start": [t0 + 11 * ms, t0 + 21 * ms],
            "response_end": [t0 + 12 * ms, t0 + 22 * ms],
            "latency_ms": [12.0, 21.0],
            "server_ms": [10.0, 19.0],
            "error_code": [0, 0],
        }
    )
    rows = ka.components(pairs)
    assert list(rows["queue_ms"]) == [0.0, 9.0]
    assert list(rows["broker_ms"]) == [10.0, 10.0]
    assert list(rows["network_ms"]) == [2.0, 2.0]


# --------------------------------------------------------------------------- errors


def test_errors_incomplete_exchanges_with_reasons():
    found = ka.errors(table("kcat"))
    incomplete = found[found["level"] == "exchange"]
    pairs = table("kcat")
    expect = pairs[pairs["status"].isin(["unanswered", "orphan_response", "malformed"])]
    assert list(incomplete["request_frame"]) == list(expect["request_frame"])
    assert set(incomplete["status"]) == {"unanswered", "malformed"}
    assert incomplete["reason"].str.len().gt(0).all()


def test_errors_at_every_level():
    t = pd.Timestamp("2024-01-01", tz="UTC")
    bodies = [
        ("CreateTopics", {"Topics": [{"Name": "a", "ErrorCode": 36, "ErrorMessage": "exists"}]}),
        (
            "Produce",
            {"Responses": [{"Name": "b", "PartitionResponses": [{"Index": 2, "ErrorCode": 6}]}]},
        ),
        ("DescribeConfigs", {"Results": [{"ResourceName": "c", "ErrorCode": 29}]}),
        ("JoinGroup", {"ErrorCode": 79, "MemberId": "m"}),
        ("LeaveGroup", {"ErrorCode": 0, "Members": [{"MemberId": "x", "ErrorCode": 25}]}),
    ]
    pairs = pd.DataFrame(
        {
            "api_name": [api for api, _ in bodies],
            "status": "error",
            "request_start": t,
            # one body as a dict, the others as the tables' JSON text
            "response": [b if i == 0 else json.dumps(b) for i, (_, b) in enumerate(bodies)],
        }
    )
    found = ka.errors(pairs)
    got = list(zip(found["api_name"], found["level"], found["error_name"], strict=True))
    assert got == [
        ("CreateTopics", "topic", "TOPIC_ALREADY_EXISTS"),
        ("Produce", "partition", "NOT_LEADER_OR_FOLLOWER"),
        ("DescribeConfigs", "resource", "TOPIC_AUTHORIZATION_FAILED"),
        ("JoinGroup", "top", "MEMBER_ID_REQUIRED"),
        ("LeaveGroup", "member", "UNKNOWN_MEMBER_ID"),
    ]
    assert list(found["topic"].fillna("")) == ["a", "b", "", "", ""]
    assert found.loc[1, "partition"] == 2 and found.loc[2, "resource"] == "c"
    assert found.loc[0, "error_message"] == "exists"


def test_error_counts_in_a_rebalance():
    counts = ka.error_counts(table("group-rebalance"))
    members = len(manifest("group-rebalance")["group"]["members"])
    got = dict(zip(counts["error_name"], counts["count"], strict=True))
    assert got["MEMBER_ID_REQUIRED"] == members


# --------------------------------------------------------------------------- clients


def test_clients_software_and_connections():
    known = manifest("confluent-kafka")
    found = ka.clients(table("confluent-kafka"))
    assert list(found["client_id"]) == known["client_ids"]
    conns = Counter(c["client_id"] for c in known["observed"]["per_connection"])
    assert dict(zip(found["client_id"], found["connections"], strict=True)) == dict(conns)
    version, librdkafka = known["client"]["version"].split(" (librdkafka ")
    assert set(found["software_name"]) == {"confluent-kafka-python"}
    for v in found["software_version"]:
        assert version in v and librdkafka.rstrip(")") in v
    consumer = found.set_index("client_id").loc["cf-consumer"]
    assert "JoinGroup" in consumer["api_versions"] and "Produce" not in consumer["api_versions"]
    assert (found["first_seen"] <= found["last_seen"]).all()


# --------------------------------------------------------------------------- throughput


def test_throughput_records_per_topic():
    known = manifest("compression")
    volume = ka.throughput(table("compression", "partitions"), freq="1min")
    sent = volume[volume["api_name"] == "Produce"].groupby("topic")["records"].sum()
    got = volume[volume["api_name"] == "Fetch"].groupby("topic")["records"].sum()
    assert dict(sent) == dict(Counter(p["topic"] for p in known["produce"]))
    assert dict(got) == dict(Counter(c["topic"] for c in known["consumed"]))
    assert (volume["control_records"] == 0).all()


def test_compression_ratio_per_codec():
    codecs = ka.compression(table("compression", "partitions"))
    produce = codecs[codecs["api_name"] == "Produce"].set_index("compression")
    assert set(produce.index) == {"gzip", "snappy", "lz4", "zstd"}
    assert (produce["records"] == 5).all()
    # five near-identical 370-byte values: every codec at least halves them
    assert (produce["ratio"] > 2).all()


def _one_mixed_record_set(pairs):
    """The compression capture's pairs with the record sets of its four Fetch responses (one
    codec each) moved into the first one's partition: what a consumer of a topic written with
    several codecs receives. Returns the new table and the record set."""
    fetches = pairs.index[pairs["api_name"].eq("Fetch")]
    bodies = {i: ka.body(pairs.at[i, "response"]) for i in fetches}
    carrying = []
    for i, response in bodies.items():
        for topic in response.get("Responses") or ():
            for part in topic["Partitions"]:
                if (part.get("Records") or {}).get("batches"):
                    carrying.append((i, part))
    assert len(carrying) == 4
    batches = [b for _, part in carrying for b in part["Records"]["batches"]]
    merged = {**carrying[0][1]["Records"], "batches": batches}
    merged["size"] = sum(part["Records"]["size"] for _, part in carrying)
    carrying[0][1]["Records"] = merged
    first = carrying[0][0]
    mixed = pairs.copy()
    mixed.loc[first, "response"] = json.dumps(bodies[first])
    return mixed.drop(index=[i for i, _ in carrying[1:]]), merged


def test_compression_splits_a_record_set_of_several_codecs():
    from dissector.tables.partitions import record_summary

    for options in ({}, {"records": "full"}):
        pairs = dissector.read_pcap(CAPTURES / "compression.pcap", **options)
        parts = dissector.read_pcap(CAPTURES / "compression.pcap", table="partitions", **options)
        mixed, records = _one_mixed_record_set(pairs)
        # from the pairs table, batch by batch: each codec's row as when they came apart
        alone = ka.compression(pairs)
        pd.testing.assert_frame_equal(ka.compression(mixed), alone)
        fetched = alone[alone["api_name"] == "Fetch"].set_index("compression")
        assert sorted(fetched.index) == ["gzip", "lz4", "snappy", "zstd"]
        assert (fetched["records"] == 5).all() and (fetched["batches"] == 1).all()
        # and the same as the partitions table's rows of one codec each
        pd.testing.assert_frame_equal(ka.compression(parts), alone)
        # the partitions table has one row for the mixed set: counted whole, not 4 rows of 1
        summary = record_summary(records)
        assert summary["compression"] == "gzip,lz4,snappy,zstd"
        rows = parts.index[parts["api_name"].eq("Fetch") & parts["bytes"].fillna(0).gt(0)]
        one = parts.drop(index=rows[1:])
        for column in ("batches", "records", "bytes", "uncompressed_bytes", "compression"):
            one.at[rows[0], column] = summary[column]
        got = ka.compression(one)
        got = got[got["api_name"] == "Fetch"].set_index("compression")
        assert list(got.index) == ["mixed"]
        assert got.loc["mixed", "batches"] == 4 and got.loc["mixed", "records"] == 20
        assert got.loc["mixed", "bytes"] == fetched["bytes"].sum() == 965
        assert got.loc["mixed", "measured_bytes"] == (965 if options else 0)


def test_compression_totals_only_what_was_measured():
    # one capture decompressed and the same three times not: a capture set of both kinds
    full = table("compression", "partitions")
    bare = dissector.read_pcap(CAPTURES / "compression.pcap", table="partitions")
    both = pd.concat(
        [full.assign(capture="full"), *(bare.assign(capture=f"bare-{i}") for i in range(3))],
        ignore_index=True,
    )
    got = ka.compression(both).set_index(["api_name", "compression"])
    alone = ka.compression(full).set_index(["api_name", "compression"])
    assert len(got) == 8
    assert (got["batches"] == 4 * alone["batches"]).all()
    assert (got["bytes"] == 4 * alone["bytes"]).all()
    assert (got["measured_batches"] == alone["batches"]).all()
    assert (got["measured_bytes"] == alone["bytes"]).all()
    assert (got["uncompressed_bytes"] == alone["uncompressed_bytes"]).all()
    assert (got["uncompressed_bytes"] > got["measured_bytes"]).all()
    assert (got["ratio"] == alone["ratio"]).all() and (got["ratio"] > 2).all()
    # nothing decompressed: nothing measured, no uncompressed size and no ratio
    for unmeasured in (
        ka.compression(bare),
        ka.compression(
            dissector.read_pcap(CAPTURES / "compression.pcap", table="partitions", decompress=False)
        ),
    ):
        assert (unmeasured["measured_batches"] == 0).all() and len(unmeasured) == 8
        assert unmeasured["uncompressed_bytes"].isna().all() and unmeasured["ratio"].isna().all()


@pytest.mark.parametrize("name", ALL)
def test_compression_from_batches_adds_up_to_the_partitions_table(name):
    parts = table(name, "partitions")
    by_set, by_batch = ka.compression(parts), ka.compression(table(name))
    pd.testing.assert_frame_equal(by_batch, by_set)
    sent = parts[parts["api_name"].eq("Produce") & parts["records_from"].eq("request")]
    got = parts[parts["api_name"].eq("Fetch") & parts["records_from"].eq("response")]
    assert by_set["bytes"].sum() == sent["bytes"].sum() + got["bytes"].sum()
    assert (by_set["uncompressed_bytes"].fillna(0) >= by_set["measured_bytes"]).all()


def test_throughput_control_records_apart():
    known = manifest("transactions")
    volume = ka.throughput(table("transactions", "partitions"), freq="1min", by="partition")
    fetched = volume[volume["api_name"] == "Fetch"]
    # each reader got every data record once and one marker per transaction and partition
    readers = len(known["fetched"])
    markers = sum(len({r["partition"] for r in t["records"]}) for t in known["transactions"])
    assert fetched["records"].sum() == sum(len(v) for v in known["fetched"].values())
    assert fetched["control_records"].sum() == readers * markers
    wire = ka.throughput(table("transactions"), freq="1min")
    assert set(wire.columns) >= {"window", "api_name", "request_bytes", "bytes_per_s"}


def test_groupings_name_the_column_of_that_name():
    pairs, parts = table("group-rebalance"), table("group-rebalance", "partitions")
    answered = pairs[pairs["latency_ms"].notna()]
    by_address = ka.latency(pairs, by="client")
    assert list(by_address.columns[:2]) == ["client", "requests"]
    assert set(by_address["client"]) == set(answered["client"])
    assert all(":" in client for client in by_address["client"])
    by_id = ka.latency(pairs, by="client_id")
    assert set(by_id["client_id"]) == set(answered["client_id"])
    assert by_address["requests"].sum() == by_id["requests"].sum() == len(answered)
    # the client's address counts each connection apart; its id, all of them together
    assert len(by_address) == answered["client"].nunique() > len(by_id)
    volume = ka.throughput(parts, freq="1min", by="client")
    assert set(volume["client"]) <= set(parts["client"])
    by_id = ka.throughput(parts, freq="1min", by="client_id")
    assert set(by_id["client_id"]) == {
        "gr-producer",
        *manifest("group-rebalance")["group"]["members"],
    }
    assert volume["records"].sum() == by_id["records"].sum()


def _unknown_api(pairs, api, name):
    """`pairs` with the requests of `api` given key 999, a key no schema knows, and the name
    `name` (missing, as older tables have it, or the core's `Unknown(999)`)."""
    rows = pairs["api_name"].eq(api)
    out = pairs.copy()
    out.loc[rows, "api_key"] = 999
    out["api_name"] = out["api_name"].astype(object)
    out.loc[rows, "api_name"] = name
    return out.astype({"api_name": pairs["api_name"].dtype}), int(rows.sum())


@pytest.mark.parametrize("name", [None, "Unknown(999)"])
def test_unknown_api_keys_are_named_by_their_key(name):
    pairs, count = _unknown_api(table("group-rebalance"), "Heartbeat", name)
    answered = pairs["api_name"].isna() | pairs["api_name"].eq("Unknown(999)")
    answered &= pairs["latency_ms"].notna()
    got = ka.latency(pairs, by="api").set_index("api_name")
    assert got["requests"].notna().all() and got.index.notna().all()
    assert got.loc["Unknown(999)", "requests"] == answered.sum() > 0
    found = ka.errors(pairs)
    # the Heartbeats answered REBALANCE_IN_PROGRESS (the errors test counts them)
    assert set(found.loc[found["error_name"] == "REBALANCE_IN_PROGRESS", "api_name"]) == {
        "Unknown(999)"
    }
    assert found["api_name"].notna().all()
    versions = ka.clients(pairs)["api_versions"]
    assert any("Unknown(999)" in v for v in versions)
    wire = ka.throughput(pairs, freq="1min")
    assert wire.loc[wire["api_name"] == "Unknown(999)", "requests"].sum() == count
    assert wire["requests"].sum() == pairs["request_frame"].notna().sum()
    (ax,) = ka.plots.latency_over_time(pairs).axes
    labels = {line.get_label() for line in ax.lines}
    assert "Unknown(999)" in labels and "nan" not in labels


# --------------------------------------------------------------------------- any capture


@pytest.mark.parametrize("name", ALL)
def test_every_analysis_on_every_capture(name):
    pairs, parts = table(name), table(name, "partitions")
    results = {
        "latency": ka.latency(pairs, by=["api", "client"], freq="1s"),
        "slowest": ka.slowest(pairs),
        "errors": ka.errors(pairs),
        "clients": ka.clients(pairs),
        "throughput": ka.throughput(parts),
        "compression": ka.compression(parts),
        "generations": ka.group_generations(pairs),
        "timeline": ka.group_timeline(pairs),
        "lag": ka.lag(parts, pairs),
        "transactions": ka.transactions(pairs),
        "aborted": ka.aborted_reads(pairs),
        "delivery": ka.delivery(table(name, "records"), pairs),
    }
    for result in results.values():
        assert isinstance(result, pd.DataFrame)
    if "group" not in name and not manifest(name).get("consumer_group"):
        assert results["generations"].empty
    if name != "transactions":
        assert results["transactions"].empty


def test_empty_tables_give_empty_results_with_columns():
    pairs = table("kafka-python").iloc[0:0]
    parts = table("kafka-python", "partitions").iloc[0:0]
    for result, columns in [
        (ka.latency(pairs), STATS),
        (ka.errors(pairs), ["level", "error_name", "reason"]),
        (ka.clients(pairs), ["client_id", "software_name"]),
        (ka.throughput(parts), ["bytes_per_s"]),
        (ka.group_generations(pairs), ["generation_id", "leader"]),
        (ka.group_timeline(pairs), ["rebalance_ms"]),
        (ka.lag(parts), ["lag"]),
        (ka.transactions(pairs), ["outcome"]),
        (ka.delivery(table("kafka-python", "records").iloc[0:0], pairs), ["delay_ms"]),
    ]:
        assert result.empty and set(columns) <= set(result.columns)


def test_bodies_as_dicts_or_json_give_the_same_answer():
    pairs = table("group-rebalance")
    as_dicts = pairs.assign(
        request=pairs["request"].map(ka.body), response=pairs["response"].map(ka.body)
    )
    a, b = ka.group_generations(pairs), ka.group_generations(as_dicts)
    pd.testing.assert_frame_equal(a, b)


def test_a_capture_set_gives_each_capture_its_own_answer():
    # a capture set (Spark's load of several files) has a `capture` column; stream numbers,
    # correlation ids and offsets repeat from capture to capture
    names = ["transactions", "kafka-python", "group-rebalance"]

    def capture_set(which):
        return pd.concat([table(n, which).assign(capture=n) for n in names], ignore_index=True)

    pairs, parts, records = capture_set("pairs"), capture_set("partitions"), capture_set("records")
    matched = ka.delivery(records, pairs)
    lags = ka.lag(parts, pairs)
    found = ka.clients(pairs).set_index("client_id")
    gens = ka.group_generations(pairs)
    txns = ka.transactions(pairs)
    assert set(txns["capture"]) == {"transactions"}
    pd.testing.assert_frame_equal(
        txns.drop(columns="capture"), ka.transactions(table("transactions"))
    )
    for name in names:
        alone = ka.group_generations(table(name))
        mine = gens[gens["capture"] == name].drop(columns="capture").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, alone, check_dtype=not alone.empty)
        alone = ka.delivery(table(name, "records"), table(name))
        mine = matched[matched["capture"] == name].drop(columns="capture")
        pd.testing.assert_frame_equal(mine.reset_index(drop=True), alone)
        alone = ka.lag(table(name, "partitions"), table(name))
        mine = lags[lags["capture"] == name].drop(columns="capture").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, alone)
        conns = Counter(c["client_id"] for c in manifest(name)["observed"]["per_connection"])
        for client_id, count in conns.items():
            assert found.loc[client_id, "connections"] == count


# --------------------------------------------------------------------------- plots


def test_plots_draw_what_the_scenario_did(tmp_path):
    from matplotlib.figure import Figure

    known = manifest("group-rebalance")
    pairs, parts = table("group-rebalance"), table("group-rebalance", "partitions")
    gantt = ka.plots.group_gantt(pairs)
    (ax,) = gantt.axes
    # one bar per member and generation it belonged to
    generations = known["group"]["generations"]
    assert sum(len(bars) for bars in ax.containers) == sum(len(g["members"]) for g in generations)
    assert [t.get_text() for t in ax.get_yticklabels()] == known["group"]["members"]
    labels = sorted(t.get_text() for t in ax.texts)
    expect = sorted(
        f"g{g['generation_id']}" + ("*" if client == g["leader"] else "")
        for g in known["group"]["generations"]
        for client in g["members"]
    )
    assert labels == expect
    (ax,) = ka.plots.lag_over_time(parts, pairs).axes
    assert len(ax.lines) == known["topics_created"][0]["partitions"]
    (ax,) = ka.plots.error_timeline(pairs).axes
    assert sum(len(c.get_offsets()) for c in ax.collections) == len(ka.errors(pairs))
    (ax,) = ka.plots.latency_over_time(pairs).axes
    assert {line.get_label() for line in ax.lines} == set(pairs["api_name"])
    others = [
        ka.plots.latency_heatmap(pairs, "5s"),
        ka.plots.throughput_over_time(parts, "5s"),
        ka.plots.delivery_delays(ka.delivery(table("group-rebalance", "records"), pairs)),
        ka.plots.group_gantt(table("kcat")),  # no group: an empty figure that says so
    ]
    for i, fig in enumerate([gantt, *others]):
        assert isinstance(fig, Figure)
        fig.savefig(tmp_path / f"{i}.png")
        assert (tmp_path / f"{i}.png").stat().st_size > 1000


def test_queue_time_agrees_with_the_table():
    pairs = table("group-rebalance")
    given = ka.components(pairs)["queue_ms"]
    derived = ka.components(pairs.drop(columns="queue_ms"))["queue_ms"]
    assert given.gt(0).any()  # some requests did wait behind another on their connection
    assert (given - derived).abs().max() < 1e-6
