"""The streamed summary: exact percentiles while few, bounded after, summaries that merge."""

import random

import pandas as pd
import pytest

import dissector
from dissector.tables.summary import Distribution, Summary

SAMPLE = "captures/confluent-kafka.pcap"


def test_percentiles_are_those_of_the_pairs_table():
    summary = Summary()
    for e in dissector.dissect(SAMPLE):
        summary.add(e)
    pairs = dissector.read_pcap(SAMPLE)
    asked = pairs[pairs.request_frame.notna()]
    for row in summary.apis():
        mine = asked[
            (asked.api_name == row["api_name"]) & (asked.api_version == row["api_version"])
        ]
        assert row["requests"] == len(mine)
        latency = mine.latency_ms.dropna()
        if len(latency):
            assert row["p95_ms"] == pytest.approx(latency.quantile(0.95))
            assert row["max_ms"] == latency.max()
            assert row["queue_p95_ms"] == pytest.approx(mine.queue_ms.dropna().quantile(0.95))


def test_a_distribution_stays_bounded_within_one_percent():
    rng = random.Random(7)
    values = [rng.lognormvariate(1, 1.5) for _ in range(3 * Distribution.EXACT)] + [0.0, -0.1]
    d = Distribution()
    for x in values:
        d.add(x)
    assert d.buckets is not None and len(d.values) == 0 and len(d.buckets) < 2000
    truth = pd.Series(values)
    for q in (0.5, 0.95, 0.99):
        assert d.quantile(q) == pytest.approx(truth.quantile(q), rel=0.011)
    assert d.max == max(values) and d.count == len(values)


def test_summaries_of_parts_merge_into_the_whole():
    exchanges = list(dissector.dissect(SAMPLE))
    whole, a, b = Summary(), Summary(), Summary()
    for i, e in enumerate(exchanges):
        whole.add(e)
        (a if i % 2 else b).add(e)
    a.merge(b)
    assert a.text("t") == whole.text("t")
    big = Distribution()
    for part in range(3):
        d = Distribution()
        for x in range(Distribution.EXACT // 2):
            d.add(float(part * 10 + x % 7 + 1))
        big.merge(d)
    assert big.buckets is not None and big.count == 3 * (Distribution.EXACT // 2)
    assert sum(big.buckets.values()) == big.count  # every value counted once
    truth = pd.Series([float(p * 10 + x % 7 + 1) for p in range(3) for x in range(big.count // 3)])
    assert big.quantile(0.5) == pytest.approx(truth.quantile(0.5), rel=0.011)
