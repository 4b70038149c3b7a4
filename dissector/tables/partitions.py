"""The `partitions` table: one row per (exchange, topic, partition).

Partition-level data is found generically: any array of structs carrying a partition index
inside a struct naming a topic (by name or id), in the request and in the response. The two
sides of the same topic-partition are merged into one row.
"""

import pandas as pd

from ..protocol.apikeys import FETCH
from ..protocol.errors import error_name
from .pairs import INT_COLUMNS as PAIR_INTS
from .pairs import order

TOPIC_KEYS = ("Name", "Topic", "TopicName")
PARTITION_KEYS = ("PartitionIndex", "Partition", "Index", "PartitionId")
EXCHANGE_COLUMNS = (
    "stream",
    "client",
    "broker",
    "api_key",
    "api_name",
    "api_version",
    "correlation_id",
    "client_id",
    "request_frame",
    "response_frame",
    "latency_ms",
    "status",
)
# column -> field name in the request or response partition struct
FIELDS = {
    "fetch_offset": "FetchOffset",
    "high_watermark": "HighWatermark",
    "last_stable_offset": "LastStableOffset",
    "log_start_offset": "LogStartOffset",
    "base_offset": "BaseOffset",
    "committed_offset": "CommittedOffset",
    "offset": "Offset",
    "timestamp": "Timestamp",
    "leader_id": "LeaderId",
}
RECORD_COLUMNS = ("batches", "records", "bytes", "uncompressed_bytes", "compression")
COLUMNS = (
    *EXCHANGE_COLUMNS,
    "topic",
    "topic_id",
    "partition",
    "error_code",
    "error_name",
    *FIELDS,
    "records_from",
    *RECORD_COLUMNS,
    "lag",
)


def partition_items(body, topic=None, topic_id=None):
    """(topic, topic id, partition struct) for every partition-level struct in a body."""
    if isinstance(body, dict):
        name = next((body[k] for k in TOPIC_KEYS if isinstance(body.get(k), str)), None)
        if name is not None or "TopicId" in body:
            topic, topic_id = name or topic, body.get("TopicId", topic_id)
        for value in body.values():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                keyed = any(k in value[0] for k in PARTITION_KEYS)
                for item in value:
                    if keyed and (topic is not None or topic_id is not None):
                        yield topic, topic_id, item
                    else:
                        yield from partition_items(item, topic, topic_id)


def partition_index(item):
    return next((item[k] for k in PARTITION_KEYS if k in item), None)


def record_summary(records):
    """Batches, records, bytes, uncompressed bytes, codecs and last offset of a record set."""
    if not isinstance(records, dict):
        return None
    batches = records.get("batches")
    if batches is None:
        return {"bytes": records.get("size")}
    codecs = sorted({b.get("compression") for b in batches if b.get("compression")})
    last = None
    for b in batches:
        if b.get("magic") == 2 and b.get("last_offset_delta") is not None:
            last = b["base_offset"] + b["last_offset_delta"]
        elif b.get("records"):
            last = b["records"][-1].get("offset")
    return {
        "batches": len(batches),
        "records": sum(b.get("record_count") or len(b.get("records") or ()) for b in batches),
        "bytes": records.get("size"),
        "uncompressed_bytes": sum(
            b.get("uncompressed_size") or b.get("compressed_size") or 0 for b in batches
        ),
        "compression": ",".join(codecs) or None,
        "last_offset": last,
    }


def exchange_partitions(e):
    """The partition rows of one exchange."""
    merged = {}
    for side, body in (("request", e.request), ("response", e.response)):
        for topic, topic_id, item in partition_items(body):
            key = (topic or e.topic_names.get(topic_id, topic_id), partition_index(item))
            merged.setdefault(key, {"topic_id": topic_id, "request": None, "response": None})
            merged[key][side] = item
    rows = []
    base = {name: getattr(e, name) for name in EXCHANGE_COLUMNS}
    for (topic, partition), sides in merged.items():
        row = dict(base, topic=topic, topic_id=sides["topic_id"], partition=partition)
        req, resp = sides["request"] or {}, sides["response"] or {}
        row["error_code"] = resp.get("ErrorCode")
        for column, field in FIELDS.items():
            row[column] = resp.get(field, req.get(field))
        summary = None
        for side, struct in (("response", resp), ("request", req)):
            records = struct.get("Records", struct.get("RecordSet"))
            if records is not None:
                summary, row["records_from"] = record_summary(records), side
                break
        if summary:
            for column in RECORD_COLUMNS:
                row[column] = summary.get(column)
            hwm = row["high_watermark"]
            if e.api_key == FETCH and hwm is not None and hwm >= 0:
                last = summary.get("last_offset")
                next_offset = last + 1 if last is not None else row["fetch_offset"]
                if next_offset is not None:
                    row["lag"] = hwm - next_offset
        rows.append(row)
    return rows


def partitions_frame(exchanges):
    rows = []
    for e in sorted(exchanges, key=order):
        rows += exchange_partitions(e)
    df = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    df["error_name"] = df["error_code"].map(lambda c: None if pd.isna(c) else error_name(int(c)))
    counts = ("partition", *FIELDS, "batches", "records", "bytes", "uncompressed_bytes", "lag")
    for name in (*(c for c in PAIR_INTS if c in df), *counts):
        df[name] = pd.to_numeric(df[name], errors="coerce").astype("Int64")
    return df
