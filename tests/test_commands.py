"""The question commands (groups, transactions, errors, clients, latency, versions, doctor)
on the bundled captures: what they print in each format is the analysis of the capture."""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import dissector
from dissector import analysis as ka
from dissector import cli
from dissector.source import in_step, read_tables

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
GROUPS = CAPTURES / "group-rebalance.pcap"
TXNS = CAPTURES / "transactions.pcap"
KCAT = CAPTURES / "kcat.pcap"


def run(capsys, *args):
    """(exit status, stdout, stderr) of the command line, in this process."""
    status = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def rows_csv(text):
    return list(csv.DictReader(io.StringIO(text)))


def rows_json(text):
    return [json.loads(line) for line in text.splitlines()]


def test_one_dissection_gives_every_table_as_read_pcap_does():
    """Every table as read_pcap gives it alone, the records read in full; beside the records
    table the pairs table's bodies hold batches without their records, as a default
    read_pcap gives them, and the analyses that read both find the same."""
    tables = dissector.read_pcap(TXNS, table=["pairs", "partitions", "records", "streams"])
    for name, table in tables.items():
        records = "batches" if name == "pairs" else "full"
        expected = dissector.read_pcap(TXNS, table=name, records=records)
        pd.testing.assert_frame_equal(table, expected, obj=name)
    assert len(tables["records"]) == 33 and len(tables["streams"]) == 22
    full = dissector.read_pcap(TXNS, records="full")
    assert '"records":[{' in "".join(full["response"].dropna())
    assert '"records":[{' not in "".join(tables["pairs"]["response"].dropna())
    pairs, records = tables["pairs"], tables["records"]
    pd.testing.assert_frame_equal(ka.transactions(pairs, records), ka.transactions(full, records))
    pd.testing.assert_frame_equal(ka.aborted_reads(pairs, records), ka.aborted_reads(full, records))


@pytest.mark.parametrize("capture", [TXNS, GROUPS, CAPTURES / "compression.pcap"])
def test_pairs_without_bodies_are_the_pairs_but_their_bodies(capture):
    """bodies=False leaves the pairs table's request and response empty and every other
    column, and any table read beside it, as they are."""
    whole = dissector.read_pcap(capture, table=["pairs", "partitions"])
    bare = dissector.read_pcap(capture, table=["pairs", "partitions"], bodies=False)
    pd.testing.assert_frame_equal(bare["partitions"], whole["partitions"])
    bodies = ["request", "response"]
    assert whole["pairs"]["response"].notna().any()
    assert bare["pairs"][bodies].isna().all().all()
    pd.testing.assert_frame_equal(
        bare["pairs"].drop(columns=bodies), whole["pairs"].drop(columns=bodies)
    )


def test_latency_reads_no_bodies_unless_grouped_by_one(capsys, monkeypatch):
    """The latency command builds the pairs table without bodies (their JSON text is most of
    its cost) and answers as the whole table does; grouped by a body, it reads them."""
    from dissector import source

    expected = ka.latency(dissector.read_pcap(GROUPS), by=["api", "client_id"])
    asked, read = [], source.read_tables

    def spied(*args, **kwargs):
        asked.append(kwargs["bodies"])
        return read(*args, **kwargs)

    monkeypatch.setattr(source, "read_tables", spied)
    status, out, _ = run(capsys, "latency", GROUPS, "--by", "api,client_id", "--format", "csv")
    got = pd.read_csv(io.StringIO(out))
    assert status == 0 and asked == [False]
    assert got[["api_name", "client_id", "requests", "errors"]].values.tolist() == (
        expected[["api_name", "client_id", "requests", "errors"]].values.tolist()
    )
    assert got["p99_ms"].tolist() == pytest.approx(expected["p99_ms"].tolist(), abs=1e-3)
    _, out, _ = run(capsys, "latency", GROUPS, "--by", "api", "--by", "request", "--format", "csv")
    assert asked == [False, True]
    assert pd.read_csv(io.StringIO(out))["request"].notna().any()


