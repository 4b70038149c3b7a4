"""Microseconds per record by stage of the records table, on one capture.

Each prefix runs over the whole capture in this process, rounds of every prefix in
alternation after a warm-up pass; a stage costs the median time of its prefix less that of
the prefix before, over the records of the capture:

1. core: the whole ``Dissector`` with ``records="full"`` (bodies scanned, not decoded);
2. batches: every magic 2 batch of every record set opened where the scan found it: header,
   CRC-32C, decompression (``protocol.records.batch.open_batch``);
3. columns: the records table in Arrow batches (``arrow_batches(..., "records")``: batches
   opened again and their records read into columns);
4. parquet: those batches written to a parquet file (``TableWriter``).

    python benchmarks/records_stages.py CAPTURE [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout, not an install

import stages  # noqa: E402  (beside this file)

from dissector.options import Options  # noqa: E402
from dissector.protocol.records.batch import open_batch  # noqa: E402
from dissector.protocol.records.common import Allowance  # noqa: E402
from dissector.tables import arrow_batches  # noqa: E402

OPTIONS = Options(records="full")
LIMITS = OPTIONS.record_decoder().limits


def exchanges(path):
    return stages.exchanges(path, OPTIONS)


def core(path):
    return sum(1 for _ in exchanges(path))


def batches(path):
    """Opens every magic 2 batch of the record sets the scan found; returns how many."""
    n = 0
    for e in exchanges(path):
        if e.record_sets is None:
            continue
        _, data, sets = e.record_sets
        view, allowance = memoryview(data), Allowance(LIMITS)
        for _, _, pos, end in sets:
            while end - pos >= 61:
                stop = pos + 12 + int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
                if stop > end or stop <= pos or data[pos + 16] != 2:
                    break
                open_batch(data, view, pos, stop, LIMITS, allowance)
                n += 1
                pos = stop
    return n


def columns(path):
    return sum(b.num_rows for b in arrow_batches(exchanges(path), "records"))


def parquet(path):
    return stages.written(path, "records", OPTIONS)


STAGES = (
    ("core", "Dissector, records scanned", core),
    ("batches", "batch headers, CRC-32C, decompression", batches),
    ("columns", "records read into Arrow columns", columns),
    ("parquet", "the parquet file", parquet),
)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    path = Path(args.capture)
    records = columns(path)  # warm-up, and the count every figure is per
    gc.freeze()
    times = {key: [] for key, _, _ in STAGES}
    for _ in range(args.rounds):
        for key, _, run in STAGES:
            started = time.process_time()
            run(path)
            times[key].append(time.process_time() - started)
    lines = [
        f"## Cost per record by stage of the records table: {path.name}",
        "",
        f"{records:,} records; each prefix run in one process, medians of {args.rounds} "
        "round(s) after a warm-up, CPU time; a stage is its prefix less the one before.",
        "",
        "| stage | adds | µs per record | share | prefix CPU s |",
        "|---|---|---:|---:|---:|",
    ]
    medians = {key: statistics.median(v) for key, v in times.items()}
    total, before = medians[STAGES[-1][0]], 0.0
    for key, adds, _ in STAGES:
        cost = medians[key] - before
        before = medians[key]
        lines.append(
            f"| {key} | {adds} | {cost / records * 1e6:.2f} | {cost / total:.0%} | "
            f"{medians[key]:.2f} |"
        )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
