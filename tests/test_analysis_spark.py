"""The aggregating analyses on Spark DataFrames: computed in Spark, the same pandas frames as
on `read_pcap`'s tables of the same captures. Counts, sums, minima and maxima exactly; the
percentiles of `latency` within the rank error of `on_spark.ACCURACY` (checked against the
exact quantiles of each group's own values), on the sample captures and on a synthetic
table large enough that Spark summarises approximately."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

from spark_support import local_spark  # noqa: E402

import dissector  # noqa: E402
from dissector import analysis as ka  # noqa: E402
from dissector.analysis.latency import group_columns  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("group-rebalance", "transactions", "compression", "confluent-kafka")
CAPTURES = [str(ROOT / "captures" / f"{name}.pcap") for name in NAMES]
# (by, freq) of latency: named groupings, a list, none, topics exploded, time windows
LATENCY = [
    ("api", None),
    (["api", "client"], "1s"),
    (None, None),
    ("topic", None),
    ("connection", "5s"),
    ("status", "250ms"),
]
LATENCY_IDS = ["api", "api+client-1s", "all", "topic", "connection-5s", "status-250ms"]
PERCENTILES = {  # latency column -> (the values it is a quantile of, q)
    "p50_ms": ("latency_ms", 0.5),
    "p95_ms": ("latency_ms", 0.95),
    "p99_ms": ("latency_ms", 0.99),
    "network_p50_ms": ("network_ms", 0.5),
    "queue_p50_ms": ("queue_ms", 0.5),
    "broker_p50_ms": ("broker_ms", 0.5),
}


@pytest.fixture(scope="module")
def spark():
    session, owned = local_spark("kafka-dissector-analysis-tests")
    yield session
    if owned:
        session.stop()


@pytest.fixture(scope="module")
def tables(spark):
    """The four captures as one capture set: `pairs` from `dissector.spark.load`, `partitions`
    through the `kafka_pcap` format; cached, as an analysis runs several Spark jobs."""
    from dissector.spark import load

    pairs = load(spark, CAPTURES, table="pairs").cache()
    partitions = (
        spark.read.format("kafka_pcap").option("table", "partitions").load(CAPTURES).cache()
    )
    yield {"pairs": pairs, "partitions": partitions}
    pairs.unpersist()
    partitions.unpersist()


@pytest.fixture(scope="module")
def local():
    """read_pcap's tables of each capture."""
    return {
        (path, table): dissector.read_pcap(path, table=table)
        for path in CAPTURES
        for table in ("pairs", "partitions")
    }


def one(tables, table, path):
    """The Spark table of one capture."""
    from pyspark.sql import functions as F

    return tables[table].where(F.col("capture") == path)


def without_capture(df):
    assert df.columns[0] == "capture"
    return df.drop(columns="capture")


def as_set(local, table):
    """read_pcap's tables of all captures, with their `capture` column (what Spark holds),
    in name order (the order of captures in the Spark versions' frames)."""
    return pd.concat(
        [local[(path, table)].assign(capture=path) for path in sorted(CAPTURES)],
        ignore_index=True,
    )


# -- the percentile bound ---------------------------------------------------------------


def within(value, values, q, eps):
    """`value` is a quantile q of `values` up to a rank error of eps * n: it lies between the
    exact q - eps quantile (the lower value) and the exact q + eps one (the higher value)."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if not len(values):
        return np.isnan(value)
    low = np.quantile(values, max(q - eps, 0.0), method="lower")
    high = np.quantile(values, min(q + eps, 1.0), method="higher")
    return low <= value <= high


def exact_quantile(values, q):
    """The value percentile_approx gives when it keeps every value: the smallest whose
    share of values at or below it reaches q."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return np.quantile(values, q, method="inverted_cdf") if len(values) else np.nan


