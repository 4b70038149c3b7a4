"""The aggregating analyses computed in Spark, for a table given as a Spark DataFrame (from
`dissector.spark.load` or `spark.read.format("kafka_pcap")`): `latency`, `errors`,
`error_counts`, `clients` and `throughput` aggregate there and bring back only their small
result, as the same pandas DataFrame (columns, dtypes, order) their pandas versions return for
the same table as pandas. The table never has to fit in the driver.

The public functions of `dissector.analysis` come here by themselves when given a Spark
DataFrame; this module is the only one of `dissector.analysis` that imports pyspark.

Percentiles are `percentile_approx` with `ACCURACY` = 1000: the value returned for quantile q
of a group of n rows is one of its values whose rank is within `EPSILON` * n = n / 1000 of
q * n (0.1 % rank error), where pandas interpolates linearly between the two values around
q * (n - 1). Below about 1 / (2 * EPSILON) = 500 rows a group is summarised exactly, so the
two differ only in that interpolation. Counts, sums, minima and maxima are exact; means up to
the order of a floating-point sum.

Times are handled as integer nanoseconds (Spark timestamps hold microseconds; a table loaded
with `timestamps="ns"` has int64 nanoseconds, used as they are), so time windows are the
epoch-aligned windows of pandas' `dt.floor(freq)` (fixed frequencies only, as there).

A capture set is analysed as pandas analyses a table with a `capture` column: `errors` and
`clients` capture by capture, with `capture` in front (captures in name order), `latency`
adding `capture` to groupings by connection.
"""

import pandas as pd
import pyarrow as pa
from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ._frames import EXCHANGE, frame, ints

#: The accuracy of `percentile_approx`: rank error at most 1 / ACCURACY of a group's rows.
ACCURACY = 1000
EPSILON = 1.0 / ACCURACY

_LAST = 2**62  # sorts after any frame number or time: pandas' missing values come last


# -- shared --------------------------------------------------------------------------------


def sql(table):
    """A Spark SQL DataFrame of `table` (a pandas-on-Spark frame is turned into one)."""
    if not hasattr(table, "sparkSession") and hasattr(table, "to_spark"):
        return table.to_spark()
    return table


def _has(df, *columns):
    return all(c in df.columns for c in columns)


def _scope(df):
    """The capture column of a capture set, as `_frames.scope`."""
    return ["capture"] if "capture" in df.columns else []


def _ns(df, name):
    """A time column as integer nanoseconds since the epoch (null stays null)."""
    kind = df.schema[name].dataType
    if isinstance(kind, T.TimestampType):
        return F.unix_micros(F.col(name)) * F.lit(1000)
    if isinstance(kind, T.TimestampNTZType):
        return F.unix_micros(F.col(name).cast("timestamp")) * F.lit(1000)
    return F.col(name).cast("long")


def _step_ns(freq):
    """A fixed pandas frequency ("1s", "5min") in nanoseconds; as `dt.floor`, others fail."""
    step = pd.Timedelta(pd.tseries.frequencies.to_offset(freq)).as_unit("ns").value
    if step <= 0:
        raise ValueError(f"freq {freq!r}: not a positive fixed frequency")
    return step


def _floor(ns, step):
    """`dt.floor(freq)` of nanoseconds: windows aligned on the epoch."""
    return ns - F.pmod(ns, F.lit(step))


def _start_ns(df):
    """When an exchange happened: its request, else its response (`_frames.when`)."""
    return F.coalesce(_ns(df, "request_start"), _ns(df, "response_start"))


def _capture_order(df):
    """Columns that put the rows in capture order, as `tables.sort_table` does (the first frame,
    then the start, then the connection; ties by the response frame and correlation id)."""
    first = F.coalesce(F.col("request_frame"), F.col("response_frame"))
    start = F.coalesce(_start_ns(df), F.lit(_LAST))
    cols = [F.coalesce(first, F.lit(_LAST)), start, F.col("stream")]
    for tie in ("response_frame", "correlation_id"):
        if tie in df.columns:
            cols.append(F.coalesce(F.col(tie).cast("long"), F.lit(_LAST)))
    return cols


def named_apis(df):
    """`_frames.named_apis`: a missing `api_name` of a known `api_key` as `Unknown(<key>)`."""
    if not _has(df, "api_name", "api_key"):
        return df
    unknown = F.concat(F.lit("Unknown("), F.col("api_key").cast("string"), F.lit(")"))
    return df.withColumn("api_name", F.coalesce(F.col("api_name"), unknown))