def test_tables_read_together_keep_the_topics_asked_for():
    """topics= filters the records and partitions tables read in one pass as it does each
    read alone (records in full, as beside a records table)."""
    compression = CAPTURES / "compression.pcap"  # four topics, one a codec
    together = dissector.read_pcap(
        compression, table=("records", "partitions"), topics=["comp-lz4"]
    )
    for name, table in together.items():
        alone = dissector.read_pcap(compression, table=name, topics=["comp-lz4"], records="full")
        pd.testing.assert_frame_equal(table, alone, obj=name)
        assert len(table) and set(table["topic"]) == {"comp-lz4"}
    assert read_tables(TXNS, ("streams",))["streams"].equals(
        dissector.read_pcap(TXNS, table="streams")
    )


def test_an_unknown_table_is_named_before_the_capture_is_read():
    for table in ("bogus", ["pairs", "bogus"]):
        with pytest.raises(ValueError, match="unknown table 'bogus'; choose from pairs, "):
            dissector.read_pcap(CAPTURES / "no-such-file.pcap", table=table)


def test_in_step_makes_each_output_as_alone_holding_one_output_of_items():
    """Each maker's outputs are those it makes alone; the items one has taken and another
    not yet (what the shared iterator holds) never pass what one takes between two outputs,
    None (nothing made yet) among them."""
    made, held, taken = [0], [], [0] * 4  # items made; made less the fewest taken; taken

    def items():
        for i in range(1000):
            made[0] += 1
            yield i

    def batches(size):
        def make(stream):
            batch = []
            for item in stream:
                batch.append(item)
                if len(batch) == size:
                    yield batch
                    held.append(made[0] - min(taken))
                    batch = []
            if batch:
                yield batch

        return make

    def counting(k, make):
        def counted(stream):
            for item in stream:
                taken[k] += 1
                yield item

        return lambda stream: make(counted(stream))

    def at_the_end(stream):  # one output once the stream ends, None every 10 items before
        seen = []
        for item in stream:
            seen.append(item)
            if len(seen) % 10 == 0:
                yield None
                held.append(made[0] - min(taken))
        yield seen

    sizes = (3, 64, 17)
    makers = [counting(k, batches(n)) for k, n in enumerate(sizes)]
    outs = in_step(items(), [*makers, counting(3, at_the_end)])
    for out, n in zip(outs[:3], sizes, strict=True):
        assert out == list(batches(n)(range(1000)))
    assert outs[3] == [list(range(1000))]
    assert made[0] == 1000 and max(held) <= max(sizes)


def test_the_partitions_table_leaves_the_exchanges_bodies_undecoded():
    """Its rows come from bodies decoded and let go: with records in full, bodies kept on
    the exchanges once held every record of the capture at once."""
    exchanges = list(dissector.dissect(TXNS, progress=False, records="full"))
    rows = dissector.tables.build_table(exchanges, "partitions")
    assert len(rows) > 0 and rows["records"].sum() > 0
    assert all(e._request.__class__ is tuple for e in exchanges if e.api_name == "Produce")


def test_groups_lists_the_five_generations(capsys):
    status, out, _ = run(capsys, "groups", GROUPS, "--format", "json")
    assert status == 0
    rows = rows_json(out)
    assert [r["generation_id"] for r in rows] == [0, 1, 2, 3, 4]
    assert {r["leader_client_id"] for r in rows} == {"gr-member-1"}
    sizes = [len(r["members"]) for r in rows]
    assert sizes == [1, 2, 3, 2, 1]
    # Times in ISO 8601 with the capture's digits; nested values stay JSON.
    assert rows[0]["started"] == "2026-11-23T11:29:13.799802Z"
    assert rows[0]["assignment_by_client"] == {
        "gr-member-1": ["gr-orders/0", "gr-orders/1", "gr-orders/2", "gr-orders/3"]
    }


