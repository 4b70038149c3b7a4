"""Bytes, records and batches over time, and compression per codec.

From the `partitions` table: what Produce requests carried and Fetch responses returned,
per topic, partition or client, data and control records apart. From the `pairs` table
(which has no per-partition volume): bytes on the wire per API.
"""

import pandas as pd

from ._frames import frame, has, ints, spark_aware

BY = {"topic": ["topic"], "partition": ["topic", "partition"], "client": ["client_id"]}
VOLUME = ["batches", "records", "control_records", "bytes", "uncompressed_bytes"]


def _data_rows(partitions):
    """Partition rows that carried record data: Produce requests and Fetch responses."""
    sent = partitions["api_name"].eq("Produce") & partitions["records_from"].eq("request")
    got = partitions["api_name"].eq("Fetch") & partitions["records_from"].eq("response")
    rows = partitions[(sent | got) & partitions["bytes"].fillna(0).gt(0)].copy()
    rows["time"] = rows["request_start"].where(rows["api_name"].eq("Produce"), rows["response_end"])
    if "control_records" not in rows:
        rows["control_records"] = 0
    return rows


@spark_aware
def throughput(table, freq="1s", by="topic"):
    """Volume per time window (`freq`, a pandas frequency) and group.

    With a `partitions` table: one row per window, API (Produce, Fetch) and group (`by`:
    "topic", "partition", "client" or None), with batches, data records (`records`),
    `control_records`, bytes on the wire, uncompressed bytes, `bytes_per_s` and
    `records_per_s`. With a `pairs` table: one row per window and API with the requests and
    the request and response bytes, and `bytes_per_s` of both. Aggregated in Spark for a
    Spark DataFrame.
    """
    seconds = pd.Timedelta(pd.tseries.frequencies.to_offset(freq)).total_seconds()
    if table is not None and "partition" in table:
        return _partitions_throughput(table, freq, seconds, BY.get(by, [by] if by else []))
    return _pairs_throughput(table, freq, seconds)


def _partitions_throughput(partitions, freq, seconds, keys):
    columns = ["window", "api_name", *keys, *VOLUME, "bytes_per_s", "records_per_s"]
    if not has(partitions, "api_name", "records_from", "bytes"):
        return frame([], columns)
    rows = _data_rows(partitions)
    if rows.empty:
        return frame([], columns)
    rows["window"] = rows["time"].dt.floor(freq)
    out = rows.groupby(["window", "api_name", *keys], dropna=False)[VOLUME].sum(min_count=1)
    out = out.reset_index()
    out["bytes_per_s"] = out["bytes"] / seconds
    out["records_per_s"] = out["records"] / seconds
    return ints(out[columns], "partition", *VOLUME)


def _pairs_throughput(pairs, freq, seconds):
    columns = ["window", "api_name", "requests", "request_bytes", "response_bytes", "bytes_per_s"]
    if not has(pairs, "api_name", "request_bytes"):
        return frame([], columns)
    rows = pairs.assign(
        window=pairs["request_start"].fillna(pairs["response_start"]).dt.floor(freq)
    )
    out = rows.groupby(["window", "api_name"]).agg(
        requests=("request_frame", "count"),
        request_bytes=("request_bytes", "sum"),
        response_bytes=("response_bytes", "sum"),
    )
    out = out.reset_index()
    out["bytes_per_s"] = (out["request_bytes"] + out["response_bytes"]) / seconds
    return out[columns]


def compression(partitions):
    """Per API (Produce, Fetch) and codec: batches, data and control records, bytes on the
    wire, uncompressed bytes and the ratio uncompressed / wire."""
    columns = ["api_name", "compression", *VOLUME, "ratio"]
    if not has(partitions, "api_name", "records_from", "bytes", "compression"):
        return frame([], columns)
    rows = _data_rows(partitions)
    if rows.empty:
        return frame([], columns)
    out = rows.groupby(["api_name", "compression"])[VOLUME].sum(min_count=1).reset_index()
    out["ratio"] = out["uncompressed_bytes"] / out["bytes"]
    return ints(out[columns], *VOLUME)
