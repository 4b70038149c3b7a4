"""The `partitions` table: one row per (exchange, topic, partition).

Partition-level data is found generically: any array of structs carrying a partition index
inside a struct naming a topic (by name or id), in the request and in the response. The two
sides of the same topic-partition are merged into one row.
"""

from ..protocol.apikeys import FETCH
from ..protocol.errors import error_name
from ..protocol.records.common import OK
from ..session.exchange import decoded

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
    "request_start",
    "response_end",
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
RECORD_COLUMNS = (
    "batches",
    "records",
    "control_records",
    "bytes",
    "uncompressed_bytes",
    "compression",
    "failed_batches",
    "batch_errors",
    "codecs",
)


def partition_items(body, topic=None, topic_id=None, topic_error=None):
    """(topic, topic id, partition struct, the topic's error) for every partition-level
    struct in a body; the topic's error is that of the struct naming the topic, if any."""
    if isinstance(body, dict):
        name = None
        for k in TOPIC_KEYS:
            if isinstance(body.get(k), str):
                name = body[k]
                break
        if name is not None or "TopicId" in body:
            topic, topic_id = name or topic, body.get("TopicId", topic_id)
            topic_error = error_of(body)
        for value in body.values():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                keyed = not value[0].keys().isdisjoint(PARTITION_KEYS)
                for item in value:
                    if keyed and (topic is not None or topic_id is not None):
                        yield topic, topic_id, item, topic_error
                    else:
                        yield from partition_items(item, topic, topic_id, topic_error)


def error_of(struct):
    """The first non-zero error field of a struct (ErrorCode, PartitionErrorCode, ...), else
    0 when it has one, else None."""
    found = None
    for key, value in struct.items():
        if key.endswith("ErrorCode") and isinstance(value, int):
            if value:
                return value
            found = 0
    return found


def partition_index(item):
    for k in PARTITION_KEYS:
        if k in item:
            return item[k]
    return None


def record_summary(records):
    """Batches, data and control records, bytes, uncompressed bytes (None where a compressed
    batch was not decompressed), codecs, the batches whose status is not ok (as far as they
    were read) and their statuses, and last offset of a record set."""
    if not isinstance(records, dict):
        return None
    batches = records.get("batches")
    if batches is None:
        return {"bytes": records.get("size")}
    data = control = 0  # None once a batch's count is unknown (compressed message sets)
    # The record set as it would be uncompressed: its size, each compressed batch body
    # counted at its decompressed size (None while one was not decompressed).
    raw_total = records.get("size")
    codecs = {}  # codec -> [bytes, uncompressed bytes or None]
    named = set()  # every batch's compression
    failed, failed_batches = set(), 0  # statuses other than ok, and the batches that have one
    last = None
    for b in batches:  # one pass: a Fetch response holds thousands of them
        count = b.get("record_count")
        if count is None and data is not None:
            data = None
        elif b.get("control"):
            control += count
        elif data is not None:
            data += count
        codec = b.get("compression")
        if codec is not None:
            named.add(codec)
        if codec and codec != "none" and not codec.startswith("unknown"):
            size, raw = b.get("compressed_size") or 0, b.get("uncompressed_size")
            c = codecs.setdefault(codec, [0, 0])
            c[0] += size
            c[1] = None if raw is None or c[1] is None else c[1] + raw
            if raw_total is not None:
                raw_total = None if raw is None else raw_total - size + raw
        if b.get("magic") == 2 and b.get("last_offset_delta") is not None:
            last = b["base_offset"] + b["last_offset_delta"]
        elif b.get("records"):
            last = b["records"][-1].get("offset")
        status = b.get("status")
        if status is not None and status != OK:
            failed.add(status)
            failed_batches += 1
    return {
        "batches": len(batches),
        "failed_batches": failed_batches,
        "batch_errors": ",".join(sorted(failed)) or None,
        "records": data,
        "control_records": control,
        "bytes": records.get("size"),
        "uncompressed_bytes": raw_total,
        "compression": ",".join(sorted(named)) or None,
        "codecs": codecs,
        "last_offset": last,
    }


class PartitionRows:
    """Partition rows of exchanges in the order they complete. Remembers the newest high
    watermark of each topic-partition, for the lag of the committed offsets that follow."""

    def __init__(self):
        self.high_watermarks = {}  # (topic, partition) -> newest high watermark seen

    def __call__(self, e):
        rows = exchange_partitions(e)
        marks = self.high_watermarks
        for row in rows:
            key = (row["topic"], row["partition"])
            hwm = row["high_watermark"]
            if hwm is not None and hwm >= 0:
                marks[key] = hwm
            committed = row["committed_offset"]
            if committed is not None and committed >= 0 and key in marks:
                row["committed_lag"] = marks[key] - committed
        return rows


def exchange_partitions(e):
    """The partition rows of one exchange. Its bodies are decoded here and let go, never kept
    on the exchange: with records in full, a table's worth of them would stay in memory."""
    merged = {}
    for side, body in (("request", decoded(e._request)), ("response", decoded(e._response))):
        for topic, topic_id, item, topic_error in partition_items(body):
            key = (topic or e.topic_names.get(topic_id, topic_id), partition_index(item))
            merged.setdefault(key, {"topic_id": topic_id, "request": None, "response": None})
            merged[key][side] = item
            if side == "response":
                merged[key]["topic_error"] = topic_error
    rows = []
    base = {name: getattr(e, name) for name in EXCHANGE_COLUMNS}
    for (topic, partition), sides in merged.items():
        row = dict(base, topic=topic, topic_id=sides["topic_id"], partition=partition)
        req, resp = sides["request"] or {}, sides["response"] or {}
        code = error_of(resp)
        if not code and sides.get("topic_error"):
            code = sides["topic_error"]  # the whole topic failed (e.g. unknown topic)
        row["error_code"] = code
        row["error_name"] = None if code is None else error_name(code)
        for column, field in FIELDS.items():
            row[column] = resp[field] if field in resp else req.get(field)
        summary = None
        for side, struct in (("response", resp), ("request", req)):
            records = struct["Records"] if "Records" in struct else struct.get("RecordSet")
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
