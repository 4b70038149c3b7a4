"""Tables to files and back: parquet, csv and jsonl, written a batch at a time.

Parquet keeps every declared type (binary keys, values and header values included). Text
formats need text: timestamps become ISO 8601 with every digit the capture has
(`2026-11-21T06:25:36.603473123Z`), bytes become base64, and in csv lists become JSON text
(in jsonl they stay JSON arrays). `read_table` reads any of the three back with the types
`to_pandas` gives.
"""

import base64
import csv
import json
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from . import FORMATS
from .arrow import to_pandas
from .columns import column
from .schema import SCHEMAS, with_capture

ISO = "%Y-%m-%dT%H:%M:%SZ"  # Arrow prints the fraction the unit has after %S
# Parquet columns written as they are unless asked (compress_values): the records' keys,
# values and header values. Compressing their dictionaries (below) made the records table of
# real.pcap 4% slower to write, for a file half the size (63 MB against 124 MB).
PAYLOADS = {"records": ("key", "value", "headers.list.element.value")}
# Bodies as JSON text, in zstd: on real traffic (406 MB of it for 161,201 exchanges) a third
# faster to write than snappy, twice as fast to read, and a quarter of the size (10 MB against
# 40 MB).
BODIES = ("request", "response")
# The payloads as dictionaries all the same: on real traffic a record crosses the wire in its
# produce and again in each fetch of it, within a few row groups. 533 MB of the records'
# keys and values (285,861 records, each seen three times) became 119 MB of file instead of
# 482 MB, and writing them took 0.57 s instead of 1.0 s. A row group's dictionary may hold
# all of its payloads (arrow.RECORD_BYTES), past which parquet writes them plain.
DICTIONARY_PAGE = 64 << 20
# Payloads with no minimum and maximum in the file: no reader skips a row group by a value's
# bytes, and computing them went over every byte. Keys keep theirs (a search for one key).
NO_STATISTICS = {"records": ("value", "headers.list.element.value")}


def output_format(path):
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"{path}: output format must be one of {', '.join(FORMATS)}")
    return suffix


class TableWriter:
    """Writes record batches of one table to a file as they come; `rows` counts them.

    capture=True adds a leading `capture` column, filled from write(batch, capture=...).
    compress_values: parquet compresses the records' keys and values too (PAYLOADS).
    background: parquet is written behind (WrittenBehind).
    """

    def __init__(self, path, table="pairs", capture=False, compress_values=False, background=False):
        self.path = Path(path)
        self.format = output_format(path)
        self.schema = with_capture(SCHEMAS[table]) if capture else SCHEMAS[table]
        self.capture = capture
        self.rows = 0
        self._file = self._writer = None
        with self._named():
            if self.format == ".parquet":
                self._sink = pa.OSFile(str(self.path), "wb")  # its position: the bytes written
                self._writer = parquet_writer(self._sink, self.schema, table, compress_values)
                if background:
                    self._writer = WrittenBehind(self._writer)
            else:
                self._file = self._sink = open(self.path, "w", newline="", encoding="utf-8")  # noqa: SIM115
                if self.format == ".csv":
                    self._writer = csv.writer(self._file)
                    self._writer.writerow(self.schema.names)

    def write(self, batch, capture=None):
        if self.capture:
            names = column((str(capture),) * batch.num_rows, pa.string())
            batch = pa.RecordBatch.from_arrays([names, *batch.columns], schema=self.schema)
        self.rows += batch.num_rows
        with self._named():
            if self.format == ".parquet":
                self._writer.write_batch(batch)
            elif self.format == ".csv":
                text = as_text(batch, lists_as_json=True)
                self._writer.writerows(zip(*text.values(), strict=True))
            else:
                self._file.writelines(json_lines(batch))

    @property
    def bytes_written(self):
        """Bytes handed to the file so far: its size on disk lags behind by what buffers hold
        (parquet adds its footer at close; written behind, the batch being written may not
        count yet). A text file's tell() flushes and gives its byte position: call it once a
        batch, not once a row."""
        return self._sink.tell()

    @contextmanager
    def _named(self):
        """A failed write (a full disk, say) says which file: Arrow's errors do not."""
        try:
            yield
        except OSError as e:
            reason = os.strerror(e.errno) if e.errno else str(e)
            raise OSError(e.errno, reason, str(self.path)) from None

    def close(self):
        with self._named():
            if self.format != ".parquet":
                self._file.close()
                return
            try:
                self._writer.close()
            finally:
                self._sink.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class WrittenBehind:
    """A ParquetWriter whose batches are encoded and written on a thread of its own while the
    caller makes the next one (Arrow lets go of the GIL meanwhile): one batch behind at most,
    so a second core takes that work. An error of a write behind is raised by the next
    write_batch or by close; close closes the writer either way."""

    def __init__(self, writer):
        self._writer = writer
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="parquet-writer")
        self._behind = None

    def write_batch(self, batch):
        self._caught_up()
        self._behind = self._thread.submit(self._writer.write_batch, batch)

    def _caught_up(self):
        behind, self._behind = self._behind, None
        if behind is not None:
            behind.result()

    def close(self):
        try:
            self._caught_up()
        finally:
            self._thread.shutdown()
            self._writer.close()