def latency_groups(pairs, by, freq):
    """The rows behind each row of `latency(pairs, by, freq)`, in its order."""
    rows = ka.components(pairs)
    keys = group_columns(by, pairs)
    if "topic" in keys:
        rows = rows.assign(topic=rows["topics"].map(lambda t: list(t) or [None]))
        rows = rows.explode("topic")
    if freq:
        rows = rows.assign(window=rows["request_start"].dt.floor(freq))
        keys = [*keys, "window"]
    if not keys:
        return [rows]
    return [group for _, group in rows.groupby(keys, dropna=False, sort=True)]


def assert_latency(got, pairs, by, freq):
    """Spark's latency against pandas' on the same rows: keys, counts, maxima and errors
    exactly, means to rounding, percentiles within the rank error (and exact in groups of
    up to 500 requests). Returns how many percentiles were not the exact ones."""
    from dissector.analysis.on_spark import EPSILON

    want = ka.latency(pairs, by=by, freq=freq)
    assert list(got.columns) == list(want.columns)
    assert list(got.dtypes) == list(want.dtypes)
    exact = [c for c in want.columns if c not in PERCENTILES and c != "mean_ms"]
    assert_frame_equal(got[exact], want[exact], check_exact=True)
    assert_frame_equal(got[["mean_ms"]], want[["mean_ms"]], check_exact=False, rtol=1e-12)
    groups = latency_groups(pairs, by, freq)
    assert len(groups) == len(got)
    approximate = 0
    for group, row in zip(groups, got.to_dict("records"), strict=True):
        assert len(group) == row["requests"]
        for column, (source, q) in PERCENTILES.items():
            value, values = row[column], group[source]
            assert within(value, values, q, EPSILON), (column, row)
            if np.isnan(value) or value == exact_quantile(values, q):
                continue
            assert len(values) > 500, (column, row)  # smaller groups are summarised exactly
            approximate += 1
    return approximate


# -- the four captures as one set, compared capture by capture -------------------------


@pytest.mark.parametrize(("by", "freq"), LATENCY, ids=LATENCY_IDS)
def test_latency(tables, local, by, freq):
    """Per capture and group (and window): streams are numbered per capture, so grouping by
    connection takes the capture in by itself."""
    names = [] if by is None else [by] if isinstance(by, str) else list(by)
    by = names if "connection" in names else ["capture", *names]
    got = ka.latency(tables["pairs"], by=by, freq=freq)
    assert set(got["capture"]) == set(CAPTURES)
    assert_latency(got, as_set(local, "pairs"), by, freq)


def test_errors_and_error_counts(tables, local):
    """Every error, capture by capture in capture order, as in read_pcap's tables."""
    pairs, spark_pairs = as_set(local, "pairs"), tables["pairs"]
    assert_frame_equal(ka.errors(spark_pairs), ka.errors(pairs))
    assert_frame_equal(ka.error_counts(spark_pairs), ka.error_counts(pairs))
    by = ["capture", "level", "topic", "partition", "error_name"]
    assert_frame_equal(ka.error_counts(spark_pairs, by=by), ka.error_counts(pairs, by=by))
    found = ka.errors(pairs)  # what the walk had to find: errors at every level
    assert {"top", "partition", "exchange"} <= set(found["level"])
    assert found["topic"].notna().any() and found["partition"].notna().any()


def test_clients(tables, local):
    want = ka.clients(as_set(local, "pairs"))
    assert_frame_equal(ka.clients(tables["pairs"]), want)
    assert want["software_name"].notna().any() and set(want["capture"]) == set(CAPTURES)


@pytest.mark.parametrize(
    ("table", "freq", "by"),
    [
        ("pairs", "1s", None),
        ("partitions", "1s", "topic"),
        ("partitions", "5s", "partition"),
        ("partitions", "100ms", "client"),
        ("partitions", "1min", "capture"),
    ],
)
def test_throughput(tables, local, table, freq, by):
    got = ka.throughput(tables[table], freq=freq, by=by)
    assert_frame_equal(got, ka.throughput(as_set(local, table), freq=freq, by=by))
    assert len(got)


