"""Per-API latency and error summaries of a `pairs` table, as tables and as text."""

import pandas as pd

from ..session.exchange import STATUSES

QUANTILES = {"p50_ms": 0.5, "p95_ms": 0.95, "p99_ms": 0.99}


def api_summary(pairs):
    """One row per (api_name, api_version): request count, latency percentiles, errors."""
    requests = pairs[pairs["request_frame"].notna()]
    rows = []
    for (name, version), group in requests.groupby(["api_name", "api_version"], dropna=False):
        latency = group["latency_ms"].dropna()
        errors = group.loc[group["error_code"].fillna(0) != 0, "error_name"].value_counts()
        row = {"api_name": name, "api_version": version, "requests": len(group)}
        for column, q in QUANTILES.items():
            row[column] = latency.quantile(q) if len(latency) else float("nan")
        row["max_ms"] = latency.max() if len(latency) else float("nan")
        row["errors"] = dict(errors)
        rows.append(row)
    columns = ["api_name", "api_version", "requests", *QUANTILES, "max_ms", "errors"]
    return pd.DataFrame(rows, columns=columns)


def topic_volume(partitions):
    """Produce and Fetch volume per topic: records, bytes on the wire, uncompressed bytes and
    the compression ratio, from the `partitions` table."""
    data = partitions[partitions["api_name"].isin(["Produce", "Fetch"]) & partitions["bytes"].gt(0)]
    columns = ["api_name", "topic", "batches", "records", "bytes", "uncompressed_bytes", "ratio"]
    if data.empty:
        return pd.DataFrame(columns=columns)
    sums = (
        data.groupby(["api_name", "topic"])[["batches", "records", "bytes", "uncompressed_bytes"]]
        .sum(min_count=1)
        .reset_index()
    )
    sums["ratio"] = sums["uncompressed_bytes"] / sums["bytes"]
    return sums[columns]


def volume_text(volume):
    lines = [
        f"{'volume':<10} {'topic':<30} {'records':>9} {'bytes':>12} {'uncompressed':>12} ratio"
    ]
    for r in volume.itertuples(index=False):
        records = "-" if pd.isna(r.records) else f"{r.records}"
        raw = "-" if pd.isna(r.uncompressed_bytes) else f"{r.uncompressed_bytes}"
        ratio = "-" if pd.isna(r.ratio) else f"{r.ratio:.2f}"
        lines.append(
            f"{r.api_name:<10} {r.topic!s:<30} {records:>9} {r.bytes:>12} {raw:>12} {ratio}"
        )
    return "\n".join(lines)


def status_counts(pairs):
    counts = pairs["status"].value_counts()
    return {status: int(counts.get(status, 0)) for status in STATUSES}


def summary_text(pairs, title=""):
    lines = [title] if title else []
    table = api_summary(pairs)
    if table.empty:
        lines.append("no Kafka exchanges found")
    else:
        header = f"{'api':<28} {'ver':>3} {'requests':>8} {'p50 ms':>9} {'p95 ms':>9} "
        header += f"{'p99 ms':>9} {'max ms':>9}  errors"
        lines.append(header)
        for r in table.itertuples(index=False):
            name = r.api_name if isinstance(r.api_name, str) else "unknown"
            version = "?" if pd.isna(r.api_version) else str(r.api_version)
            errors = ", ".join(f"{k} x{v}" for k, v in r.errors.items()) or "-"
            cells = [
                f"{v:9.2f}" if v == v else f"{'-':>9}"
                for v in (r.p50_ms, r.p95_ms, r.p99_ms, r.max_ms)
            ]
            lines.append(f"{name:<28} {version:>3} {r.requests:>8} {' '.join(cells)}  {errors}")
    counts = status_counts(pairs)
    lines.append("status: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return "\n".join(lines)
