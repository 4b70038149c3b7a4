"""The terminal view of a live run, redrawn a few times a second (rich)."""

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

# Figures that mean traffic was lost (red when not zero); the others are warnings (yellow):
# a resync is also how connections open before the capture are joined; bytes abandoned are
# frames a peer left unfinished when it ended the connection (RST or FIN), not lost by the
# capture; packets queued and the lag say the dissector is behind the capture.
LOST = {"kernel_drops", "bytes_missing", "gaps", "expired_requests"}
LOSS = (
    ("kernel drops", "kernel_drops"),
    ("bytes missing", "bytes_missing"),
    ("gaps", "gaps"),
    ("resyncs", "resyncs"),
    ("bytes abandoned", "bytes_abandoned"),
    ("expired requests", "expired_requests"),
    ("queued", "queued"),
    ("lag", "lag"),
)
# A figure warns from this value (default 1): a lag under a second is delivery, not falling
# behind (the kernel hands packed blocks over up to a second late).
WARN_FROM = {"lag": 1.0}


def _ms(v):
    return "-" if v is None or v != v else f"{v:.1f}"


def _size(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


def _clock(seconds):
    s = int(seconds)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def header(source, stats):
    return Text.assemble(
        ("kafka-dissect live ", "bold"),
        f"{source} · {_clock(stats['seconds'])} · {stats['packets']:,} packets · "
        f"{_size(stats['bytes'])} · {stats['open_connections']} connections open · "
        f"{stats['exchanges']:,} exchanges",
    )


def _figure(key, value):
    if value is None:
        return "?"
    return f"{value:.1f} s" if key == "lag" else f"{value:,}"


def loss_line(stats):
    """The loss figures, always shown; red where not zero."""
    parts = [("loss: ", "bold")]
    for i, (label, key) in enumerate(LOSS):
        value = stats.get(key)
        quiet = value is None or value < WARN_FROM.get(key, 1)
        style = "green" if quiet else ("bold red" if key in LOST else "yellow")
        parts.append((f"{label} {_figure(key, value)}", style))
        if i < len(LOSS) - 1:
            parts.append(" · ")
    return Text.assemble(*parts)


def _table(title, *columns):
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for name in columns:
        right = name not in ("api", "error", "client", "topic", "broker")
        t.add_column(name, justify="right" if right else "left", no_wrap=True)
    return t


def render(source, stats, window, waiting, now_ns, width=120):
    """The view; `now_ns`: the run's capture time now (LiveRun.capture_now), which the
    window's figures are taken at."""
    if now_ns is not None:
        window.at(now_ns, stats.get("capture_elapsed"))
    apis = _table(
        f"last {window.seconds:g} s, per API",
        "api",
        "req/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
        "errors",
    )
    for r in window.apis()[:12]:
        apis.add_row(
            r["api"],
            f"{r['rate']:.1f}",
            _ms(r["p50"]),
            _ms(r["p95"]),
            _ms(r["p99"]),
            _ms(r["max"]),
            str(r["errors"]) if r["errors"] else "",
        )
    errors = _table("errors", "error", "count")
    for name, n in window.errors():
        errors.add_row(Text(str(name), style="red"), str(n))
    clients = _table("top clients", "client", "req/s")
    for c, rate in window.clients():
        clients.add_row(c, f"{rate:.1f}")
    topics = _table("top topics", "topic", "req/s")
    for t, rate in window.topics():
        topics.add_row(t, f"{rate:.1f}")
    slow = _table("slowest recent", "api", "client", "corr", "ms")
    for s in window.slowest():
        slow.add_row(s.api, s.client, str(s.corr if s.corr is not None else "-"), _ms(s.latency))
    wait = _table("oldest waiting", "api", "client", "corr", "waiting s")
    for req, conn in waiting:
        client = conn.endpoints[conn.client_side or 0]
        age = (now_ns - req.frame.first_ts) / 1e9 if now_ns is not None else float("nan")
        wait.add_row(
            req.api_name or "?",
            f"{req.client_id or '-'} {client[0]}:{client[1]}",
            str(req.correlation_id if req.correlation_id is not None else "-"),
            f"{age:.1f}",
        )
    side = Table.grid(padding=(0, 3))
    side.add_row(errors, clients, topics)
    recent = Table.grid(padding=(0, 3))
    recent.add_row(slow, wait)
    return Group(header(source, stats), loss_line(stats), apis, side, recent)


def stats_line(stats):
    """The figures as one line, for stderr when stdout is not a terminal."""
    drops = stats.get("kernel_drops")
    return (
        f"live: {stats['seconds']:.1f} s, {stats['packets']} packets, {stats['bytes']} bytes, "
        f"{stats['exchanges']} exchanges; kernel drops {'?' if drops is None else drops}, "
        f"bytes missing {stats['bytes_missing']} in {stats['gaps']} gaps, "
        f"resyncs {stats['resyncs']}, bytes abandoned {stats['bytes_abandoned']}, "
        f"expired requests {stats['expired_requests']}"
        + (f", connections evicted {stats['evicted']}" if stats.get("evicted") else "")
        + f"; queued {stats['queued']}, lag {_figure('lag', stats['lag'])}"
    )
