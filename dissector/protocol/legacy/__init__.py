"""The Kafka 0.7 wire format, which predates API versions and correlation ids.

Built from the 0.6/0.7 wire-format notes: five request types, a 6-byte response header
(length, error code), messages with magic 0 or 1, and no response to Produce or
Multi-Produce. Pure functions over the bytes of one frame (its int32 length stripped).
"""

from .errors import ERROR_NAMES, error_name
from .messages import decode_message_set
from .requests import (
    REQUEST_TYPES,
    decode_request,
    expects_response,
    plausible_request,
    topic_partitions,
)
from .responses import decode_response

__all__ = [
    "ERROR_NAMES",
    "REQUEST_TYPES",
    "decode_message_set",
    "decode_request",
    "decode_response",
    "error_name",
    "expects_response",
    "plausible_request",
    "topic_partitions",
]
