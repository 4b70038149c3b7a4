"""Live capture on loopback against a Tansu broker: rates, CPU, memory over a long run, and a
picture of the terminal view.

    python benchmarks/bench_live.py                   # everything (about 16 minutes)
    python benchmarks/bench_live.py --only rate       # also: replay, cpu, soak, picture, lab
    python benchmarks/bench_live.py --only lab --capture captures/group-rebalance.pcap

Needs root (or a capture-capable tcpdump), tmux for the picture, tcpreplay and iproute2 for
the lab, and the test dependencies. Writes the report to benchmarks/out/live.md (and prints
it), the picture to benchmarks/live_view.txt, the lab's table to benchmarks/live_lab.md. The
load is tests/sniff_load.py: small Metadata/ApiVersions requests, each answered before the
next, five packets an exchange on loopback.

- rate: `sniff()` in this process under growing load, 15 s a step: packets/s and
  exchanges/s, kernel drops, the dissector's backlog;
- replay: a recorded capture of that load piped into `kafka-dissect live -r -`: the rate the
  reading and dissecting side sustains alone, without the broker and clients competing;
- cpu: `kafka-dissect live` at a typical rate (3 connections x 300 requests/s), 60 s: CPU
  of the command and of its tcpdump;
- soak: the same command for --soak seconds (default 600) with connections that reconnect
  every 20 s, writing parquet rotated every 2 minutes: resident memory sampled every 10 s;
- picture: the terminal view in a 130x42 tmux window, captured with capture-pane;
- lab: a recorded capture (benchmarks/out/real.pcap when there, else --capture) replayed by
  tcpreplay onto a veth pair (tools/replay_lab.py) at each of --rates packets/s while
  `kafka-dissect live -i <other end> --port P -o live.parquet` captures, stopped by SIGINT:
  packets replayed and seen, kernel drops, exchanges against `kafka-dissect analyze` on the
  file, CPU per 10,000 packets/s, and the highest rate without a drop. `--copies N` replays N
  copies of the capture played at once (benchmarks/replicate.py), for longer runs; `--rounds
  N` goes through the rates N times.
"""

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools import replay_lab  # noqa: E402
from tools.broker import Tansu  # noqa: E402

LOAD = ROOT / "tests" / "sniff_load.py"
OUT = ROOT / "benchmarks" / "out"
PICTURE = ROOT / "benchmarks" / "live_view.txt"
LAB_TABLE = ROOT / "benchmarks" / "live_lab.md"
REAL = OUT / "real.pcap"
SAMPLE = ROOT / "captures" / "group-rebalance.pcap"
RATES = "20000,40000,60000,80000,100000"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def load(port, seconds, processes, connections, rate=None, reconnect=None, prefix="load"):
    cmd = [sys.executable, str(LOAD), "--port", str(port), "--seconds", str(seconds),
           "--connections", str(connections)]  # fmt: skip
    if rate:
        cmd += ["--rate", str(rate)]
    if reconnect:
        cmd += ["--reconnect", str(reconnect)]
    return [
        subprocess.Popen([*cmd, "--prefix", f"{prefix}{i}"], stdout=subprocess.PIPE)
        for i in range(processes)
    ]


def finish(procs):
    total = 0
    for p in procs:
        out, _ = p.communicate()
        total += sum(json.loads(out)["exchanges"].values())
    return total


