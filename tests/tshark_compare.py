"""Body-level comparison of tshark's Kafka fields with the decoded bodies.

Both sides become sequences per Kafka field, in wire order: ours by walking the decoded dict
(record sets expanded into the record-format fields tshark shows), tshark's by reading each
field's value and mapping its name to the Kafka field(s) it stands for (`tshark_fields`).
Each tshark field name is then compared as one sequence with the Kafka fields it maps to.
"""

import datetime
import json
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import tshark_fields

from dissector.protocol.embedded import ASSIGNMENT, SUBSCRIPTION, decode_embedded
from dissector.protocol.sasl import parse_token

SCHEMA = (
    Path(__file__).resolve().parent.parent
    / "dissector"
    / "protocol"
    / "definitions"
    / "kafka_messages.json"
)

# Record-set fields, named as in Kafka's record format documentation.
BATCH_FIELDS = (
    ("RecordBatch.baseOffset", "base_offset"),
    ("RecordBatch.batchLength", "batch_length"),
    ("RecordBatch.partitionLeaderEpoch", "partition_leader_epoch"),
    ("RecordBatch.magic", "magic"),
    ("RecordBatch.crc", "crc"),
    ("RecordBatch.attributes.compression", "compression"),
    ("RecordBatch.attributes.timestampType", "timestamp_type"),
    ("RecordBatch.attributes.isTransactional", "transactional"),
    ("RecordBatch.attributes.isControlBatch", "control"),
    ("RecordBatch.lastOffsetDelta", "last_offset_delta"),
    ("RecordBatch.baseTimestamp", "base_timestamp"),
    ("RecordBatch.maxTimestamp", "max_timestamp"),
    ("RecordBatch.producerId", "producer_id"),
    ("RecordBatch.producerEpoch", "producer_epoch"),
    ("RecordBatch.baseSequence", "base_sequence"),
    ("RecordBatch.recordCount", "record_count"),
)
MESSAGE_FIELDS = (
    ("Message.offset", "offset"),
    ("Message.messageSize", "batch_length"),
    ("Message.crc", "crc"),
    ("Message.magic", "magic"),
    ("Message.attributes.compression", "compression"),
    ("Message.attributes.timestampType", "timestamp_type"),
    ("Message.timestamp", "timestamp"),
    ("Message.key", "key"),
    ("Message.value", "value"),
)
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TIMESTAMP_TYPES = {"create": 0, "log_append": 1, None: None}


@cache
def tagged_fields(api_key, side):
    """Kafka field name -> (tag, type) of the tagged fields of one message, at any depth."""
    apis = json.loads(SCHEMA.read_text())["apis"]
    found = {}

    def walk(fields):
        for f in fields:
            if "tag" in f:
                found[f["name"]] = (f["tag"], f["type"])
            walk(f.get("fields", ()))

    for message in apis[str(api_key)][side]:
        walk(message["fields"])
    return found


def flatten(body, api_key=None, side=None):
    """(Kafka field, value) pairs of a decoded body, in wire order; a tagged field also
    gives its tag number and (type, value) as `_tag` and `_tag_data`."""
    out = []
    tags = tagged_fields(api_key, side) if api_key is not None else {}
    _walk(body or {}, out, tags)
    return out


def _walk(node, out, tags):
    tagged = []  # tagged fields follow the others of their struct on the wire, by tag number
    for key, value in node.items():
        if key == "_trailing_bytes":
            continue
        if key == "_unknown_tags":
            for tag, data in value.items():
                tagged.append((int(tag), [("_tag", int(tag)), ("_tag_data", ("bytes", data))]))
        elif key in tags:
            tag, kind = tags[key]
            tagged.append((tag, [("_tag", tag), ("_tag_data", (kind, value))]))
        elif isinstance(value, dict) and "batches" in value:
            _record_set(value, out)
        elif isinstance(value, dict):
            out.append((key, value))  # an embedded structure (consumer protocol, SASL token)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    _walk(item, out, tags)
                else:
                    out.append((key, item))
        else:
            out.append((key, value))
    for _, pairs in sorted(tagged, key=lambda t: t[0]):
        out.extend(pairs)


