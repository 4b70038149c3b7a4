"""Exchanges turned into tables: one declared schema per table (`schema.py`), built in
Arrow batches (`arrow.py`), read as pandas, written to files (`output.py`), summarised
(`summary.py`)."""

from .bodies import body_json, parse_body
from .partitions import PartitionRows
from .records import exchange_records
from .streams import stream_rows

TABLES = ("pairs", "partitions", "records", "streams")  # as schema.py declares them
FORMATS = (".parquet", ".csv", ".jsonl")

# Arrow and pandas are loaded when a table is built, not for a stream or a summary.
_LAZY = {
    "arrow_batches": "arrow",
    "to_pandas": "arrow",
    "parse_bodies": "arrow",
    "SCHEMAS": "schema",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# table -> a new function from one exchange (for "streams", one ConnectionEnded event or one
# accounting row) to its rows; a function per table built, as some remember what came before
# (high watermarks)
ROW_BUILDERS = {
    "partitions": PartitionRows,
    "records": lambda: lambda e: list(exchange_records(e)),
    "streams": lambda: stream_rows,
}

# The order a whole table is given in: capture order, as Wireshark lists packets.
SORT_KEYS = {
    "pairs": ["_first_frame", "_start", "stream"],
    "partitions": ["_first_frame", "stream"],
    "records": ["_first_frame", "stream"],
    "streams": ["stream", "direction"],
}


def build_table(items, table="pairs", wanted=None):
    """A pandas DataFrame of a whole table, in capture order, from exchanges (for "streams",
    the core's ConnectionEnded events or accounting rows); wanted: see arrow_batches."""
    from .arrow import arrow_batches, in_capture_order, to_pandas

    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}; choose from {', '.join(TABLES)}")
    batches = arrow_batches(items, table, wanted=wanted)
    if table == "streams":
        return sort_table(to_pandas(batches, table), table)
    return to_pandas(in_capture_order(batches, table), table)


def sort_table(df, table):
    """Rows in capture order (exchanges complete out of it: a long poll ends late)."""
    if table == "streams":
        keys = SORT_KEYS[table]
    else:
        req = "request_frame" if table != "records" else "frame"
        first = df[req].fillna(df["response_frame"]) if "response_frame" in df else df[req]
        df = df.assign(_first_frame=first)
        keys = SORT_KEYS[table]
        if table == "pairs":
            df = df.assign(_start=df["request_start"].fillna(df["response_start"]))
    df = df.sort_values(keys, kind="stable").reset_index(drop=True)
    return df.drop(columns=[k for k in ("_first_frame", "_start") if k in df])


__all__ = [
    "ROW_BUILDERS",
    "SCHEMAS",
    "TABLES",
    "arrow_batches",
    "body_json",
    "build_table",
    "parse_bodies",
    "parse_body",
    "sort_table",
    "to_pandas",
]
