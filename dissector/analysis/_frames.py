"""What every analysis shares: bodies in any form, empty results, topic names, time."""

import functools

import numpy as np
import pandas as pd

from ..tables.bodies import parse_body
from ..tables.partitions import TOPIC_KEYS

# Which exchange a row of an analysis is about: the columns that name it, in one order.
EXCHANGE = [
    "stream",
    "client",
    "client_id",
    "broker",
    "api_name",
    "api_version",
    "correlation_id",
    "request_frame",
    "response_frame",
]


def body(value):
    """A decoded body as a dict: JSON text (the tables' form) is parsed, dicts pass through,
    anything else (missing, NaN) is an empty dict."""
    try:
        value = parse_body(value)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def frame(rows, columns):
    """A DataFrame with exactly `columns`, also when there are no rows."""
    return pd.DataFrame(rows, columns=columns)


def has(table, *columns):
    return table is not None and len(table) > 0 and all(c in table for c in columns)


# What api_rows reads: which API, and the times it orders the rows by.
ORDERED = ("api_name", "request_start", "response_start")


def api_rows(pairs, *names):
    """The rows of these APIs, in capture order of their request (or response): taken from
    the table once, as a take copies every column, the bodies too."""
    if not has(pairs, "api_name"):
        return pairs.iloc[0:0] if pairs is not None else pd.DataFrame()
    picked = np.flatnonzero(pairs["api_name"].isin(names).to_numpy(dtype=bool, na_value=False))
    if "request_start" not in pairs:
        return pairs.iloc[picked]
    start = pairs["request_start"].iloc[picked]
    if "response_start" in pairs:  # an orphan response: when it came
        start = start.fillna(pairs["response_start"].iloc[picked])
    order = start.reset_index(drop=True).sort_values(kind="stable", na_position="last").index
    return pairs.iloc[picked[order]]


def may_contain(values, text):
    """Per value of a column of bodies, whether it may hold `text`: where the column is JSON
    text, whether it does (one vectorised search, no body parsed); elsewhere (dicts) True."""
    if not pd.api.types.is_string_dtype(values):
        return pd.Series(True, index=values.index)
    return values.str.contains(text, regex=False).fillna(False).astype(bool)


def only(table, *columns):
    """`table` with only those of `columns` it has, and the capture in a capture set: a loop
    over rows then makes no Python object of the columns it does not read."""
    return table[[c for c in dict.fromkeys([*scope(table), *columns]) if c in table]]


def without(table, *columns):
    """`table` without those of `columns` it has: where a check reads no bodies, its sorts,
    filters and row loops then leave them alone, which was most of their time."""
    return table.drop(columns=[c for c in columns if c in table])


def api_label(name, key):
    """An API's name for display: `Unknown(<api_key>)` for a key the schema does not know
    (a missing name, as older tables have it, or the name the core gives it)."""
    if isinstance(name, str):
        return name
    return f"Unknown({int(key)})" if pd.notna(key) else None


def named_apis(table):
    """`table` with every missing `api_name` of a known `api_key` as `Unknown(<api_key>)`,
    so that unknown APIs group, sort and show under a name rather than as NaN."""
    if not has(table, "api_name", "api_key"):
        return table
    missing = table["api_name"].isna() & table["api_key"].notna()
    if not missing.any():
        return table
    labels = [api_label(None, k) for k in table.loc[missing, "api_key"]]
    names = table["api_name"].astype(object).copy()
    names[missing] = labels
    return table.assign(api_name=names.astype(table["api_name"].dtype))


def when(row):
    """The time an exchange happened: its request, else its response."""
    start = getattr(row, "request_start", None)
    return start if pd.notna(start) else getattr(row, "response_start", pd.NaT)


def topic_names(pairs):
    """Topic id -> name, from every Metadata and CreateTopics response in the table."""
    names = {}
    for row in api_rows(pairs, "Metadata", "CreateTopics").itertuples(index=False):
        for topic in body(row.response).get("Topics") or ():
            tid, name = topic.get("TopicId"), topic.get("Name")
            if tid and name:
                names[tid] = name
    return names


def topic_of(item, names):
    """A topic's name in a body's topic entry (named, or by id)."""
    for key in TOPIC_KEYS:
        if item.get(key):
            return item[key]
    tid = item.get("TopicId")
    return names.get(tid, tid)


def quantiles(values, prefix=""):
    """p50/p95/p99/max of a numeric series (NaN when empty)."""
    values = pd.to_numeric(values, errors="coerce").dropna()
    out = {}
    for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        out[f"{prefix}{name}_ms"] = float(values.quantile(q)) if len(values) else float("nan")
    out[f"{prefix}max_ms"] = float(values.max()) if len(values) else float("nan")
    return out


def ints(table, *columns):
    """Nullable integer columns (NaN-free), as the tables have them."""
    for column in columns:
        if column in table:
            table[column] = pd.to_numeric(table[column], errors="coerce").astype("Int64")
    return table


def scope(table):
    """The columns that tell captures apart in a capture set (Spark's `capture`), else none:
    stream numbers, correlation ids and offsets only mean something within one capture."""
    return ["capture"] if table is not None and "capture" in table else []


def connections(table):
    """One key per TCP connection: the stream number, with the capture in a capture set."""
    keys = [*scope(table), "stream"]
    return pd.Series(list(zip(*(table[k] for k in keys), strict=True)), index=table.index)


def is_spark(table):
    """Whether `table` is a Spark DataFrame (classic or Spark Connect), told without importing
    pyspark."""
    return type(table).__module__.startswith("pyspark")


def spark_aware(analysis):
    """Run `analysis` in Spark when it is given a Spark DataFrame: the function of the same
    name in `on_spark`, which aggregates there and returns the same pandas frame."""

    @functools.wraps(analysis)
    def run(table, *args, **kwargs):
        if is_spark(table):
            from . import on_spark

            return getattr(on_spark, analysis.__name__)(on_spark.sql(table), *args, **kwargs)
        return analysis(table, *args, **kwargs)

    return run


def per_capture(analysis):
    """Run `analysis(table, ...)` on each capture of a capture set apart (its state, such as
    producer ids, belongs to one capture), with the `capture` column in front."""

    @functools.wraps(analysis)
    def run(table, *args, **kwargs):
        if not scope(table) or table.empty:
            return analysis(table, *args, **kwargs)
        parts = [
            analysis(part.drop(columns="capture"), *args, **kwargs).assign(capture=name)
            for name, part in table.groupby("capture", sort=False)
        ]
        out = pd.concat([p for p in parts if not p.empty] or parts[:1], ignore_index=True)
        return out[["capture", *out.columns.drop("capture")]]

    return run
