"""What a field audit and first-time users found, each checked against traffic built for it or
recorded from real clients: headers of unknown versions, detection through known brokers,
bodies cut short, partition errors and lags, broker-assigned offsets, 0.7 fetches, queue time,
command-line errors, loss warnings, and files read back."""

import hashlib
import json
import struct
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from kafka_encoder import encode_request, encode_response
from synth import Capture, Connection, frame_bytes

import dissector
from dissector.tables import sort_table
from dissector.tables.output import read_table

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
RECORDED = sorted(
    p
    for p in CAPTURES.glob("*.pcap")
    if not p.name.startswith("legacy-") and p.with_suffix(".expected.json").exists()
)

API_VERSIONS, METADATA, FETCH, OFFSET_COMMIT, ADD_PARTITIONS_TO_TXN = 18, 3, 1, 8, 24


def bare_request(key, version, corr, client_id):
    """A request header v1 (int16 client id) and no body: what a client newer than the
    schema sends first, e.g. ApiVersions at a version it hopes the broker knows."""
    cid = client_id.encode()
    return struct.pack(">hhih", key, version, corr, len(cid)) + cid


def pcap(tmp_path, build, name="t.pcap"):
    cap = Capture()
    build(cap)
    return cap.write_pcap(tmp_path / name)


# -- 1. headers of unknown versions and keys -------------------------------------------------


@pytest.mark.parametrize(("key", "version"), [(API_VERSIONS, 99), (METADATA, 99), (9999, 0)])
def test_requests_of_unknown_versions_keep_their_header(tmp_path, key, version):
    def build(cap):
        c = Connection(cap)
        c.send("c", frame_bytes(bare_request(key, version, 7, "probe")))
        c.send("b", frame_bytes(struct.pack(">ih", 7, 35)))  # UNSUPPORTED_VERSION
        c.close()

    pairs = dissector.read_pcap(pcap(tmp_path, build), ports=[9092])
    assert len(pairs) == 1
    row = pairs.iloc[0]
    assert (row.api_key, row.api_version, row.correlation_id) == (key, version, 7)
    assert row.client_id == "probe" and (row.request_frame, row.response_frame) == (4, 5)
    assert "unknown version" in row.reason or "unknown API key" in row.reason


# -- 2. detection through endpoints proven to be Kafka ----------------------------------------


