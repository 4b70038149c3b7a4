"""Benchmark the dissector against tshark on real and synthetic Kafka traffic.

Captures (each made first when missing, or always with --record):

* ``real.pcap``: real clients against a Tansu broker (``record_real.py``, 320 MB);
* ``mixed.pcap``: synthetic traffic of few, large exchanges (``make_capture.py``, 320 MB);
* ``real3x.pcap``: the same real load, 960 MB, for peak memory at three times the size;
* ``real-tls.pcap``: the real load over TLS 1.3 with the clients' key log ``real-tls.keylog``
  (``record_real.py --tls``, 320 MB), timed only when asked for (``--captures real-tls``).

On each capture these commands run pinned to core 0 (``taskset -c 0``), in alternation (round
after round of every command, so a change of machine load touches them all alike):

* ``tshark -r F -d tcp.port==P,kafka -T fields -e frame.number -e kafka.api_key ...``;
* ``kafka-dissect analyze F --no-progress`` (the summary);
* ``kafka-dissect analyze F --no-progress --decompress`` (the summary with uncompressed sizes);
* ``kafka-dissect analyze F --no-progress -o pairs.parquet``;
* ``dissector.dissect(F)`` iterated, keeping counters only;
* ``kafka-dissect analyze F --no-progress --table records -o records.parquet``;
* ``dissector.read_pcap(F, table="records")`` (a DataFrame of every record);
* ``dissector.dissect(F, records="full")`` iterated, every body read and its records counted
  (a dict per record, in Python);
* tshark and the two parquet commands again on cores 0 and 1 (``taskset -c 0,1``): parquet
  is encoded and written on a thread of its own, behind the dissection; their ratios are to
  tshark on the same two cores.

On a capture of TLS connections (its manifest names its key log K) tshark decrypts instead:
``-o tls.keylog_file:K -d tcp.port==P,tls -d tls.port==P,kafka`` in place of
``-d tcp.port==P,kafka``, and the dissector's commands get ``--tls-keylog K``
(``dissect(F, tls_keylog=K)``).

Reported per command: median wall time (and its range), the median over rounds of its wall
time over tshark's in the same round, MB/s, packets/s and exchanges/s at the median, and the
median peak RSS (GNU time, else the child's resource usage). The exchange counts are checked
against the capture's manifest. Then peak RSS on real.pcap and real3x.pcap, the cost per
exchange by stage (``stages.py``) and per record by stage of the records table
(``records_stages.py``). Markdown on stdout and in benchmarks/results.md.

    python benchmarks/run.py [--repeat 5] [--captures real,mixed] [--no-flat] [--no-stages]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
PY = sys.executable
CORE = "0"
BOTH = "0,1"  # the rows that show what a second core gives
TSHARK_FIELDS = (
    "frame.number",
    "kafka.api_key",
    "kafka.api_version",
    "kafka.correlation_id",
    "kafka.client_id",
    "kafka.error",
)

# Iterates the exchanges and keeps only counters; prints them as JSON. A second argument is
# the key log of a capture of TLS connections.
STREAMED = """
import json, sys
from collections import Counter
import dissector

by_client, statuses, largest = Counter(), Counter(), 0
secrets = {"tls_keylog": sys.argv[2]} if len(sys.argv) > 2 else {}
for ex in dissector.dissect(sys.argv[1], progress=False, **secrets):
    by_client[f"{ex.client_id} {ex.api_name}"] += 1
    statuses[ex.status] += 1
    largest = max(largest, ex.request_bytes or 0, ex.response_bytes or 0)
print(json.dumps({"exchanges": sum(statuses.values()), "by_client": by_client,
                  "statuses": statuses, "largest_frame": largest}))
"""

# Every record in Python: each exchange's bodies read, record sets decoded in full.
STREAMED_FULL = """
import sys
import dissector

secrets = {"tls_keylog": sys.argv[2]} if len(sys.argv) > 2 else {}
records = 0
for ex in dissector.dissect(sys.argv[1], progress=False, records="full", **secrets):
    for body in (ex.request, ex.response):
        for topic in (body or {}).get("TopicData") or (body or {}).get("Responses") or ():
            for part in topic.get("PartitionData") or topic.get("Partitions") or ():
                for batch in (part.get("Records") or {}).get("batches") or ():
                    records += len(batch["records"])
