#!/usr/bin/env python
"""Spark against the command line, on the same cores, as whole commands.

* the command: ``kafka-dissect analyze CAPTURE -o pairs.parquet``, one process (for the
  records table, two: a second process writes the table, see tables/records_behind.py);
* Spark: ``kafka-dissect spark CAPTURE -o DIR`` with its defaults (``local[*]``, Spark's
  default memory), plus ``--split-bytes`` and ``--spark-arg`` when given;
* with ``--table records``, both write the records table instead;
* Spark's start-up: the same command on a tiny capture (``captures/kafka-python.pcap``, 51
  exchanges): session, JVM, Python workers, planning, all but the work.

Each round runs the three in turn (``--repeat``, default 3), so a change of load on the
machine touches all alike; medians. Spark's work is its wall time less the start-up. Peak RSS
of each command's process tree is sampled from /proc every 0.1 s, the JVM and the Python
processes (driver and workers) apart. After the timed runs, both outputs must hold as many
rows with the same ``status`` counts (``batch_status`` for records). The table goes to
stdout, ``benchmarks/out/spark.md`` and ``benchmarks/spark.md`` (``spark-records.md`` for
the records table); exit status 1 when the outputs differ.

    python benchmarks/bench_spark.py [--capture benchmarks/out/real8x.pcap] [--repeat 3]
        [--table records] [--split-bytes 64m] [--spark-arg=--master=local[2]] ...

The default capture is made when missing: real.pcap (record_real.py), then 8 copies of it
played at once (replicate.py).
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from statistics import median

from run import machine  # beside this file: the machine, as the main benchmark names it

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
TINY = HERE.parent / "captures" / "kafka-python.pcap"
# The console script beside this interpreter: a shim on PATH would be timed with the command.
CLI = Path(sys.executable).parent / "kafka-dissect"
CORES = os.cpu_count()
# Per table: the column whose counts both outputs must share, and what a row is.
STATUS = {"pairs": "status", "records": "batch_status"}
ROW = {"pairs": "exchange", "records": "record"}


# --------------------------------------------------------------------------- measuring


def tree(root: int) -> list[int]:
    """``root`` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def kind_and_rss(pid: int) -> tuple[str | None, int]:
    """("java" or "python" by the process's executable, else None; its RSS in bytes)."""
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        with open(f"/proc/{pid}/status") as f:
            rss = next((int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmRSS:")), 0)
    except OSError:
        return None, 0
    if exe == "java":
        return "java", rss
    return ("python" if exe.startswith("python") else None), rss


def measured(argv: list[str], log: Path) -> dict:
    """Run ``argv`` (output to ``log``); its wall time and the peak RSS of its tree."""
    peaks = {"java": 0, "python": 0}
    done = threading.Event()

    def sample(pid: int) -> None:
        while not done.wait(0.1):
            totals = {"java": 0, "python": 0}
            for p in tree(pid):
                kind, rss = kind_and_rss(p)
                if kind:
                    totals[kind] += rss
            for k in peaks:
                peaks[k] = max(peaks[k], totals[k])

    with open(log, "wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        sampler = threading.Thread(target=sample, args=(proc.pid,), daemon=True)
        sampler.start()
        proc.wait()
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
    if proc.returncode:
        tail = log.read_text(errors="replace").splitlines()[-5:]
        raise SystemExit(f"exit status {proc.returncode}: {' '.join(argv)}\n" + "\n".join(tail))
    return {"wall": wall, **peaks}


def status_counts(path: Path, table: str = "pairs") -> dict[str, int]:
    """Rows per status (STATUS) of a table: one parquet file, or a partitioned directory."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    column = pq.read_table(path, columns=[STATUS[table]])[STATUS[table]]
    return {v["values"]: v["counts"] for v in pc.value_counts(column).to_pylist()}


# --------------------------------------------------------------------------- the capture


def default_capture(path: Path) -> None:
    """Make real8x.pcap (and real.pcap before it) when missing."""
    real = OUT / "real.pcap"
    if not real.exists():
        subprocess.run(
            [sys.executable, str(HERE / "record_real.py"), "--out", str(real)], check=True
        )
    subprocess.run(
        [sys.executable, str(HERE / "replicate.py"), str(real), "--copies", "8", "-o", str(path)],
        check=True,
    )


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def warm(path: Path) -> None:
    """Read the capture once, so that every run finds it in the page cache."""
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass


# --------------------------------------------------------------------------- the report


def report(capture: Path, runs: dict, count: int, tiny_count: int, spark_cmd: str, table: str):
    """The table: the command, Spark, Spark's start-up (medians of the runs)."""
    wall = {key: median(r["wall"] for r in rs) for key, rs in runs.items()}
    startup = wall["tiny"]
    work = wall["spark"] - startup
    speedup = wall["one"] / work if work > 0 else None
    mb, tiny_mb = capture.stat().st_size / 1e6, TINY.stat().st_size / 1e6
    one = "analyze" + ("" if table == "pairs" else f" --table {table}") + f" -o {table}.parquet"
    rows = [  # label, MB, rows, start-up s, work s, speed-up
        (f"the command: `{one}`", "one", mb, count, None, wall["one"], 1.0),
        (f"Spark: `{spark_cmd}`", "spark", mb, count, startup, work, speedup),
        (f"Spark start-up: the same on {TINY.name}", "tiny", tiny_mb, tiny_count, startup,
         None, None),
    ]  # fmt: skip

    def cell(value, spec):
        return "—" if value is None else format(value, spec)

    unit = ROW[table]
    lines = [
        f"| run | capture MB | {unit}s | wall s | start-up s | work s | MB/s | µs/{unit} "
        "| speed-up | per core | peak JVM MB | peak Python MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, key, size, n, start, seconds, up in rows:
        ok = seconds is not None and seconds > 0
        java, python = (median(r[k] for r in runs[key]) / 1e6 for k in ("java", "python"))
        cells = [
            label,
            cell(size, ".1f" if size < 10 else ".0f"),
            cell(n, ","),
            cell(wall[key], ".1f"),
            cell(start, ".1f"),
            cell(seconds, ".1f"),
            cell(size / seconds if ok else None, ".1f"),
            cell(seconds / n * 1e6 if ok and n else None, ".1f"),
            cell(up, ".2f"),
            cell(up / (1 if key == "one" else CORES) if up else None, ".2f"),
            f"{java:.0f}",
            f"{python:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    ups = [
        o["wall"] / (s["wall"] - t["wall"])
        for o, s, t in zip(runs["one"], runs["spark"], runs["tiny"], strict=True)
    ]
    lines += ["", f"Round by round, the speed-up was {min(ups):.2f} to {max(ups):.2f}."]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--capture", type=Path, default=OUT / "real8x.pcap", help="default out/real8x.pcap"
    )
    ap.add_argument("--repeat", type=int, default=3, help="rounds (medians), default 3")
    ap.add_argument("--table", choices=tuple(STATUS), default="pairs", help="default pairs")
    ap.add_argument("--split-bytes", help="passed to kafka-dissect spark")
    ap.add_argument(
        "--spark-arg",
        action="append",
        default=[],
        help="an extra argument of kafka-dissect spark (repeatable; --spark-arg=--master=...)",
    )
    args = ap.parse_args(argv)
    capture = args.capture.resolve()
    if not capture.exists():
        if capture != (OUT / "real8x.pcap").resolve():
            ap.error(f"{capture} does not exist")
        default_capture(capture)
    cli = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "dissector"]
    table = ["--table", args.table] if args.table != "pairs" else []
    extra = [
        *table,
        *(["--split-bytes", args.split_bytes] if args.split_bytes else []),
        *args.spark_arg,
    ]
    OUT.mkdir(parents=True, exist_ok=True)
    warm(capture)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-spark-", dir=OUT) as name:
        tmp = Path(name)
        one_file, spark_dir, tiny_dir = tmp / f"{args.table}.parquet", tmp / "spark", tmp / "tiny"
        outputs = {"one": one_file, "spark": spark_dir, "tiny": tiny_dir}
        commands = {
            "one": [*cli, "analyze", str(capture), "--no-progress", *table, "-o", str(one_file)],
            "spark": [*cli, "spark", str(capture), "-o", str(spark_dir), *extra],
            "tiny": [*cli, "spark", str(TINY), "-o", str(tiny_dir), *extra],
        }
        runs: dict = {key: [] for key in commands}
        for n in range(args.repeat):
            for key, command in commands.items():
                remove(outputs[key])  # each run writes afresh
                res = measured(command, tmp / f"{key}.log")
                runs[key].append(res)
                print(
                    f"round {n + 1}/{args.repeat} {key}: {res['wall']:.1f} s, JVM "
                    f"{res['java'] / 1e6:.0f} MB, Python {res['python'] / 1e6:.0f} MB",
                    file=sys.stderr,
                    flush=True,
                )
        # After the timed runs: the last round's outputs.
        one, spark = status_counts(one_file, args.table), status_counts(spark_dir, args.table)
        tiny_count = sum(status_counts(tiny_dir, args.table).values())
    count = sum(one.values())  # exchanges or records: the table's rows
    counts = ", ".join(f"{k} {v:,}" for k, v in sorted(one.items()))
    same = one == spark
    date = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    spark_cmd = " ".join(["kafka-dissect spark", *extra])
    text = "\n".join(
        [
            f"{date}: {capture.name} ({capture.stat().st_size / 1e6:.0f} MB) on {machine()}, "
            f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after; medians of "
            f"{args.repeat} round{'s' * (args.repeat > 1)}; Spark in local mode with its "
            "defaults (local[*], default memory) unless said",
            "",
            *report(capture, runs, count, tiny_count, spark_cmd, args.table),
            "",
            "Work: wall time less Spark's start-up (the median on the tiny capture); the "
            f"command's is its wall time. MB/s and µs per {ROW[args.table]} on the work. Speed-up: "
            f"the command's wall time over Spark's work; per core: over {CORES} for Spark. "
            "Peak RSS summed over each command's processes (sampled every 0.1 s). "
            + (
                f"Checked: both outputs hold {count:,} rows ({counts})."
                if same
                else f"MISMATCH: the command {one}, Spark {spark}."
            ),
        ]
    )
    print(text)
    name = "spark.md" if args.table == "pairs" else f"spark-{args.table}.md"
    for path in (OUT / name, HERE / name):
        path.write_text(text + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