def _record_set(records, out):
    for batch in records["batches"]:
        if batch["magic"] == 2:
            for name, key in BATCH_FIELDS:
                out.append((name, _plain(key, batch.get(key))))
            for record in batch.get("records") or ():
                out.append(("Record.attributes", record["attributes"]))
                out.append(("Record.timestamp", record["timestamp"]))
                out.append(("Record.offset", record["offset"]))
                out.append(("Record.key", record["key"]))
                out.append(("Record.value", record["value"]))
                for header_key, header_value in record["headers"]:
                    out.append(("Header.headerKey", header_key))
                    out.append(("Header.value", header_value))
        else:
            for name, key in MESSAGE_FIELDS:
                if key == "timestamp" and batch["magic"] == 0:
                    continue
                if name.startswith("Message.attributes."):
                    # the attribute bits as they are on the wire (magic 0 has no timestamp type)
                    bits = batch["attributes"]
                    value = bits & 7 if key == "compression" else (bits >> 3) & 1
                    out.append((name, value))
                else:
                    out.append((name, batch.get(key)))


def _plain(key, value):
    if key == "compression":
        return CODECS.get(value, value)
    if key == "timestamp_type":
        return TIMESTAMP_TYPES.get(value, value)
    return value


# tshark values


def tshark_value(kind, f):
    """The value a tshark field shows, as the decoded body would hold it."""
    return READERS[kind](f)


def _int(f):
    return int(f.show, 0)


def _string(f):
    return None if f.show == "[ Null ]" or f.showname.endswith("[ Null ]") else f.show


def _bytes(f):
    if "<NULL>" in f.showname or f.showname.endswith("[ Null ]"):
        return None
    return bytes.fromhex(f.raw)


def _unprefixed(f):
    """(bytes, prefix size) of a bytes field whose length prefix tshark shows inside the
    field: an unsigned varint (flexible versions), an int16 or an int32, whichever accounts
    for the field's size."""
    raw = bytes.fromhex(f.raw)
    count, width = _uvarint(raw)
    if count and width + count - 1 == len(raw):
        return raw[width:], width
    for width in (2, 4):
        if len(raw) >= width:
            n = int.from_bytes(raw[:width], "big", signed=True)
            if n == -1 and len(raw) == width:
                return None, width
            if width + n == len(raw):
                return raw[width:], width
    return raw, 0


def _raw_uint(f):
    return int(f.raw, 16)


def _raw_int(f):
    value = int(f.raw, 16)
    bits = 4 * len(f.raw)
    return value - (1 << bits) if value >> (bits - 1) else value


def _date_ms(f):
    """tshark's "Nov 14, 2023 22:13:20.012000000 UTC" as milliseconds since the epoch."""
    text = f.show.removesuffix(" UTC")
    whole, _, fraction = text.partition(".")
    moment = datetime.datetime.strptime(whole, "%b %d, %Y %H:%M:%S")
    seconds = int(moment.replace(tzinfo=datetime.timezone.utc).timestamp())
    return seconds * 1000 + int(fraction[:3].ljust(3, "0"))


READERS = {
    "int": _int,
    "string": _string,
    "bytes": _bytes,
    "raw_uint": _raw_uint,
    "raw_int": _raw_int,
    "date_ms": _date_ms,
    "embedded": lambda f: _unprefixed(f)[0],
    "sasl": lambda f: _unprefixed(f)[0],
    "tag_data": _bytes,
}

EMBEDDED = {"Metadata": SUBSCRIPTION, "MemberMetadata": SUBSCRIPTION}