def test_groups_timeline_is_every_group_exchange(capsys):
    status, out, _ = run(capsys, "groups", GROUPS, "--timeline", "--format", "csv")
    rows = rows_csv(out)
    expected = ka.group_timeline(dissector.read_pcap(GROUPS))
    assert status == 0 and len(rows) == len(expected) > 100
    assert list(rows[0]) == list(expected.columns)
    first_join = next(r for r in rows if r["api_name"] == "JoinGroup")
    assert (first_join["error_name"], first_join["request_frame"]) == ("MEMBER_ID_REQUIRED", "78")


def test_transactions_commit_abort_commit(capsys):
    status, out, _ = run(capsys, "transactions", TXNS, "--format", "csv")
    rows = rows_csv(out)
    assert status == 0
    assert [r["outcome"] for r in rows] == ["commit", "abort", "commit"]
    assert {(r["transactional_id"], r["producer_id"]) for r in rows} == {("tx-producer", "1")}
    # Markers need the records decoded: the command decodes them by default.
    assert json.loads(rows[1]["markers"])["tx-orders/0"] == "ABORT@4"
    assert json.loads(rows[1]["offsets"]) == {"tx-orders/0": [3, 3], "tx-orders/1": [2, 2]}


def test_errors_counts_and_all(capsys):
    status, out, _ = run(capsys, "errors", GROUPS, "--format", "csv")
    counts = {(r["api_name"], r["error_name"]): int(r["count"]) for r in rows_csv(out)}
    assert status == 0
    assert counts == {
        ("Heartbeat", "REBALANCE_IN_PROGRESS"): 6,
        ("JoinGroup", "MEMBER_ID_REQUIRED"): 3,
    }
    _, out, _ = run(capsys, "errors", KCAT, "--all", "--format", "json")
    rows = {r["api_name"]: r for r in rows_json(out)}
    assert rows["Produce"]["status"] == "unanswered"
    assert rows["Produce"]["reason"] == "connection ended by the broker (FIN) at frame 53"
    assert (rows["Produce"]["request_frame"], rows["Produce"]["response_frame"]) == (52, None)
    assert rows["ListOffsets"]["status"] == "malformed"
    assert (rows["ListOffsets"]["request_frame"], rows["ListOffsets"]["response_frame"]) == (67, 68)


def test_clients_name_their_software(capsys):
    status, out, _ = run(capsys, "clients", GROUPS, "--format", "json")
    rows = {r["client_id"]: r for r in rows_json(out)}
    assert status == 0
    assert sorted(rows) == ["gr-admin", "gr-member-1", "gr-member-2", "gr-member-3", "gr-producer"]
    assert {(r["software_name"], r["software_version"]) for r in rows.values()} == {
        ("kafka-python", "3.0.12")
    }
    assert rows["gr-admin"]["api_versions"] == {
        "ApiVersions": [4],
        "CreateTopics": [7],
        "Metadata": [12],
    }


def test_latency_by_columns_and_window(capsys):
    status, out, _ = run(capsys, "latency", GROUPS, "--format", "csv")
    rows = {r["api_name"]: r for r in rows_csv(out)}
    assert status == 0
    assert int(rows["Fetch"]["requests"]) == 91 and int(rows["Heartbeat"]["errors"]) == 6
    assert 500 < float(rows["Fetch"]["p50_ms"]) < 510  # the long poll Tansu holds
    _, out, _ = run(
        capsys, "latency", GROUPS, "--by", "api,client_id", "--freq", "5s", "--format", "csv"
    )
    rows = rows_csv(out)
    expected = ka.latency(dissector.read_pcap(GROUPS), by=["api", "client_id"], freq="5s")
    assert len(rows) == len(expected) and list(rows[0])[:3] == ["api_name", "client_id", "window"]
    assert sum(int(r["requests"]) for r in rows) == 298  # every exchange of the capture
    assert all(pd.Timestamp(r["window"]).second % 5 == 0 for r in rows)


