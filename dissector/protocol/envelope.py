"""Envelope (KRaft forwarding): a broker hands a client's request to the controller whole,
header and body, in RequestData, and gets the controller's response back in ResponseData.

Those bytes are a request like any other (AlterUserScramCredentials with its salted
passwords, CreateDelegationToken, even SaslAuthenticate), so they are decoded with the same
decoders and redacted like any other request. Bytes that do not decode exactly are redacted
whole: nothing says what they hold.
"""

from ..errors import DecodeError
from . import messages, sasl, schema
from .apikeys import ENVELOPE
from .codegen import Context


def open_request(body, show_secrets):
    """RequestData of a decoded Envelope request, in place: the inner request decoded and
    redacted, or redacted whole when it does not decode."""
    data = body.get("RequestData")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return
    inner = inner_request(bytes(data), show_secrets)
    if inner is not None:
        body["RequestData"] = inner
    elif not show_secrets:
        body["RequestData"] = sasl.redacted(data)


def open_response(request, body, show_secrets):
    """ResponseData of a decoded Envelope response, in place, read as the answer to the
    request its Envelope request carried (decoded, or the response cannot be read)."""
    data = body.get("ResponseData")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return
    inner = request.get("RequestData") if isinstance(request, dict) else None
    opened = None
    if isinstance(inner, dict):
        opened = inner_response(bytes(data), inner["api_key"], inner["api_version"], show_secrets)
    if opened is not None:
        body["ResponseData"] = opened
    elif not show_secrets:
        body["ResponseData"] = sasl.redacted(data)


def inner_request(data, show_secrets):
    """The request inside an Envelope as a dict (header fields and redacted body), or None
    when it does not decode exactly. An Envelope inside one is not opened: Kafka never
    nests them, so such bytes are no forwarded request."""
    try:
        header = messages.decode_request_header(data)
        if header.api_key == ENVELOPE:
            return None
        key, version = header.api_key, header.api_version
        body = messages.decode_body(key, "request", version, data, header.end, Context())
    except DecodeError:
        return None
    if "_trailing_bytes" in body:
        return None
    # No handshake happens inside an Envelope: a token's mechanism is unknown, so opaque.
    sasl.redact_body(key, body, None, True, show_secrets)
    return {
        "api_key": key,
        "api_name": schema.api_names().get(key, f"Unknown({key})"),
        "api_version": version,
        "correlation_id": header.correlation_id,
        "client_id": header.client_id,
        "body": body,
    }


def inner_response(data, key, version, show_secrets):
    """The response inside an Envelope response, to a request of this key and version, as a
    dict (correlation id and redacted body), or None when it does not decode exactly."""
    try:
        corr, pos = messages.decode_response_header(data, key, version)
        body = messages.decode_body(key, "response", version, data, pos, Context())
    except DecodeError:
        return None
    if "_trailing_bytes" in body:
        return None
    sasl.redact_body(key, body, None, False, show_secrets)
    return {"correlation_id": corr, "body": body}
