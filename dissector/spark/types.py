"""Arrow schemas as Spark sees them.

Spark holds timestamps in microseconds: the tables' nanosecond timestamps are truncated to
the microsecond on the way in (exact for captures with microsecond resolution); latency_ms
and server_ms are computed before, from the nanoseconds. With `timestamps="ns"`, the
nanosecond columns (capture times) are int64 nanoseconds since the epoch instead, exact; the
records' `timestamp` (Kafka's milliseconds) stays a Spark timestamp, which holds it exactly.
"""

import pyarrow as pa

from ..tables.schema import SCHEMAS, with_capture

SPARK_TIME = pa.timestamp("us", tz="UTC")


TIMESTAMPS = ("us", "ns")  # Spark timestamps (default), or int64 nanoseconds


def spark_schema(schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(_for_spark(schema))


def _for_spark(schema, timestamps="us"):
    if timestamps not in TIMESTAMPS:
        raise ValueError(f"timestamps: {timestamps!r}; choose from {', '.join(TIMESTAMPS)}")
    fields = []
    for f in schema:
        kind = f.type
        if pa.types.is_timestamp(kind):
            kind = pa.int64() if timestamps == "ns" and kind.unit == "ns" else SPARK_TIME
        fields.append(pa.field(f.name, kind, nullable=True))
    return pa.schema(fields)


def table_schema(table, timestamps="us"):
    """The Arrow schema a Spark table of `table` has: `capture`, then the declared columns."""
    return _for_spark(with_capture(SCHEMAS[table]), timestamps)


def for_spark(batch, capture, schema):
    """A table batch with its capture column, timestamps as `schema` says (microseconds, or
    int64 nanoseconds)."""
    n = batch.num_rows
    arrays = [pa.array(capture if isinstance(capture, list) else [capture] * n, pa.string())]
    for f, column in zip(list(schema)[1:], batch.columns, strict=True):
        if column.type != f.type:
            column = column.cast(f.type, safe=False)
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