def test_table_view_shows_every_column_whole(capsys):
    status, out, _ = run(capsys, "latency", GROUPS)
    assert status == 0
    header = next(line for line in out.splitlines() if "api_name" in line)
    assert header.split() == list(ka.latency(dissector.read_pcap(GROUPS)).columns)
    fetch = next(line.split() for line in out.splitlines() if line.split()[:1] == ["Fetch"])
    assert fetch[1] == "91" and fetch[2] == "501.343"


def test_several_captures_get_a_capture_column(capsys):
    status, out, _ = run(capsys, "errors", GROUPS, KCAT, "--all", "--format", "csv")
    rows = rows_csv(out)
    assert status == 0 and list(rows[0])[0] == "capture"
    per = pd.Series([r["capture"] for r in rows]).value_counts().to_dict()
    assert per == {str(GROUPS): 9, str(KCAT): 2}


def test_versions_lists_what_a_broker_no_longer_serves(capsys):
    status, out, _ = run(capsys, "versions", KCAT, "--broker", "4.0", "--format", "json")
    rows = [
        (r["client_id"], r["api_name"], r["api_version"], r["first_frame"]) for r in rows_json(out)
    ]
    assert status == 0
    # Kafka 4.0 dropped Produce v0 to v2 and ListOffsets v0 (KIP-896); kcat used both.
    assert rows == [("kc-producer", "Produce", 1, 52), ("kc-consumer", "ListOffsets", 0, 67)]
    status, out, err = run(capsys, "versions", KCAT, "--broker", "1.5")
    assert (status, out) == (2, "") and err.startswith("kafka-dissect: error: unknown Apache Kafka")


@pytest.mark.parametrize("capture", [TXNS, GROUPS, KCAT])
def test_doctor_exit_status_follows_the_findings(capsys, capture):
    t = read_tables(capture, ("pairs", "streams", "partitions", "records"))
    found = ka.diagnose(t["pairs"], t["streams"], t["partitions"], t["records"])
    status, out, _ = run(capsys, "doctor", capture, "--format", "json")
    rows = rows_json(out)
    assert status == (1 if found["severity"].eq("error").any() else 0)
    assert [(r["kind"], r["frames"]) for r in rows] == [
        (k, list(f)) for k, f in zip(found["kind"], found["frames"], strict=True)
    ]
    status, text, _ = run(capsys, "doctor", capture)
    if found.empty:
        assert text == "no findings\n"
        return
    blocks = [b for b in text.split("\n\n") if b.strip().startswith(tuple(found["kind"]))]
    assert len(blocks) == len(found)
    for block, frames in zip(blocks, found["frames"], strict=True):
        assert block.splitlines()[-1].strip() == "frames: " + ", ".join(map(str, frames))
    heads = [line for line in text.splitlines() if line[:1].isupper()]
    counts = found["severity"].value_counts(sort=False)
    assert heads == [f"{s.upper()} ({n})" for s, n in counts.items()]


def test_doctor_says_its_exit_status_in_help():
    res = subprocess.run(
        [sys.executable, "-m", "dissector", "doctor", "--help"], capture_output=True, text=True
    )
    assert res.returncode == 0 and "Exit status 1 when a finding is of severity error" in " ".join(
        res.stdout.split()
    )


@pytest.mark.parametrize(
    "command", ["groups", "transactions", "errors", "clients", "latency", "doctor"]
)
def test_a_file_that_is_no_capture_is_one_line(capsys, tmp_path, command):
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture file at all")
    status, out, err = run(capsys, command, junk)
    assert (status, out) == (2, "")
    said = "frame 1, offset 0: not a capture file (unknown magic 74686973)"
    assert err == f"kafka-dissect: error: {junk}: {said}\n"


def test_progress_on_stderr_when_asked(capsys):
    status, out, err = run(capsys, "clients", GROUPS, "--progress", "--format", "csv")
    assert status == 0 and len(rows_csv(out)) == 5
    assert str(GROUPS) in err and "145k/145k" in err  # bytes of the file, read to its end
    status, out, err = run(capsys, "clients", GROUPS, "--no-progress", "--format", "csv")
    assert (status, err) == (0, "")
