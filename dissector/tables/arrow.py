"""Exchanges into Arrow record batches of the declared schemas, and those into pandas.

Each exchange becomes its row as it completes, and a batch of rows becomes Arrow columns: a
file, a Spark task or a live view never needs the whole table, nor a batch of exchanges.
"""

import pyarrow as pa

from ..session.exchange import COLUMNS
from .columns import TEXT, column
from .schema import HEADER, RECORD_TIME, SCHEMAS

HEADERS = pa.list_(HEADER)

try:  # C (record_columns.pyx): records read from batch bytes into columns
    from .record_columns import SETS, RecordColumns, work
except ImportError:  # built without a C compiler: the records table is built row by row
    RecordColumns = work = SETS = None

try:  # C: text rows gathered from several arrays into one, in capture order
    from .text_buffers import gather_text
except ImportError:  # built without a C compiler: Arrow's take
    gather_text = None

BATCH_ROWS = 4096  # exchanges per batch: large enough for Arrow, small enough to stream
RECORD_ROWS = 65536  # records per batch of the records table
RECORD_BYTES = 16 << 20  # bytes of keys and values per batch of the records table
BATCH_TEXT = 64 << 20  # bytes of body text per batch: a batch of large bodies is cut early
# Bytes of text one Arrow string column of a batch holds at most (its offsets are int32): a
# body whose JSON text alone passes it is left out of its row, which says so in `reason`.
MAX_TEXT = (1 << 31) - 1


def parse_bodies(pairs):
    """A pairs DataFrame with `request` and `response` parsed from JSON text into dicts."""
    from .bodies import parse_body

    return pairs.assign(
        request=pairs["request"].map(parse_body, na_action="ignore").astype(object),
        response=pairs["response"].map(parse_body, na_action="ignore").astype(object),
    )


def arrow_batches(
    items,
    table="pairs",
    batch_rows=BATCH_ROWS,
    max_text=MAX_TEXT,
    wanted=None,
    body_records=None,
    idle=None,
    with_bodies=True,
):
    """Record batches of `table` from exchanges (for "streams", ConnectionEnded events of the
    core, or accounting rows). wanted: the records and partitions tables keep the rows of the
    topics and partitions it takes (Options.wanted). body_records: the record decoder the pairs
    table's bodies write record sets with, in place of the session's (pairs.json_text).
    idle: None is yielded after every `idle` items that completed no batch (exchanges with no
    partition or record rows), so that a caller feeding several tables one stream of items
    moves the others on meanwhile (source.in_step). with_bodies=False: the pairs table's
    `request` and `response` are left null, for a reader that never looks at them (their
    JSON text is most of the table's time and memory). Every item of "pairs" is a row."""
    schema = SCHEMAS[table]
    if table == "pairs":
        yield from _pairs_batches(items, schema, batch_rows, max_text, body_records, with_bodies)
        return
    if table == "records" and RecordColumns is not None:
        yield from _records_batches(items, batch_rows, wanted, idle)
        return
    from . import ROW_BUILDERS

    rows_of = ROW_BUILDERS[table]()

    def completed():  # the batches each item completes
        rows = []
        for item in items:
            if wanted is None or table == "streams":
                rows += rows_of(item)
            else:
                rows += [r for r in rows_of(item) if wanted(r["topic"], r["partition"])]
            if len(rows) >= batch_rows:
                yield (pa.RecordBatch.from_pylist(rows, schema=schema),)
                rows = []
            else:
                yield ()
        if rows:
            yield (pa.RecordBatch.from_pylist(rows, schema=schema),)

    yield from _paced(completed(), idle)


def record_columns(batch_rows=BATCH_ROWS, wanted=None):
    """The records table's columns, filled exchange by exchange (record_columns.pyx)."""
    return RecordColumns(max(batch_rows, RECORD_ROWS), RECORD_BYTES, wanted)


def _records_batches(exchanges, batch_rows, wanted, idle):
    columns = record_columns(batch_rows, wanted)
    yield from _paced(map(columns.add, exchanges), idle)
    last = columns.finish()
    if last is not None:
        yield last


