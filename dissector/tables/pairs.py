"""The `pairs` table: one row per request, and one per response whose request was unseen."""

from ..session.exchange import COLUMNS
from .bodies import body_json

_PLAIN = tuple(c for c in COLUMNS if c not in ("request", "response"))


def order(exchange):
    """Capture order: by the request's frame (the response's for an orphan)."""
    start = (
        exchange.request_start if exchange.request_start is not None else exchange.response_start
    )
    return exchange.first_frame, start, exchange.stream


def pairs_columns(exchanges):
    """Column name -> values, for a batch of exchanges."""
    cols = {name: [getattr(e, name) for e in exchanges] for name in _PLAIN}
    cols["request"] = [body_json(e.request) for e in exchanges]
    cols["response"] = [body_json(e.response) for e in exchanges]
    return cols


def pairs_rows(exchange):
    return [exchange.as_dict()]
