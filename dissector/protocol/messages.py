"""Decoding of request/response headers and bodies, by API key and version."""

import struct
from functools import cache, partial
from typing import NamedTuple

from dissector.tuples import new as _new  # a NamedTuple from its fields, a C call

from ..errors import DecodeError
from . import scanner, schema
from .apikeys import API_VERSIONS, CONTROLLED_SHUTDOWN, PRODUCE
from .codegen import Context
from .decoder import compile_decoder, compile_program, fill, returning_dict
from .primitives import string


@cache
def body_decoder(api_key, kind, version):
    """decode(buf, pos, ctx) -> (dict, pos) of a request or response body (its decode
    program), or None for unknown versions."""
    program = decode_program(api_key, kind, version)
    return None if program is None else returning_dict(partial(fill, program))


class ByVersion:
    """compute(api_key, version), made once and kept under one int: these are looked up for
    every request and response, where functools.cache would build and hash a tuple of the
    arguments. Compiled (messages.pxd), `get` is a C call."""

    def __init__(self, compute):
        self.compute = compute
        self.table = {}

    def get(self, api_key, version):
        k = api_key << 16 | version & 0xFFFF
        try:
            return self.table[k]
        except KeyError:
            value = self.table[k] = self.compute(api_key, version)
            return value


def _per_kind(compile_program):
    """kind -> ByVersion: what compile_program(definition, version) makes of each message
    version, or None for versions the schema does not have."""

    def of_kind(kind):
        def compute(api_key, version):
            definition = schema.message(api_key, kind, version)
            return None if definition is None else compile_program(definition, version)

        return ByVersion(compute)

    return {kind: of_kind(kind) for kind in ("request", "response")}


_DECODE_PROGRAMS = _per_kind(compile_program)
_SCAN_PROGRAMS = _per_kind(scanner.compile_program)


# Produce responses' scan programs that note the base offsets (scanner.ASSIGNED).
_ASSIGNED_PROGRAMS = _per_kind(partial(scanner.compile_program, assigned=True))["response"]


def assigned_offsets(version, buf, pos):
    """(topic name or id, partition) -> base offset: what the Produce response of `version`
    (one the schema has) at buf[pos:] gave each partition it took (no error, a base offset of
    0 or more), read by a scan, without decoding it."""
    ctx = Context()
    ctx.assigned = {}
    scanner.scan(_ASSIGNED_PROGRAMS.get(PRODUCE, version), buf, pos, ctx)
    return ctx.assigned


def decode_program(api_key, kind, version):
    """The decode program of a body (decoder.py: the dict it fills), or None."""
    return _DECODE_PROGRAMS[kind].get(api_key, version)


def body_program(api_key, kind, version):
    """The scan program of a body (scanner.py: notes only, nothing built), or None."""
    return _SCAN_PROGRAMS[kind].get(api_key, version)


def body_scanner(api_key, kind, version):
    """scan(buf, pos, ctx) -> pos of a body, or None."""
    program = body_program(api_key, kind, version)
    return None if program is None else partial(scanner.scan, program)


@cache
def _header_decoder(name, version):
    return returning_dict(compile_decoder(schema.header(name), version))


def _request_header_version(api_key, version):
    if api_key == CONTROLLED_SHUTDOWN and version == 0:
        return 0
    return 2 if schema.is_flexible(api_key, "request", version) else 1


def _response_header_version(api_key, version):
    # ApiVersions responses keep header v0 so that any client can read them.
    if api_key == API_VERSIONS:
        return 0
    return 1 if schema.is_flexible(api_key, "response", version) else 0


_REQUEST_HV = ByVersion(_request_header_version)
_RESPONSE_HV = ByVersion(_response_header_version)
request_header_version = _REQUEST_HV.get  # (api_key, version) -> header version
response_header_version = _RESPONSE_HV.get


# API keys and versions beyond the schema taken as real (newer than it) rather than as bytes
# that are no request: Kafka's keys and versions are small numbers.
PLAUSIBLE = 255
_HEADER_CONTEXT = Context()  # headers carry nothing a context notes: one serves them all


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    tags: dict | None  # unknown tagged fields of a v2 header
    end: int  # offset where the body starts