def _is_error():
    return F.when(F.coalesce(F.col("error_code"), F.lit(0)) != 0, 1).otherwise(0)


_NULLABLE_INTS = {
    pa.int8(): pd.Int8Dtype(),
    pa.int16(): pd.Int16Dtype(),
    pa.int32(): pd.Int32Dtype(),
    pa.int64(): pd.Int64Dtype(),
}


def _collect(df, times=()):
    """A small Spark result as pandas: integers nullable as in the tables, `times` (integer
    nanoseconds) and Spark timestamps as datetime64[ns, UTC]."""
    data = df.toArrow()
    for i, field in enumerate(data.schema):
        kind = None
        if field.name in times or pa.types.is_timestamp(field.type):
            kind = pa.timestamp("ns", tz="UTC")
        elif pa.types.is_large_string(field.type):
            kind = pa.string()
        if kind is not None:
            data = data.set_column(i, field.name, data.column(i).cast(kind))
    return data.to_pandas(types_mapper=_NULLABLE_INTS.get)


def _sorted(out, keys):
    """Rows in the order of pandas' `groupby(keys, sort=True, dropna=False)`."""
    if keys and len(out):
        out = out.sort_values(keys, kind="stable", na_position="last")
    return out.reset_index(drop=True)


# -- latency -------------------------------------------------------------------------------


def components(pairs):
    """The answered requests with `network_ms`, `queue_ms` and `broker_ms`, as
    `latency.components`, as a Spark DataFrame (nothing is computed yet)."""
    pairs = named_apis(pairs)
    rows = pairs.where(F.col("latency_ms").isNotNull())
    given = "queue_ms" in pairs.columns and bool(
        rows.where(F.col("queue_ms").isNotNull()).limit(1).collect()
    )
    if not given:
        rows = _with_queue(pairs).where(F.col("latency_ms").isNotNull())
    server = F.col("server_ms").cast("double")
    queue = F.col("queue_ms").cast("double")
    queue = F.when(queue < 0, F.lit(0.0)).otherwise(queue)  # clip(lower=0): null stays
    queue = F.when(server < queue, server).otherwise(queue)  # min(queue, server)
    return (
        rows.withColumn("latency_ms", F.col("latency_ms").cast("double"))
        .withColumn("network_ms", F.col("latency_ms") - server)
        .withColumn("queue_ms", queue)
        .withColumn("broker_ms", server - F.col("queue_ms"))
    )


def _with_queue(pairs):
    """`queue_ms` derived as `latency._queue_ms`: per connection in request order, the first
    byte of the previous response (the latest so far) minus this request's last byte."""
    end = _ns(pairs, "request_end")
    conn = [*_scope(pairs), "stream", end.isNull()]
    order = Window.partitionBy(*conn).orderBy(end, *_capture_order(pairs))
    prev = F.lag(_ns(pairs, "response_start")).over(order)
    upto = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    rows = pairs.withColumn("_prev", prev)
    latest = F.when(F.col("_prev").isNotNull(), F.max("_prev").over(upto))  # cummax
    queue = (latest - end) / F.lit(1e9) * F.lit(1000.0)
    return rows.withColumn("queue_ms", F.coalesce(queue, F.lit(0.0))).drop("_prev")


