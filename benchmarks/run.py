"""Benchmark the dissector against tshark on one capture, each pinned to one CPU core.

Three timed runs:

* `kafka-dissect analyze FILE --port PORT --no-progress`: the command line, which builds the
  pairs table and prints the summary;
* `tshark -r FILE -d tcp.port==PORT,kafka -T fields -e ...`: Wireshark's Kafka dissector;
* `dissector.dissect()` iterated without building a table ("streaming, no table"): its peak
  memory must stay below 300 MB whatever the size of the capture. This run also counts the
  exchanges per API key and version and per status, which are checked against the counts
  `make_capture.py` wrote next to the capture (<name>.expected.json), when there are any.

Wall time is measured around each command, peak RSS with `/usr/bin/time -v` (or from the
child's resource usage when GNU time is missing). Results are printed as Markdown and written
to benchmarks/out/results.md.

    python benchmarks/run.py [--file CAPTURE] [--port 9092] [--repeat N]
"""

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
DEFAULT_CAPTURE = OUT / "mixed.pcap"
STREAMING_LIMIT_MB = 300
TSHARK_FIELDS = (
    "frame.number",
    "kafka.api_key",
    "kafka.api_version",
    "kafka.correlation_id",
    "kafka.request_frame",
    "kafka.response_frame",
)

# Iterates the exchanges one by one and keeps only counters; prints them as JSON.
STREAMING_SCRIPT = """
import json, sys
from collections import Counter
import dissector

path, port = sys.argv[1], int(sys.argv[2])
versions, statuses = Counter(), Counter()
dissection = dissector.dissect(path, ports=(port,), progress=False)
for ex in dissection:
    versions[f"{ex.api_key}/{ex.api_version}"] += 1
    statuses[ex.status] += 1
d = dissection.dissector
print(json.dumps({
    "exchanges": sum(statuses.values()),
    "by_version": dict(versions),
    "statuses": dict(statuses),
    "packets": d.packets,
    "kafka_connections": d.kafka_connections,
}))
"""


class Run:
    """One measured command: wall and CPU seconds, peak RSS, exit status and output."""

    def __init__(self, name, command):
        self.name = name
        self.command = command
        self.wall = None
        self.cpu = None
        self.rss_kb = None
        self.returncode = None
        self.stdout = ""
        self.stderr = ""

    @property
    def ok(self):
        return self.returncode == 0

    def error(self):
        """The last lines of stderr, for the report."""
        lines = [
            line
            for line in self.stderr.strip().splitlines()
            if line and not line.startswith("Running as user")
        ]
        return "\n".join(lines[-15:]) or f"exit status {self.returncode}"


def measure(run, stdout_path=None, pin=True):
    """Run `run.command` (pinned to core 0 when taskset exists) and fill in the measurements."""
    command = list(run.command)
    if pin and shutil.which("taskset"):
        command = ["taskset", "-c", "0", *command]
    gnu_time = Path("/usr/bin/time")
    report = None
    if gnu_time.exists():
        fd, report = tempfile.mkstemp(prefix="bench-time-", suffix=".txt")
        os.close(fd)
        command = [str(gnu_time), "-v", "-o", report, *command]
    out = open(stdout_path, "wb") if stdout_path else subprocess.PIPE  # noqa: SIM115
    try:
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE)
        if stdout_path:
            stdout, stderr = b"", proc.stderr.read()
        else:
            stdout, stderr = _communicate(proc)
        _, status, usage = os.wait4(proc.pid, 0)
        run.wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if stdout_path:
            out.close()
    run.returncode = proc.returncode
    run.stdout = stdout.decode(errors="replace")
    run.stderr = stderr.decode(errors="replace")
    run.cpu = usage.ru_utime + usage.ru_stime
    run.rss_kb = usage.ru_maxrss  # kilobytes on Linux; the time(1) figure below wins
    if report:
        text = Path(report).read_text(errors="replace")
        Path(report).unlink()
        rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
        if rss:
            run.rss_kb = int(rss.group(1))
        status = re.search(r"Exit status: (\d+)", text)
        if status:
            run.returncode = int(status.group(1))
        if "Command terminated by signal" in text:
            run.stderr += "\n" + text.splitlines()[0]
    return run


