"""Microseconds per exchange by stage of the pipeline, on one capture.

Each prefix of the pipeline runs over the whole capture in this process, rounds of every
prefix in alternation after one warm-up pass (decoders are generated on first use); a stage
costs the median time of its prefix less that of the prefix before, over the exchanges of the
capture:

1. capture: packets read from the file;
2. net + tcp: ``NetDecoder`` and ``TcpTracker`` (link, IP and TCP headers, reassembly);
3. framing: a ``Framer`` per connection and side;
4. headers: request headers decoded, the correlation id of each response read;
5. matching: the whole core, ``Dissector``: the session pairs requests and responses, scans
   the bodies for topics and errors and builds the exchanges, whose bodies are decoded only
   when read;
6. bodies: every exchange's request and response as the JSON text the pairs table holds,
   written from the scanned bytes (``tables.pairs.json_text``; record sets as the command
   line decodes them by default: batch headers);
7. tables: the rest of the pairs table: rows, Arrow columns and the parquet file
   (``arrow_batches`` into a ``TableWriter``).

Prefixes 3 and 4 drive the core's parts directly; they assume connections captured from their
SYN (the recorded benchmark captures are), where the core would also re-find frame starts.

    python benchmarks/stages.py CAPTURE [--rounds 3] [--results benchmarks/out/stages.md]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout, not an install

from dissector import Dissector  # noqa: E402
from dissector.capture import open_capture  # noqa: E402
from dissector.errors import DecodeError, DissectorError  # noqa: E402
from dissector.framing import Frame, Framer  # noqa: E402
from dissector.net.decode import NetDecoder  # noqa: E402
from dissector.options import Options  # noqa: E402
from dissector.protocol import messages  # noqa: E402
from dissector.protocol.primitives import i32  # noqa: E402
from dissector.tables import arrow_batches  # noqa: E402
from dissector.tables.output import TableWriter  # noqa: E402
from dissector.tables.pairs import json_text  # noqa: E402
from dissector.tcp import StreamData, TcpTracker  # noqa: E402


def read(path):
    n = 0
    with open_capture(path) as reader:
        for _ in reader:
            n += 1
    return n


def tcp_events(path):
    """Every event of the TCP stage, for the prefixes that go further."""
    net, tcp = NetDecoder(in_place=True), TcpTracker()  # as the core makes them
    with open_capture(path) as reader:
        for packet in reader:
            seg = net.decode(packet)
            if seg is not None:
                yield from tcp.feed(seg)
    yield from tcp.finish()


def net_tcp(path):
    return sum(1 for _ in tcp_events(path))


def frames(path):
    """(connection, side, Frame) of every frame, from a Framer per connection and side."""
    framers = {}
    for ev in tcp_events(path):
        if ev.__class__ is not StreamData:
            continue
        key = (ev.conn.id, ev.side)
        framer = framers.get(key)
        if framer is None:
            framer = framers[key] = Framer(synced=ev.conn.how == "syn")
        for item in framer.feed(ev.data, ev.frame, ev.ts, ev.start):
            if item.__class__ is Frame:
                yield ev.conn, ev.side, item


def framing(path):
    return sum(1 for _ in frames(path))


def headers(path):
    """Request headers decoded and response correlation ids read; returns how many."""
    decoded = 0
    for conn, side, frame in frames(path):
        try:
            if side == conn.client_side:
                messages.decode_request_header(frame.data)
            else:
                i32(frame.data, 0)
            decoded += 1
        except DecodeError:
            pass
    return decoded


def core(path):
    return sum(1 for _ in exchanges(path))


def exchanges(path, options=None):
    dissector = Dissector(options or Options())
    with open_capture(path) as reader:
        for packet in reader:
            yield from dissector.feed(packet)
    yield from dissector.finish()


def bodies(path):
    n = 0
    for ex in exchanges(path):
        json_text(ex._request), json_text(ex._response)
        n += 1
    return n


def written(path, table="pairs", options=None):
    """`table` of the capture written to a parquet file (in a directory removed after); its
    row count."""
    with tempfile.TemporaryDirectory(prefix="stages-") as tmp:
        with TableWriter(Path(tmp) / f"{table}.parquet", table) as writer:
            for batch in arrow_batches(exchanges(path, options), table):
                writer.write(batch)
        return writer.rows


def tables(path):
    return written(path, "pairs")


# (stage, what its prefix adds, the prefix)
STAGES = (
    ("capture", "read packets", read),
    ("net + tcp", "NetDecoder, TcpTracker", net_tcp),
    ("framing", "Framer per side", framing),
    ("headers", "request header, response correlation id", headers),
    ("matching", "the session (Dissector), bodies scanned", core),
    ("bodies", "request and response bodies as JSON text", bodies),
    ("tables", "pairs table to parquet", tables),
)


def measure(path, rounds):
    """Median CPU and wall seconds of each prefix over ``rounds`` rounds, the exchange count
    and the packet count. CPU time is the figure: on a shared machine wall time also counts
    the time other processes held the core."""
    cpu = [[] for _ in STAGES]
    wall = [[] for _ in STAGES]
    results = [None] * len(STAGES)
    print("  warm-up: bodies", file=sys.stderr, flush=True)
    bodies(path)  # scan and text programs are compiled on first use: not in the figures
    for n in range(rounds):
        for i, (name, _, prefix) in enumerate(STAGES):
            print(f"  round {n + 1}/{rounds}: {name}", file=sys.stderr, flush=True)
            gc.collect()
            started, started_cpu = time.perf_counter(), time.process_time()
            results[i] = prefix(path)
            cpu[i].append(time.process_time() - started_cpu)
            wall[i].append(time.perf_counter() - started)
    exchanges_found = results[[s[0] for s in STAGES].index("matching")]
    medians = [(statistics.median(c), statistics.median(w)) for c, w in zip(cpu, wall, strict=True)]
    return medians, exchanges_found, results[0]


def report(path, rounds, medians, exchanges_found, packets):
    lines = [
        f"## Cost per exchange by stage: {Path(path).name}",
        "",
        f"{exchanges_found:,} exchanges, {packets:,} packets; each prefix of the pipeline run "
        f"in one process, medians of {rounds} round(s) after a warm-up, CPU time; a stage is "
        "its prefix less the one before (a difference within the noise can come out negative).",
        "",
        "| stage | adds | µs per exchange | share | prefix CPU s | prefix wall s |",
        "|---|---|---:|---:|---:|---:|",
    ]
    total = medians[-1][0]
    before = 0.0
    for (name, adds, _), (seconds, wall) in zip(STAGES, medians, strict=True):
        cost = seconds - before
        before = seconds
        lines.append(
            f"| {name} | {adds} | {cost / exchanges_found * 1e6:,.1f} "
            f"| {cost / total:.0%} | {seconds:.2f} | {wall:.2f} |"
        )
    lines.append(
        f"| **all** | | **{total / exchanges_found * 1e6:,.1f}** | 100% | {total:.2f} "
        f"| {medians[-1][1]:.2f} |"
    )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", help="pcap or pcapng file")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every prefix (median)")
    parser.add_argument("--results", help="also write the Markdown here")
    args = parser.parse_args(argv)
    if not Path(args.capture).is_file():
        print(f"stages.py: error: no such capture: {args.capture}", file=sys.stderr)
        return 2
    try:
        medians, found, packets = measure(args.capture, args.rounds)
    except DissectorError as exc:
        print(f"stages.py: error: {exc}", file=sys.stderr)
        return 2
    if not found:
        print(f"stages.py: error: {args.capture}: no Kafka exchanges", file=sys.stderr)
        return 2
    text = report(args.capture, args.rounds, medians, found, packets)
    print(text)
    if args.results:
        Path(args.results).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
