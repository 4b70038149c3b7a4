"""A table written by the tasks that build it: each task writes its rows as parquet files of
the output itself and sends the driver one small row per capture (rows written, summary).

The layout is the one Spark's `partitionBy("capture")` writes (`capture=<escaped path>/part-…
.parquet`, `_SUCCESS` once every task is done), so Spark, pyarrow and pandas read it back as
they would Spark's. The rows never cross into the JVM: turning Arrow batches into Spark rows
and writing them from there took as long as dissecting the capture.

A task writes into `_temporary/` and moves its file into place once whole, so an attempt that
failed leaves nothing in the table; the driver removes `_temporary/` when the job is done.
"""

import os
import uuid
from urllib.parse import quote

import pyarrow as pa

from ..tables.output import WrittenBehind, parquet_writer
from .whole import SUMMARY

PARTS = pa.schema([("capture", pa.string()), ("rows", pa.int64()), ("summary", pa.binary())])
TEMPORARY = "_temporary"


def filesystem(path):
    """(pyarrow filesystem, path inside it) of an output directory: a local path or a URI."""
    from pyarrow import fs

    if "://" in str(path):
        return fs.FileSystem.from_uri(str(path))
    return fs.LocalFileSystem(), os.path.abspath(path)


def reachable(spark, path):
    """Whether the tasks can write `path` as the driver names it: a URI pyarrow reaches, or a
    local path where Spark's default filesystem is the local one (else Spark would read
    `out/` on its cluster's filesystem)."""
    if "://" in str(path):
        try:
            filesystem(path)
        except (pa.ArrowException, ValueError, OSError):
            return False
        return True
    default = spark.conf.get("spark.hadoop.fs.defaultFS", None) or "file:///"
    return default.startswith("file:")


def prepare(path):
    """An empty output directory (what was there is replaced, as Spark's overwrite does)."""
    fs, root = filesystem(path)
    fs.create_dir(root, recursive=True)
    fs.delete_dir_contents(root)
    return str(uuid.uuid4())


def commit(path):
    fs, root = filesystem(path)
    fs.delete_dir(f"{root}/{TEMPORARY}")
    with fs.open_output_stream(f"{root}/_SUCCESS"):
        pass


def capture_dir(capture):
    """The partition directory of a capture, its path escaped as Spark escapes it (Spark and
    pyarrow both read any %XX back)."""
    return f"capture={quote(str(capture), safe='')}"


def write_capture(batches, path, job, task, table, compress_values=False):
    """Write one capture's batches (Spark's schema, with `capture` and `_summary`, the summary
    in a last row of its own) as part-<task> of its partition. Returns a PARTS row."""
    seen = {"capture": None, "summary": None}

    def data():
        for batch in batches:
            seen["capture"] = batch.column("capture")[0].as_py()
            if batch.num_rows == 1 and batch.column(SUMMARY)[0].is_valid:
                seen["summary"] = batch.column(SUMMARY)[0].as_py()
                continue
            yield batch.drop_columns(["capture", SUMMARY])

    rows = write_part(data(), path, job, task, table, compress_values, lambda: seen["capture"])
    return {"capture": seen["capture"], "rows": rows, "summary": seen["summary"]}


def write_part(batches, path, job, task, table, compress_values, capture):
    """Write batches (Spark's schema, without `capture`) as part-<task> of the partition of
    `capture` (or of what `capture()` says once they are written); returns the rows
    written."""
    fs, root = filesystem(path)
    temporary = f"{root}/{TEMPORARY}/{job}/{task:05d}-{uuid.uuid4().hex}.parquet"
    rows, writer, sink = 0, None, None
    try:
        for data in batches:
            if not data.num_rows:
                continue
            if writer is None:
                fs.create_dir(f"{root}/{TEMPORARY}/{job}", recursive=True)
                sink = fs.open_output_stream(temporary)
                # Written behind: the thread encodes while the task dissects on, and takes
                # the cores the JVM and the driver leave idle between tasks.
                writer = WrittenBehind(parquet_writer(sink, data.schema, table, compress_values))
            writer.write_batch(data)
            rows += data.num_rows
    finally:
        if writer is not None:
            try:
                writer.close()  # raises the error of a write behind, if one failed
            finally:
                sink.close()
    if writer is not None:
        final = f"{root}/{capture_dir(capture() if callable(capture) else capture)}"
        fs.create_dir(final, recursive=True)
        fs.move(temporary, f"{final}/part-{task:05d}-{job}.parquet")
    return rows