def same(kind, kafka_field, theirs, ours, side):
    """Whether tshark's value (read with `kind`) is the decoded body's value."""
    if kind == "embedded" and isinstance(ours, dict):
        schema = EMBEDDED.get(kafka_field, ASSIGNMENT)
        return decode_embedded(schema, theirs) == ours
    if kind == "embedded":
        return theirs == ours  # bytes of a group whose protocol type is not "consumer"
    if kind == "sasl" and isinstance(ours, dict):
        return parse_token(ours["mechanism"], theirs, side == "request") == ours
    if kind == "tag_data" and isinstance(ours, tuple):
        return tag_data_matches(theirs, *ours)
    return theirs == ours


def tag_data_matches(data, kind, value):
    """Whether a tagged field's bytes hold this decoded value: fixed-width numbers and
    booleans in full, arrays by their element count, strings and bytes in full."""
    ints = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2}
    if kind == "bool":
        return data == bytes([int(value)])
    if kind in ints:
        return data == int(value).to_bytes(ints[kind], "big", signed=kind != "uint16")
    if kind.startswith("[]"):
        count, _ = _uvarint(data)
        return count - 1 == (-1 if value is None else len(value))
    if kind in ("string", "bytes"):
        count, start = _uvarint(data)
        if value is None:
            return count == 0
        raw = value.encode() if isinstance(value, str) else bytes(value)
        return data[start:] == raw and count - 1 == len(raw)
    return data == value


def _uvarint(data):
    value = shift = 0
    for i, byte in enumerate(data):
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i + 1
        shift += 7
    return value, len(data)


def ours_value(value):
    if isinstance(value, bool):
        return int(value)
    return value


@dataclass
class Comparison:
    """The outcome of comparing one PDU."""

    values: int = 0  # tshark values compared
    agreements: int = 0
    differences: list = field(default_factory=list)  # Difference
    # Kafka values of a mapped field that tshark does not show (it stopped early): field -> n
    not_shown: Counter = field(default_factory=Counter)
    unmapped: Counter = field(default_factory=Counter)  # tshark fields without a mapping


@dataclass(frozen=True)
class Difference:
    tshark_field: str
    index: int  # the n-th value of that tshark field in the PDU
    theirs: object
    ours: object
    pos: int  # where tshark read it (frame offset, or in the reassembled PDU)
    size: int


def compare(pdu, body, api_key, side):
    """Compare every body value tshark shows in `pdu` with the decoded `body`."""
    result = Comparison()
    flat = flatten(body, api_key, side)
    for name, fields in pdu.body_fields().items():
        spec = tshark_fields.lookup(api_key, side, name)
        if spec is None:
            result.unmapped[name] += len(fields)
            continue
        kafka = set(spec.kafka)
        ours = [(k, ours_value(v)) for k, v in flat if k in kafka]
        for i, f in enumerate(fields):
            result.values += 1
            theirs = tshark_value(spec.kind, f)
            if i < len(ours) and same(spec.kind, ours[i][0], theirs, ours[i][1], side):
                result.agreements += 1
            else:
                mine = ours[i][1] if i < len(ours) else _MISSING
                result.differences.append(Difference(name, i, theirs, mine, f.pos, f.size))
        if len(ours) > len(fields):
            result.not_shown[name] += len(ours) - len(fields)
    return result


class _Missing:
    def __repr__(self):
        return "<missing>"


_MISSING = _Missing()


def values_for(pdu, body, api_key, side, kafka_field):
    """tshark's values of one Kafka field in a PDU, in wire order."""
    flat = flatten(body, api_key, side)
    out = []
    for name, fields in pdu.body_fields().items():
        spec = tshark_fields.lookup(api_key, side, name)
        if spec is None or kafka_field not in spec.kafka:
            continue
        order = [k for k, _ in flat if k in spec.kafka]
        out += [
            tshark_value(spec.kind, f)
            for f, k in zip(fields, order, strict=False)
            if k == kafka_field
        ]
    return out
