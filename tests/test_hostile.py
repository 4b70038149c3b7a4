"""Hostile captures, built by hand to cost far more than their size: each is read in a process
of its own, bounded in memory (RLIMIT_AS) and time, and must give the documented result (rows,
byte accounting, a one-line error) within those bounds."""

import json
import struct
import subprocess
import sys
import zlib

import pytest
from bounded import run_bounded
from synth import Capture, Connection, frame_bytes

MEMORY = 1 << 30  # address space of a child: the interpreter and the package need ~200 MiB
MSS = 32_000  # large segments: the packets' own cost stays small beside the bytes'
# ApiVersions v0 with a one-letter client id: the smallest request a client sends first.
API_VERSIONS = struct.pack(">hhih", 18, 0, 1, 1) + b"c"

# The child: dissect a capture, print its rows and the streams table's rows as JSON.
DISSECT = """
import json, sys
import dissector
d = dissector.dissect(sys.argv[1])
rows = [[e.api_name, e.correlation_id, e.status] for e in d]
print(json.dumps({"rows": rows, "streams": d.streams}))
"""


def bounded(args, timeout, stdin=None):
    """A command in a child limited to MEMORY bytes of address space and `timeout` s."""
    return run_bounded(args, timeout, MEMORY, stdin=stdin)


def dissected(path, timeout):
    res = bounded([sys.executable, "-c", DISSECT, str(path)], timeout)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def kafka_then(tmp_path, *pieces, name="hostile.pcap"):
    """A connection seen from its SYN: an ApiVersions request, then `pieces` from the client
    (bytes, written as they are), then the close."""
    cap = Capture()
    conn = Connection(cap, mss=MSS)
    conn.request(API_VERSIONS)
    for piece in pieces:
        conn.send("c", piece)
    conn.close()
    return cap.write_pcap(tmp_path / name)


def assert_adds_up(row):
    assert (
        row["bytes_seen"] == row["bytes_delivered"] + row["bytes_duplicate"] + row["bytes_dropped"]
    )
    assert row["bytes_delivered"] == row["bytes_framed"] + row["bytes_skipped"]
    assert row["bytes_framed"] >= row["bytes_malformed"] + row["bytes_unused"]


def test_zeros_on_a_kafka_stream_are_skipped_not_framed(tmp_path):
    """Runs of zeros hold no frame: 8 MiB of them are bytes skipped, not two million
    malformed rows of empty frames; the request after them is found again."""
    zeros = 8 << 20
    second = struct.pack(">hhih", 18, 0, 2, 1) + b"c"
    path = kafka_then(tmp_path, bytes(zeros), frame_bytes(second))
    out = dissected(path, timeout=60)
    assert out["rows"] == [["ApiVersions", 1, "unanswered"], ["ApiVersions", 2, "unanswered"]]
    request, response = out["streams"]
    assert request["direction"] == "request" and request["kafka"]
    assert request["frames"] == 2 and request["malformed_frames"] == 0
    assert request["bytes_framed"] == 2 * (4 + len(API_VERSIONS))
    assert request["bytes_skipped"] == zeros
    assert_adds_up(request)
    assert_adds_up(response)


def test_zeros_after_a_2_gb_size_prefix_are_searched_in_linear_time(tmp_path):
    """A size prefix far beyond --max-frame, then 32 MiB of zeros: the search for the next
    frame start passes over them at the regex engine's speed (it cost 1.5 s a MiB)."""
    zeros = 32 << 20
    path = kafka_then(tmp_path, b"\x7f\xff\xff\xff", bytes(zeros))
    out = dissected(path, timeout=30)
    assert out["rows"] == [["ApiVersions", 1, "unanswered"]]
    request = out["streams"][0]
    assert request["frames"] == 1
    assert request["bytes_skipped"] == 4 + zeros
    assert_adds_up(request)


