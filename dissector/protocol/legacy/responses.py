"""Kafka 0.7 responses: ERROR_CODE int16, then a body that depends on the request answered.

Responses carry neither a type nor a correlation id, so the caller passes the type (and body,
when known) of the request the response answers, which is the oldest one still unanswered.
"""

import struct

from ...errors import DecodeError
from ..primitives import i16, i32
from .errors import error_name
from .messages import decode_message_set
from .requests import FETCH, MULTIFETCH, OFFSETS, REQUEST_TYPES, expects_response


def _error(buf, pos, what):
    if len(buf) - pos < 2:
        raise DecodeError(f"{what} error code runs past the end of the response", pos)
    code = i16(buf, pos)[0]
    return {"ErrorCode": code, "error_name": error_name(code)}


def _fetched(out, buf, pos, end, request):
    offset = request.get("Offset") if request else None
    messages, partial = decode_message_set(buf, pos, end, base_offset=offset, partial_ok=True)
    out["Messages"] = messages
    if partial:
        # Normal: the broker sent MAX_SIZE bytes of log, ending inside a message.
        out["PartialMessageBytes"] = partial


def _multi_fetch(out, buf, request_body):
    requested = request_body.get("TopicPartitions") if request_body else None
    parts = []
    pos = 2
    # Without the request, parts are read until the bytes run out.
    while (pos < len(buf)) if requested is None else (len(parts) < len(requested)):
        if len(buf) - pos < 4:
            want = "more" if requested is None else len(requested)
            raise DecodeError(f"response holds {len(parts)} of {want} fetch responses", pos)
        size = i32(buf, pos)[0]
        if not 2 <= size <= len(buf) - pos - 4:
            raise DecodeError(f"fetch response of {size} bytes cannot fit", pos)
        request = requested[len(parts)] if requested else None
        part = {"Topic": request["Topic"], "Partition": request["Partition"]} if request else {}
        part.update(_error(buf, pos + 4, "fetch response"))
        _fetched(part, buf, pos + 6, pos + 4 + size, request)
        parts.append(part)
        pos += 4 + size
    out["TopicPartitions"] = parts
    return pos


def _offsets(out, buf):
    if len(buf) - 2 < 4:
        raise DecodeError("offset count runs past the end of the response", 2)
    count = i32(buf, 2)[0]
    if not 0 <= count <= (len(buf) - 6) // 8:
        raise DecodeError(f"{count} offsets cannot fit in {len(buf) - 6} bytes", 2)
    out["Offsets"] = list(struct.unpack_from(f">{count}q", buf, 6))
    return 6 + 8 * count


def decode_response(request_type, data, request_body=None):
    """{"ErrorCode", "error_name", ...} of the response to a request of this type.

    Fetch adds "Messages", Multi-Fetch "TopicPartitions" (one fetch response per requested
    topic-partition, which request_body tells; without it, parts are read to the end), and
    Offsets "Offsets". Message offsets are absolute byte offsets when request_body gives the
    fetch offset, positions in the set otherwise.
    """
    if request_type not in REQUEST_TYPES:
        raise DecodeError(f"unknown 0.7 request type {request_type}", 0)
    if not expects_response(request_type):
        raise DecodeError(f"{REQUEST_TYPES[request_type]} requests get no response", 0)
    buf = data
    out = _error(buf, 0, "response")
    pos = len(buf)
    if request_type == FETCH:
        if request_body:  # what was fetched, as Multi-Fetch parts say it
            out = {"Topic": request_body.get("Topic"), "Partition": request_body.get("Partition")}
            out.update(_error(buf, 0, "response"))
        _fetched(out, buf, 2, len(buf), request_body)
    elif len(buf) == 2 and out["ErrorCode"] != 0:
        # A failed request may be answered by the header alone.
        return out
    elif request_type == MULTIFETCH:
        pos = _multi_fetch(out, buf, request_body)
    elif request_type == OFFSETS:
        pos = _offsets(out, buf)
    if pos != len(buf):
        out["_trailing_bytes"] = bytes(buf[pos:])
    return out
