"""TableWriter: a parquet file written behind (on a thread of its own) is the file written in
line, and a write that fails says which file, whether it failed in line or behind."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dissector
from dissector.tables import arrow_batches
from dissector.tables.output import TableWriter

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def _pairs_batches():
    exchanges = dissector.dissect(CAPTURES / "kafka-python.pcap", progress=False)
    # Small batches: many writes, each one overlapping the making of the next.
    return list(arrow_batches(exchanges, "pairs", batch_rows=3))


def test_a_file_written_behind_is_the_file_written_in_line(tmp_path):
    batches = _pairs_batches()
    assert len(batches) == 17
    tables = {}
    for background in (False, True):
        path = tmp_path / f"pairs-{background}.parquet"
        with TableWriter(path, "pairs", capture=True, background=background) as writer:
            for batch in batches:
                writer.write(batch, capture="kafka-python.pcap")
        assert writer.rows == 51
        tables[background] = pq.read_table(path)
    assert tables[True].equals(tables[False])
    assert tables[True].num_rows == 51
    assert tables[True].column("request_frame").to_pylist() == [
        frame for b in batches for frame in b.column("request_frame").to_pylist()
    ]


@pytest.mark.parametrize("compress_values", [False, True])
def test_the_records_payloads_are_dictionaries_uncompressed_without_min_max(
    tmp_path, compress_values
):
    # Each record of compression.pcap is produced once and fetched once: as dictionaries its
    # keys and values are written once. Nor do the values' minimum and maximum help a reader
    # skip a row group; keys keep theirs, so a search for one key skips what cannot hold it.
    exchanges = dissector.dissect(CAPTURES / "compression.pcap", progress=False, records="full")
    batches = list(arrow_batches(exchanges, "records"))
    path = tmp_path / "records.parquet"
    with TableWriter(path, "records", compress_values=compress_values) as writer:
        for batch in batches:
            writer.write(batch)
    group = pq.ParquetFile(path).metadata.row_group(0)
    chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    plain = {"key", "value", "headers.list.element.value"}
    for name, chunk in chunks.items():
        payload = name in plain
        assert chunk.compression == (
            "UNCOMPRESSED" if payload and not compress_values else "SNAPPY"
        )
        assert chunk.is_stats_set == (name not in ("value", "headers.list.element.value"))
        if payload:
            assert chunk.has_dictionary_page and "RLE_DICTIONARY" in chunk.encodings
    keys = [k for b in batches for k in b.column("key").to_pylist() if k is not None]
    assert chunks["key"].statistics.min == min(keys)
    assert chunks["key"].statistics.max == max(keys)
    values = [v for b in batches for v in b.column("value").to_pylist()]
    assert len(values) == 40 and len(set(values)) == 20
    if not compress_values:  # each value's bytes once, and an index a row
        written = chunks["value"].total_uncompressed_size
        assert sum(map(len, set(values))) < written < sum(map(len, values))
    back = pq.read_table(path)
    assert back.equals(pa.Table.from_batches(batches).cast(back.schema))
    assert back.schema.field("value").type == pa.binary()  # read back as values, not indices


def test_the_bodies_are_written_in_zstd(tmp_path):
    """The pairs' JSON bodies in zstd (a quarter of snappy's size on real traffic), the rest
    in snappy; the bodies read back as written."""
    batches = _pairs_batches()
    path = tmp_path / "pairs.parquet"
    with TableWriter(path, "pairs") as writer:
        for batch in batches:
            writer.write(batch)
    group = pq.ParquetFile(path).metadata.row_group(0)
    columns = [group.column(i) for i in range(group.num_columns)]
    codecs = {c.path_in_schema: c.compression for c in columns}
    assert codecs.pop("request") == codecs.pop("response") == "ZSTD"
    assert set(codecs.values()) == {"SNAPPY"}
    back = pq.read_table(path)
    assert back.column("response").to_pylist() == [
        text for b in batches for text in b.column("response").to_pylist()
    ]
    assert any(back.column("response").to_pylist())


def test_an_error_behind_is_raised_by_the_next_write_or_close(tmp_path):
    batch = _pairs_batches()[0]
    wrong = pa.RecordBatch.from_pydict({"x": [1]})  # not the pairs schema
    writer = TableWriter(tmp_path / "p.parquet", "pairs", background=True)
    writer.write(batch)
    writer.write(wrong)  # handed to the thread: it fails there
    with pytest.raises(ValueError, match="schema"):
        writer.write(batch)
    writer.close()  # the error was raised once; the file is still closed
    assert pq.read_table(tmp_path / "p.parquet").num_rows == batch.num_rows


def _small_files():
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_a_full_file_is_one_error_line_that_names_it(tmp_path, suffix):
    # The pairs of kafka-python.pcap make 24 KB of parquet, 80 KB of csv: past the limit of
    # 4 KB, the first batch's write fails (behind, for parquet).
    out = tmp_path / f"pairs{suffix}"
    res = subprocess.run(
        [sys.executable, "-m", "dissector", "analyze", CAPTURES / "kafka-python.pcap"]
        + ["-o", out, "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_small_files,
    )
    assert res.returncode == 2
    assert "Traceback" not in res.stderr and res.stderr.count("\n") == 1
    assert "File too large" in res.stderr and str(out) in res.stderr
