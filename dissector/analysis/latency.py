"""Latency percentiles by any grouping and time window, split into network, queue and broker
time; the slowest exchanges.

Where the time goes, as seen at the capture point (all in milliseconds):

    latency_ms = network_ms + queue_ms + broker_ms
    network_ms = latency_ms - server_ms   carrying the request's and the response's bytes
    queue_ms                              waiting behind earlier requests on the connection
                                          (a broker answers a connection in order)
    broker_ms  = server_ms - queue_ms     the broker working on this request

`queue_ms` is the table's column when it has values, else derived here: the time from the
request's last byte to the first byte of the previous response on the connection, clipped to
[0, server_ms].
"""

import pandas as pd

from ._frames import EXCHANGE, frame, has, named_apis, scope, spark_aware

#: Names that are not columns of `pairs` -> the columns they stand for. A column's own name
#: (`client`, `client_id`, `broker`, `status`, ...) groups by that column.
GROUPS = {
    "api": ["api_name"],
    "version": ["api_name", "api_version"],
    "address": ["client"],
    "topic": ["topic"],
    "connection": ["stream", "client", "broker"],
}
STATS = [
    "requests",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "max_ms",
    "mean_ms",
    "network_p50_ms",
    "queue_p50_ms",
    "broker_p50_ms",
    "errors",
]
PARTS = ("network", "queue", "broker")
SLOWEST = [
    "request_start",
    *EXCHANGE,
    "latency_ms",
    "network_ms",
    "queue_ms",
    "broker_ms",
    "status",
    "error_name",
    "topics",
]


def group_columns(by, table=None):
    if by is None:
        return []
    names = [by] if isinstance(by, str) else list(by)
    cols = [col for name in names for col in GROUPS.get(name, [name])]
    return [*scope(table), *cols] if "stream" in cols else cols


def components(pairs):
    """The answered requests of `pairs` with `network_ms`, `queue_ms` and `broker_ms`."""
    if not has(pairs, "latency_ms", "server_ms"):
        return pd.DataFrame(columns=[*(pairs.columns if pairs is not None else []), *SLOWEST])
    pairs = named_apis(pairs)
    rows = pairs[pairs["latency_ms"].notna()].copy()
    server = rows["server_ms"].astype(float)
    rows["network_ms"] = rows["latency_ms"].astype(float) - server
    given = rows.get("queue_ms")
    if given is None or given.isna().all():
        rows["queue_ms"] = _queue_ms(rows, pairs)
    rows["queue_ms"] = rows["queue_ms"].astype(float).clip(lower=0).combine(server, min)
    rows["broker_ms"] = server - rows["queue_ms"]
    return rows


def _queue_ms(rows, pairs):
    """Per connection, in request order: previous response_start - request_end."""
    conn = [*scope(pairs), "stream"]
    ordered = pairs[pairs["request_end"].notna()].sort_values([*conn, "request_end"])
    prev = ordered.groupby(conn)["response_start"].shift()
    prev = prev.groupby([ordered[c] for c in conn]).cummax()  # responses come in order
    queue = (prev - ordered["request_end"]).dt.total_seconds() * 1000
    return queue.reindex(rows.index).fillna(0.0)


@spark_aware
def latency(pairs, by="api", freq=None):
    """Latency percentiles per group and, with `freq` (a pandas frequency such as "1s" or
    "5min"), per time window of the request's start.

    `by` names a column of `pairs` (`client` the ip:port, `client_id`, `broker`, `status`,
    ...), or one of: `api` (api_name), `version` (api_name, api_version), `address` (the
    client's ip:port), `topic` (each topic of `topics`, a request counted once per topic),
    `connection` (stream, client, broker); a list combines them.

    Columns: the group columns, `window` (with freq), then requests, p50/p95/p99/max/mean
    latency, the median network, queue and broker time, and the number of error responses.
    A Spark DataFrame is aggregated in Spark (`on_spark.latency`: percentiles approximate).
    """
    keys = group_columns(by, pairs)
    columns = [*keys, *(["window"] if freq else []), *STATS]
    rows = components(pairs)
    if rows.empty:
        return frame([], columns)
    if "topic" in keys:
        rows = rows.assign(topic=rows["topics"].map(lambda t: list(t) or [None]))
        rows = rows.explode("topic")
    if freq:
        rows = rows.assign(window=rows["request_start"].dt.floor(freq))
    group_keys = [*keys, *(["window"] if freq else [])]
    rows = rows.assign(
        _all=0, _error=(rows["error_code"].fillna(0) != 0).astype(int), **_floats(rows)
    )
    groups = rows.groupby(group_keys or ["_all"], dropna=False, sort=True)
    lat = groups["latency_ms"]
    out = pd.DataFrame(
        {
            "requests": lat.size(),
            **{f"p{round(q * 100)}_ms": lat.quantile(q) for q in (0.5, 0.95, 0.99)},
            "max_ms": lat.max(),
            "mean_ms": lat.mean(),
            **{f"{part}_p50_ms": groups[f"{part}_ms"].median() for part in PARTS},
            "errors": groups["_error"].sum(),
        }
    )
    out = out.reset_index()
    return out[columns] if group_keys else out.drop(columns="_all")[columns]


def _floats(rows):
    return {c: rows[c].astype(float) for c in ("latency_ms", *(f"{p}_ms" for p in PARTS))}


def slowest(pairs, n=10):
    """The `n` answered requests with the highest latency, slowest first."""
    rows = components(pairs)
    if rows.empty:
        return frame([], SLOWEST)
    rows = rows.sort_values("latency_ms", ascending=False, kind="stable").head(n)
    return rows.reindex(columns=SLOWEST).reset_index(drop=True)
