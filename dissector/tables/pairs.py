"""The `pairs` table: one row per request, and one per response whose request was unseen."""

from operator import attrgetter

from ..session.exchange import COLUMNS
from .bodies import body_json

_PLAIN = tuple(c for c in COLUMNS if c not in ("request", "response"))


_plain_values = attrgetter(*_PLAIN)  # one C call per exchange for its plain columns


def pairs_columns(exchanges):
    """Column name -> values, for a batch of exchanges."""
    if exchanges:
        rows = map(_plain_values, exchanges)
        cols = dict(zip(_PLAIN, map(list, zip(*rows, strict=True)), strict=True))
    else:
        cols = {name: [] for name in _PLAIN}
    cols["request"] = [body_json(e.request) for e in exchanges]
    cols["response"] = [body_json(e.response) for e in exchanges]
    return cols
