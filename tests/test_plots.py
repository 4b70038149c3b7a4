"""The figures of `analysis.plots`, read back from their matplotlib objects: a colour of its
own per series, axes in units people read (ms, B/s to GB/s, time), a log axis where values
span decades, and windows without data left as gaps."""

import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm, to_hex
from matplotlib.lines import Line2D
from samples import CAPTURES, table

import dissector
from dissector import analysis as ka
from dissector.analysis.plots import palette


def colours(artists):
    """The colour of each line, or of each scatter's points."""
    return [
        to_hex(a.get_color() if isinstance(a, Line2D) else a.get_facecolor()[0]) for a in artists
    ]


def windows(times, freq):
    return pd.date_range(times.min(), times.max(), freq=freq)


def test_palette_never_repeats_a_colour():
    for n in (1, 10, 14, 60, 61, 200):
        assert len({to_hex(c) for c in palette(n)}) == n


def test_latency_over_time_one_colour_per_api_in_ms_with_gaps():
    pairs = table("group-rebalance")
    data = ka.latency(pairs, by="api", freq="1s")
    (ax,) = ka.plots.latency_over_time(pairs).axes
    # fourteen APIs: more than the ten colours of matplotlib's default cycle
    assert len(ax.lines) == pairs["api_name"].nunique() == 14
    assert len(set(colours(ax.lines))) == 14
    assert ax.get_ylabel() == "p95 latency (ms)"
    assert ax.get_xlabel() == "time (UTC)"
    # from 0.12 ms (a Metadata) to 3 s (a JoinGroup held for the rebalance): a log axis
    assert data["p95_ms"].max() / data["p95_ms"].min() > 1000
    assert ax.get_yscale() == "log"
    every = windows(data["window"], "1s")
    for line in ax.lines:
        got = np.asarray(line.get_ydata(), dtype=float)
        assert len(got) == len(every) == 44
        want = data[data["api_name"] == line.get_label()].set_index("window")["p95_ms"]
        assert np.isnan(got).sum() == len(every) - len(want)  # a gap per window without it
        np.testing.assert_allclose(got[every.isin(want.index)], want.to_numpy())
    # Heartbeats alone, from 0.3 to 22 ms: a linear axis
    (ax,) = ka.plots.latency_over_time(pairs, apis=["Heartbeat"]).axes
    assert ax.get_yscale() == "linear"


def test_latency_heatmap_in_ms_with_empty_windows_blank():
    pairs = table("group-rebalance")
    data = ka.latency(pairs, by="api", freq="5s")
    fig = ka.plots.latency_heatmap(pairs, "5s")
    ax, bar = fig.axes
    (image,) = ax.images
    shown = image.get_array()
    assert isinstance(image.norm, LogNorm)
    assert bar.get_ylabel() == "p95 latency (ms)"
    assert shown.shape == (14, len(windows(data["window"], "5s")))
    assert shown.mask.sum() == shown.size - len(data)


def test_throughput_over_time_in_bytes_per_second_with_gaps():
    parts = table("group-rebalance", "partitions")
    data = ka.throughput(parts, freq="1s")
    (ax,) = ka.plots.throughput_over_time(parts, "1s").axes
    assert [line.get_label() for line in ax.lines] == ["Fetch gr-orders", "Produce gr-orders"]
    assert len(set(colours(ax.lines))) == 2
    assert data["bytes_per_s"].max() == 666  # under 1 KB/s: bytes
    assert ax.get_ylabel() == "B/s" and ax.get_yscale() == "linear"
    for line in ax.lines:
        got = np.asarray(line.get_ydata(), dtype=float)
        want = data[data["api_name"] + " " + data["topic"] == line.get_label()]
        assert np.nansum(got) == want["bytes_per_s"].sum()
        assert np.isnan(got).sum() == len(got) - len(want)
        assert np.isnan(got).any()
    # per 100 ms the same bytes make ten times the rate: KB/s
    (ax,) = ka.plots.throughput_over_time(parts, "100ms").axes
    data = ka.throughput(parts, freq="100ms")
    assert ax.get_ylabel() == "KB/s"
    peak = max(np.nanmax(np.asarray(line.get_ydata(), dtype=float)) for line in ax.lines)
    assert peak == data["bytes_per_s"].max() / 1000
    (ax,) = ka.plots.throughput_over_time(parts, "1s", value="records_per_s").axes
    assert ax.get_ylabel() == "records/s"


def test_lag_errors_and_delays_one_colour_per_series():
    pairs, parts = table("group-rebalance"), table("group-rebalance", "partitions")
    (ax,) = ka.plots.lag_over_time(parts, pairs).axes
    assert len(ax.lines) == 4 and len(set(colours(ax.lines))) == 4
    assert {line.get_label() for line in ax.lines} == {f"gr-group gr-orders {p}" for p in range(4)}
    # the consumers of five captures as one set: more partitions than the default ten colours
    names = ["group-rebalance", "kafka-python", "confluent-kafka", "aiokafka", "transactions"]
    many = {
        which: pd.concat([table(n, which).assign(capture=n) for n in names], ignore_index=True)
        for which in ("pairs", "partitions")
    }
    commits = ka.lag(many["partitions"], many["pairs"]).query("source == 'commit'")
    (ax,) = ka.plots.lag_over_time(many["partitions"], many["pairs"]).axes
    assert len(ax.lines) == len(commits.groupby(["group_id", "topic", "partition"])) == 22
    assert len(set(colours(ax.lines))) == 22
    (ax,) = ka.plots.error_timeline(pairs).axes
    assert len(ax.collections) == 2 and len(set(colours(ax.collections))) == 2
    matched = ka.delivery(
        dissector.read_pcap(CAPTURES / "group-rebalance.pcap", table="records"), pairs
    )
    (ax,) = ka.plots.delivery_delays(matched).axes
    assert len(ax.collections) == matched["consumer"].nunique()
    assert len(set(colours(ax.collections))) == len(ax.collections)
    assert ax.get_ylabel().startswith("ms ")
