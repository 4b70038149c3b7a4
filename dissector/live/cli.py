"""`kafka-dissect live`: sniff an interface (or read a pcap stream) and show what happens now."""

import argparse
import contextlib
import signal
import sys
import time
import traceback

from ..arguments import add_bodies, add_dissection_arguments, dissection_options
from ..errors import DissectorError
from ..options import Options
from ..tables import FORMATS, TABLES
from ..tables.summary import Summary
from . import sniff
from .capture import DEFAULT_BUFFER_KIB


def add_parser(subparsers):
    p = subparsers.add_parser(
        "live",
        help="dissect live traffic from an interface or a pcap stream",
        description="Capture on an interface (through tcpdump) or read a pcap/pcapng stream, "
        "and show the Kafka traffic as it happens: a live view when stdout is a terminal; "
        "with -o FILE the table goes there and stdout gets the summary; with -o -, or "
        "without -o when stdout is no terminal, one JSON line per row on stdout and the "
        "summary on stderr.",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("-i", "--interface", help="interface to capture on (any: all of them)")
    where.add_argument(
        "-r", "--read", metavar="FILE", help="read a pcap/pcapng stream instead; - for stdin"
    )
    p.add_argument("--filter", dest="bpf", help="a further capture filter (BPF syntax)")
    p.add_argument(
        "--duration",
        type=float,
        help="seconds to run (default: until Ctrl-C, SIGTERM or the end of the input)",
    )
    p.add_argument(
        "-o",
        "--output",
        help=f"write the table as it grows ({', '.join(FORMATS)}); -: JSON lines on stdout",
    )
    p.add_argument(
        "--table", choices=sorted(TABLES), default="pairs", help="table -o writes (%(default)s)"
    )
    p.add_argument(
        "--rotate-mb", type=float, help="with -o FILE: begin a new file past this many MB written"
    )
    p.add_argument(
        "--rotate-seconds",
        type=float,
        help="with -o FILE: begin a new file after this many seconds",
    )
    p.add_argument("--ring", metavar="DIR", help="also keep the raw packets in pcap files there")
    p.add_argument(
        "--ring-files", type=int, default=10, help="pcap files the ring keeps (default %(default)s)"
    )
    p.add_argument(
        "--ring-mb", type=float, default=100, help="MB per ring file (default %(default)g)"
    )
    p.add_argument(
        "--buffer-kib",
        type=int,
        default=DEFAULT_BUFFER_KIB,
        help="kernel capture buffer in KiB (default %(default)s)",
    )
    p.add_argument("--snaplen", type=int, default=0, help="bytes kept per packet (0: all)")
    p.add_argument(
        "--immediate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="hand each packet over as it comes (default: unless the interface's MTU is above "
        "16 KiB, as loopback's, where it would shrink the ring to a few packets)",
    )
    p.add_argument(
        "--idle",
        type=float,
        default=600.0,
        help="seconds without a packet after which a connection is ended (default %(default)g)",
    )
    p.add_argument(
        "--unanswered",
        type=float,
        default=120.0,
        help="seconds a request waits for its response beyond its own timeout (MaxWaitMs, "
        "RebalanceTimeoutMs, ...) before it is reported unanswered (default %(default)g)",
    )
    p.add_argument(
        "--window", type=float, default=10.0, help="seconds the live view's figures cover"
    )
    p.add_argument(
        "--refresh", type=float, default=2.0, help="view redraws per second (1-4, default 2)"
    )
    p.add_argument(
        "--stats-every",
        type=float,
        default=10.0,
        help="seconds between figure lines on stderr when stdout is not a terminal",
    )
    add_dissection_arguments(p)
    add_bodies(p)
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    return p


def run(args):
    signals = _Signals()  # Ctrl-C and SIGTERM are ours from here, until the summary is out
    with signals.installed():
        options = dissection_options(args, args.table if args.output else None)
        writer = _writer(args, Options(**options).for_tables())
        live = _sniff(args, options)
        if writer is not None and args.table == "streams":
            live.on_streams = writer.add
        summary = Summary.of(live.dissector.options)
        view = sys.stdout.isatty() and not _json_stdout(args)
        try:
            with live, _internal_errors(live, args.debug):
                print(f"kafka-dissect: {_started(live.capture)}", file=sys.stderr, flush=True)
                batches = _consumed(live, summary, writer, args.table, signals)
                (_view if view else _lines)(live, args, batches)
        finally:
            if writer is not None:
                writer.close()  # what was written stays a complete file
        # JSON lines on stdout keep it to themselves; else the summary goes there.
        _report(live, summary, writer, args, sys.stderr if _json_stdout(args) else sys.stdout)
    return 0


def _sniff(args, options):
    # The view, the writers and the ring load rich, Arrow and pandas: only for a live run.
    from .ring import PcapRing

    return sniff(
        args.interface,
        args.port,
        read=args.read,
        bpf=args.bpf,
        duration=args.duration,
        buffer_kib=args.buffer_kib,
        snaplen=args.snaplen,
        idle=args.idle,
        unanswered=args.unanswered,
        immediate=args.immediate,
        **options,
        ring=PcapRing(args.ring, args.ring_files, int(args.ring_mb * 1e6)) if args.ring else None,
    )


def _json_stdout(args):
    """JSON lines on stdout: asked for (-o -), or, without -o, when it is no terminal."""
    return args.output == "-" or (not args.output and not sys.stdout.isatty())


def _writer(args, kept):
    """Where the rows go: a (rotating) file, JSON lines on stdout, or nowhere (the view);
    `kept`: what the table keeps of the run's options (Options.for_tables: --topic,
    --no-bodies)."""
    from .output import RotatingWriter, StreamWriter

    rotate_bytes = int(args.rotate_mb * 1e6) if args.rotate_mb else None
    if args.output and args.output != "-":
        return RotatingWriter(args.output, args.table, rotate_bytes, args.rotate_seconds, kept=kept)
    if rotate_bytes or args.rotate_seconds:
        raise ValueError("--rotate-mb and --rotate-seconds rotate files: they need -o FILE")
    if _json_stdout(args):
        return StreamWriter(sys.stdout, args.table, kept=kept)
    return None


def _report(live, summary, writer, args, out):
    from ..tables.summary import tls_notes
    from .view import stats_line

    stats = live.stats()
    for w in live.warnings:
        print(f"kafka-dissect: warning: {w}", file=sys.stderr)
    print(summary.text(_title(live, stats)), file=out)
    for line in tls_notes(stats):
        print(line, file=out)
    print(stats_line(stats), file=out)
    if writer is not None and args.output:
        names = ", ".join(str(f) for f in writer.files)
        print(f"wrote {writer.rows} rows of {args.table} to {names}", file=out)
    out.flush()


def _started(capture):
    if getattr(capture, "proc", None) is None:
        return f"reading {capture.name}"
    mode = "immediate" if capture.immediate else "packed into blocks"
    return f"capturing on {capture.name}, {mode}"


def _title(live, stats):
    drops = stats["kernel_drops"]
    dropped = "" if drops is None else f" ({drops} dropped by the kernel)"
    return (
        f"{live.capture.name}: {stats['packets']} packets{dropped}, "
        f"{stats['connections']} TCP connections examined, {stats['kafka_connections']} Kafka, "
        f"{stats['exchanges']} exchanges"
    )


def _consumed(live, summary, writer, table, signals):
    """The run's batches, each added to the summary and written; the signals heeded, and the
    stop said once begun."""
    said = False
    for batch in live.batches():
        signals.heed(live)
        for e in batch:
            summary.add(e)
        if writer is not None:
            if table != "streams":
                writer.add(batch)
            writer.tick()
        if live.stopping and not said:
            said = True
            _say_stopping(live.stats()["queued"])
        yield batch


def _say_stopping(queued):
    detail = f": dissecting the {queued:,} packets queued (Ctrl-C again to leave them)"
    print(f"kafka-dissect: stopping{detail if queued else ''}", file=sys.stderr, flush=True)


def _lines(live, args, batches):
    """Without the view: a line of figures on stderr every --stats-every seconds."""
    from .view import stats_line

    next_stats = time.monotonic() + args.stats_every
    for _ in batches:
        if time.monotonic() >= next_stats:
            next_stats = time.monotonic() + args.stats_every
            print(stats_line(live.stats()), file=sys.stderr, flush=True)


def _view(live, args, batches):
    from rich.console import Console
    from rich.live import Live

    from .view import loss_line, render
    from .window import Window

    window = Window(args.window)
    hz = min(4.0, max(1.0, args.refresh))
    console = Console()
    with Live(console=console, auto_refresh=False, transient=False) as screen:
        next_draw = 0.0
        for batch in batches:
            window.add(batch)
            now = time.monotonic()
            if now >= next_draw:
                next_draw = now + 1 / hz
                screen.update(
                    render(
                        live.capture.name,
                        live.stats(),
                        window,
                        live.waiting(),
                        live.capture_now(),
                    ),
                    refresh=True,
                )
    console.print(loss_line(live.stats()))


@contextlib.contextmanager
def _internal_errors(live, debug):
    """A bug met in the traffic: one line naming the packet it came with (--debug: traceback)."""
    try:
        yield
    except DissectorError:
        raise
    except Exception as e:
        if debug:
            traceback.print_exc()
        detail = " ".join(str(e).split())
        raise DissectorError(
            f"{live.capture.name}: frame {live.dissector.packets}: internal error: "
            f"{type(e).__name__}: {detail}"
        ) from e


class _Signals:
    """Ctrl-C and SIGTERM, counted by the handler and acted on by the run loop: a handler that
    took a lock, or wrote, could wait forever for a lock the code it interrupted holds. The
    first stops the run (the capture drains, the summary prints), a later one leaves what is
    still queued (files and summary stay complete). One that comes while the capture starts
    stops the run as soon as it runs."""

    def __init__(self):
        self.count = 0
        self._heeded = 0

    def __call__(self, signum, frame):
        self.count += 1

    def heed(self, live):
        while self._heeded < self.count:
            self._heeded += 1
            (live.abandon if live.stopping else live.stop)()

    @contextlib.contextmanager
    def installed(self):
        old = {s: signal.signal(s, self) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
