"""Findings of transactions and idempotence, against captures whose recording scenarios
(tools/record_findings_transactions.py) know what they did: aborted records handed to
read_committed consumers, a producer fenced by a newer instance with its transactional.id,
Produce batches whose sequence the broker refused."""

import damage
import pytest
from samples import CAPTURES, manifest, table

import dissector
from dissector import analysis as ka

# --------------------------------------------------------------------------- transactions()


def test_transactions_have_a_duration():
    txns = ka.transactions(table("transactions"))
    expect = (txns["end"] - txns["start"]).dt.total_seconds() * 1000
    assert list(txns["duration_ms"]) == pytest.approx(list(expect))
    # the scenario waits 0.2 s between its last record and the commit or abort
    assert (txns["duration_ms"] > 200).all()


def test_markers_named_without_full_record_decoding():
    # the default dissection leaves control records undecoded: the EndTxn says the type
    txns = ka.transactions(table("transactions"))
    known = manifest("transactions")["transactions"]
    for txn, expect in zip(txns.itertuples(index=False), known, strict=True):
        last = {}
        for r in expect["records"]:
            key = f"{r['topic']}/{r['partition']}"
            last[key] = max(last.get(key, -1), r["offset"])
        assert txn.markers == {k: f"{expect['outcome'].upper()}@{o + 1}" for k, o in last.items()}


def test_markers_named_from_the_records_table_without_end_txn():
    pairs = table("transactions")
    pairs = pairs[pairs["api_name"] != "EndTxn"]
    records = table("transactions", "records")
    txns = ka.transactions(pairs, records=records)
    known = manifest("transactions")["transactions"]
    assert list(txns["outcome"]) == [t["outcome"] for t in known]
    assert (txns["ended_by"] == "marker").all()
    assert all(
        m.startswith(t.outcome.upper() + "@") for t in txns.itertuples() for m in t.markers.values()
    )
    # neither EndTxn nor records: a control batch ended it, of a type the capture does not say
    bare = ka.transactions(pairs)
    assert (bare["outcome"] == "ended").all() and (bare["ended_by"] == "marker").all()
    assert all(m.startswith("control@") for t in bare.itertuples() for m in t.markers.values())


def test_a_newer_instance_ends_the_fenced_transaction_with_an_abort():
    pairs, known = table("findings-txn-fenced"), manifest("findings-txn-fenced")["fenced"]
    txns = ka.transactions(pairs)
    old, new = txns.itertuples(index=False)
    init = pairs[(pairs["api_name"] == "InitProducerId") & (pairs["client_id"] == new.client_id)]
    assert (old.client_id, new.client_id) == (known["old_client_id"], known["new_client_id"])
    assert (old.outcome, old.ended_by, old.end) == (
        "abort",
        "InitProducerId",
        init["response_end"].iloc[0],
    )
    assert (new.outcome, new.producer_epoch) == ("commit", old.producer_epoch + 1)
    # the coordinator's ABORT sits where the reader found no record, after the old one's
    (fetched,) = manifest("findings-txn-fenced")["fetched"].values()
    offsets = [r["offset"] for r in fetched]
    (key, marker) = old.markers.popitem()
    assert marker == f"ABORT@{offsets[0] + 1}" and offsets[0] + 1 not in offsets
    records = table("findings-txn-fenced", "records")
    marked = records[(records["direction"] == "response") & records["control"].notna()]
    assert f"ABORT@{marked['offset'].iloc[0]}" == marker
    assert old.offsets == {key: [offsets[0], offsets[0]]}  # its refused Produce wrote nothing


# --------------------------------------------------------------------------- findings


def findings(name, records=True):
    found = ka.diagnose(table(name), records=table(name, "records") if records else None)
    return found[found["kind"].isin(KINDS)]


KINDS = ("aborted_records_read", "producer_fenced", "sequence_error")


@pytest.mark.parametrize("records", [True, False], ids=["with-records", "pairs-only"])
def test_aborted_records_read_by_read_committed_consumers(records):
    known = manifest("findings-txn-aborted")
    found = findings("findings-txn-aborted", records)
    assert set(found["kind"]) == {"aborted_records_read"}
    committed = {c for c, level in known["isolation"].items() if level == "read_committed"}
    assert set(found["client_id"]) == committed  # the read_uncommitted reader is not one
    aborted = next(t for t in known["transactions"] if t["outcome"] == "abort")["records"]
    got = table("findings-txn-aborted", "records")
    for f in found.itertuples():
        received = known["aborted_received"][f.client_id]
        assert f.severity == "error" and f.count == len(received) == len(aborted)
        # the producer's linger put each partition's aborted records in one batch
        assert f.batches == len({r["partition"] for r in aborted}) == 2
        assert set(f.partitions) == {f"fa-orders/{r['partition']}" for r in aborted}
        assert f.transactional_ids == ["fa-producer"]
        # the evidence: the Fetch responses that carried those records to that reader
        offsets = {(r["partition"], r["offset"]) for r in received}
        mine = got[(got["client_id"] == f.client_id) & (got["direction"] == "response")]
        frames = {r.frame for r in mine.itertuples() if (r.partition, r.offset) in offsets}
        assert f.frames == sorted(frames)
        assert f.broker == f"127.0.0.1:{known['broker_port']}"
        assert "AbortedTransactions" in f.detail and f"{f.count} records" in f.detail


