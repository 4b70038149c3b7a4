"""The `records` table: one row per record of every record set, in requests and responses.

It needs the record sets decoded in full (Options(records="full")), which read_pcap and the
command line ask for when this table is wanted.
"""

from ..protocol import legacy, messages
from ..protocol.apikeys import PRODUCE
from ..session.modern import scanned
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


def _batch_rows(base, batches, assigned=None):
    """Rows of the records of batches. assigned: for records sent in a Produce request, the
    base offset the broker gave them (UNKNOWN: none), replacing the client's placeholders."""
    for batch in batches:
        shift, assigned = offset_shift(assigned, *first_and_last(batch))
        yield from batch_rows(base, batch, shift)


def first_and_last(batch):
    """A decoded batch's base offset (None for magic 0/1) and last offset delta."""
    return batch.get("base_offset"), batch.get("last_offset_delta") or 0


def offset_shift(assigned, first, last_delta):
    """(what to add to the offsets of the batch whose base offset is `first`, None: they are
    unknown; the assigned offset of the next batch). assigned: see _batch_rows."""
    if assigned is UNKNOWN:
        return None, assigned
    if assigned is None or first is None:
        return 0, assigned
    return assigned - first, assigned + last_delta + 1


def batch_rows(base, batch, shift):
    """The rows of one batch's records; shift: see offset_shift."""
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
            offset=None if shift is None or offset is None else offset + shift,
            timestamp=record.get("timestamp"),
            key=_bytes(record.get("key")),
            value=_bytes(record.get("value")),
            headers=[{"key": k, "value": _bytes(v)} for k, v in record.get("headers") or ()],
            sequence=sequence,
            control=_control(record, batch),
            crc_ok=record.get("crc_ok", batch.get("crc_ok")),
        )


def _bytes(value):
    return value if value is None or isinstance(value, bytes) else bytes(value)


def _control(record, batch):
    """The marker of a control record (ABORT, COMMIT, or its type number); None for data."""
    marker = record.get("control")
    if marker is not None:
        return str(marker.get("type"))
    return "unknown" if batch.get("control") else None


def _legacy_messages(messages):
    """0.7 messages, with the contents of compressed ones in place of their wrappers."""
    for m in messages or ():
        if m.get("messages"):
            yield from _legacy_messages(m["messages"])
        else:
            yield m


def exchange_records(e):
    """The record rows of one exchange: records sent, then records received."""
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
                        value=_bytes(m.get("value")),
                        magic=m.get("magic"),
                        compression=m.get("compression"),
                        crc_ok=m.get("crc_ok"),
                        headers=[],
                    )
            continue
        produced = direction == "request" and e.api_key == PRODUCE
        assigned = assigned_offsets(e) if produced else None
        for topic, topic_id, item, _ in partition_items(body):
            records = item.get("Records")
            if isinstance(records, dict) and records.get("batches"):
                name = topic or e.topic_names.get(topic_id, topic_id)
                partition = partition_index(item)
                where = dict(side, topic=name, partition=partition)
                given = None if assigned is None else assigned.get((name, partition), UNKNOWN)
                yield from _batch_rows(where, records["batches"], given)


UNKNOWN = object()  # no offset assigned (yet): produced records keep none


def assigned_offsets(e):
    """(topic, partition) -> the base offset a Produce response assigned to what the request
    sent there (its records count on from it, batch after batch). A response the session
    only scanned is scanned for them (decoding each took 8% of the records table's time);
    a decoded one has its own layout walked. An empty topic name is no name, in both."""
    names = e.topic_names
    body = e._response
    if scanned(body):  # its version's scan worked
        _decode, _key, _kind, version, data, pos, _records = body
        found = messages.assigned_offsets(version, data, pos)
        return {(names.get(t, t) if t else None, p): base for (t, p), base in found.items()}
    body = e.response
    if body.__class__ is not dict:
        return {}
    out = {}
    for topic in body.get("Responses") or ():
        if topic.__class__ is not dict:
            continue
        name = topic.get("Name")
        if not name or name.__class__ is not str:  # v13 on: by id
            topic_id = topic.get("TopicId")
            name = names.get(topic_id, topic_id)
        for item in topic.get("PartitionResponses") or ():
            if item.__class__ is not dict:
                continue
            base = item.get("BaseOffset")
            if base is not None and base >= 0 and not item.get("ErrorCode"):
                out[(name, item.get("Index"))] = base
    return out