def _communicate(proc):
    """Read stdout and stderr to the end without deadlock, leaving the reaping to wait4."""
    import threading

    chunks = {}

    def drain(name, stream):
        chunks[name] = stream.read()

    reader = threading.Thread(target=drain, args=("err", proc.stderr))
    reader.start()
    drain("out", proc.stdout)
    reader.join()
    return chunks["out"], chunks["err"]


def warm_cache(path):
    """Read the capture once so that every timed run starts with it in the page cache."""
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass


def count_pcap_packets(path):
    """Packets in a classic pcap file, or None for other formats."""
    import struct

    with open(path, "rb") as f:
        header = f.read(24)
        order = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<"}.get(header[:4])
        order = order or {b"\xa1\xb2\xc3\xd4": ">", b"\xa1\xb2\x3c\x4d": ">"}.get(header[:4])
        if order is None:
            return None
        record = struct.Struct(order + "IIII")
        packets = 0
        while True:
            head = f.read(16)
            if len(head) < 16:
                return packets
            f.seek(record.unpack(head)[2], os.SEEK_CUR)
            packets += 1


def parse_analyze(stdout):
    """Packets, exchanges and {(api_name, version): requests} from the analyze summary."""
    title = re.search(r": (\d+) packets, .*?, (\d+) exchanges", stdout)
    rows = {}
    for m in re.finditer(r"^(\S+)\s+(\d+|\?)\s+(\d+)\s", stdout, re.MULTILINE):
        if m.group(1) in ("api", "status:"):
            continue
        rows[(m.group(1), m.group(2))] = int(m.group(3))
    statuses = {}
    status = re.search(r"^status: (.*)$", stdout, re.MULTILINE)
    if status:
        for part in status.group(1).split(", "):
            name, _, n = part.rpartition(" ")
            statuses[name] = int(n)
    return {
        "packets": int(title.group(1)) if title else None,
        "exchanges": int(title.group(2)) if title else None,
        "rows": rows,
        "statuses": statuses,
    }


def count_tshark(path):
    """Kafka requests and responses tshark decoded, from its field output."""
    requests = responses = 0
    with open(path, errors="replace") as f:
        for line in f:
            cells = line.rstrip("\n").split("\t")
            if len(cells) < 5 or not cells[3]:
                continue
            n = cells[3].count(",") + 1  # one correlation id per Kafka PDU in the frame
            if cells[4]:
                responses += n
            else:
                requests += n
    return requests, responses


def check_counts(expected, streamed, analyzed):
    """Lines describing each comparison; the second value is True when everything matched."""
    lines = []
    ok = True

    def compare(what, want, got):
        nonlocal ok
        good = want == got
        ok &= good
        lines.append(f"| {what} | {want} | {got} | {'ok' if good else '**MISMATCH**'} |")

    if streamed is not None:
        compare("exchanges (dissect)", expected["exchanges"], streamed["exchanges"])
        for row in expected["requests_by_api_version"]:
            key = f"{row['api_key']}/{row['api_version']}"
            compare(
                f"{row['api_name']} v{row['api_version']} (dissect)",
                row["requests"],
                streamed["by_version"].get(key, 0),
            )
        wanted_keys = {
            f"{r['api_key']}/{r['api_version']}" for r in expected["requests_by_api_version"]
        }
        for key, n in sorted(streamed["by_version"].items()):
            if key not in wanted_keys:
                compare(f"unexpected api_key/version {key} (dissect)", 0, n)
        for status, want in expected["statuses"].items():
            compare(f"status {status} (dissect)", want, streamed["statuses"].get(status, 0))
        for status, n in sorted(streamed["statuses"].items()):
            if status not in expected["statuses"]:
                compare(f"status {status} (dissect)", 0, n)
    if analyzed is not None and analyzed["exchanges"] is not None:
        compare("exchanges (analyze summary)", expected["exchanges"], analyzed["exchanges"])
        for row in expected["requests_by_api_version"]:
            got = analyzed["rows"].get((row["api_name"], str(row["api_version"])), 0)
            compare(
                f"{row['api_name']} v{row['api_version']} (analyze summary)", row["requests"], got
            )
    return lines, ok


