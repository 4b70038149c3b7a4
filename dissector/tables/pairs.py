"""The `pairs` table: one row per request, and one per response whose request was unseen."""

import pandas as pd

from ..session.exchange import COLUMNS

TIME_COLUMNS = ("request_start", "request_end", "response_start", "response_end")
INT_COLUMNS = (
    "stream",
    "api_key",
    "api_version",
    "correlation_id",
    "request_frame",
    "response_frame",
    "request_bytes",
    "response_bytes",
    "error_code",
    "throttle_ms",
)


def order(exchange):
    start = (
        exchange.request_start if exchange.request_start is not None else exchange.response_start
    )
    return exchange.first_frame, start, exchange.stream


def pairs_frame(exchanges):
    rows = [e.row() for e in sorted(exchanges, key=order)]
    df = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    for name in TIME_COLUMNS:
        df[name] = pd.to_datetime(df[name].astype("Int64"), unit="ns", utc=True)
    for name in INT_COLUMNS:
        df[name] = df[name].astype("Int64")
    for name in ("latency_ms", "server_ms"):
        df[name] = df[name].astype("float64")
    return df
