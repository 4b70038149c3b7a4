"""Where tshark 4.0's Kafka dissector is wrong, by name, each with the bytes that prove it.

A class recognises the PDUs it affects and returns the frame offset of tshark's first misread
value when the PDU's own bytes prove the misreading; every disagreement at or after that
offset in the PDU is then that class's. Anything else tshark disagrees on is a new finding.
"""

import datetime
from dataclasses import dataclass

import tshark_compare
import tshark_fields

from dissector.protocol.embedded import decode_embedded

JOIN_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, PRODUCE = 11, 14, 15, 0


def _offset(pdu, f):
    """Where field `f` starts in the PDU's bytes."""
    return f.pos - pdu.fields["kafka.len"][0].pos


def _int32(raw, at):
    return int.from_bytes(raw[at : at + 4], "big", signed=True)


@dataclass(frozen=True)
class KnownError:
    name: str
    explanation: str

    def applies(self, api_key, api_version, side):
        raise NotImplementedError

    def first_misread(self, pdu, body, api_key, side):
        """Frame offset of the first value tshark misreads, when the bytes prove it."""
        raise NotImplementedError


class Int16GroupBytes(KnownError):
    """The consumer-protocol bytes of JoinGroup (v0-5), SyncGroup (v0-3) and DescribeGroups
    (v0-4) are Kafka `bytes`, with an int32 length; tshark 4.0 reads an int16 length, takes
    the length's first two bytes (00 00) as an empty value and reads everything after two
    bytes early."""

    FIELDS = ("kafka.protocol_metadata", "kafka.member_metadata", "kafka.member_assignment")
    NON_FLEXIBLE_BELOW = {JOIN_GROUP: 6, SYNC_GROUP: 4, DESCRIBE_GROUPS: 5}

    def applies(self, api_key, api_version, side):
        return api_version < self.NON_FLEXIBLE_BELOW.get(api_key, -1)

    def first_misread(self, pdu, body, api_key, side):
        flat = tshark_compare.flatten(body, api_key, side)
        proven = []
        for name in self.FIELDS:
            spec = tshark_fields.lookup(api_key, side, name)
            if spec is None:
                continue
            ours = [v for k, v in flat if k in spec.kafka]
            for i, f in enumerate(pdu.fields.get(name, ())):
                at = _offset(pdu, f)
                length = _int32(pdu.raw, at)
                if f.size != 2 or length < 0 or at + 4 + length > len(pdu.raw) or i >= len(ours):
                    continue
                data = pdu.raw[at + 4 : at + 4 + length]  # the value, read with an int32 length
                schema = tshark_compare.EMBEDDED.get(spec.kafka[0], tshark_compare.ASSIGNMENT)
                value = decode_embedded(schema, data) if isinstance(ours[i], dict) else data
                if value == ours[i]:
                    proven.append(f.pos)
        return min(proven, default=None)


class Magic0KeyOneByteLate(KnownError):
    """In a magic 0 message (Produce v0-v2), tshark 4.0 reads the attributes byte and then a
    timestamp-type byte that magic 0 does not have, so it reads the key's int32 length one
    byte late (as 00 00 and part of the key), reports the packet malformed and shows none of
    the messages after the first."""

    def applies(self, api_key, api_version, side):
        return api_key == PRODUCE and side == "request" and api_version <= 2

    def first_misread(self, pdu, body, api_key, side):
        flat = tshark_compare.flatten(body, api_key, side)
        keys = [v for k, v in flat if k == "Message.key"]
        magics = [v for k, v in flat if k == "Message.magic"]
        shown = pdu.fields.get("kafka.message_key", ())
        for f, key, magic in zip(shown, keys, magics, strict=False):  # tshark shows fewer
            at = _offset(pdu, f) - 1  # where the key's length really is
            if (
                magic == 0
                and key is not None
                and _int32(pdu.raw, at) == len(key)
                and pdu.raw[at + 4 : at + 4 + len(key)] == key
            ):
                return f.pos
        return None


KNOWN = (
    Int16GroupBytes(
        "int16-length group protocol bytes",
        "JoinGroup v0-5, SyncGroup v0-3, DescribeGroups v0-4: consumer-protocol bytes read "
        "with an int16 length instead of int32",
    ),
    Magic0KeyOneByteLate(
        "magic 0 key one byte late",
        "Produce v0-2 magic 0 messages: a timestamp-type byte read that magic 0 lacks; the "
        "key is read one byte late and the message set is cut after the first message",
    ),
)


# Values tshark reads right but displays wrong: its field bytes are compared, the display is
# counted and checked against the right value.
MISDISPLAYED = {
    "kafka.batch_first_timestamp": "batch timestamps shown in the wrong unit",
    "kafka.batch_last_timestamp": "batch timestamps shown in the wrong unit",
}


def displayed_date(ms):
    """A millisecond timestamp as tshark displays an absolute time."""
    moment = datetime.datetime.fromtimestamp(ms // 1000, datetime.timezone.utc)
    return f"{moment:%b} {moment.day:2d}, {moment:%Y %H:%M:%S}.{ms % 1000:03d}000000 UTC"


def misdisplayed(pdu):
    """(class name, field, value) of each value tshark displays other than its bytes say."""
    found = []
    for name, known in MISDISPLAYED.items():
        for f in pdu.fields.get(name, ()):
            value = tshark_compare.tshark_value("raw_int", f)
            if f.show != displayed_date(value):
                found.append((known, f, value))
    return found


def classify(pdu, body, api_key, api_version, side, differences):
    """(class name or None, first offset) for each difference: which known error explains it."""
    starts = []
    for known in KNOWN:
        if pdu.raw is not None and known.applies(api_key, api_version, side):
            start = known.first_misread(pdu, body, api_key, side)
            if start is not None:
                starts.append((start, known.name))
    starts.sort()
    result = []
    for d in differences:
        owner = None
        for start, name in starts:
            if d.pos >= start:
                owner = name
        result.append(owner)
    return result, starts
