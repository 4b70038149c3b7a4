"""Decoded bodies as JSON text, the one form pandas, parquet and Spark all hold as it is, and
back (bytes become base64; tag numbers become text keys)."""

import base64
import json


def _json_default(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} in a decoded body")


_encode = json.JSONEncoder(default=_json_default, separators=(",", ":")).encode


def body_json(body):
    """A decoded body as JSON text."""
    return None if body is None else _encode(body)


def parse_body(value):
    """A body from any table back to a dict: JSON text is parsed, dicts pass through."""
    return json.loads(value) if isinstance(value, str) else value