def test_transactions_capture_genuinely_shows_aborted_records_read():
    known = manifest("transactions")
    found = findings("transactions")
    (f,) = found.itertuples()
    assert f.kind == "aborted_records_read" and f.client_id == "tx-reader-committed"
    assert f.count == len(known["aborted_received_by_read_committed"]) == 2
    reads = ka.aborted_reads(table("transactions"))
    assert f.frames == sorted(reads["response_frame"]) and f.batches == len(reads)


def test_producer_fenced_by_a_newer_instance():
    pairs = table("findings-txn-fenced")
    known = manifest("findings-txn-fenced")["fenced"]
    found = findings("findings-txn-fenced")
    (f,) = found.itertuples()
    assert (f.kind, f.severity) == ("producer_fenced", "error")
    assert f.client_id == known["old_client_id"] and f.fenced_by == known["new_client_id"]
    assert f.transactional_id == known["transactional_id"]
    # what the old instance's client was told when it tried to commit
    told = {s["error"] for s in known["steps"] if s["client_id"] == f.client_id and s["error"]}
    assert f.errors == ["PRODUCER_FENCED"] and "PRODUCER_FENCED" in told
    old = pairs[pairs["client_id"] == known["old_client_id"]]
    refused = old[old["error_name"] == "PRODUCER_FENCED"]
    assert list(refused["api_name"]) == ["Produce"] and f.count == 1
    (epoch,) = {ka.body(r)["ProducerEpoch"] for r in old[old["api_name"] == "EndTxn"]["request"]}
    assert f.producer_epoch == epoch and f.fenced_by_epoch == epoch + 1
    # Tansu hangs up on the old epoch's EndTxn (abort): the client's abort timed out
    endtxn = old[old["api_name"] == "EndTxn"]
    assert (endtxn["status"] == "unanswered").all() and f.unanswered == len(endtxn) > 0
    assert "_TIMED_OUT" in told
    init = pairs[(pairs["api_name"] == "InitProducerId") & (pairs["client_id"] == f.fenced_by)]
    expect = {*refused["response_frame"], *endtxn["request_frame"], *init["response_frame"]}
    assert f.frames == sorted(expect)


def test_sequence_errors_the_broker_answered():
    pairs = table("findings-txn-sequence")
    known = manifest("findings-txn-sequence")
    found = findings("findings-txn-sequence")
    raw = pairs[(pairs["client_id"] == known["raw_producer"]["client_id"])]
    produced = raw[raw["api_name"] == "Produce"]
    assert len(produced) == len(known["raw_produce"])
    expect, nexts = [], {}
    for sent, frame_no in zip(known["raw_produce"], produced["response_frame"], strict=True):
        pid = sent["producer_id"]
        if sent["error_code"] == 0:
            nexts[pid] = sent["base_sequence"] + sent["records"]
            continue
        expect.append((sent["error_name"], pid, sent["base_sequence"], nexts.get(pid), frame_no))
    got = [
        (f.error_name, f.producer_id, *f.sequences, *f.expected_sequences, *f.frames)
        for f in found.sort_values("time").itertuples()
    ]
    assert got == expect
    assert {e[0] for e in expect} == {
        "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "DUPLICATE_SEQUENCE_NUMBER",
        "UNKNOWN_PRODUCER_ID",
    }
    assert set(found["kind"]) == {"sequence_error"} and set(found["severity"]) == {"error"}
    assert set(found["client_id"]) == {known["raw_producer"]["client_id"]}
    unknown = found[found["error_name"] == "UNKNOWN_PRODUCER_ID"].iloc[0]
    assert "no InitProducerId in the capture handed it out" in unknown["detail"]


@pytest.mark.parametrize(
    "name", ["kafka-python", "confluent-kafka", "aiokafka", "compression", "group-rebalance"]
)
def test_clean_captures_show_none(name):
    # confluent-kafka's producers are idempotent: their sequences are in order
    found = findings(name)
    assert found[found["severity"] != "info"].empty


@pytest.mark.parametrize(
    "name", ["findings-txn-aborted", "findings-txn-fenced", "findings-txn-sequence"]
)
def test_damaged_and_cut_captures_do_not_raise(name, tmp_path):
    pcap = damage.read_pcap(CAPTURES / f"{name}.pcap")
    for i, damaged in enumerate(
        [
            damage.snap(pcap.packets, 200),
            damage.drop(pcap.packets, 0.3, seed=7),
            damage.cut_start(pcap.packets, 2),
        ]
    ):
        path = tmp_path / f"{i}.pcap"
        damaged.write(path, pcap)
        pairs = dissector.read_pcap(path)
        ka.diagnose(pairs, records=dissector.read_pcap(path, table="records"))
    # the checks find nothing in what they are not given
    from dissector.analysis.findings import Tables, transactions

    for check in transactions.CHECKS:
        assert list(check(Tables(None))) == []
        assert list(check(Tables(table(name).iloc[0:0]))) == []
