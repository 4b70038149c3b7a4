"""Bytes, records and batches over time, and compression per codec.

From the `partitions` table: what Produce requests carried and Fetch responses returned,
per topic, partition or client, data and control records apart. From the `pairs` table
(which has no per-partition volume): bytes on the wire per API.
"""

import pandas as pd

from ._frames import body, frame, has, ints, named_apis, spark_aware

#: Names that are not columns of `partitions` -> the columns they stand for; any column's own
#: name (`topic`, `client` the ip:port, `client_id`, ...) groups by that column.
BY = {"partition": ["topic", "partition"]}
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

    With a `partitions` table: one row per window, API (Produce, Fetch) and group (`by`: a
    column such as "topic", "client" (ip:port) or "client_id"; "partition" for topic and
    partition; or None), with batches, data records (`records`),
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
    rows = named_apis(pairs).assign(
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


#: The codec of a `partitions` row whose record set mixes codecs: one total for them all.
MIXED = "mixed"


def compression(table):
    """Per API (Produce requests, Fetch responses) and codec: batches, data and control
    records and bytes on the wire; of these, what was measured (`measured_batches`,
    `measured_bytes`: uncompressed batches always, compressed ones when decompressed, as
    with `read_pcap(..., records="full")`), the `uncompressed_bytes` of the measured ones
    alone and `ratio` = uncompressed / measured bytes (NaN while nothing was measured).

    From a `pairs` table, batch by batch from the decoded record sets: exact per codec.
    From a `partitions` table, row by row: a record set of several codecs (`compression`
    "gzip,none") has one total for them all, counted under codec "mixed"."""
    if table is not None and "partition" not in table and "request" in table:
        rows = _batch_rows(table)
    elif has(table, "api_name", "records_from", "bytes", "compression"):
        rows = _set_rows(_data_rows(table))
    else:
        return frame([], CODECS)
    if rows.empty:
        return frame([], CODECS)
    sums = CODECS[2:-1]  # every column but the keys and the ratio
    out = rows.groupby(["api_name", "compression"])[sums].sum(min_count=1).reset_index()
    out = ints(out, *sums)
    out["uncompressed_bytes"] = out["uncompressed_bytes"].where(out["measured_batches"].gt(0))
    out["ratio"] = (out["uncompressed_bytes"] / out["measured_bytes"]).astype("Float64")
    return out[CODECS]


def _set_rows(rows):
    """Partition rows as record sets: a codec each (or "mixed"), measured when the table has
    their uncompressed size (it has none once a compressed batch was not decompressed)."""
    codecs = rows["compression"].fillna("unknown")
    measured = rows["uncompressed_bytes"].notna()
    return pd.DataFrame(
        {
            "api_name": rows["api_name"],
            "compression": codecs.where(~codecs.str.contains(",", regex=False), MIXED),
            **{c: rows[c] for c in ("batches", "records", "control_records", "bytes")},
            "measured_batches": rows["batches"].where(measured, 0),
            "measured_bytes": rows["bytes"].where(measured, 0),
            "uncompressed_bytes": rows["uncompressed_bytes"].where(measured, 0),
        }
    )


def _batch_rows(pairs):
    """One row per batch of every Produce request and Fetch response record set."""
    out = []
    for api, side in (("Produce", "request"), ("Fetch", "response")):
        for value in pairs.loc[pairs["api_name"].eq(api), side]:
            for batch in _batches(body(value)):
                out.append({"api_name": api, **_batch_volume(batch)})
    return pd.DataFrame(out, columns=["api_name", *_VOLUME_KEYS])


_VOLUME_KEYS = [
    "compression",
    "batches",
    "records",
    "control_records",
    "bytes",
    "measured_batches",
    "measured_bytes",
    "uncompressed_bytes",
]
CODECS = ["api_name", *_VOLUME_KEYS, "ratio"]


def _batches(node):
    """The batches of every record set in a decoded body."""
    if isinstance(node, list):
        for item in node:
            yield from _batches(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in ("Records", "RecordSet") and isinstance(value, dict):
                yield from value.get("batches") or ()
            else:
                yield from _batches(value)


def _batch_volume(batch):
    """A batch's volume: its size on the wire (offset and length fields included) and, where
    known, its size with the records uncompressed."""
    codec = batch.get("compression") or "unknown"
    count = batch.get("record_count")
    length = batch.get("batch_length")
    wire = None if length is None else length + 12
    raw = batch.get("uncompressed_size")
    if codec == "none":
        raw = wire
    elif raw is not None and wire is not None:
        raw = wire - (batch.get("compressed_size") or 0) + raw
    measured = raw is not None
    return {
        "compression": codec,
        "batches": 1,
        "records": 0 if batch.get("control") else count,
        "control_records": count if batch.get("control") else 0,
        "bytes": wire,
        "measured_batches": int(measured),
        "measured_bytes": wire if measured else 0,
        "uncompressed_bytes": raw if measured else 0,
    }