print(records)
"""

# The records table as a pandas DataFrame.
READ_RECORDS = """
import sys
import dissector

secrets = {"tls_keylog": sys.argv[2]} if len(sys.argv) > 2 else {}
print(len(dissector.read_pcap(sys.argv[1], table="records", **secrets)))
"""


@dataclass
class Capture:
    name: str
    path: Path
    make: list[str]  # the command that writes it
    about: str

    @property
    def manifest(self) -> dict:
        path = self.path.with_name(self.path.stem + ".expected.json")
        return json.loads(path.read_text()) if path.exists() else {}

    @property
    def port(self) -> int:
        """The port the clients connected to: the broker's, or over TLS the proxy's."""
        broker = self.manifest.get("broker") or {}  # record_real: a dict; make_capture: ip:port
        return int(broker["port"] if isinstance(broker, dict) else broker.rpartition(":")[2])

    @property
    def keylog(self) -> Path | None:
        """The key log of a capture of TLS connections, as its manifest names it; else None."""
        name = (self.manifest.get("tls") or {}).get("keylog")
        return self.path.with_name(name) if name else None


def captures(where: Path) -> dict[str, Capture]:
    record = [PY, str(HERE / "record_real.py")]
    real, mixed, real3x = where / "real.pcap", where / "mixed.pcap", where / "real3x.pcap"
    real_tls = where / "real-tls.pcap"
    return {
        "real": Capture(
            "real", real, [*record, "--out", str(real)], "real clients against a Tansu broker"
        ),
        "mixed": Capture(
            "mixed",
            mixed,
            [PY, str(HERE / "make_capture.py"), "--out", str(mixed)],
            "synthetic: few, large exchanges",
        ),
        "real3x": Capture(
            "real3x",
            real3x,
            [*record, "--size-mb", "960", "--out", str(real3x)],
            "the real load at three times the size",
        ),
        "real-tls": Capture(
            "real-tls",
            real_tls,
            [*record, "--tls", "--out", str(real_tls)],
            "the real load over TLS 1.3, decrypted with the clients' key log",
        ),
    }


@dataclass
class Command:
    key: str
    label: str
    argv: list[str]
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)  # user + system seconds
    rss_kb: list[int] = field(default_factory=list)
    stdout: str = ""
    failure: str | None = None
    cores: str = CORE  # taskset's list
    baseline: str = "tshark"  # the command its ratios are to: tshark on the same cores


def commands(capture: Capture, tmp: Path) -> list[Command]:
    # The script pip installed beside this interpreter: a shim on PATH (pyenv's adds 0.1 s of
    # shell per run) would be timed with the command.
    script = Path(PY).parent / "kafka-dissect"
    cli = [str(script)] if script.exists() else [PY, "-m", "dissector"]
    path, port, keylog = str(capture.path), capture.port, capture.keylog
    fields = [arg for f in TSHARK_FIELDS for arg in ("-e", f)]
    if keylog is None:
        decode, secrets = ["-d", f"tcp.port=={port},kafka"], []
    else:  # TLS first, Kafka inside it, with the clients' secrets
        decode = ["-o", f"tls.keylog_file:{keylog}", "-d", f"tcp.port=={port},tls"]
        decode += ["-d", f"tls.port=={port},kafka"]
        secrets = ["--tls-keylog", str(keylog)]
    tshark = ["tshark", "-r", path, *decode, "-T", "fields"]
    analyze = [*cli, "analyze", path, "--no-progress", *secrets]
    parquet = str(tmp / "pairs.parquet")
    records = [*analyze, "--table", "records", "-o", str(tmp / "records.parquet")]
    keys = [str(keylog)] if keylog else []
    both = {"cores": BOTH, "baseline": "tshark_both"}
    # The analysis face at real size: a diagnosis reads several tables of the capture at once.
    doctor = [*cli, "doctor", path, "--no-progress"]
    full = [*doctor, "--records", "full"]
    diagnoses = [
        Command("doctor", "kafka-dissect doctor, 2 cores", doctor, **both),
        Command("doctor_full", "kafka-dissect doctor --records full, 2 cores", full, **both),
    ]
    if capture.name != "real":
        diagnoses = []
    return [
        Command("tshark", "tshark -T fields", [*tshark, *fields]),
        Command("summary", "kafka-dissect analyze", analyze),
        Command("decompress", "kafka-dissect analyze --decompress", [*analyze, "--decompress"]),
        Command("parquet", "kafka-dissect analyze -o pairs.parquet", [*analyze, "-o", parquet]),
        Command("streamed", "dissector.dissect() streamed", [PY, "-c", STREAMED, path, *keys]),
        Command("records", "kafka-dissect analyze --table records -o records.parquet", records),
        Command(
            "read_records", 'read_pcap(table="records")', [PY, "-c", READ_RECORDS, path, *keys]
        ),
        Command(
            "streamed_full",
            'dissect(records="full") streamed, every record read',
            [PY, "-c", STREAMED_FULL, path, *keys],
        ),
        # Writing parquet runs behind, on a thread of its own: what a second core gives.
        Command("tshark_both", "tshark -T fields, 2 cores", [*tshark, *fields], cores=BOTH),
        Command("parquet_both", "… -o pairs.parquet, 2 cores", [*analyze, "-o", parquet], **both),
        Command("records_both", "… --table records -o records.parquet, 2 cores", records, **both),
        *diagnoses,
    ]


# --------------------------------------------------------------------------- measuring


def measure(cmd: Command, tmp: Path) -> None:
    """One run of ``cmd`` pinned to its cores: appends its wall time and peak RSS."""
    argv = ["taskset", "-c", cmd.cores, *cmd.argv]
    report = tmp / "time.txt"
    if Path("/usr/bin/time").exists():
        argv = ["/usr/bin/time", "-f", "%M %U %S", "-o", str(report), *argv]
    out_path = tmp / f"{cmd.key}.out"
    with open(out_path, "wb") as out, open(tmp / "stderr", "wb+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        errors = err.read().decode(errors="replace")
    # KB on Linux; GNU time's figures are the command's own (taskset execs it).
    rss, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    if report.exists():
        found = re.findall(r"^(\d+) ([\d.]+) ([\d.]+)$", report.read_text(), re.MULTILINE)
        if found:
            rss, cpu = int(found[-1][0]), float(found[-1][1]) + float(found[-1][2])
        report.unlink()
    if proc.returncode != 0:
        lines = [ln for ln in errors.splitlines() if ln and "Running as user" not in ln]
        cmd.failure = f"exit status {proc.returncode}: " + " / ".join(lines[-3:])
        return
    cmd.walls.append(wall)
    cmd.cpus.append(cpu)
    cmd.rss_kb.append(rss)
    if cmd.key != "tshark":  # tshark's field output is large and only timed
        cmd.stdout = out_path.read_text(errors="replace")
    out_path.unlink()


def bench(capture: Capture, repeat: int, keys: set[str] | None = None) -> list[Command]:
    """``repeat`` rounds of every command (or those in ``keys``), in alternation."""
    warm_cache(capture.path)
    with tempfile.TemporaryDirectory(prefix="bench-") as name:
        tmp = Path(name)
        plan = [c for c in commands(capture, tmp) if keys is None or c.key in keys]
        for n in range(repeat):
            for cmd in plan:
                if cmd.failure:
                    continue
                print(f"  {capture.name} round {n + 1}/{repeat}: {cmd.label}", file=sys.stderr)
                measure(cmd, tmp)
                (tmp / "pairs.parquet").unlink(missing_ok=True)
                (tmp / "records.parquet").unlink(missing_ok=True)
    return plan


def warm_cache(path: Path) -> None:
    """Read the capture once so every run finds it in the page cache."""
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass


def count_packets(path: Path) -> int:
    """Packets in a capture, as the dissector's reader reads them."""
    from dissector.capture import open_capture

    with open_capture(path) as reader:
        return sum(1 for _ in reader)