def _paced(completed, idle):
    """The batches of `completed` (those each item completed, in order); with `idle`, None
    after every `idle` items in a row that completed none (see arrow_batches)."""
    quiet = 0
    for batches in completed:
        if batches:
            yield from batches
            quiet = 0
        elif idle is not None:
            quiet += 1
            if quiet >= idle:
                yield None
                quiet = 0


def _pairs_batches(exchanges, schema, batch_rows, max_text, body_records, with_bodies=True):
    from .pairs import pairs_row, plain_row

    rows, requests, responses = [], 0, 0  # bytes of text in the batch's two body columns
    for exchange in exchanges:
        row = pairs_row(exchange, body_records) if with_bodies else plain_row(exchange)
        request, response = len(row[-2] or ""), len(row[-1] or "")
        if request > max_text or response > max_text:
            row = _left_out(row, max_text)
            request, response = len(row[-2] or ""), len(row[-1] or "")
        if rows and (requests + request > max_text or responses + response > max_text):
            yield _columns_batch(rows, schema)  # a column's int32 offsets would overflow
            rows, requests, responses = [], 0, 0
        rows.append(row)
        requests += request
        responses += response
        if len(rows) >= batch_rows or requests + responses >= BATCH_TEXT:
            yield _columns_batch(rows, schema)
            rows, requests, responses = [], 0, 0
    if rows:
        yield _columns_batch(rows, schema)


_REASON = COLUMNS.index("reason")


def _left_out(row, max_text):
    """A row without the body whose JSON text alone passes what a column holds, and its
    `reason` saying so: the row stays, the run goes on."""
    row = list(row)
    said = [row[_REASON]] if row[_REASON] else []
    for at, side in ((-2, "request"), (-1, "response")):
        if row[at] is not None and len(row[at]) > max_text:
            said.append(f"{side} body of {len(row[at])} bytes as JSON text left out: more than "
                        f"a table column holds ({max_text} bytes)")  # fmt: skip
            row[at] = None
    row[_REASON] = "; ".join(said)
    return tuple(row)