def cpu_seconds(pid):
    """User + system CPU of a process and its children that were waited for."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / CLK_TCK


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def tcpdump_child(pid):
    for line in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        if Path(f"/proc/{line}/comm").read_text().strip() == "tcpdump":
            return int(line)
    return None


def wait_started(proc):
    line = proc.stderr.readline().decode()
    if not line.startswith("kafka-dissect: capturing"):
        raise SystemExit(f"kafka-dissect live did not start: {line}{proc.stderr.read().decode()}")


# -- the parts ----------------------------------------------------------------------------------


def bench_rate(broker):
    import dissector

    rows = []
    for processes, connections in ((1, 1), (1, 2), (2, 2), (3, 2), (4, 2)):
        with dissector.sniff("lo", ports=[broker.port]) as live:
            procs = load(broker.port, 15, processes, connections, prefix="rate")
            backlog = 0
            exchanges = 0
            stopping = False
            for batch in live.batches():
                exchanges += len(batch)
                backlog = max(backlog, live.stats()["queued"])
                if not stopping and all(p.poll() is not None for p in procs):
                    stopping = True
                    live.stop()
            sent = finish(procs)
            s = live.stats()
        rows.append(
            {
                "load": f"{processes}x{connections}",
                "packets/s": s["packets"] / s["capture_seconds"],
                "exchanges/s": exchanges / s["capture_seconds"],
                "kernel drops": s["kernel_drops"],
                "gaps": s["gaps"],
                "all exchanges": exchanges == sent,
                "max backlog (packets)": backlog,
            }
        )
        print(rows[-1], flush=True)
    return rows


def bench_replay(broker, workdir):
    import dissector
    from dissector.live.ring import PcapRing

    # Recorded by a live run's own ring at a rate it sustains (20,000 packets/s), so nothing
    # is lost; replayed, it is read as fast as the command can.
    ring = PcapRing(workdir / "ring", files=1, file_bytes=1 << 40)
    with dissector.sniff("lo", ports=[broker.port], ring=ring) as live:
        procs = load(broker.port, 10, 2, 2, rate=1000, prefix="replay")
        for _ in live.batches():
            if all(p.poll() is not None for p in procs):
                live.stop()
        sent = finish(procs)
        drops = live.stats()["kernel_drops"]
    (path,) = ring.written
    size = path.stat().st_size
    best = None
    for _ in range(3):
        start = time.monotonic()
        with path.open("rb") as f:
            done = subprocess.run(
                ["kafka-dissect", "live", "-r", "-", "--port", str(broker.port)],
                stdin=f,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                check=True,
            )
        wall = time.monotonic() - start
        best = wall if best is None else min(best, wall)
    last = done.stderr.decode().strip().splitlines()[-1]
    packets = int(last.split(" packets,")[0].rsplit(" ", 1)[1])
    exchanges = int(last.split(" exchanges;")[0].rsplit(" ", 1)[1])
    return {
        "capture MB": size / 1e6,
        "packets": packets,
        "exchanges": exchanges,
        "sent": sent,
        "kernel drops while recording": drops,
        "wall s": best,
        "packets/s": packets / best,
        "exchanges/s": exchanges / best,
    }


def run_cli(broker, seconds, workdir, extra=(), stdout=subprocess.DEVNULL):
    return subprocess.Popen(
        ["kafka-dissect", "live", "-i", "lo", "--port", str(broker.port),
         "--duration", str(seconds), "--stats-every", "10", *extra],
        stdout=stdout,
        stderr=subprocess.PIPE,
        cwd=workdir,
    )  # fmt: skip


def bench_cpu(broker, workdir, seconds=60):
    cli = run_cli(broker, seconds + 5, workdir)
    wait_started(cli)
    dump = tcpdump_child(cli.pid)
    procs = load(broker.port, seconds, 1, 3, rate=300, prefix="cpu")
    c0, d0, t0 = cpu_seconds(cli.pid), cpu_seconds(dump), time.monotonic()
    time.sleep(seconds - 2)
    c1, d1, t1 = cpu_seconds(cli.pid), cpu_seconds(dump), time.monotonic()
    sent = finish(procs)
    _, err = cli.communicate()
    summary = err.decode().strip().splitlines()
    return {
        "exchanges/s": sent / seconds,
        "packets/s": 5 * sent / seconds,
        "kafka-dissect CPU %": 100 * (c1 - c0) / (t1 - t0),
        "tcpdump CPU %": 100 * (d1 - d0) / (t1 - t0),
        "last line": summary[-1],
    }


def bench_soak(broker, workdir, seconds):
    # With -o FILE stdout holds the summary alone, at the end.
    cli = run_cli(broker, seconds + 10, workdir, ["-o", "soak.parquet", "--rotate-seconds", "120"],
                  stdout=subprocess.PIPE)  # fmt: skip
    wait_started(cli)
    procs = load(broker.port, seconds, 1, 3, rate=300, reconnect=20, prefix="soak")
    samples = []
    start = time.monotonic()
    while cli.poll() is None:
        samples.append((time.monotonic() - start, rss_mb(cli.pid), cpu_seconds(cli.pid)))
        time.sleep(10)
    sent = finish(procs)
    out, _ = cli.communicate()
    lines = out.decode().strip().splitlines()
    files = sorted(workdir.glob("soak-*.parquet"))
    return {"samples": samples, "sent": sent, "summary": lines[-12:], "files": len(files)}


def take_picture(broker, workdir):
    if shutil.which("tmux") is None:
        return "tmux not installed"
    kafka = __import__("kafka")
    session = f"bench-live-{os.getpid()}"
    procs = load(broker.port, 40, 1, 3, rate=200, prefix="view")
    cmd = f"kafka-dissect live -i lo --port {broker.port} --duration 30; sleep 60"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "130", "-y", "42", cmd],
                   check=True, cwd=workdir)  # fmt: skip
    try:
        # Some real client traffic beside the load: a producer, a consumer group, an error.
        time.sleep(3)
        producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, client_id="orders-app")
        for i in range(200):
            producer.send("orders", f"order-{i}".encode())
        producer.flush()
        consumer = kafka.KafkaConsumer(
            "orders", bootstrap_servers=broker.bootstrap, client_id="billing",
            group_id="billing", auto_offset_reset="earliest", session_timeout_ms=6000,
            max_poll_interval_ms=6000, heartbeat_interval_ms=1000,
        )  # fmt: skip
        end = time.monotonic() + 12
        while time.monotonic() < end:
            consumer.poll(timeout_ms=500)
        admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="ops")
        for _ in range(3):  # the topic exists: TOPIC_ALREADY_EXISTS, in the errors panel
            with contextlib.suppress(kafka.errors.TopicAlreadyExistsError):
                admin.create_topics([kafka.admin.NewTopic("orders", 1, 1)])
        admin.close()
        time.sleep(2)
        picture = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
        ).stdout
        consumer.close()
        producer.close()
    finally:
        finish(procs)
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
    PICTURE.write_text("\n".join(line.rstrip() for line in picture.rstrip().splitlines()) + "\n")
    return f"{PICTURE.relative_to(ROOT)} ({len(picture.splitlines())} lines)"


# -- the replay lab -----------------------------------------------------------------------------


def replicated(capture, copies, workdir):
    """`copies` of the capture played at once, on client addresses of their own."""
    if copies == 1:
        return capture
    from benchmarks.replicate import replicate

    out = workdir / f"{capture.stem}{copies}x.pcap"
    replicate(capture, out, copies, 0.37, None)
    return out


def code_measured():
    """Which dissector the lab's commands run (PYTHONPATH, else the installed package), at
    which commit, compiled or not."""
    probe = "import dissector, dissector.flow as f; print(dissector.__file__, f.__file__)"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           cwd=replay_lab.RUN_DIR, check=True).stdout.split()  # fmt: skip
    package = Path(found[0]).parent.parent

    def git(*args):
        return subprocess.run(["git", "-C", str(package), *args], capture_output=True,
                              text=True).stdout.strip()  # fmt: skip

    commit = (
        f"{git('rev-parse', '--abbrev-ref', 'HEAD')} at {git('log', '-1', '--format=%h (%cs)')}"
    )
    changed = " with changes" if git("status", "--porcelain", "-uno", "--", "dissector") else ""
    hot_path = "compiled" if found[1].endswith(".so") else "pure Python"
    return f"{commit}{changed}, hot path {hot_path}"


def lab_row(pps, run, ref):
    r = run.replayed
    return {
        "asked": pps,
        "reached": r.pps,
        "replayed": r.packets,
        "failed": r.failed,
        "seen": run.packets,
        "kernel drops": run.kernel_drops,
        "exchanges": len(run.exchanges),
        "same exchanges": run.exchanges == ref.exchanges,
        "cpu s": run.cpu_seconds,
        # CPU seconds per 10,000 packets: the share of a core 10,000 packets/s keep busy.
        "cpu per 10k pps": run.cpu_seconds * 10_000 / max(run.packets, 1),
        "stop s": run.stop_seconds,
    }


def bench_lab(capture, rates, copies, rounds, workdir):
    """Every rate in turn, `rounds` times over, so that a change of load on the machine
    touches every rate alike."""
    load_before = os.getloadavg()[0]
    name = capture.name if copies == 1 else f"{copies} copies of {capture.name}"
    capture, skipped = replay_lab.prepare(replicated(capture, copies, workdir), workdir)
    ref = replay_lab.reference(capture, workdir)
    output = workdir / "live.parquet"
    runs = {pps: [] for pps in sorted(rates)}
    with replay_lab.veth_pair() as lab:
        for _ in range(rounds):
            for pps, rows in runs.items():
                output.unlink(missing_ok=True)
                run = replay_lab.live_replay(lab, capture, ref.ports, output, pps)
                rows.append(lab_row(pps, run, ref))
                print(rows[-1], flush=True)
    return {
        "capture": name,
        "MB": capture.stat().st_size / 1e6,
        "packets": runs[min(runs)][0]["replayed"],
        "skipped": skipped,
        "exchanges": len(ref.exchanges),
        "ports": ref.ports,
        "code": code_measured(),
        "load": (load_before, os.getloadavg()[0]),
        "command": " ".join(["python", "benchmarks/bench_live.py", *sys.argv[1:]]),
        "rounds": rounds,
        "runs": runs,
    }


def lossless(rows):
    return all(r["kernel drops"] == 0 and r["same exchanges"] for r in rows)


def drop_free(runs):
    """The highest rate below the first one that lost anything in any round."""
    best = None
    for pps, rows in runs.items():
        if not lossless(rows):
            break
        best = pps
    return best


def lab_report(r):
    def each(rows, key, fmt="{:,}"):
        return " / ".join(fmt.format(row[key]) for row in rows)

    def median(rows, key):
        return statistics.median(row[key] for row in rows)

    best = drop_free(r["runs"])
    rounds = f"; {r['rounds']} rounds of the rates in turn" if r["rounds"] > 1 else ""
    lines = [
        f"`{r['capture']}`: {r['packets']:,} packets ({r['skipped']} left out), "
        f"{r['MB']:.1f} MB, {r['exchanges']:,} exchanges found by `kafka-dissect analyze`; "
        f"`kafka-dissect live -i <veth end> --port {','.join(map(str, r['ports']))} -o "
        f"live.parquet`, stopped by SIGINT when tcpreplay ends{rounds}. {os.cpu_count()} cores, "
        f"load average {r['load'][0]:.1f} before, {r['load'][1]:.1f} after. Code: {r['code']}. "
        f"Run: `{r['command']}`.",
        "",
        "| packets/s asked | reached | packets seen | kernel drops | exchanges | "
        "same as analyze | CPU s | CPU per 10k packets/s | stop s |",
        "|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for pps, rows in r["runs"].items():
        lines.append(
            f"| {pps:,} | {median(rows, 'reached'):,.0f} | {each(rows, 'seen')} | "
            f"{each(rows, 'kernel drops')} | {each(rows, 'exchanges')} | "
            f"{'yes' if lossless(rows) else 'no'} | {median(rows, 'cpu s'):.2f} | "
            f"{100 * median(rows, 'cpu per 10k pps'):.0f}% of a core | "
            f"{median(rows, 'stop s'):.1f} |"
        )
    found = f"{best:,} packets/s" if best else "none of the rates"
    notes = [
        "Packets seen, kernel drops and exchanges: each round; the rest: medians. CPU: "
        "`kafka-dissect live` with its tcpdump, user + system, from the start of capture to "
        "its end; per 10k packets/s: CPU seconds per 10,000 packets seen. Stop s: from SIGINT "
        "to the end of the command.",
        "",
        f"Highest rate without a drop in any round: {found}.",
        "",
    ]
    return [*lines, "", *notes]


# -- report -------------------------------------------------------------------------------------


def report(results):
    lines = ["# Live capture benchmark", ""]
    if "rate" in results:
        lines += ["## Load steps (sniff() in process, 15 s each)", "",
                  "| load | packets/s | exchanges/s | kernel drops | gaps | all exchanges | "
                  "max backlog |", "|---|---:|---:|---:|---:|---|---:|"]  # fmt: skip
        for r in results["rate"]:
            lines.append(
                f"| {r['load']} | {r['packets/s']:,.0f} | {r['exchanges/s']:,.0f} | "
                f"{r['kernel drops']} | {r['gaps']} | {r['all exchanges']} | "
                f"{r['max backlog (packets)']:,} |"
            )
        lines.append("")
    if "replay" in results:
        r = results["replay"]
        lines += [
            "## Replay through `kafka-dissect live -r -` (fastest of 3)",
            "",
            f"{r['packets']:,} packets, {r['exchanges']:,} exchanges (of {r['sent']:,} sent) "
            f"({r['capture MB']:.1f} MB) in {r['wall s']:.2f} s: "
            f"{r['packets/s']:,.0f} packets/s, {r['exchanges/s']:,.0f} exchanges/s",
            "",
        ]
    if "cpu" in results:
        r = results["cpu"]
        lines += ["## CPU at a typical rate", "",
                  f"{r['exchanges/s']:,.0f} exchanges/s (about {r['packets/s']:,.0f} packets/s): "
                  f"kafka-dissect live {r['kafka-dissect CPU %']:.1f}% of a core, tcpdump "
                  f"{r['tcpdump CPU %']:.1f}%", "", f"    {r['last line']}", ""]  # fmt: skip
    if "soak" in results:
        r = results["soak"]
        lines += ["## Soak", "", f"{r['sent']:,} exchanges sent; {r['files']} parquet files", "",
                  "| minute | RSS MB | CPU s |", "|---:|---:|---:|"]  # fmt: skip
        for t, rss, cpu in r["samples"]:
            if int(t) % 60 < 10:
                lines.append(f"| {t / 60:.0f} | {rss:.1f} | {cpu:.1f} |")
        lines += ["", "```", *r["summary"], "```", ""]
    if "picture" in results:
        lines += [f"Picture: {results['picture']}", ""]
    if "lab" in results:
        lines += ["## Replay lab", "", *lab_report(results["lab"])]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", action="append",
                   choices=["rate", "replay", "cpu", "soak", "picture", "lab"])  # fmt: skip
    p.add_argument("--soak", type=float, default=600, help="soak seconds (default 600)")
    p.add_argument(
        "--capture",
        type=Path,
        help="the lab's capture (default "
        "benchmarks/out/real.pcap when there, else captures/group-rebalance.pcap)",
    )
    p.add_argument("--rates", default=RATES, help=f"the lab's packets/s (default {RATES})")
    p.add_argument(
        "--copies",
        type=int,
        default=1,
        help="copies of the capture the lab plays at once (default 1)",
    )
    p.add_argument("--rounds", type=int, default=1,
                   help="times the lab goes through the rates (default 1)")  # fmt: skip
    a = p.parse_args()
    parts = a.only or ["rate", "replay", "cpu", "soak", "picture", "lab"]
    if "lab" in parts and (why := replay_lab.unavailable()):
        p.error(why)
    capture = a.capture or (REAL if REAL.exists() else SAMPLE)
    rates = [int(float(r)) for r in a.rates.split(",")]
    OUT.mkdir(parents=True, exist_ok=True)
    results = {}
    # The lab replays a file: it needs no broker.
    broker = Tansu() if set(parts) - {"lab"} else contextlib.nullcontext()
    with broker as broker, tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        for part in parts:
            print(f"-- {part}", flush=True)
            if part == "rate":
                results[part] = bench_rate(broker)
            elif part == "replay":
                results[part] = bench_replay(broker, workdir)
            elif part == "cpu":
                results[part] = bench_cpu(broker, workdir)
            elif part == "soak":
                results[part] = bench_soak(broker, workdir, a.soak)
            elif part == "picture":
                results[part] = take_picture(broker, workdir)
            elif part == "lab":
                results[part] = bench_lab(capture, rates, a.copies, a.rounds, workdir)
            print(results[part], flush=True)
    text = report(results)
    name = "live.md" if not a.only else f"live-{'-'.join(parts)}.md"
    (OUT / name).write_text(text)
    if "lab" in results:
        title = f"# Live capture on the replay lab, {time.strftime('%Y-%m-%d')}"
        LAB_TABLE.write_text("\n".join([title, "", *lab_report(results["lab"])]))
    print(text)


if __name__ == "__main__":
    main()
