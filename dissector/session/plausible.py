"""Cheap tests of whether bytes look like the start of a Kafka request."""

from ..protocol import schema
from ..protocol.messages import request_header_version
from ..protocol.primitives import i16

# Clients may speak a few versions newer than the schema knows; their headers still parse.
VERSION_SLACK = 8


def plausible_request(data, pos=0, size=None):
    """True if the bytes at pos could be a request header: a known API key, a version not
    far beyond the newest known, and a client id that fits in the frame."""
    end = len(data) if size is None else min(len(data), pos + size)
    if end - pos < 8:
        return False
    api_key = i16(data, pos)[0]
    rng = schema.version_range(api_key)
    if rng is None:
        return False
    version = i16(data, pos + 2)[0]
    if not 0 <= version <= rng[1] + VERSION_SLACK:
        return False
    if request_header_version(api_key, version) == 0:
        return True
    if end - pos < 10:
        return False
    n = i16(data, pos + 8)[0]
    # Within the frame, not only within the bytes at hand: the first segment (or TLS record)
    # of a connection may end inside the client id.
    return -1 <= n <= (end if size is None else pos + size) - pos - 10