def latency(pairs, by="api", freq=None):
    """`latency.latency` in Spark: the same columns, groups in the same order; p50/p95/p99
    and the medians from `percentile_approx` (see ACCURACY)."""
    from .latency import GROUPS, PARTS, STATS

    names = [] if by is None else [by] if isinstance(by, str) else list(by)
    keys = [col for name in names for col in GROUPS.get(name, [name])]
    if "stream" in keys:
        keys = [*_scope(pairs), *keys]
    step = _step_ns(freq) if freq else None
    group_keys = [*keys, *(["window"] if freq else [])]
    columns = [*group_keys, *STATS]
    if not _has(pairs, "latency_ms", "server_ms"):
        return frame([], columns)
    rows = components(pairs)
    if "topic" in keys:
        rows = rows.withColumn("topic", F.explode_outer("topics"))
    if freq:
        rows = rows.withColumn("window", _floor(_ns(rows, "request_start"), step))
    quantiles = F.percentile_approx("latency_ms", [0.5, 0.95, 0.99], ACCURACY)
    out = rows.groupBy(*group_keys).agg(
        F.count(F.lit(1)).alias("requests"),
        quantiles.alias("_q"),
        F.max("latency_ms").alias("max_ms"),
        F.avg("latency_ms").alias("mean_ms"),
        *(
            F.percentile_approx(f"{part}_ms", 0.5, ACCURACY).alias(f"{part}_p50_ms")
            for part in PARTS
        ),
        F.sum(_is_error()).alias("errors"),
    )
    out = out.select(
        *group_keys,
        "requests",
        *(F.col("_q")[i].alias(f"p{p}_ms") for i, p in enumerate((50, 95, 99))),
        *(c for c in STATS if c not in ("requests", "p50_ms", "p95_ms", "p99_ms")),
    )
    got = _collect(out, times=("window",))
    got = got[got["requests"] > 0]  # a global aggregate of no rows is one row of nothing
    if got.empty:
        return frame([], columns)
    got = got.astype({"requests": "int64", "errors": "int64"})
    floats = [c for c in STATS if c.endswith("_ms")]
    got[floats] = got[floats].astype("float64")
    return _sorted(got[columns], group_keys)


# -- errors --------------------------------------------------------------------------------

_CONTEXT = {  # what the walk found, as Spark columns
    "level": T.StringType(),
    "topic": T.StringType(),
    "partition": T.LongType(),
    "resource": T.StringType(),
    "member_id": T.StringType(),
    "error_code": T.LongType(),
    "error_name": T.StringType(),
    "error_message": T.StringType(),
    "_seq": T.IntegerType(),
}


def _text(value):
    return value if value is None or isinstance(value, str) else str(value)


def topic_names(pairs):
    """{capture: {topic id: name}} from every Metadata and CreateTopics response, as
    `_frames.topic_names` per capture (the latest response naming an id wins), parsed in
    Spark tasks; only the names come back."""
    scope = _scope(pairs)
    rows = pairs.where(
        F.col("api_name").isin("Metadata", "CreateTopics") & F.col("response").isNotNull()
    ).select(
        (F.col("capture") if scope else F.lit(None).cast("string")).alias("capture"),
        F.struct(F.isnull(_start_ns(pairs)), *_capture_order(pairs)).alias("_order"),
        "response",
    )
    schema = T.StructType(
        [
            T.StructField("capture", T.StringType()),
            T.StructField("_order", rows.schema["_order"].dataType),
            T.StructField("tid", T.StringType()),
            T.StructField("name", T.StringType()),
        ]
    )
    found = (
        rows.mapInArrow(_named_topics, schema)
        .groupBy("capture", "tid")
        .agg(F.max_by("name", "_order").alias("name"))
        .collect()
    )
    names = {}
    for row in found:
        names.setdefault(row["capture"], {})[row["tid"]] = row["name"]
    return names


def _named_topics(batches):
    """mapInArrow: (capture, order, response) -> one row per (topic id, name) it names."""
    from ._frames import body

    for batch in batches:
        take, tids, names = [], [], []
        for i, response in enumerate(batch.column("response").to_pylist()):
            for topic in body(response).get("Topics") or ():
                tid, name = topic.get("TopicId"), topic.get("Name")
                if tid and name:
                    take.append(i)
                    tids.append(_text(tid))
                    names.append(_text(name))
        index = pa.array(take, pa.int64())
        yield pa.RecordBatch.from_arrays(
            [
                batch.column("capture").take(index).cast(pa.string()),
                batch.column("_order").take(index),
                pa.array(tids, pa.string()),
                pa.array(names, pa.string()),
            ],
            names=["capture", "_order", "tid", "name"],
        )


def _walker(names, passed):
    """mapInArrow: pairs rows -> one row per error found in their responses and per
    incomplete exchange, with the columns `passed` through; the walk is `errors._walk`."""

    def run(batches):
        for batch in batches:
            yield _walk_batch(batch, names, passed)

    return run