# --------------------------------------------------------------------------- checks


def streamed_counts(plan: list[Command]) -> dict | None:
    cmd = next(c for c in plan if c.key == "streamed")
    if not cmd.stdout.strip():  # from the last round that ran to the end
        return None
    return json.loads(cmd.stdout.strip().splitlines()[-1])


def checks(capture: Capture, counts: dict | None, plan: list[Command]) -> list[str]:
    """Rows (what, expected, found, verdict) comparing the run's counts with the manifest."""
    if counts is None:
        return []
    manifest = capture.manifest
    rows = []

    def compare(what, want, got):
        verdict = "ok" if want == got else "**MISMATCH**"
        rows.append(f"| {what} | {want:,} | {got:,} | {verdict} |")

    clients = manifest.get("clients")  # per client id from record_real.py
    for cid, client in sorted(clients.items() if isinstance(clients, dict) else ()):
        for api in ("Produce", "Fetch"):
            want = (client.get("requests") or {}).get(api)
            if want:
                compare(
                    f"{api} exchanges of {cid}", want, counts["by_client"].get(f"{cid} {api}", 0)
                )
    if "exchanges" in manifest:  # make_capture.py knows every exchange it wrote
        compare("exchanges", manifest["exchanges"], counts["exchanges"])
    summary = next(c for c in plan if c.key == "summary")
    title = re.search(r"(\d+) exchanges", summary.stdout)
    if title:
        compare("exchanges in the analyze summary", counts["exchanges"], int(title.group(1)))
    return rows


