"""Protocols carried as opaque bytes inside Kafka messages: the consumer group protocol.

JoinGroup carries each member's subscription and SyncGroup each member's assignment as bytes
whose layout depends on the group's protocol type. For type "consumer" they follow the
ConsumerProtocolSubscription / ConsumerProtocolAssignment schemas (an int16 version, then
the fields at that version), decoded here with the same decode programs as messages.
"""

import struct
from functools import cache

from ..errors import DecodeError
from . import schema
from .apikeys import JOIN_GROUP, SYNC_GROUP
from .codegen import Context
from .decoder import compile_decoder, returning_dict
from .primitives import i16

SUBSCRIPTION = "ConsumerProtocolSubscription"
ASSIGNMENT = "ConsumerProtocolAssignment"


@cache
def _decoder(name, version):
    return returning_dict(compile_decoder(schema.data_schema(name), version))


def decode_embedded(name, raw, strict=False):
    """The decoded form of consumer-protocol bytes, or None when they do not decode.

    Versions newer than the schema knows are read with the newest known layout: the format
    only ever appends fields. strict: no bytes may be left over (used to guess the type).
    """
    if raw is None or len(raw) < 2:
        return None
    version = i16(raw, 0)[0]
    if version < 0:
        return None
    newest = schema.data_schema(name)["validVersions"][1]
    try:
        body, end = _decoder(name, min(version, newest))(raw, 2, Context())
    except (DecodeError, struct.error, IndexError):
        return None
    if end != len(raw):
        if strict or version <= newest:
            return None
        body["_trailing_bytes"] = bytes(raw[end:])
    return {"Version": version, **body}


def _decode_field(items, field, name, strict):
    for item in items or ():
        decoded = decode_embedded(name, item.get(field), strict)
        if decoded is not None:
            item[field] = decoded


def decode_group_protocol(api_key, request, response, protocol_type):
    """Replace consumer-protocol bytes in JoinGroup/SyncGroup bodies by their decoded form.

    protocol_type: the group's protocol type when known ("consumer" decodes; anything else
    leaves the bytes), None to decode only bytes that fit the layout exactly.
    """
    if protocol_type not in ("consumer", None):
        return
    strict = protocol_type is None
    if api_key == JOIN_GROUP:
        if request:
            _decode_field(request.get("Protocols"), "Metadata", SUBSCRIPTION, strict)
        if response:
            _decode_field(response.get("Members"), "Metadata", SUBSCRIPTION, strict)
    elif api_key == SYNC_GROUP:
        if request:
            _decode_field(request.get("Assignments"), "Assignment", ASSIGNMENT, strict)
        if response:
            _decode_field([response], "Assignment", ASSIGNMENT, strict)