def _walk_batch(batch, names, passed):
    from ..protocol.errors import error_name
    from ._frames import body
    from .errors import _NONZERO, INCOMPLETE, _walk

    captures = batch.column("capture").to_pylist()
    statuses = batch.column("status").to_pylist()
    responses = batch.column("response").to_pylist()
    take, found = [], {name: [] for name in _CONTEXT}

    def add(i, level, context=None, code=None, message=None):
        context = context or {}
        take.append(i)
        found["level"].append(level)
        found["topic"].append(_text(context.get("topic")))
        found["partition"].append(context.get("partition"))
        found["resource"].append(_text(context.get("resource")))
        found["member_id"].append(_text(context.get("member_id")))
        found["error_code"].append(code)
        found["error_name"].append(None if code is None else error_name(code))
        found["error_message"].append(_text(message))
        found["_seq"].append(len(take))

    for i, (status, response) in enumerate(zip(statuses, responses, strict=True)):
        if status in INCOMPLETE:
            add(i, "exchange")
        if isinstance(response, str) and not _NONZERO.search(response):
            continue  # as `errors.errors`: no error code but 0, nothing to walk
        errors = []
        _walk(body(response), {}, names.get(captures[i], {}), errors)
        for level, context, code, message in errors:
            add(i, level, context, code, message)
    index = pa.array(take, pa.int64())
    arrays = [batch.column(name).take(index) for name in passed]
    arrays += [pa.array(found[name], _ARROW[name]) for name in _CONTEXT]
    return pa.RecordBatch.from_arrays(arrays, names=[*passed, *_CONTEXT])


_ARROW = {
    "level": pa.string(),
    "topic": pa.string(),
    "partition": pa.int64(),
    "resource": pa.string(),
    "member_id": pa.string(),
    "error_code": pa.int64(),
    "error_name": pa.string(),
    "error_message": pa.string(),
    "_seq": pa.int32(),
}


def found_errors(pairs):
    """The rows of `errors` as a Spark DataFrame (not yet computed): `capture`, `time` in
    integer nanoseconds, the exchange, `status`, `reason`, the walk's columns, and `_order0`...
    (capture order) and `_seq` (order within an exchange)."""
    from .errors import _NONZERO, INCOMPLETE

    names = topic_names(pairs)
    pairs = named_apis(pairs)
    exchange = [c for c in EXCHANGE if c in pairs.columns]
    rows = pairs.where(
        F.col("status").isin(*INCOMPLETE) | F.col("response").rlike(_NONZERO.pattern)
    ).select(
        (F.col("capture") if _scope(pairs) else F.lit(None).cast("string")).alias("capture"),
        _start_ns(pairs).alias("time"),
        *exchange,
        "status",
        (F.col("reason") if "reason" in pairs.columns else F.lit(None).cast("string")).alias(
            "reason"
        ),
        *(c.alias(f"_order{i}") for i, c in enumerate(_capture_order(pairs))),
        "response",
    )
    passed = [c for c in rows.columns if c != "response"]
    schema = T.StructType(
        [rows.schema[c] for c in passed]
        + [T.StructField(name, kind) for name, kind in _CONTEXT.items()]
    )
    return rows.mapInArrow(_walker(names, passed), schema)


def errors(pairs):
    """`errors.errors` with the bodies walked in Spark tasks; the error rows come back, in
    capture order within each capture."""
    from .errors import COLUMNS

    scope = _scope(pairs)
    if not _has(pairs, "status"):
        return frame([], COLUMNS)
    found = found_errors(pairs)
    order = [*(c for c in found.columns if c.startswith("_order")), "_seq"]
    got = _collect(found, times=("time",))
    if got.empty:  # as `per_capture`: a capture column unless the table is empty
        empty = not scope or pairs.isEmpty()
        return frame([], COLUMNS if empty else ["capture", *COLUMNS])
    got = got.sort_values(["capture", *order], kind="stable")
    return _rebuild(got, COLUMNS, scope)


def _rebuild(got, columns, scope):
    """The frame of `errors.errors` (its `columns`, or some of them) from collected rows,
    built as it builds it: from one dict per row holding the keys it sets, capture by
    capture. Its dtypes are those of the pandas version (a column no row sets is NaN)."""
    parts = []
    for name, part in got.groupby("capture", sort=False, dropna=False):
        rows = [_error_row(row, columns) for row in part.itertuples(index=False)]
        table = ints(frame(rows, columns), "partition", "error_code")
        parts.append(table.assign(capture=name))
    if not scope:
        return parts[0].drop(columns="capture")
    out = pd.concat(parts, ignore_index=True)
    return out[["capture", *columns]]


_FOUND = ("topic", "partition", "resource", "member_id")  # set when the walk found them
_ERROR = ("error_code", "error_name", "error_message")  # set on error rows, not exchange rows