def gzip_bomb(path, inflated):
    """A gzip'd pcap of `inflated` bytes: identical records of 65,535 zero bytes."""
    record = struct.pack("<IIII", 1_700_000_000, 0, 65535, 65535) + bytes(65535)
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip container
    with open(path, "wb") as f:
        f.write(z.compress(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)))
        for _ in range(inflated // len(record)):
            f.write(z.compress(record))
        f.write(z.flush())
    return path


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    """512 MiB of capture in half a megabyte of gzip."""
    path = gzip_bomb(tmp_path_factory.mktemp("bomb") / "bomb.pcap.gz", 512 << 20)
    assert path.stat().st_size < 1 << 20
    return path


@pytest.mark.parametrize("how", ["file", "pipe"])
def test_a_gzip_bomb_is_one_line_naming_the_file_and_offset(bomb, how):
    """A gzip capture is read up to 100 times its compressed bytes (past 64 MiB), then it is
    one line and status 2, in bounded memory and time; from a file or a pipe alike."""
    command = [sys.executable, "-m", "dissector", "analyze", "--no-progress"]
    if how == "file":
        name = str(bomb)
        res = bounded([*command, name], timeout=60)
    else:
        name = "/dev/stdin"
        with subprocess.Popen(["cat", str(bomb)], stdout=subprocess.PIPE) as cat:
            res = bounded([*command, name], timeout=60, stdin=cat.stdout)
            cat.kill()
    assert res.returncode == 2, res.stderr
    assert res.stdout == ""
    [line] = res.stderr.splitlines()
    prefix = f"kafka-dissect: error: {name}: frame "
    assert line.startswith(prefix), line
    frame, rest = line[len(prefix) :].split(", offset ", 1)
    offset, reason = rest.split(": ", 1)
    record = 16 + 65535
    # the record the reader was at: the bound (64 MiB) falls inside it
    assert int(frame) == (64 << 20) // record + 1
    assert int(offset) == 24 + (int(frame) - 1) * record
    assert reason.startswith(
        "decompression bomb: the gzip stream expands past 100 times its compressed size ("
    )


RECORDS_CHILD = """
import json, sys
import dissector
d = dissector.dissect(sys.argv[1], records="full")
out = []
for e in d:
    if e.api_name != "Produce":
        continue
    parts = [p for t in e.request["TopicData"] for p in t["PartitionData"]]
    batches = [b for p in parts for b in p["Records"]["batches"]]
    out.append({"status": e.status, "batches": len(batches),
                "bytes": sum(b["uncompressed_size"] or 0 for b in batches),
                "bombs": sum(b["status"] == "decompression_bomb" for b in batches)})
print(json.dumps(out))
"""


def test_record_sets_of_one_request_cannot_add_up_past_the_bounds(tmp_path):
    """A Produce request of 200 partitions, each record set 15 zstd batches of a record of
    1,000,000 zero bytes (each batch 120 bytes, under the 1 MiB floor of the ratio): 3 GB
    from 360 KB if each batch were bounded alone. In a child limited to 1 GiB, the request
    decodes with its batches past the allowance reported as bombs."""
    from kafka_encoder import encode_request
    from test_records import zeros_batch

    batch = zeros_batch()
    body = {
        "TransactionalId": None,
        "Acks": 1,
        "TimeoutMs": 1000,
        "TopicData": [
            {
                "Name": "t",
                "PartitionData": [{"Index": i, "Records": batch * 15} for i in range(200)],
            }
        ],
    }
    path = kafka_then(tmp_path, frame_bytes(encode_request(0, 7, 2, "c", body)))
    res = bounded([sys.executable, "-c", RECORDS_CHILD, str(path)], timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    (produce,) = json.loads(res.stdout)
    assert produce["batches"] == 3000
    assert produce["bytes"] < 64 << 20  # of 3 GB
    assert produce["bombs"] > 2900


def test_requests_one_after_another_cannot_add_up_past_the_runs_ratio(tmp_path):
    """3,000 Produce requests of one zstd batch each, a record of 1,000,000 zero bytes from
    120 bytes: each request alone stays under the 1 MiB floor of its own ratio (3 GB from
    a 530 KB capture, all `ok`, if each were bounded alone). The ratio holds over the run:
    streamed with every record, and as the records table, in children limited to 1 GiB,
    the first batch is read and every later one is a bomb. The records table has rows for
    the records read; the partitions table counts the batches that were not."""
    import pyarrow.parquet as pq
    from kafka_encoder import encode_request
    from test_records import zeros_batch

    batch = zeros_batch()
    body = {
        "TransactionalId": None,
        "Acks": 1,
        "TimeoutMs": 1000,
        "TopicData": [{"Name": "t", "PartitionData": [{"Index": 0, "Records": batch}]}],
    }
    requests = [frame_bytes(encode_request(0, 7, i, "c", body)) for i in range(2, 3002)]
    path = kafka_then(tmp_path, b"".join(requests))
    res = bounded([sys.executable, "-c", RECORDS_CHILD, str(path)], timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    produced = json.loads(res.stdout)
    assert len(produced) == 3000 and all(p["batches"] == 1 for p in produced)
    assert [p["bombs"] for p in produced] == [0] + [1] * 2999
    assert sum(p["bytes"] for p in produced) < 2 << 20  # of 3 GB
    out = tmp_path / "records.parquet"
    cli = [sys.executable, "-m", "dissector.cli", "analyze", str(path), "--no-progress"]
    res = bounded([*cli, "--table", "records", "-o", str(out)], timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    table = pq.read_table(out, columns=["correlation_id", "value"])
    assert table.column("correlation_id").to_pylist() == [2]
    assert out.stat().st_size < 2 << 20
    parts = tmp_path / "partitions.parquet"
    res = bounded([*cli, "--records", "full", "--table", "partitions", "-o", str(parts)], 120)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = pq.read_table(parts, columns=["failed_batches", "batch_errors"]).to_pylist()
    assert (
        rows
        == [{"failed_batches": 0, "batch_errors": None}]
        + [{"failed_batches": 1, "batch_errors": "decompression_bomb"}] * 2999
    )


def test_two_million_records_in_one_batch_become_a_table_in_bounded_memory(tmp_path):
    """One zstd batch of 2,000,000 minimal records (no key, no value, no header), 1.6 MB in
    the capture: the records table reads them into columns a batch of rows at a time, never
    an object per record (which took gigabytes), so the parquet file is written in a child
    limited to MEMORY bytes."""
    import zstandard
    from kafka_encoder import encode_request
    from test_records import ZSTD, make_v2, record

    count = 2_000_000
    records = b"".join(record(i, None, None) for i in range(count))
    packed = zstandard.ZstdCompressor(level=19).compress(records)
    assert len(packed) < 2_000_000
    batch = make_v2(packed, count, attributes=ZSTD)
    body = {
        "TransactionalId": None,
        "Acks": 1,
        "TimeoutMs": 1000,
        "TopicData": [{"Name": "t", "PartitionData": [{"Index": 3, "Records": batch}]}],
    }
    path = kafka_then(tmp_path, frame_bytes(encode_request(0, 7, 2, "c", body)))
    out = tmp_path / "records.parquet"
    cli = [sys.executable, "-m", "dissector.cli", "analyze", str(path)]
    res = bounded([*cli, "--table", "records", "-o", str(out), "--no-progress"], timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    import pyarrow.parquet as pq

    table = pq.read_table(out, columns=["partition", "offset", "key", "batch_status"])
    assert table.num_rows == count
    assert table.column("partition").unique().to_pylist() == [3]
    assert table.column("batch_status").unique().to_pylist() == ["ok"]
    assert table.column("key").null_count == count
    # a Produce request's records have no offset until its response assigns one
    assert table.column("offset").null_count == count