def test_odd_connection_to_a_proven_broker_is_kafka(tmp_path):
    def build(cap):
        a = Connection(cap, client=("10.0.0.2", 40001))
        a.request(encode_request(API_VERSIONS, 3, 1, "ok", {}))
        a.response(encode_response(API_VERSIONS, 3, 1, {"ErrorCode": 0, "ApiKeys": []}))
        b = Connection(cap, client=("10.0.0.2", 40002))  # same broker endpoint
        b.send("c", frame_bytes(bare_request(API_VERSIONS, 99, 1, "odd")))
        b.send("b", frame_bytes(struct.pack(">ih", 1, 35)))
        ssh = Connection(cap, client=("10.0.0.2", 40003), broker=("10.0.0.1", 22))
        ssh.send("c", b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
        for conn in (a, b, ssh):
            conn.close()

    path = pcap(tmp_path, build)
    pairs = dissector.read_pcap(path)
    assert sorted(pairs.client_id) == ["odd", "ok"]
    out = run_cli("analyze", path, "--no-progress").stdout
    assert "not Kafka: 1 TCP connections (ports 22)" in out


@pytest.mark.parametrize("first", [14, 15, 20, 23])
def test_a_first_segment_that_ends_inside_the_client_id_is_kafka(tmp_path, first):
    """The client's first segment (or TLS record) holds the size prefix and the request
    header up to part of the client id: its length is checked against the frame, not
    against the bytes at hand, so the connection is Kafka and its requests are rows."""

    def build(cap):
        c = Connection(cap, broker=("10.0.0.1", 9999))
        stream = b"".join(
            frame_bytes(encode_request(API_VERSIONS, 3, corr, "a-client-id", {})) for corr in (1, 2)
        )
        c.send("c", stream[:first])
        c.send("c", stream[first:])
        c.response(encode_response(API_VERSIONS, 3, 1, {"ErrorCode": 0, "ApiKeys": []}))
        c.response(encode_response(API_VERSIONS, 3, 2, {"ErrorCode": 0, "ApiKeys": []}))
        c.close()

    pairs = dissector.read_pcap(pcap(tmp_path, build))
    assert list(pairs.correlation_id) == [1, 2] and set(pairs.status) == {"ok"}


def test_summary_hints_at_port_when_nothing_is_kafka(tmp_path):
    def build(cap):
        c = Connection(cap, broker=("10.0.0.1", 9999))
        c.send("c", frame_bytes(bare_request(API_VERSIONS, 99, 1, "odd")))
        c.close()

    out = run_cli("analyze", pcap(tmp_path, build), "--no-progress").stdout
    assert "not Kafka: 1 TCP connections (ports 9999)" in out and "--port" in out


# -- 3. frames cut by the snap length ---------------------------------------------------------


def test_frames_cut_by_the_snap_length_keep_their_rows(tmp_path):
    big = {"Topics": [{"Name": "t" * 2900}]}  # a request of ~3 KB in one 3 KB segment

    def build(cap):
        c = Connection(cap, mss=65000)
        c.request(encode_request(API_VERSIONS, 3, 1, "snap", {}))
        c.response(encode_response(API_VERSIONS, 3, 1, {"ErrorCode": 0, "ApiKeys": []}))
        c.request(encode_request(METADATA, 1, 2, "snap", big))
        meta = {
            "Brokers": [],
            "ControllerId": 1,
            "Topics": [{"ErrorCode": 3, "Name": "t" * 2900, "IsInternal": False, "Partitions": []}],
        }
        c.response(encode_response(METADATA, 1, 2, meta))
        c.close()

    whole = pcap(tmp_path, build)
    cut = Capture()
    for p in dissector.capture.open_capture(whole):
        cut.packets.append(p._replace(data=p.data[:200]))  # tcpdump -s 200
    pairs = dissector.read_pcap(cut.write_pcap(tmp_path / "cut.pcap"))
    meta = pairs[pairs.api_name == "Metadata"].iloc[0]
    assert (meta.api_version, meta.correlation_id, meta.client_id) == (1, 2, "snap")
    assert (meta.request_frame, meta.response_frame) == (6, 7)
    # The topic's error lies in the captured bytes of the response.
    assert (meta.status, meta.error_name) == ("error", "UNKNOWN_TOPIC_OR_PARTITION")
    assert meta.request_bytes > 2900 and meta.response_bytes > 2900
    # 200 bytes a packet: 54 of headers (Ethernet, IPv4, TCP), 146 of the frame.
    assert "request cut by the capture: 146 of 2924 bytes captured" in meta.reason
    streams = dissector.read_pcap(tmp_path / "cut.pcap", table="streams")
    assert (
        streams.bytes_seen
        == streams.bytes_delivered + streams.bytes_duplicate + streams.bytes_dropped
    ).all()


# -- 4. a response captured before its request ----------------------------------------------


def test_a_response_captured_before_its_request_is_paired(tmp_path):
    def build(cap):
        c = Connection(cap)
        for corr in (1, 2):  # the connection's first exchange, and a later one
            (req,) = c.request(encode_request(API_VERSIONS, 3, corr, "c", {}))
            body = {"ErrorCode": 0, "ApiKeys": []}
            (resp,) = c.response(encode_response(API_VERSIONS, 3, corr, body))
            # Recorded on two queues: the response lands in the file first.
            cap.packets[req - 1], cap.packets[resp - 1] = (
                cap.packets[resp - 1],
                cap.packets[req - 1],
            )
        c.close()

    pairs = dissector.read_pcap(pcap(tmp_path, build), ports=[9092])
    assert list(pairs.status) == ["ok", "ok"] and list(pairs.correlation_id) == [1, 2]
    frames = zip(pairs.request_frame, pairs.response_frame, strict=True)
    assert list(frames) == [(5, 4), (7, 6)]


# -- 5. bodies cut short keep what decoded ------------------------------------------------------


def test_a_truncated_response_keeps_its_topic_partition_and_error():
    # Tansu answers kcat's ListOffsets v0 with a response cut inside the partition.
    exchanges = [e for e in dissector.dissect(CAPTURES / "kcat.pcap") if e.status == "malformed"]
    (e,) = [e for e in exchanges if e.api_name == "ListOffsets"]
    assert e.response["Topics"][0]["Name"] == "kc-topic"
    assert e.response["Topics"][0]["Partitions"][0] == {"PartitionIndex": 0, "ErrorCode": 0}
    assert e.response["_stopped_at"] == 28 and "offset 28" in e.reason
    assert e.topics == ["kc-topic"] and e.error_code == 0


# -- 6. partitions: every error field, timestamps, committed lag ---------------------------------


def test_partition_errors_come_from_any_error_field_and_commits_get_a_lag(tmp_path):
    def build(cap):
        c = Connection(cap)
        add = {
            "V3AndBelowTransactionalId": "tx",
            "V3AndBelowProducerId": 5,
            "V3AndBelowProducerEpoch": 0,
            "V3AndBelowTopics": [{"Name": "t", "Partitions": [0, 1]}],
        }
        c.request(encode_request(ADD_PARTITIONS_TO_TXN, 3, 1, "p", add))
        results = [{"PartitionIndex": 0, "PartitionErrorCode": 0}]
        results.append({"PartitionIndex": 1, "PartitionErrorCode": 48})  # INVALID_TXN_STATE
        body = {
            "ThrottleTimeMs": 0,
            "ResultsByTopicV3AndBelow": [{"Name": "t", "ResultsByPartition": results}],
        }
        c.response(encode_response(ADD_PARTITIONS_TO_TXN, 3, 1, body))
        fetch = {
            "ReplicaId": -1,
            "MaxWaitMs": 0,
            "MinBytes": 1,
            "Topics": [
                {
                    "Topic": "t",
                    "Partitions": [{"Partition": 0, "FetchOffset": 10, "PartitionMaxBytes": 1}],
                }
            ],
        }
        c.request(encode_request(FETCH, 4, 2, "c", dict(fetch, MaxBytes=1, IsolationLevel=0)))
        part = {
            "PartitionIndex": 0,
            "ErrorCode": 0,
            "HighWatermark": 100,
            "LastStableOffset": 100,
            "AbortedTransactions": [],
            "Records": None,
        }
        c.response(
            encode_response(
                FETCH,
                4,
                2,
                {"ThrottleTimeMs": 0, "Responses": [{"Topic": "t", "Partitions": [part]}]},
            )
        )
        commit = {
            "GroupId": "g",
            "GenerationIdOrMemberEpoch": 1,
            "MemberId": "m",
            "RetentionTimeMs": -1,
            "Topics": [
                {
                    "Name": "t",
                    "Partitions": [
                        {"PartitionIndex": 0, "CommittedOffset": 60, "CommittedMetadata": ""}
                    ],
                }
            ],
        }
        c.request(encode_request(OFFSET_COMMIT, 2, 3, "c", commit))
        c.response(
            encode_response(
                OFFSET_COMMIT,
                2,
                3,
                {"Topics": [{"Name": "t", "Partitions": [{"PartitionIndex": 0, "ErrorCode": 0}]}]},
            )
        )
        c.close()

    parts = dissector.read_pcap(pcap(tmp_path, build), ports=[9092], table="partitions")
    txn = parts[parts.api_name == "AddPartitionsToTxn"].set_index("partition")
    assert txn.loc[1, "error_name"] == "INVALID_TXN_STATE" and txn.loc[0, "error_code"] == 0
    commit = parts[parts.api_name == "OffsetCommit"].iloc[0]
    assert commit.committed_offset == 60 and commit.committed_lag == 40
    assert parts.request_start.notna().all() and parts.response_end.notna().all()
    assert (parts.response_end > parts.request_start).all()


# -- 7. produced records carry the offsets the broker assigned ---------------------------------


def digest(value):
    return None if value is None or value is pd.NA else hashlib.sha256(value).hexdigest()


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_produced_records_carry_broker_assigned_offsets(path):
    records = dissector.read_pcap(path, table="records")
    data = records[records.control.isna()]
    key = ["topic", "partition", "offset"]
    produced = data[(data.api_name == "Produce") & data.offset.notna()]
    fetched = data[data.api_name == "Fetch"].drop_duplicates(key)
    if produced.empty or fetched.empty:
        pytest.skip("no record both produced and fetched")
    got = {(*k, digest(v)) for *k, v in produced[[*key, "value"]].itertuples(index=False)}
    seen = {(*k, digest(v)) for *k, v in fetched[[*key, "value"]].itertuples(index=False)}
    both = {k[:3] for k in got} & {k[:3] for k in seen}
    assert both, "some record is both produced and fetched"
    # Same topic, partition and offset: the same record, as the broker stored it.
    assert {k for k in got if k[:3] in both} == {k for k in seen if k[:3] in both}


def test_control_records_are_apart_and_hashable():
    path = CAPTURES / "transactions.pcap"
    if not path.exists():
        pytest.skip("no transactional capture")
    records = dissector.read_pcap(path, table="records")
    control = records[records.control.notna()]
    assert not control.empty and set(control.control) <= {"COMMIT", "ABORT"}
    assert records.control.nunique() >= 1  # hashable


# -- 8. 0.7 -----------------------------------------------------------------------------------


def test_07_fetch_records_carry_the_requested_topic_and_partition():
    records = dissector.read_pcap(CAPTURES / "legacy-0.7.pcap", table="records")
    fetched = records[(records.api_name == "Fetch") & (records.direction == "response")]
    assert not fetched.empty and fetched.topic.notna().all() and fetched.partition.notna().all()


def test_07_multifetch_part_errors_are_the_exchange_error(tmp_path):
    # 0.7 traffic has no broker to record from: built byte by byte from the 0.7 documents.
    from tools import make_legacy_captures as mk

    def build(cap):
        c = Connection(cap)
        blocks = [mk.fetch_block("a", 0, 0, 100), mk.fetch_block("b", 0, 5, 100)]
        c.send("c", frame_bytes(mk.multi_request(2, blocks)))
        parts = [mk.fetch_response(0, b""), mk.fetch_response(1, b"")]  # b: OFFSET_OUT_OF_RANGE
        c.send("b", frame_bytes(mk.multi_fetch_response(parts)))
        c.close()

    pairs = dissector.read_pcap(pcap(tmp_path, build), ports=[9092], protocol="0.7")
    (row,) = pairs.itertuples()
    assert (row.api_name, row.error_code, row.status) == ("MultiFetch", 1, "error")


# -- 9. who ended a connection -------------------------------------------------------------


def test_unanswered_says_who_ended_the_connection():
    # Tansu hangs up on kcat's Produce v1 (magic 0 message set): the broker's FIN.
    pairs = dissector.read_pcap(CAPTURES / "kcat.pcap")
    (row,) = pairs[pairs.status == "unanswered"].itertuples()
    assert (row.api_name, row.api_version, row.request_frame) == ("Produce", 1, 52)
    assert row.reason == "connection ended by the broker (FIN) at frame 53"
    streams = dissector.read_pcap(CAPTURES / "kcat.pcap", table="streams")
    mine = streams[streams.stream == row.stream].iloc[0]
    assert (mine.end, mine.ended_by, mine.end_frame) == ("fin", "broker", 53)
    assert mine.end_time > pairs.loc[pairs.stream == row.stream, "request_end"].max()


def test_a_reset_and_the_end_of_the_capture_are_told_apart(tmp_path):
    from synth import RST

    def build(cap):
        a = Connection(cap, client=("10.0.0.2", 40001))
        a.request(encode_request(METADATA, 1, 1, "a", {"Topics": []}))
        a._send("c", RST, b"")
        b = Connection(cap, client=("10.0.0.2", 40002))
        b.request(encode_request(METADATA, 1, 1, "b", {"Topics": []}))

    pairs = dissector.read_pcap(pcap(tmp_path, build), ports=[9092]).set_index("client_id")
    assert pairs.loc["a", "reason"] == "connection ended by the client (RST) at frame 5"
    assert pairs.loc["b", "reason"] == "connection ended: the capture ends (last packet frame 9)"


# -- 10. queue time ---------------------------------------------------------------------------


def test_queue_time_behind_a_long_poll(tmp_path):
    fetch = {
        "ReplicaId": -1,
        "MaxWaitMs": 500,
        "MinBytes": 1,
        "MaxBytes": 1,
        "IsolationLevel": 0,
        "Topics": [],
    }

    def build(cap):
        c = Connection(cap)
        c.request(encode_request(FETCH, 4, 1, "c", fetch))
        c.request(encode_request(METADATA, 1, 2, "c", {"Topics": []}), after_ns=1_000_000)
        fetched = {"ThrottleTimeMs": 0, "Responses": []}
        c.response(encode_response(FETCH, 4, 1, fetched), after_ns=499_000_000)
        meta = {"Brokers": [], "ControllerId": 1, "Topics": []}
        c.response(encode_response(METADATA, 1, 2, meta), after_ns=2_000_000)
        c.close()

    pairs = dissector.read_pcap(pcap(tmp_path, build), ports=[9092]).set_index("api_name")
    assert pairs.loc["Fetch", "queue_ms"] == 0
    meta = pairs.loc["Metadata"]
    # Sent 1 ms after the Fetch, queued until its response 499 ms later, answered 2 ms after.
    assert meta.queue_ms == pytest.approx(499.0) and meta.server_ms == pytest.approx(501.0)
    assert meta.server_ms - meta.queue_ms == pytest.approx(2.0)


# -- 11, 12. the command line -------------------------------------------------------------------


def run_cli(*args):
    cmd = [sys.executable, "-m", "dissector", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_missing_file_and_directory_are_one_line(tmp_path):
    for target, words in ((tmp_path / "nope.pcap", "no such file"), (tmp_path, "is a directory")):
        res = run_cli("analyze", target)
        assert res.returncode == 2 and res.stderr == f"kafka-dissect: error: {target}: {words}\n"


def test_a_closed_pipe_ends_quietly():
    cmd = f"{sys.executable} -m dissector analyze {CAPTURES}/*.pcap | head -1"
    res = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == "" and res.stdout.count("\n") == 1


def test_summary_warns_of_lost_bytes_and_cut_packets(tmp_path):
    def build(cap):
        c = Connection(cap)
        c.request(encode_request(API_VERSIONS, 3, 0, "c", {}))
        c.response(encode_response(API_VERSIONS, 3, 0, {"ErrorCode": 0, "ApiKeys": []}))
        big = encode_request(METADATA, 1, 1, "c", {"Topics": [{"Name": "x" * 3000}]})
        frames = c.request(big, mss=1000)
        del cap.packets[frames[1] - 1]  # a segment the capture lost
        c.response(
            encode_response(METADATA, 1, 1, {"Brokers": [], "ControllerId": 1, "Topics": []})
        )
        c.close()

    path = pcap(tmp_path, build)
    out = run_cli("analyze", path, "--port", 9092, "--no-progress").stdout
    assert "warning: the capture lost data: 1000 bytes missing in 1 gaps" in out
    # The same capture cut at 100 bytes a packet: counted as cut by the snap length.
    cut = tmp_path / "cut.pcap"
    cap = Capture()
    for p in dissector.capture.open_capture(path):
        cap.packets.append(p._replace(data=p.data[:100]))
    cap.write_pcap(cut)
    out = run_cli("analyze", cut, "--port", 9092, "--no-progress").stdout
    assert "packets cut by the snap length" in out


# -- 13. files read back ----------------------------------------------------------------------


@pytest.mark.parametrize("table", ["pairs", "partitions", "records", "streams"])
@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_every_table_reads_back_from_every_format(tmp_path, table, suffix):
    sample = CAPTURES / "compression.pcap"
    out = tmp_path / f"{table}{suffix}"
    res = run_cli("analyze", sample, "--table", table, "-o", out, "--no-progress")
    assert res.returncode == 0, res.stderr
    want = dissector.read_pcap(sample, table=table)
    got = sort_table(read_table(out, table), table)
    pd.testing.assert_frame_equal(got, want)
    if table == "records" and suffix == ".parquet":
        import pyarrow.parquet as pq

        headers = pq.read_schema(out).field("headers").type.value_type
        assert str(headers.field("value").type) == "binary"
    if suffix == ".jsonl" and table == "pairs":
        first = json.loads(out.read_text().splitlines()[0])
        assert first["request_start"].endswith("Z") and len(first["request_start"]) == 30
