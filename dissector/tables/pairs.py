"""The `pairs` table: one row per request, and one per response whose request was unseen."""

from operator import attrgetter

from ..session.exchange import COLUMNS, decoded
from ..session.modern import decode_later, scanned
from .bodies import body_utf8

try:  # C (body_text.pyx): a scanned body's JSON text written from its bytes
    from .body_text import write as _write_text
except ImportError:  # built without a C compiler: every body is decoded, then serialized
    _write_text = None

_PLAIN = COLUMNS[:-2]
assert COLUMNS[-2:] == ("request", "response"), "bodies are the last two columns"

_plain_values = attrgetter(*_PLAIN)  # one C call per exchange for its plain columns


def json_text(body, records=None):
    """A body as JSON text in UTF-8 bytes (Arrow's strings), or None: one the session only
    scanned is written from its bytes where body_text.pyx can, and is not kept decoded.
    `records`: the record decoder its record sets are written with, in place of the
    session's (None: the session's)."""
    if scanned(body):
        args = body[1:] if records is None else (*body[1:-1], records)
        if _write_text is not None:
            text = _write_text(*args)
            if text is not None:
                return text
        return body_utf8(decode_later(*args))
    return body_utf8(decoded(body))


def pairs_row(exchange, records=None):
    """The exchange's row, in COLUMNS order, bodies as JSON text: all a batch keeps of it.
    The bodies are read as the exchange holds them (`_request`, `_response`): decoded, or
    still bytes to decode (their record sets with `records`, see json_text)."""
    return (
        *_plain_values(exchange),
        json_text(exchange._request, records),
        json_text(exchange._response, records),
    )


def plain_row(exchange):
    """The exchange's row without its bodies (None in their columns)."""
    return (*_plain_values(exchange), None, None)
