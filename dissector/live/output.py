"""Live outputs: JSON lines on a stream, and table files written in batches and rotated.

A long run never holds its table: rows leave in Arrow batches of the declared schema, at
least every few seconds, and a file is closed and the next begun once it reaches its size or
age, so each finished file is complete and readable while the run goes on.
"""

import time
from pathlib import Path

from ..tables import arrow_batches
from ..tables.output import TableWriter, json_lines, output_format


def write_json_lines(items, out, table="pairs", kept=None):
    """One JSON object per row of `table` (exchanges; ConnectionEnded events for `streams`),
    the columns as `-o x.jsonl` writes them; flushed, so a reader at the other end of a pipe
    sees each line at once. `kept`: what the table keeps (Options.for_tables). Returns the
    rows written."""
    rows = 0
    for batch in arrow_batches(items, table, **(kept or {})) if items else ():
        for line in json_lines(batch):
            out.write(line)
        rows += batch.num_rows
    if rows:
        out.flush()
    return rows


class StreamWriter:
    """Rows of one table as JSON lines on a stream (`-o -`: stdout), each batch as it comes;
    the interface of RotatingWriter."""

    def __init__(self, out, table="pairs", name="<stdout>", kept=None):
        self.out = out
        self.table = table
        self.kept = kept
        self.files = [name]
        self.rows = 0

    def add(self, items):
        self.rows += write_json_lines(items, self.out, self.table, self.kept)

    def tick(self):
        pass

    def close(self):
        pass


class RotatingWriter:
    """Rows of one table to `path`, or with rotation to `stem-0001.suffix`, `stem-0002...`.

    rotate_bytes / rotate_seconds: begin a new file past this many bytes written / this age
    (bytes written, not the size on disk, which lags behind what the writer buffers).
    Rows are written every `batch_rows` rows, and at least every `flush_seconds`. `kept`:
    what the table keeps (Options.for_tables).
    """

    def __init__(
        self,
        path,
        table="pairs",
        rotate_bytes=None,
        rotate_seconds=None,
        batch_rows=2048,
        flush_seconds=2.0,
        clock=time.monotonic,
        kept=None,
    ):
        output_format(path)  # a bad suffix fails before the capture starts
        self.path = Path(path)
        self.table = table
        self.rotate_bytes = rotate_bytes
        self.rotate_seconds = rotate_seconds
        self.batch_rows = batch_rows
        self.flush_seconds = flush_seconds
        self.clock = clock
        self.kept = kept or {}
        self.files = []  # paths begun, in order
        self.rows = 0
        self._pending = []
        self._writer = None
        self._opened = 0.0
        self._flushed = clock()

    @property
    def rotating(self):
        return bool(self.rotate_bytes or self.rotate_seconds)

    def add(self, items):
        """Exchanges (ConnectionEnded events for the `streams` table)."""
        self._pending += items
        if len(self._pending) >= self.batch_rows:
            self.flush()

    def tick(self):
        """Called on the run's clock: write what waits, rotate when due."""
        now = self.clock()
        if self._pending and now - self._flushed >= self.flush_seconds:
            self.flush()
        if self._writer is not None and self._due(now):
            self._close_file()

    def flush(self):
        items, self._pending = self._pending, []
        self._flushed = self.clock()
        if not items:
            return
        for batch in arrow_batches(items, self.table, batch_rows=self.batch_rows, **self.kept):
            if self._writer is None:
                self._open()
            self._writer.write(batch)
            self.rows += batch.num_rows
            if self._due(self.clock()):
                self._close_file()

    def _due(self, now):
        if self.rotate_seconds and now - self._opened >= self.rotate_seconds:
            return True
        return bool(self.rotate_bytes) and self._writer.bytes_written >= self.rotate_bytes

    def _open(self):
        path = self.path
        if self.rotating:
            path = path.with_name(f"{path.stem}-{len(self.files) + 1:04d}{path.suffix}")
        self._writer = TableWriter(path, self.table)
        self._opened = self.clock()
        self.files.append(path)

    def _close_file(self):
        self._writer.close()
        self._writer = None

    def close(self):
        self.flush()
        if self._writer is None and not self.files:
            self._open()  # an empty run still leaves its (empty) table
        if self._writer is not None:
            self._close_file()