def decode_request_header(buf):
    """The request header. api_key, api_version and correlation_id sit at the same offsets
    in every header version, so a header whose version the schema cannot tell (an unknown
    API key or version, sent with another header version than guessed) still gives them,
    and its client id when one parses there."""
    if buf.__class__ is not bytes:
        buf = bytes(buf)
    size = len(buf)
    if size < 8:
        raise DecodeError(f"request of {size} bytes is shorter than a header", 0)
    p = buf  # read byte by byte: compiled (messages.pxd), through a pointer
    api_key = p[0] << 8 | p[1]
    version = p[2] << 8 | p[3]
    if api_key >= 0x8000:
        api_key -= 0x10000
    if version >= 0x8000:
        version -= 0x10000
    hv = _REQUEST_HV.get(api_key, version)
    if hv and size >= 10:
        # Nearly every header, read here: v1, or v2 with no tagged field (its count, a zero
        # byte, ends it), with the client id the schema puts after the fixed fields (a
        # nullable int16-length string in both). Anything else takes the decode program.
        corr = correlation_id(buf, 4)
        n = p[8] << 8 | p[9]
        if n >= 0x8000:
            n -= 0x10000
        end = 10 + n if n > 0 else 10
        if hv == 1 and end <= size or hv == 2 and end < size and p[end] == 0:
            client_id = p[10:end].decode("utf-8", "replace") if n >= 0 else None
            fields = (api_key, version, corr, client_id, None, end + hv - 1)
            return _new(RequestHeader, fields)  # without the Python-level __new__
    try:
        d, end = _header_decoder("RequestHeader", hv)(buf, 0, _HEADER_CONTEXT)
    except (struct.error, IndexError, DecodeError):
        if schema.message(api_key, "request", version) is not None or not (
            0 <= api_key <= PLAUSIBLE and 0 <= version <= PLAUSIBLE
        ):
            raise DecodeError("request header runs past the end of the frame", len(buf)) from None
        return _bare_header(buf, api_key, version)
    fields = (api_key, version, d["CorrelationId"], d.get("ClientId"), d.get("_unknown_tags"), end)
    return _new(RequestHeader, fields)  # without the Python-level __new__: once per request


def _bare_header(buf, api_key, version):
    """The fixed fields of a header the schema cannot tell, and a client id if one fits."""
    corr = correlation_id(buf, 4)
    try:
        client_id, end = string(buf, 8)
    except (IndexError, DecodeError):
        raise DecodeError("request header runs past the end of the frame", len(buf)) from None
    return RequestHeader(api_key, version, corr, client_id, None, end)


def unknown(api_key, version):
    """Why a message has no schema: its API key or its version is unknown."""
    name = schema.api_names().get(api_key)
    if name is None:
        return f"unknown API key {api_key}"
    low, high = schema.version_range(api_key)
    return f"unknown version: {name} v{version} (known: v{low} to v{high})"


def correlation_id(buf, pos=0):
    """The correlation id at buf[pos] (bytes, 4 of them there at least): where a response
    starts, 4 bytes into a request. Read byte by byte: compiled (messages.pxd), a C call
    reading through a pointer, once a request and once a response."""
    p = buf
    n = p[pos]  # widened before the shift: 24 bits up overflows a C int
    n = n << 24 | p[pos + 1] << 16 | p[pos + 2] << 8 | p[pos + 3]
    return n - 0x100000000 if n >= 0x80000000 else n


def decode_response_header(buf, api_key, version):
    """(correlation_id, body offset) of a response to a request of this key and version."""
    if buf.__class__ is not bytes:
        buf = bytes(buf)
    hv = _RESPONSE_HV.get(api_key, version)
    # Nearly every header, read at once: v0, or v1 with no tagged field (a zero byte).
    if len(buf) > 4 and (hv == 0 or buf[4] == 0):
        return correlation_id(buf), 4 + hv
    try:
        d, end = _header_decoder("ResponseHeader", hv)(buf, 0, _HEADER_CONTEXT)
    except (struct.error, IndexError):
        raise DecodeError("response header runs past the end of the frame", len(buf)) from None
    return d["CorrelationId"], end


def decode_body(api_key, kind, version, buf, pos, ctx):
    """Decode a body starting at pos.

    Bytes after the last field are kept under "_trailing_bytes" rather than rejected:
    brokers ignore them too, and some clients send them (librdkafka's Metadata v12).
    """
    program = _DECODE_PROGRAMS[kind].get(api_key, version)
    if program is None:
        raise DecodeError(unknown(api_key, version), pos)
    body = {}
    try:
        end = fill(program, buf, pos, ctx, body)
    except DecodeError as e:
        e.partial = body
        raise
    except (struct.error, IndexError):
        raise DecodeError(f"{kind} ends before its fields do", len(buf), body) from None
    except RecursionError:
        raise DecodeError(f"{kind} nests too deeply", pos, body) from None
    if end != len(buf):
        body["_trailing_bytes"] = bytes(buf[end:])
    return body


def scan_body(api_key, kind, version, buf, pos, ctx):
    """Walk a body as decode_body would, taking only ctx's notes; raises as it would."""
    memo = _SCAN_PROGRAMS[kind]  # typed when compiled: get() is a C call
    program = memo.get(api_key, version)
    if program is None:
        raise DecodeError(unknown(api_key, version), pos)
    try:
        scanner.scan(program, buf, pos, ctx)
    except (struct.error, IndexError):
        raise DecodeError(f"{kind} ends before its fields do", len(buf)) from None
    except RecursionError:
        raise DecodeError(f"{kind} nests too deeply", pos) from None


def decode_response(buf, api_key, version, ctx):
    """The body of a response frame answering a request of this key and version."""
    _, pos = decode_response_header(buf, api_key, version)
    return decode_body(api_key, "response", version, buf, pos, ctx)


def decodes_exactly(decode, *args):
    """Whether decode(*args) succeeds and uses every byte: how a guess is confirmed."""
    try:
        body = decode(*args)
    except DecodeError:
        return False
    return "_trailing_bytes" not in body


def decode_request(buf, ctx):
    """Header and body of a request frame."""
    header = decode_request_header(buf)
    return decode_body(header.api_key, "request", header.api_version, buf, header.end, ctx)
