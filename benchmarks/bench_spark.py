#!/usr/bin/env python
"""Spark against the single process, on one big capture (split into byte ranges) and on a
set of captures (8 pieces of it, cut with editcap).

For each input: the single process (`dissect` streamed into pairs batches), then Spark in
local mode with 1 and 2 cores, each in a fresh process pinned to as many cores (taskset:
unpinned, `local[1]` would run the JVM on one core and the Python worker on the other).
Spark's fixed start-up (session, a first Python task, `register`) is timed apart from the
run (planning, packets, shuffle, dissection, pairs table written to Spark's no-op sink).
Rounds of every mode in turn (`--repeat`, default 3), medians. Reported: seconds, MB/s,
scaling efficiency T1 / (2 * T2) (the median over rounds, within a round), shuffle bytes
written (Spark's REST API), peak RSS of the JVM and of the Python processes (driver and
workers), sampled from /proc every 0.1 s.

    python benchmarks/bench_spark.py [--capture benchmarks/out/real.pcap] [--out FILE]
                                     [--only one|set] [--repeat 3]
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from statistics import median

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _tree(pid):
    """pid and its descendants, from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except OSError:
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def _rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                    break
            else:
                return None, 0
        with open(f"/proc/{pid}/comm") as f:
            name = f.read().strip()
        return name, rss
    except OSError:
        return None, 0


def measured(cmd):
    """Run cmd; return (its JSON output, peak RSS of java and of python processes)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    peaks = {"java": 0, "python": 0}
    done = threading.Event()

    def sample():
        while not done.is_set():
            totals = {"java": 0, "python": 0}
            for pid in _tree(proc.pid):
                name, rss = _rss(pid)
                if name:
                    totals["java" if name == "java" else "python"] += rss
            for k in peaks:
                peaks[k] = max(peaks[k], totals[k])
            time.sleep(0.1)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, _ = proc.communicate()
    done.set()
    t.join()
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return json.loads(out.strip().splitlines()[-1]), peaks


def single(paths):
    from dissector import dissect
    from dissector.tables import arrow_batches

    t = time.perf_counter()
    rows = 0
    for path in paths:
        rows += sum(b.num_rows for b in arrow_batches(dissect(path), "pairs"))
    return {"run_s": time.perf_counter() - t, "rows": rows}


def spark_run(paths, cores, split):
    import urllib.request

    t0 = time.perf_counter()
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .config("spark.ui.port", "0")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(4 * cores))
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.range(4).mapInArrow(lambda bs: bs, "id long").count()  # a first Python worker
    from dissector.spark import Dissected, register

    register(spark)  # once per session, as a user does
    startup = time.perf_counter() - t0

    t = time.perf_counter()
    d = Dissected(spark, paths, split)
    table = d.table("pairs")
    table.write.format("noop").mode("overwrite").save()
    run = time.perf_counter() - t
    rows = table.count()  # a check, after the timing (whole captures are dissected again)
    ui = spark.sparkContext.uiWebUrl
    app = spark.sparkContext.applicationId
    with urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/stages") as r:
        stages = json.load(r)
    shuffle = sum(s.get("shuffleWriteBytes", 0) for s in stages)
    spark.stop()
    return {"startup_s": startup, "run_s": run, "rows": rows, "shuffle_bytes": shuffle}


def capture_set(capture, n, directory):
    """The capture cut into n files of consecutive packets (editcap -c)."""
    directory.mkdir(parents=True, exist_ok=True)
    if not list(directory.glob("part*.pcap")):
        packets = int(
            subprocess.run(
                ["capinfos", "-c", "-M", "-T", str(capture)], capture_output=True, text=True
            ).stdout.split()[-1]
        )
        per = -(-packets // n)
        subprocess.run(["editcap", "-c", str(per), str(capture), str(directory / "part.pcap")])
    return sorted(str(p) for p in directory.glob("part*.pcap"))


MODES = {"single": "one process", "1": "Spark, 1 core", "2": "Spark, 2 cores"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--capture", default=str(HERE / "out" / "real.pcap"))
    ap.add_argument("--out", default=str(HERE / "out" / "spark.md"))
    ap.add_argument("--split", default="32m", help="byte ranges of the one big capture")
    ap.add_argument("--only", choices=("one", "set"), help="measure one input only")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of every mode (medians)")
    ap.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:  # a measured child: single|cores split paths...
        mode, split, *paths = args.worker
        res = single(paths) if mode == "single" else spark_run(paths, int(mode), split)
        print(json.dumps(res))
        return
    capture = Path(args.capture)
    inputs = {
        f"one capture ({args.split} ranges)": (args.split, [str(capture)]),
        "8 captures": ("128m", capture_set(capture, 8, HERE / "out" / f"{capture.stem}-set8")),
    }
    if args.only:
        inputs = dict([list(inputs.items())[0 if args.only == "one" else 1]])
    lines = [
        f"Spark local mode against one process; {capture.name}, "
        f"{capture.stat().st_size / 1e6:.0f} MB, {os.cpu_count()} cores; "
        f"medians of {args.repeat} rounds",
        "",
        "| input | run | start-up s | run s | MB/s | scaling T1/(2·T2) | shuffle MB "
        "| peak JVM MB | peak Python MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    me = [sys.executable, __file__, "--worker"]
    for name, (split, paths) in inputs.items():
        size = sum(Path(p).stat().st_size for p in paths) / 1e6
        runs = {mode: [] for mode in MODES}
        for round_ in range(args.repeat):  # every mode once a round, so drift touches all
            for mode in MODES:
                # Pinned, so that "1 core" is one core for the JVM and Python alike.
                cpus = ["taskset", "-c", "0" if mode != "2" else "0,1"]
                res, peaks = measured([*cpus, *me, mode, split, *paths])
                runs[mode].append((res, peaks))
                print(name, round_ + 1, mode, res, peaks, file=sys.stderr, flush=True)
        # Scaling: the median over rounds of T1 / (2 * T2) within a round.
        pairs = zip(runs["1"], runs["2"], strict=True)
        scaling = median(a["run_s"] / (2 * b["run_s"]) for (a, _), (b, _) in pairs)
        for mode, label in MODES.items():
            res = {k: median(r[k] for r, _ in runs[mode]) for k in runs[mode][0][0]}
            peaks = {k: median(p[k] for _, p in runs[mode]) for k in ("java", "python")}
            shuffle = f"{res['shuffle_bytes'] / 1e6:.0f}" if "shuffle_bytes" in res else ""
            startup = f"{res['startup_s']:.1f}" if "startup_s" in res else ""
            lines.append(
                f"| {name} | {label} | {startup} | {res['run_s']:.1f} | "
                f"{size / res['run_s']:.1f} | {f'{scaling:.2f}' if mode == '2' else ''} | "
                f"{shuffle} | {peaks['java'] / 1e6:.0f} | {peaks['python'] / 1e6:.0f} |"
            )
    text = "\n".join(lines)
    print(text)
    Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
