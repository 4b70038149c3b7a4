"""The `records` table: one row per record of every record set, in requests and responses.

It needs the record sets decoded in full (Options(records="full")), which read_pcap and the
command line ask for when this table is wanted.
"""

import pandas as pd

from ..protocol import legacy
from .pairs import order
from .partitions import partition_index, partition_items

EXCHANGE_COLUMNS = (
    "stream",
    "client",
    "broker",
    "protocol",
    "api_name",
    "api_version",
    "correlation_id",
    "client_id",
)
COLUMNS = (
    *EXCHANGE_COLUMNS,
    "frame",  # the request's frame for records sent, the response's for records received
    "direction",  # "request" (e.g. Produce) or "response" (e.g. Fetch)
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestamp_type",
    "key",
    "value",
    "headers",
    "producer_id",
    "producer_epoch",
    "sequence",
    "magic",
    "compression",
    "transactional",
    "control",
    "crc_ok",
    "batch_status",
)


def _batch_rows(base, batches):
    for batch in batches:
        seq0 = batch.get("base_sequence")
        first = batch.get("base_offset")
        common = dict(
            base,
            producer_id=batch.get("producer_id"),
            producer_epoch=batch.get("producer_epoch"),
            magic=batch.get("magic"),
            compression=batch.get("compression"),
            transactional=batch.get("transactional"),
            timestamp_type=batch.get("timestamp_type"),
            batch_status=batch.get("status"),
        )
        for record in batch.get("records") or ():
            offset = record.get("offset")
            sequence = None
            if seq0 is not None and seq0 >= 0 and offset is not None and first is not None:
                sequence = seq0 + (offset - first)
            yield dict(
                common,
                offset=offset,
                timestamp=record.get("timestamp"),
                key=record.get("key"),
                value=record.get("value"),
                headers=record.get("headers") or [],
                sequence=sequence,
                control=record.get("control") or (batch.get("control") or None),
                crc_ok=record.get("crc_ok", batch.get("crc_ok")),
            )


def _legacy_messages(messages):
    """0.7 messages, with the contents of compressed ones in place of their wrappers."""
    for m in messages or ():
        if m.get("messages"):
            yield from _legacy_messages(m["messages"])
        else:
            yield m


def exchange_records(e):
    base = {name: getattr(e, name) for name in EXCHANGE_COLUMNS}
    for direction, body, frame in (
        ("request", e.request, e.request_frame),
        ("response", e.response, e.response_frame),
    ):
        if not body:
            continue
        side = dict(base, frame=frame, direction=direction)
        if e.protocol == "0.7":
            for part in legacy.topic_partitions(body):
                for m in _legacy_messages(part.get("Messages")):
                    yield dict(
                        side,
                        topic=part.get("Topic"),
                        partition=part.get("Partition"),
                        offset=m.get("offset"),
                        value=m.get("value"),
                        magic=m.get("magic"),
                        compression=m.get("compression"),
                        crc_ok=m.get("crc_ok"),
                        headers=[],
                    )
            continue
        for topic, topic_id, item in partition_items(body):
            records = item.get("Records")
            if isinstance(records, dict) and records.get("batches"):
                name = topic or e.topic_names.get(topic_id, topic_id)
                where = dict(side, topic=name, partition=partition_index(item))
                yield from _batch_rows(where, records["batches"])


def records_frame(exchanges):
    rows = [row for e in sorted(exchanges, key=order) for row in exchange_records(e)]
    df = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    # Any int64 is a legal timestamp on the wire; those pandas cannot hold become NaT.
    df["timestamp"] = pd.to_datetime(
        df["timestamp"].astype("Int64"), unit="ms", utc=True, errors="coerce"
    )
    for name in (
        "stream",
        "api_version",
        "correlation_id",
        "frame",
        "partition",
        "offset",
        "producer_id",
        "producer_epoch",
        "sequence",
        "magic",
    ):
        df[name] = df[name].astype("Int64")
    return df
