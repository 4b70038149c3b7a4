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

# The order a whole table is given in: capture order, as Wireshark lists packets (exchanges
# complete out of it: a long poll ends late). Each key is the first of its columns that is
# not null; rows with none come last. Streams: by stream and direction.
CAPTURE_ORDER = {
    "pairs": (
        ("request_frame", "response_frame"),
        ("request_start", "response_start"),
        ("stream",),
    ),
    "partitions": (("request_frame", "response_frame"), ("stream",)),
    "records": (("frame",), ("stream",)),
}


def build_table(items, table="pairs", wanted=None, body_records=None):
    """A pandas DataFrame of a whole table, in capture order, from exchanges (for "streams",
    the core's ConnectionEnded events or accounting rows); wanted, body_records: see
    arrow_batches."""
    from .arrow import arrow_batches

    known(table)
    return whole_table(arrow_batches(items, table, wanted=wanted, body_records=body_records), table)


def known(table):
    """A ValueError for a table name no schema declares."""
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}; choose from {', '.join(TABLES)}")


def whole_table(batches, table):
    """A pandas DataFrame, in capture order, of all the Arrow batches of a table."""
    from .arrow import in_capture_order, to_pandas

    if table == "streams":
        return sort_table(to_pandas(batches, table), table)
    return to_pandas(in_capture_order(batches, table), table)


def sort_table(df, table):
    """A DataFrame's rows in capture order (CAPTURE_ORDER)."""
    if table == "streams":
        return df.sort_values(["stream", "direction"], kind="stable").reset_index(drop=True)
    keys = {}
    for i, columns in enumerate(CAPTURE_ORDER[table]):
        key = df[columns[0]]
        for other in columns[1:]:
            key = key.fillna(df[other])
        keys[f"_key{i}"] = key
    df = df.assign(**keys).sort_values(list(keys), kind="stable").reset_index(drop=True)
    return df.drop(columns=list(keys))


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
