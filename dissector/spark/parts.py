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
import time
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
    out = write_temporary(
        batches, path, job, f"{task:05d}-{uuid.uuid4().hex}", table, compress_values
    )
    if out.rows:
        place(path, job, out.file, capture() if callable(capture) else capture, task)
    return out.rows


def write_temporary(batches, path, job, name, table, compress_values):
    """Write batches (Spark's schema, without `capture`) as `_temporary/<job>/<name>.parquet`;
    returns the Temporary (its `file`, and `rows` written)."""

    def new_writer(sink, schema):
        return parquet_writer(sink, schema, table, compress_values)

    out = Temporary(path, job, f"{name}.parquet", new_writer)
    try:
        for data in batches:
            out.write(data)
    finally:
        out.close()
    return out


def place(path, job, file, capture, task):
    """Move a whole written file into the table, as part-<task> of `capture`'s partition."""
    fs, root = filesystem(path)
    final = f"{root}/{capture_dir(capture)}"
    fs.create_dir(final, recursive=True)
    fs.move(file, f"{final}/part-{task:05d}-{job}.parquet")


def rendezvous(path, job, meeting, count, me, blob, pause=0.005):
    """The blobs of `count` tasks running at once (`me` is this one's number), each left under
    the output's `_temporary/<job>/<meeting>/` (whole: written aside, then moved) and read
    once all are there. Spark's barrier sync answers at the next whole second; this, within
    `pause`."""
    from pyarrow.fs import FileSelector

    fs, root = filesystem(path)
    folder = f"{root}/{TEMPORARY}/{job}/{meeting}"
    fs.create_dir(folder, recursive=True)
    with fs.open_output_stream(f"{folder}/{me}.part") as out:
        out.write(blob)
    fs.move(f"{folder}/{me}.part", f"{folder}/{me}")
    while sum(not f.path.endswith(".part") for f in fs.get_file_info(FileSelector(folder))) < count:
        time.sleep(pause)
    blobs = []
    for k in range(count):
        with fs.open_input_stream(f"{folder}/{k}") as f:
            blobs.append(f.read())
    return blobs


class Temporary:
    """A file `name` under the output's `_temporary/<job>/`, opened at its first rows by
    `new_writer(sink, schema)`. Written behind: the thread encodes while the task dissects
    on, and takes the cores the JVM and the driver leave idle between tasks."""

    def __init__(self, path, job, name, new_writer):
        self.fs, root = filesystem(path)
        self.file = f"{root}/{TEMPORARY}/{job}/{name}"
        self.new_writer = new_writer
        self.rows = 0
        self._sink = self._writer = None

    def write(self, batch):
        if not batch.num_rows:
            return
        if self._writer is None:
            self.fs.create_dir(self.file.rsplit("/", 1)[0], recursive=True)
            self._sink = self.fs.open_output_stream(self.file)
            self._writer = WrittenBehind(self.new_writer(self._sink, batch.schema))
        self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def close(self):
        if self._writer is not None:
            try:
                self._writer.close()  # raises the error of a write behind, if one failed
            finally:
                self._sink.close()
