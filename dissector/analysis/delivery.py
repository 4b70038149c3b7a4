"""Produce-to-fetch delivery: each record matched from the Produce request that wrote it to
the Fetch responses that returned it, on topic, partition and offset.

The offset of a produced record is the one the broker assigned: the Produce response's
BaseOffset plus the record's place in its batch, computed here from the `pairs` table (so
a `records` table that gives produced records the offsets the client wrote, base 0 plus
delta, gives the same answer as one that gives the broker's). The times come from the same
pairs: the Produce request's last byte, its response's, and the Fetch response's last byte.
"""

import pandas as pd

from ..tables.partitions import partition_index
from ._frames import (
    api_rows,
    body,
    frame,
    quantiles,
    scope,
    topic_names,
    topic_of,
)

COLUMNS = [
    "topic",
    "partition",
    "offset",
    "key",
    "producer",
    "consumer",
    "produced",
    "acknowledged",
    "fetched",
    "delay_ms",
    "produce_frame",
    "fetch_frame",
]
EXCHANGE = ["stream", "correlation_id"]


def _base_offsets(pairs, names, keys):
    rows = []
    for row in api_rows(pairs, "Produce").itertuples(index=False):
        for topic in body(row.response).get("Responses") or ():
            for part in topic.get("PartitionResponses") or ():
                rows.append(
                    {
                        **{k: getattr(row, k) for k in scope(pairs)},
                        "stream": row.stream,
                        "correlation_id": row.correlation_id,
                        "topic": topic_of(topic, names),
                        "partition": partition_index(part),
                        "base_offset": part.get("BaseOffset"),
                    }
                )
    return pd.DataFrame(rows, columns=[*keys, "topic", "partition", "base_offset"])


def delivery(records, pairs):
    """One row per record and consumer: every data record that a Produce request carried
    and a Fetch response returned (the first such response per consumer client id), with
    the producer and consumer client ids, when it was produced (request sent), acknowledged
    and fetched (response received), `delay_ms` from produced to fetched, and the frames."""
    if records is None or records.empty or pairs is None or pairs.empty:
        return frame([], COLUMNS)
    exchange_keys = [*scope(records), *EXCHANGE]
    data = records[records["control"].isna()] if "control" in records else records
    times = pairs[
        [*exchange_keys, "request_end", "response_end", "request_frame", "response_frame"]
    ]
    sent = data[data["api_name"].eq("Produce") & data["direction"].eq("request")]
    got = data[data["api_name"].eq("Fetch") & data["direction"].eq("response")]
    if sent.empty or got.empty:
        return frame([], COLUMNS)
    sent = sent.assign(
        delta=sent["offset"]
        - sent.groupby([*exchange_keys, "topic", "partition"])["offset"].transform("min")
    )
    base = _base_offsets(pairs, topic_names(pairs), exchange_keys)
    sent = sent.merge(base, on=[*exchange_keys, "topic", "partition"])
    sent = sent[sent["base_offset"].fillna(-1).ge(0)]
    sent = sent.assign(offset=sent["base_offset"] + sent["delta"]).merge(times, on=exchange_keys)
    sent = sent.rename(
        columns={
            "client_id": "producer",
            "request_end": "produced",
            "response_end": "acknowledged",
            "request_frame": "produce_frame",
        }
    )
    got = got.merge(times, on=exchange_keys).rename(
        columns={
            "client_id": "consumer",
            "response_end": "fetched",
            "response_frame": "fetch_frame",
        }
    )
    keys = [*scope(records), "topic", "partition", "offset"]
    got = got.sort_values("fetched", kind="stable").drop_duplicates([*keys, "consumer"])
    both = sent[[*keys, "key", "producer", "produced", "acknowledged", "produce_frame"]].merge(
        got[[*keys, "consumer", "fetched", "fetch_frame"]], on=keys
    )
    both["delay_ms"] = (both["fetched"] - both["produced"]).dt.total_seconds() * 1000
    both = both.sort_values(["produced", "topic", "partition", "offset"], kind="stable")
    return both[[*scope(records), *COLUMNS]].reset_index(drop=True)


def delivery_summary(matched, by="topic"):
    """Delay percentiles of `delivery(...)` per topic (or any of its columns)."""
    by = [by] if isinstance(by, str) else list(by)
    columns = [*by, "records", "p50_ms", "p95_ms", "p99_ms", "max_ms"]
    if matched is None or matched.empty:
        return frame([], columns)
    rows = [
        {
            **dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
            "records": len(group),
            **quantiles(group["delay_ms"]),
        }
        for key, group in matched.groupby(by)
    ]
    return frame(rows, columns)