def test_one_capture_alone(tables, local):
    """A DataFrame of one capture: the frames of read_pcap's table, with `capture` in front
    where the analysis goes capture by capture."""
    path = CAPTURES[1]
    spark_pairs, pairs = one(tables, "pairs", path), local[(path, "pairs")]
    assert_frame_equal(without_capture(ka.errors(spark_pairs)), ka.errors(pairs))
    assert_frame_equal(without_capture(ka.clients(spark_pairs)), ka.clients(pairs))
    assert_latency(ka.latency(spark_pairs, by="version"), pairs, "version", None)
    spark_partitions = one(tables, "partitions", path)
    got = ka.throughput(spark_partitions, freq="1s", by="partition")
    assert_frame_equal(got, ka.throughput(local[(path, "partitions")], "1s", "partition"))


def test_queue_time_derived_without_the_column(tables, local):
    """Without `queue_ms`, the queue time is derived per connection in request order."""
    path = CAPTURES[0]  # group-rebalance: connections with several requests in flight
    pairs = local[(path, "pairs")].drop(columns="queue_ms")
    got = ka.latency(one(tables, "pairs", path).drop("queue_ms"), by="connection")
    assert_latency(without_capture(got), pairs, "connection", None)


def test_no_such_traffic_gives_the_empty_frames(tables, local):
    from pyspark.sql import functions as F

    path = CAPTURES[0]
    none = tables["pairs"].where(F.lit(False))
    empty = local[(path, "pairs")].iloc[0:0]
    assert_frame_equal(ka.latency(none, by=None), ka.latency(empty, by=None))
    for analysis in (ka.errors, ka.clients):  # no capture column: the table is empty
        got, want = analysis(none), analysis(empty)
        assert got.empty and list(got.columns) == list(want.columns), analysis.__name__


# -- percentiles where Spark approximates -----------------------------------------------


def test_percentiles_of_a_large_table_within_the_rank_error(spark):
    """60,000 requests in three groups, far above what percentile_approx keeps exactly:
    every percentile within the stated rank error of the exact one, some not exact."""
    from pyspark.sql import functions as F

    from dissector.analysis.on_spark import EPSILON

    n = 60_000  # 20,000 per API: summarised, where below 500 rows Spark is exact
    rand, api = F.rand(seed=7), F.col("id") % 3
    spark_pairs = (
        spark.range(n)
        .select(
            F.lit("synthetic").alias("capture"),
            (F.col("id") % 50).alias("stream"),
            F.when(api == 0, "Fetch")
            .when(api == 1, "Produce")
            .otherwise("Metadata")
            .alias("api_name"),
            F.round(F.exp(rand * 8), 3).alias("latency_ms"),  # 1 ms to 3 s, heavy tailed
            F.round(F.exp(rand * 8) * 0.9, 3).alias("server_ms"),
            F.round(F.rand(seed=8) * 2, 3).alias("queue_ms"),
            F.when(F.col("id") % 97 == 0, 6).otherwise(0).cast("short").alias("error_code"),
            F.timestamp_micros(F.lit(1_700_000_000_000_000) + F.col("id") * 1000).alias(
                "request_start"
            ),
        )
        .cache()
    )
    pairs = spark_pairs.toArrow().to_pandas()
    pairs["request_start"] = pairs["request_start"].astype("datetime64[ns, UTC]")
    got = ka.latency(spark_pairs, by="api")
    assert got["requests"].sum() == n
    assert assert_latency(got, pairs, "api", None)  # some percentiles approximate
    got = ka.latency(spark_pairs, by=None, freq="50s")
    assert len(got) > 1
    assert_latency(got, pairs, None, "50s")
    assert EPSILON <= 0.01
    spark_pairs.unpersist()


# -- dispatch ---------------------------------------------------------------------------


def test_the_analysis_layer_imports_no_pyspark():
    code = (
        "import sys, dissector.analysis, dissector\n"
        "ka = dissector.analysis\n"
        "p = dissector.read_pcap(sys.argv[1])\n"
        "ka.latency(p); ka.errors(p); ka.clients(p); ka.throughput(p)\n"
        "assert not [m for m in sys.modules if m.startswith('pyspark')]\n"
    )
    subprocess.run([sys.executable, "-c", code, CAPTURES[1]], check=True, cwd=ROOT)