def fmt(value, spec, missing="n/a"):
    return missing if value is None else format(value, spec)


def machine_description():
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return f"{cpu}, {os.cpu_count()} cores{mem}"


def tool_version(command):
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unavailable"
    return out.strip().splitlines()[0] if out.strip() else "unknown"


def best(runs):
    """The successful run with the shortest wall time (or the last one if all failed)."""
    good = [r for r in runs if r.ok]
    return min(good, key=lambda r: r.wall) if good else runs[-1]


def tshark_command(capture, port):
    fields = [arg for field in TSHARK_FIELDS for arg in ("-e", field)]
    return ["tshark", "-r", str(capture), "-d", f"tcp.port=={port},kafka", "-T", "fields", *fields]


class Results:
    """The best run of each tool, what their output said, and what the capture holds."""

    def __init__(self, capture, expected):
        self.capture = capture
        self.mb = capture.stat().st_size / 1e6
        self.expected = expected
        self.packets = None
        self.analyze = self.tshark = self.streaming = None
        self.analyzed = self.streamed = None
        self.tshark_counts = None

    def runs(self):
        return [r for r in (self.analyze, self.tshark, self.streaming) if r is not None]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", default=str(DEFAULT_CAPTURE), help="capture to benchmark")
    parser.add_argument("--port", type=int, default=9092, help="broker port (default 9092)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool; the fastest counts")
    parser.add_argument("--expected", help="expected counts (default: <capture>.expected.json)")
    parser.add_argument("--no-tshark", action="store_true", help="skip the tshark run")
    parser.add_argument("--results", default=str(OUT / "results.md"), help="Markdown report")
    args = parser.parse_args(argv)

    capture = Path(args.file)
    if not capture.exists():
        hint = (
            " (run python benchmarks/make_capture.py first)"
            if args.file == str(DEFAULT_CAPTURE)
            else ""
        )
        print(f"run.py: no such capture: {capture}{hint}", file=sys.stderr)
        return 2
    if args.expected:
        expected_file = Path(args.expected)
    else:
        expected_file = capture.with_name(capture.stem + ".expected.json")
    expected = json.loads(expected_file.read_text()) if expected_file.exists() else None
    OUT.mkdir(parents=True, exist_ok=True)
    res = Results(capture, expected)

    kafka_dissect = shutil.which("kafka-dissect")
    cli = [kafka_dissect] if kafka_dissect else [sys.executable, "-m", "dissector"]
    analyze = [*cli, "analyze", str(capture), "--port", str(args.port), "--no-progress"]
    streaming = [sys.executable, "-c", STREAMING_SCRIPT, str(capture), str(args.port)]
    plan = [
        ("analyze", "kafka-dissect analyze", analyze),
        ("tshark", "tshark -T fields", tshark_command(capture, args.port)),
        ("streaming", "dissector.dissect(), streaming, no table", streaming),
    ]
    if args.no_tshark or not shutil.which("tshark"):
        if not args.no_tshark:
            print("run.py: tshark not found; skipping it", file=sys.stderr)
        plan = [p for p in plan if p[0] != "tshark"]

    tshark_out = OUT / f"{capture.stem}.tshark.tsv"
    print(f"capture {capture} ({res.mb:.1f} MB); warming the page cache", file=sys.stderr)
    warm_cache(capture)
    for key, name, command in plan:
        runs = []
        for i in range(args.repeat):
            run = Run(name, command)
            label = f"{name} ({i + 1}/{args.repeat})" if args.repeat > 1 else name
            print(f"running {label} ...", file=sys.stderr, flush=True)
            measure(run, stdout_path=tshark_out if key == "tshark" else None)
            if run.ok:
                print(f"  {run.wall:.2f} s, {run.rss_kb:,} KB", file=sys.stderr)
            else:
                print(f"  FAILED (exit status {run.returncode})", file=sys.stderr)
            runs.append(run)
            if not run.ok:
                break  # a failure repeats; one report of it is enough
        setattr(res, key, best(runs))

    if res.analyze.ok:
        res.analyzed = parse_analyze(res.analyze.stdout)
    if res.streaming.ok:
        try:
            res.streamed = json.loads(res.streaming.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            res.streaming.returncode = -1
            res.streaming.stderr += "\nunreadable output: " + res.streaming.stdout[-500:]
    if res.tshark is not None and res.tshark.ok:
        res.tshark_counts = count_tshark(tshark_out)
    # Packets: from the generator, else counted here, else as the dissector counted them.
    res.packets = (expected or {}).get("packets") or count_pcap_packets(capture)
    if res.packets is None and res.analyzed:
        res.packets = res.analyzed["packets"]

    text, ok = render(res, args.repeat)
    print(text)
    Path(args.results).write_text(text + "\n")
    print(f"\nwritten to {args.results}", file=sys.stderr)
    return 0 if ok else 1


def render(res, repeat):
    """The Markdown report, and whether every check passed and every tool ran."""
    expected = res.expected
    lines = [
        "# Benchmark: kafka-dissect vs tshark",
        "",
        f"- capture: `{res.capture.name}`, {res.mb:.1f} MB, {fmt(res.packets, ',')} packets"
        + (f", {expected['exchanges']:,} Kafka exchanges" if expected else ""),
        f"- machine: {machine_description()}; each tool pinned to one core (`taskset -c 0`)",
        f"- Python {platform.python_version()}; {tool_version(['tshark', '--version'])}",
        f"- {repeat} run(s) per tool, the fastest shown; capture in the page cache",
        "",
        "| tool | wall s | CPU s | MB/s | packets/s | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for run in res.runs():
        if not run.ok:
            lines.append(f"| {run.name} | failed (exit status {run.returncode}) | | | | |")
            continue
        pps = res.packets / run.wall if res.packets else None
        lines.append(
            f"| {run.name} | {run.wall:.2f} | {run.cpu:.2f} | {res.mb / run.wall:.1f} | "
            f"{fmt(pps, ',.0f')} | {run.rss_kb / 1024:,.0f} |"
        )

    tshark = res.tshark
    if tshark is not None and tshark.ok:
        ratios = [
            f"| {run.name} | {run.wall / tshark.wall:.2f} | {tshark.wall / run.wall:.2f} | "
            f"{run.rss_kb / tshark.rss_kb:.2f} |"
            for run in (res.analyze, res.streaming)
            if run.ok
        ]
        if ratios:
            lines += [
                "",
                "| vs tshark | wall-time ratio | speed-up | peak-memory ratio |",
                "|---|---:|---:|---:|",
                *ratios,
            ]

    ok = True
    lines.append("")
    if res.streaming.ok:
        rss_mb = res.streaming.rss_kb / 1024
        within = rss_mb < STREAMING_LIMIT_MB
        ok &= within
        verdict = "within the limit" if within else "**OVER THE LIMIT**"
        lines.append(
            f"- streaming, no table: peak RSS {rss_mb:,.0f} MB against a limit of "
            f"{STREAMING_LIMIT_MB} MB: {verdict}"
        )
    if res.tshark_counts is not None:
        requests, responses = res.tshark_counts
        lines.append(f"- tshark decoded {requests:,} Kafka requests and {responses:,} responses")

    if expected is not None and (res.streamed is not None or res.analyzed is not None):
        check_lines, matched = check_counts(expected, res.streamed, res.analyzed)
        ok &= matched
        lines += [
            "",
            "## Exchange counts",
            "",
            "| what | expected | found | |",
            "|---|---:|---:|---|",
            *check_lines,
        ]
    elif expected is None:
        lines.append("- no expected counts for this capture: exchange counts not checked")

    failed = [run for run in res.runs() if not run.ok]
    if failed:
        ok = False
        lines += ["", "## Failures"]
        for run in failed:
            lines += ["", f"{run.name}:", "", "```", run.error(), "```"]
    return "\n".join(lines), ok


if __name__ == "__main__":
    sys.exit(main())