def _columns_batch(rows, schema):
    columns = zip(*rows, strict=True)
    arrays = [column(values, f.type) for values, f in zip(columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def in_capture_order(batches, table):
    """The rows of record batches of `table` (not "streams") in capture order
    (tables.CAPTURE_ORDER), as tables.sort_table puts a DataFrame's. Rows complete near
    where they were captured, so each input batch is let go once the output has taken its
    rows: the reordering holds the table and little more, not a second copy of it. An output
    batch holds at most RECORD_ROWS rows and, past one row, BATCH_TEXT bytes of text."""
    import numpy as np

    batches = [b for b in batches if b.num_rows]
    if not batches:
        return []
    schema = batches[0].schema
    keys = [_order_keys(b, table) for b in batches]
    columns = [np.concatenate(one) for one in zip(*keys, strict=True)]
    order = np.lexsort(columns[::-1])  # stable; lexsort takes its first key last
    sizes = np.array([b.num_rows for b in batches])
    starts = np.cumsum(sizes) - sizes
    owner = np.searchsorted(starts, order, side="right") - 1  # the input batch of each row
    rows = order - starts[owner]  # its row there
    last_use = np.zeros(len(batches), dtype=np.int64)
    np.maximum.at(last_use, owner, np.arange(len(order)))
    text = np.cumsum(
        np.concatenate([[0], np.concatenate([_text_bytes(b) for b in batches])[order]])
    )
    out = []
    a = 0
    while a < len(order):
        b = min(a + RECORD_ROWS, len(order))
        b = max(a + 1, min(b, np.searchsorted(text, text[a] + BATCH_TEXT, side="right") - 1))
        alive = np.unique(owner[a:b])
        out.append(_taken([batches[k] for k in alive], alive, owner[a:b], rows[a:b], schema))
        for k in alive:
            if last_use[k] < b:
                batches[k] = None
        a = b
    return out


def _text_bytes(batch):
    """The bytes of text (string and binary columns) of each row of a batch."""
    import numpy as np

    total = np.zeros(batch.num_rows, dtype=np.int64)
    for array in batch.columns:
        if array.type in TEXT:
            starts = np.frombuffer(array.buffers()[1], dtype=np.int32)
            total += np.diff(starts[array.offset : array.offset + len(array) + 1])
    return total


def _taken(inputs, alive, owner, rows, schema):
    """A batch of the rows rows[i] of the input batches[owner[i]]; `inputs` are those
    batches, numbered `alive` (sorted). Text is gathered straight into its buffers
    (text_buffers.gather_text), the other columns taken by Arrow's `take`."""
    import numpy as np
    import pyarrow.compute as pc

    part = pa.Table.from_batches(inputs)
    counts = np.array([b.num_rows for b in inputs])
    starts = np.cumsum(counts) - counts
    chunk_of = np.searchsorted(alive, owner)
    # The system allocator gives a freed input batch back to the kernel at once; Arrow's
    # default pool kept them, and the reordering took twice the table.
    by_take = [f.name for f in schema if gather_text is None or f.type not in TEXT]
    taken = pc.take(
        part.select(by_take), starts[chunk_of] + rows, memory_pool=pa.system_memory_pool()
    )
    arrays = []
    for f in schema:
        if f.name in by_take:
            arrays.append(taken.column(f.name).combine_chunks())
            continue
        validity, nulls, offsets, data = gather_text(
            [b.column(f.name) for b in inputs], chunk_of, rows
        )
        buffers = [None if validity is None else pa.py_buffer(validity)]
        buffers += [pa.py_buffer(offsets), pa.py_buffer(data)]
        arrays.append(pa.Array.from_buffers(f.type, len(rows), buffers, nulls))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _order_keys(batch, table):
    """The sort keys of a batch's rows (tables.CAPTURE_ORDER) as int64 arrays, nulls last."""
    import pyarrow.compute as pc

    from . import CAPTURE_ORDER

    keys = []
    for columns in CAPTURE_ORDER[table]:
        key = pc.coalesce(*(batch.column(c) for c in columns))
        keys.append(pc.fill_null(key.cast(pa.int64()), (1 << 63) - 1).to_numpy())
    return keys


def _pandas_types():
    import pandas as pd

    return {
        pa.int8(): pd.Int8Dtype(),
        pa.int16(): pd.Int16Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
        pa.bool_(): pd.BooleanDtype(),
        pa.float64(): pd.Float64Dtype(),
        # Keys, values and record headers stay in Arrow's buffers (pd.ArrowDtype): a
        # Python object for each would take more memory than the bytes themselves.
        pa.binary(): pd.ArrowDtype(pa.binary()),
        HEADERS: pd.ArrowDtype(HEADERS),
    }


def to_pandas(batches, table="pairs"):
    """A DataFrame of record batches (or an Arrow table): nullable integer and boolean
    columns, UTC timestamps, binary and record headers backed by Arrow (an element is bytes,
    or a list of {"key", "value"}; missing: pd.NA), other lists as Python lists."""
    import pandas as pd

    schema = SCHEMAS[table]
    data = batches if isinstance(batches, pa.Table) else pa.Table.from_batches(batches, schema)
    for f in schema:  # a file read back names a list's items as parquet does ("element")
        at = data.schema.get_field_index(f.name)
        if at >= 0 and str(data.schema.field(at).type) != str(f.type):  # == ignores names
            data = data.set_column(at, f.name, data.column(at).cast(f.type))
    df = data.to_pandas(types_mapper=_pandas_types().get)
    for f in schema:
        if f.type == RECORD_TIME and f.name in df:
            # Any int64 is a legal record timestamp; those a pandas datetime cannot hold
            # (before 1677, after 2262) become NaT here and stay exact in Arrow and files.
            ms = data.column(f.name).cast(pa.int64()).to_pandas().astype("Int64")
            df[f.name] = pd.to_datetime(ms, unit="ms", utc=True, errors="coerce")
        elif pa.types.is_float64(f.type):
            df[f.name] = df[f.name].astype("float64")  # NaN for missing, as numbers expect
        elif pa.types.is_list(f.type) and f.type != HEADERS and f.name in df:
            df[f.name] = pd.Series(data.column(f.name).to_pylist(), index=df.index, dtype=object)
    return df
