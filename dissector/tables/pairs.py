"""The `pairs` table: one row per request, and one per response whose request was unseen."""

from operator import attrgetter

from ..session.exchange import COLUMNS
from .bodies import body_utf8

_PLAIN = COLUMNS[:-2]
assert COLUMNS[-2:] == ("request", "response"), "bodies are the last two columns"

_plain_values = attrgetter(*_PLAIN)  # one C call per exchange for its plain columns


def pairs_row(exchange):
    """The exchange's row, in COLUMNS order, bodies as JSON text in UTF-8 bytes (Arrow's
    strings): all a batch keeps of it."""
    return (*_plain_values(exchange), body_utf8(exchange.request), body_utf8(exchange.response))