def _error_row(row, columns):
    """A row of `errors` as the pandas version builds it (the keys it sets, and only those)."""
    out = {}
    for column in columns:
        value = getattr(row, column)
        if column in _FOUND:
            if not pd.isna(value):
                out[column] = int(value) if column == "partition" else value
        elif column in _ERROR:
            if row.level != "exchange":
                if column == "error_code":
                    value = int(value)
                elif column == "error_message" and pd.isna(value):
                    value = None
                out[column] = value
        else:
            out[column] = value
    return out


def error_counts(pairs, by=("api_name", "error_name")):
    """`errors.error_counts` counted in Spark. The counts are per capture, level, status
    and `by` there; here they are summed over `by` in the frame `errors` would have."""
    from .errors import COLUMNS

    by = list(by)
    scope = _scope(pairs)
    if not _has(pairs, "status"):
        return frame([], [*by, "count"])
    keys = list(dict.fromkeys(["capture", "level", "status", *by]))
    counts = found_errors(pairs).groupBy(*keys).agg(F.count(F.lit(1)).alias("found_count"))
    got = _collect(counts, times=("time",))
    if got.empty:
        return frame([], [*by, "count"])
    columns = [c for c in COLUMNS if c in keys] + ["found_count"]
    found = _rebuild(got, columns, scope)
    if "error_name" in found:
        found = found.assign(error_name=found["error_name"].fillna(found["status"]))
    out = found.groupby(by, dropna=False)["found_count"].sum().rename("count").reset_index()
    return out.astype({"count": "int64"})


# -- clients -------------------------------------------------------------------------------


def clients(pairs):
    """`clients.clients` aggregated in Spark: one row per capture, client id and address."""
    from .clients import COLUMNS

    scope = _scope(pairs)
    if not _has(pairs, "client", "stream"):
        return frame([], COLUMNS)
    pairs = named_apis(pairs)
    order = F.struct(*_capture_order(pairs))
    software = (
        pairs.where(F.col("api_name") == "ApiVersions")
        .select(
            *scope,
            "stream",
            F.get_json_object("request", "$.ClientSoftwareName").alias("name"),
            F.get_json_object("request", "$.ClientSoftwareVersion").alias("version"),
            F.struct(
                F.isnull(_start_ns(pairs)), F.coalesce(_start_ns(pairs), F.lit(0)), order
            ).alias("_when"),
        )
        .where(F.col("name").isNotNull() & (F.col("name") != ""))
        .groupBy(*scope, "stream")  # the last announcement of a connection, as in api_rows
        .agg(F.max_by(F.struct("name", "version"), "_when").alias("software"))
    )
    host = F.when(F.instr("client", ":") > 0, F.regexp_extract("client", r"^(.*):", 1))
    host = host.otherwise(F.col("client"))  # `clients._address`: ip:port, [ip]:port -> ip
    bracketed = F.expr("substring(_host, 2, length(_host) - 2)")
    rows = (
        pairs.withColumn("_host", host)
        .withColumn(
            "address", F.when(F.col("_host").startswith("["), bracketed).otherwise(F.col("_host"))
        )
        .withColumn("_order", order)
        .withColumn("_seen", _start_ns(pairs))
        .withColumn("_last", F.coalesce(_ns(pairs, "response_end"), _ns(pairs, "request_end")))
        .join(software, [*scope, "stream"], "left")
    )
    known = F.col("api_name").isNotNull() & F.col("api_version").isNotNull()
    out = rows.groupBy(*scope, "client_id", "address").agg(
        # the software of the group's first connection (in capture order) that announced one
        F.min(F.when(F.col("software").isNotNull(), F.struct("_order", "software")))
        .getField("software")
        .alias("software"),
        F.collect_set(F.when(known, F.struct("api_name", "api_version"))).alias("versions"),
        F.countDistinct("stream").alias("connections"),
        F.count("request_frame").alias("requests"),
        F.sum(_is_error()).alias("errors"),
        F.min("_seen").alias("first_seen"),
        F.greatest(F.max("_seen"), F.max("_last")).alias("last_seen"),
    )
    got = out.toArrow().to_pylist()
    if not got:  # as `per_capture`: a capture column unless the table is empty
        empty = not scope or pairs.isEmpty()
        return frame([], COLUMNS if empty else ["capture", *COLUMNS])
    by_capture = {}
    for row in got:
        by_capture.setdefault(row.get("capture"), []).append(row)
    parts = []
    for name in sorted(by_capture, key=lambda c: (c is None, c)):
        rows = sorted(
            by_capture[name],
            key=lambda r: tuple((r[k] is None, r[k] or "") for k in ("client_id", "address")),
        )
        table = frame([_client_row(r) for r in rows], COLUMNS)
        table = table.sort_values("first_seen", kind="stable").reset_index(drop=True)
        parts.append(table.assign(capture=name))
    if not scope:
        return parts[0].drop(columns="capture")
    out = pd.concat(parts, ignore_index=True)
    return out[["capture", *COLUMNS]]