def parquet_writer(sink, schema, table, compress_values=False):
    """A ParquetWriter of `table`'s rows (in `schema`) into `sink`: text that repeats and the
    records' payloads as dictionaries, snappy but for the bodies (zstd) and the records'
    payloads (none, unless `compress_values`), statistics but for NO_STATISTICS."""
    payloads = PAYLOADS.get(table, ())
    plain = () if compress_values else payloads
    unsummed = NO_STATISTICS.get(table, ())
    leaves = _leaves(schema)
    return pq.ParquetWriter(
        sink,
        schema,
        use_dictionary=_repeating_text(schema) + list(payloads),
        dictionary_pagesize_limit=DICTIONARY_PAGE if payloads else None,
        compression={leaf: _codec(leaf, plain) for leaf in leaves},
        write_statistics=[leaf for leaf in leaves if leaf not in unsummed],
    )


def _codec(leaf, plain):
    if leaf in plain:
        return "none"
    return "zstd" if leaf in BODIES else "snappy"


def json_lines(batch):
    """The rows of a batch as the lines of a .jsonl file (lists stay JSON arrays)."""
    text = as_text(batch, lists_as_json=False)
    names = list(text)
    for values in zip(*text.values(), strict=True):
        yield json.dumps(dict(zip(names, values, strict=True))) + "\n"


def _repeating_text(schema):
    """The text columns parquet stores as dictionaries (as leaf paths): text that repeats
    (addresses, API names, topics, statuses) but not the bodies, where trying a dictionary
    on text that never repeats cost a fifth of the write."""
    out = []
    for f in schema:
        if f.name in BODIES:
            continue
        if f.type == pa.string():
            out.append(f.name)
        elif pa.types.is_list(f.type) and f.type.value_type == pa.string():
            out.append(f"{f.name}.list.element")
    return out


def _leaves(schema):
    """The paths of a schema's parquet columns: a list's items and a struct's fields each
    have their own."""
    out = []
    for f in schema:
        kind = f.type
        if pa.types.is_list(kind):
            item = kind.value_type
            path = f"{f.name}.list.element"
            out += [f"{path}.{c.name}" for c in item] if pa.types.is_struct(item) else [path]
        else:
            out.append(f.name)
    return out


def _b64(value):
    return None if value is None else base64.b64encode(value).decode("ascii")


def as_text(batch, lists_as_json):
    """Column name -> Python values a text format can hold."""
    import pyarrow.compute as pc  # 25 ms to import: only text formats need it

    out = {}
    for field, array in zip(batch.schema, batch.columns, strict=True):
        kind = field.type
        if pa.types.is_timestamp(kind):
            values = pc.strftime(array, format=ISO).to_pylist()
        elif pa.types.is_binary(kind):
            values = [_b64(v) for v in array.to_pylist()]
        elif pa.types.is_list(kind):
            values = array.to_pylist()
            if pa.types.is_struct(kind.value_type):  # record headers
                values = [[dict(h, value=_b64(h["value"])) for h in v] for v in values]
            if lists_as_json:
                values = [json.dumps(v, separators=(",", ":")) for v in values]
        else:
            values = array.to_pylist()
        out[field.name] = values
    return out


def read_table(path, table="pairs"):
    """A file written by TableWriter (or `-o`) read back as a DataFrame with its types."""
    fmt = output_format(path)
    if fmt == ".parquet":
        data = pq.read_table(path)
        return to_pandas(data, table)
    if fmt == ".csv":
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            names = next(reader, [])
            rows = [dict(zip(names, r, strict=True)) for r in reader]
    else:
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    schema = SCHEMAS[table]
    if rows and "capture" in rows[0]:
        schema = with_capture(schema)
    if fmt == ".csv":  # csv has no null: an empty cell is one (an empty client id reads as null)
        rows = [{k: (None if v == "" else v) for k, v in r.items()} for r in rows]
    arrays = [pa.array([_parse(r.get(f.name), f.type) for r in rows], f.type) for f in schema]
    return to_pandas(pa.Table.from_arrays(arrays, schema=schema), table)


def _parse(value, kind):
    """One value of a text format back to what Arrow takes for its declared type."""
    if value is None:
        return None
    if pa.types.is_timestamp(kind):
        return _timestamp(value, kind.unit)
    if pa.types.is_binary(kind):
        return base64.b64decode(value)
    if pa.types.is_list(kind):
        items = json.loads(value) if isinstance(value, str) else value
        if pa.types.is_struct(kind.value_type):
            return [
                dict(h, value=None if h["value"] is None else base64.b64decode(h["value"]))
                for h in items
            ]
        return items
    if not isinstance(value, str):
        return value
    if pa.types.is_integer(kind):
        return int(value)
    if pa.types.is_floating(kind):
        return float(value)
    if pa.types.is_boolean(kind):
        return value == "True"
    return value


_UNITS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def _timestamp(text, unit):
    """ISO 8601 text (as written above) to an integer of the unit, every digit kept."""
    import pandas as pd

    return pd.Timestamp(text).value // _UNITS[unit]