# --------------------------------------------------------------------------- the report


def median(values):
    return statistics.median(values) if values else None


def ratio(mine: list[float], tshark: list[float]) -> str:
    """Median over rounds of this command's time over tshark's in the same round."""
    pairs = list(zip(mine, tshark, strict=False))
    return f"{statistics.median(a / b for a, b in pairs):.2f}" if pairs else ""


def capture_section(capture: Capture, plan: list[Command], repeat: int) -> list[str]:
    size = capture.path.stat().st_size
    packets = count_packets(capture.path)
    counts = streamed_counts(plan)
    exchanges = counts["exchanges"] if counts else None
    per_exchange = f", {size / exchanges / 1e3:.1f} KB per exchange" if exchanges else ""
    lines = [
        f"## {capture.path.name}: {capture.about}",
        "",
        f"{size / 1e6:.1f} MB, {packets:,} packets, {exchanges or 0:,} exchanges"
        f"{per_exchange}; {repeat} rounds.",
        "",
        "| command | wall s | range s | × tshark | CPU s | × tshark CPU | MB/s | packets/s "
        "| exchanges/s | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cmd in plan:
        tshark = next(c for c in plan if c.key == cmd.baseline)
        if not cmd.walls:
            lines.append(f"| {cmd.label} | failed: {cmd.failure} | | | | | | | | |")
            continue
        wall = median(cmd.walls)
        lines.append(
            f"| {cmd.label} | {wall:.2f} | {min(cmd.walls):.2f}–{max(cmd.walls):.2f} "
            f"| {ratio(cmd.walls, tshark.walls)} | {median(cmd.cpus):.2f} "
            f"| {ratio(cmd.cpus, tshark.cpus)} | {size / 1e6 / wall:.1f} "
            f"| {packets / wall:,.0f} | {(exchanges or 0) / wall:,.0f} "
            f"| {median(cmd.rss_kb) / 1024:,.0f} |"
        )
    rows = checks(capture, counts, plan)
    if rows:
        lines += ["", "| check | expected | found | |", "|---|---:|---:|---|", *rows]
    failed = [c for c in plan if c.failure and c.walls]
    lines += [f"- {c.label} failed in a later round: {c.failure}" for c in failed]
    return lines


def flat_section(small: Capture, big: Capture, small_plan, big_plan) -> list[str]:
    """Peak RSS on two sizes of the same load; memory is flat when it does not grow with the
    capture, only with the largest frame (a frame is held whole)."""
    counts = [streamed_counts(small_plan) or {}, streamed_counts(big_plan) or {}]
    lines = [
        "## Peak memory at two capture sizes",
        "",
        f"| | {small.path.name} | {big.path.name} | ratio |",
        "|---|---:|---:|---:|",
    ]

    def row(what, a, b, unit=""):
        if a and b:
            lines.append(f"| {what} | {a:,.0f}{unit} | {b:,.0f}{unit} | {b / a:.2f} |")

    row("capture MB", small.path.stat().st_size / 1e6, big.path.stat().st_size / 1e6)
    row("exchanges", counts[0].get("exchanges"), counts[1].get("exchanges"))
    row(
        "largest frame KB",
        counts[0].get("largest_frame", 0) / 1e3,
        counts[1].get("largest_frame", 0) / 1e3,
    )
    for a in small_plan:
        b = next((c for c in big_plan if c.key == a.key), None)
        if b is not None and a.rss_kb and b.rss_kb:
            row(f"peak RSS MB, {a.label}", median(a.rss_kb) / 1024, median(b.rss_kb) / 1024)
    return lines


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    kb = int(Path("/proc/meminfo").read_text().split()[1])
    return f"{cpu}, {os.cpu_count()} cores, {kb / 1024**2:.0f} GB RAM"


def version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unavailable"
    return out.strip().splitlines()[0] if out.strip() else "unknown"


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# --------------------------------------------------------------------------- main


def ensure(capture: Capture, again: bool) -> None:
    if capture.path.exists() and not again:
        return
    print(f"making {capture.path} ...", file=sys.stderr, flush=True)
    capture.path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(capture.make, check=True, timeout=3600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds per capture (median)")
    parser.add_argument(
        "--captures", default="real,mixed", help="which captures to time (also: real-tls)"
    )
    parser.add_argument("--flat-repeat", type=int, default=1, help="rounds on real3x.pcap")
    parser.add_argument("--no-flat", action="store_true", help="skip real3x.pcap")
    parser.add_argument("--no-stages", action="store_true", help="skip the stage costs")
    parser.add_argument("--record", action="store_true", help="remake the captures first")
    parser.add_argument("--dir", default=str(OUT), help="where the captures are (made)")
    parser.add_argument("--results", default=str(HERE / "results.md"), help="Markdown report")
    args = parser.parse_args(argv)
    for tool in ("tshark", "taskset"):
        if shutil.which(tool) is None:
            print(f"run.py: error: {tool} not found (run tools/setup.sh)", file=sys.stderr)
            return 2
    known = captures(Path(args.dir))
    names = [n.strip() for n in args.captures.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"run.py: error: unknown capture {unknown[0]!r}", file=sys.stderr)
        return 2
    wanted = [known[n] for n in names]
    flat = not args.no_flat and "real" in names
    try:
        for capture in wanted + ([known["real3x"]] if flat else []):
            ensure(capture, args.record)
    except subprocess.SubprocessError as exc:
        print(f"run.py: error: making a capture failed: {exc}", file=sys.stderr)
        return 2

    load_before = load()
    git = subprocess.run(
        ["git", "-C", str(HERE), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    sections, plans = [], {}
    for capture in wanted:
        plans[capture.name] = bench(capture, args.repeat)
        sections += ["", *capture_section(capture, plans[capture.name], args.repeat)]
    if flat:
        big = known["real3x"]
        big_plan = bench(big, args.flat_repeat, {"summary", "parquet", "streamed", "records"})
        sections += ["", *flat_section(known["real"], big, plans["real"], big_plan)]
    if not args.no_stages and "real" in names:
        for script in ("stages.py", "records_stages.py"):
            done = subprocess.run(
                ["taskset", "-c", CORE, PY, str(HERE / script), str(known["real"].path)],
                capture_output=True,
                text=True,
                timeout=3600,
            )
            failed = f"{script} failed: {done.stderr.strip()[-500:]}"
            sections += ["", done.stdout.strip() or failed]

    header = [
        "# Benchmark: kafka-dissect vs tshark",
        "",
        f"- machine: {machine()}; shared with other work while measured (load average "
        f"{load_before} at the start, {load()} at the end)",
        f"- every command pinned to core {CORE} (`taskset -c {CORE}`) but those marked 2 cores "
        f"(`taskset -c {BOTH}`, ratios to tshark on the same cores); commands alternate round "
        "by round; medians (wall time also as its range); captures in the page cache",
        f"- Python {platform.python_version()}; {version(['tshark', '--version'])}; "
        f"code at {git or 'unknown'}",
    ]
    text = "\n".join(header + sections)
    print(text)
    Path(args.results).write_text(text + "\n")
    print(f"\nwritten to {args.results}", file=sys.stderr)
    failed = any(c.failure for plan in plans.values() for c in plan)
    return 1 if failed or "MISMATCH" in text else 0


if __name__ == "__main__":
    sys.exit(main())
