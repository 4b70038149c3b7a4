"""The tables, declared once: column names, Arrow types and nullability.

Every output is built from these declarations: pandas DataFrames, parquet/csv/jsonl files,
Spark DataFrames and the live view. Timestamps are exact integer nanoseconds from the capture
(`timestamp[ns, UTC]`); record timestamps are Kafka's milliseconds. Decoded bodies
(`request`, `response`) are JSON text, with bytes as base64, the one form that pandas, parquet
and Spark all hold as it is.
"""

import pyarrow as pa

from ..session import exchange
from . import TABLES as NAMES
from . import partitions, records

TIME = pa.timestamp("ns", tz="UTC")
RECORD_TIME = pa.timestamp("ms", tz="UTC")
HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])


def _schema(*columns):
    return pa.schema([pa.field(name, kind, nullable=nullable) for name, kind, nullable in columns])


# Every column of an exchange (the `pairs` table), by name, in the order the session gives
# them (session/exchange.py); the derived tables repeat some on every row.
_EXCHANGE = {
    "stream": (pa.int64(), False),
    "client": (pa.string(), False),
    "broker": (pa.string(), False),
    "protocol": (pa.string(), False),
    "api_key": (pa.int16(), True),
    "api_name": (pa.string(), True),
    "api_version": (pa.int16(), True),
    "correlation_id": (pa.int32(), True),
    "client_id": (pa.string(), True),
    "request_frame": (pa.int64(), True),
    "response_frame": (pa.int64(), True),
    "request_start": (TIME, True),
    "request_end": (TIME, True),
    "response_start": (TIME, True),
    "response_end": (TIME, True),
    "latency_ms": (pa.float64(), True),
    "server_ms": (pa.float64(), True),
    "queue_ms": (pa.float64(), True),
    "request_bytes": (pa.int64(), True),
    "response_bytes": (pa.int64(), True),
    "error_code": (pa.int16(), True),
    "error_name": (pa.string(), True),
    "throttle_ms": (pa.int32(), True),
    "topics": (pa.list_(pa.string()), False),
    "status": (pa.string(), False),
    "reason": (pa.string(), True),
    "request": (pa.string(), True),
    "response": (pa.string(), True),
}


def _exchange(names):
    return [(name, *_EXCHANGE[name]) for name in names]


PAIRS = _schema(*_exchange(exchange.COLUMNS))

PARTITIONS = _schema(
    *_exchange(partitions.EXCHANGE_COLUMNS),
    ("topic", pa.string(), True),
    ("topic_id", pa.string(), True),
    ("partition", pa.int32(), True),
    ("error_code", pa.int16(), True),
    ("error_name", pa.string(), True),
    ("fetch_offset", pa.int64(), True),
    ("high_watermark", pa.int64(), True),
    ("last_stable_offset", pa.int64(), True),
    ("log_start_offset", pa.int64(), True),
    ("base_offset", pa.int64(), True),
    ("committed_offset", pa.int64(), True),
    ("offset", pa.int64(), True),
    ("timestamp", pa.int64(), True),
    ("leader_id", pa.int32(), True),
    ("records_from", pa.string(), True),
    ("batches", pa.int64(), True),
    ("records", pa.int64(), True),
    ("control_records", pa.int64(), True),
    ("bytes", pa.int64(), True),
    ("uncompressed_bytes", pa.int64(), True),
    ("compression", pa.string(), True),
    ("failed_batches", pa.int64(), True),
    ("batch_errors", pa.string(), True),
    ("lag", pa.int64(), True),
    ("committed_lag", pa.int64(), True),
)

RECORDS = _schema(
    *_exchange(records.EXCHANGE_COLUMNS),
    ("frame", pa.int64(), True),
    ("direction", pa.string(), False),
    ("topic", pa.string(), True),
    ("partition", pa.int32(), True),
    ("offset", pa.int64(), True),
    ("timestamp", RECORD_TIME, True),
    ("timestamp_type", pa.string(), True),
    ("key", pa.binary(), True),
    ("value", pa.binary(), True),
    ("headers", pa.list_(HEADER), False),
    ("producer_id", pa.int64(), True),
    ("producer_epoch", pa.int16(), True),
    ("sequence", pa.int64(), True),
    ("magic", pa.int8(), True),
    ("compression", pa.string(), True),
    ("transactional", pa.bool_(), True),
    ("control", pa.string(), True),
    ("crc_ok", pa.bool_(), True),
    ("batch_status", pa.string(), True),
)

# The streams table's byte, frame and segment counts, per direction (tables/streams.py says
# how they add up); bytes_decoded is derived from three others, the rest are the core's
# counters. Each is a sum over the direction's packets, so ranges of a capture add up.
STREAM_COUNTERS = (
    "bytes_seen",
    "bytes_duplicate",
    "bytes_dropped",
    "bytes_missing",
    "bytes_delivered",
    "bytes_tls",  # TLS: record headers, handshake, tags and records not decrypted
    "bytes_framed",
    "bytes_skipped",
    "bytes_abandoned",  # of bytes_skipped: a frame left unfinished when the peer ended it
    "bytes_decoded",
    "bytes_malformed",
    "bytes_unused",
    "frames",
    "malformed_frames",
    "gaps",
    "bytes_conflicting",  # buffered bytes a later overlapping copy contradicted (it won)
    "rsts_ignored",  # RSTs outside the receiver's window: the connection went on
    "syns_ignored",  # new SYNs on the open connection that its traffic went on past
)

STREAMS = _schema(
    ("stream", pa.int64(), False),
    ("direction", pa.string(), False),
    ("client", pa.string(), False),
    ("broker", pa.string(), False),
    ("kafka", pa.bool_(), False),
    ("protocol", pa.string(), True),
    ("client_side_from", pa.string(), True),
    ("end", pa.string(), True),
    ("ended_by", pa.string(), True),
    ("end_frame", pa.int64(), True),
    ("end_time", TIME, True),
    ("first_frame", pa.int64(), True),
    ("last_frame", pa.int64(), True),
    # TLS connections: the status (tls/connection.py STATUSES), what the handshake said, and
    # what stopped decryption; null for plaintext ones.
    ("tls", pa.string(), True),
    ("tls_version", pa.string(), True),
    ("tls_cipher", pa.string(), True),
    ("tls_sni", pa.string(), True),
    ("tls_alpn", pa.string(), True),
    ("tls_error", pa.string(), True),
    *((name, pa.int64(), False) for name in STREAM_COUNTERS),
)


def with_capture(schema):
    """The schema of a table whose rows name the capture file they came from."""
    return schema.insert(0, pa.field("capture", pa.string(), nullable=False))


SCHEMAS = {"pairs": PAIRS, "partitions": PARTITIONS, "records": RECORDS, "streams": STREAMS}
TABLES = tuple(SCHEMAS)
assert TABLES == NAMES, "the package names the tables before Arrow is loaded: keep them equal"