def _time(ns):
    return pd.NaT if ns is None else pd.Timestamp(ns, unit="ns", tz="UTC")


def _client_row(row):
    versions = {}
    for item in row["versions"] or ():
        versions.setdefault(item["api_name"], set()).add(int(item["api_version"]))
    software = row["software"] or {}
    return {
        "client_id": float("nan") if row["client_id"] is None else row["client_id"],
        "address": float("nan") if row["address"] is None else row["address"],
        "software_name": software.get("name"),
        "software_version": software.get("version"),
        "api_versions": {k: sorted(v) for k, v in sorted(versions.items())},
        "connections": int(row["connections"]),
        "requests": int(row["requests"]),
        "errors": int(row["errors"] or 0),
        "first_seen": _time(row["first_seen"]),
        "last_seen": _time(row["last_seen"]),
    }


# -- throughput ----------------------------------------------------------------------------


def throughput(table, freq="1s", by="topic"):
    """`throughput.throughput` aggregated in Spark."""
    from .throughput import BY

    step = _step_ns(freq)
    seconds = step / 1e9
    if "partition" in table.columns:
        return _partitions_throughput(table, step, seconds, BY.get(by, [by] if by else []))
    return _pairs_throughput(table, step, seconds)


def _partitions_throughput(partitions, step, seconds, keys):
    from .throughput import VOLUME

    columns = ["window", "api_name", *keys, *VOLUME, "bytes_per_s", "records_per_s"]
    if not _has(partitions, "api_name", "records_from", "bytes"):
        return frame([], columns)
    api = F.col("api_name")
    sent = (api == "Produce") & (F.col("records_from") == "request")
    got = (api == "Fetch") & (F.col("records_from") == "response")
    time = F.when(api == "Produce", _ns(partitions, "request_start")).otherwise(
        _ns(partitions, "response_end")
    )
    rows = partitions.where((sent | got) & (F.coalesce(F.col("bytes"), F.lit(0)) > 0))
    if "control_records" not in partitions.columns:
        rows = rows.withColumn("control_records", F.lit(0).cast("long"))
    rows = rows.withColumn("window", _floor(time, step))
    group = ["window", "api_name", *keys]
    out = rows.groupBy(*group).agg(*(F.sum(c).alias(c) for c in VOLUME))
    got = _collect(out, times=("window",))
    if got.empty:
        return frame([], columns)
    got = _sorted(got, group)
    got = ints(got, *VOLUME)
    got["bytes_per_s"] = got["bytes"] / seconds
    got["records_per_s"] = got["records"] / seconds
    return ints(got[columns], "partition", *VOLUME)


def _pairs_throughput(pairs, step, seconds):
    columns = ["window", "api_name", "requests", "request_bytes", "response_bytes", "bytes_per_s"]
    if not _has(pairs, "api_name", "request_bytes"):
        return frame([], columns)
    pairs = named_apis(pairs)
    rows = pairs.withColumn("window", _floor(_start_ns(pairs), step)).where(
        F.col("window").isNotNull() & F.col("api_name").isNotNull()  # groupby drops them
    )
    out = rows.groupBy("window", "api_name").agg(
        F.count("request_frame").alias("requests"),
        F.coalesce(F.sum("request_bytes"), F.lit(0)).alias("request_bytes"),
        F.coalesce(F.sum("response_bytes"), F.lit(0)).alias("response_bytes"),
    )
    got = _collect(out, times=("window",))
    if got.empty:
        return frame([], columns)
    got = _sorted(got, ["window", "api_name"])
    got = got.astype({c: "Int64" for c in ("requests", "request_bytes", "response_bytes")})
    got["bytes_per_s"] = (got["request_bytes"] + got["response_bytes"]) / seconds
    return got[columns]
