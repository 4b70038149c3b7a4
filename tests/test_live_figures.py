"""The figures of a live run: rates over the capture time the window covers, the lag, and the
kernel's drops as packets missing (each loopback packet is counted twice by the kernel).

The last tests capture on loopback (root, or tcpdump with CAP_NET_RAW and CAP_NET_ADMIN;
skipped with the reason otherwise): a tiny ring drops packets while a reference capture with
a large ring sees them all, and the drops reported are the packets missing.
"""

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import damage
import pytest
from rich.console import Console

import dissector
from dissector.capture.packet import Packet
from dissector.capture.reader import open_capture
from dissector.live import LiveCaptureError, port_filter
from dissector.live.capture import (
    TcpdumpCapture,
    copies_counted,
    packets_dropped,
    read_counters,
    with_report,
)
from dissector.live.runner import LiveRun
from dissector.live.view import loss_line, render, stats_line
from dissector.live.window import Window
from dissector.options import Options
from dissector.session.exchange import Exchange

CAPTURES = Path(__file__).resolve().parent.parent / "captures"

S = 10**9  # nanoseconds a second
T0 = 1_700_000_000 * S  # capture time of the first exchange


def exchange(end, api="Metadata", client_id="c", status="ok", **more):
    return Exchange(
        api_name=api, client_id=client_id, client="127.0.0.1:5000", status=status,
        request_start=end - S // 1000, request_end=end - S // 1000, response_start=end,
        response_end=end, latency_ms=1.0, error_code=0, topics=["t"], **more,
    )  # fmt: skip


def steady(rate, seconds, start=T0, **kw):
    """Exchanges ending at `rate` a second for `seconds` of capture time from `start`."""
    n = int(rate * seconds)
    return [exchange(start + (i + 1) * S // rate, **kw) for i in range(n)]


def rates(window):
    return {r["api"]: r["rate"] for r in window.apis()}


def figures(**more):
    return {
        "seconds": 12.0, "packets": 100, "bytes": 5000, "open_connections": 1, "exchanges": 20,
        "kernel_drops": 0, "bytes_missing": 0, "gaps": 0, "resyncs": 0, "bytes_abandoned": 0,
        "expired_requests": 0,
        "queued": 0, "lag": 0.0, "capture_elapsed": 12.0, **more,
    }  # fmt: skip


def shown(renderable):
    console = Console(record=True, width=130, color_system=None)
    console.print(renderable)
    return console.export_text()


# -- rates ------------------------------------------------------------------------------------


def test_rates_in_the_first_seconds_are_over_the_time_elapsed():
    """Two seconds into a run at 50 requests/s: 50/s, not 100 requests over a 10 s window."""
    window = Window(seconds=10)
    window.add(steady(50, 2))
    window.at(T0 + 2 * S, elapsed=2.0)
    assert rates(window) == {"Metadata": pytest.approx(50)}
    assert window.clients() == [("c 127.0.0.1:5000", pytest.approx(50))]
    assert window.topics() == [("t", pytest.approx(50))]


def test_rates_are_the_traffic_s_in_capture_time():
    """20 s at 500/s then 10 s at 1,000/s: the window holds the last 10 s of capture time,
    whenever the exchanges were dissected: added in one go, as by a run that fell behind
    and catches up, the rate is the traffic's 1,000/s."""
    window = Window(seconds=10)
    window.add(steady(500, 20) + steady(1000, 10, start=T0 + 20 * S))
    window.at(T0 + 30 * S, elapsed=30.0)
    assert rates(window) == {"Metadata": pytest.approx(1000, rel=1e-3)}
    assert window.count() == 10_000
    # Later in capture time, with nothing new, the window empties: no traffic, no rate.
    window.at(T0 + 41 * S, elapsed=41.0)
    assert window.apis() == [] and window.count() == 0


def test_an_exchange_reported_out_of_order_leaves_with_its_own_time():
    window = Window(seconds=10)
    window.add(steady(10, 5, start=T0 + 10 * S) + [exchange(T0, api="Fetch")])
    window.at(T0 + 15 * S, elapsed=15.0)
    assert rates(window) == {"Metadata": pytest.approx(5)}


def test_an_expired_request_is_placed_when_reported():
    """An unanswered request's last packet is minutes old when its deadline passes: it is
    shown in the window it was reported in."""
    window = Window(seconds=10)
    window.at(T0 + 300 * S, elapsed=300.0)
    late = Exchange(api_name="Fetch", client="127.0.0.1:5000", status="unanswered",
                    request_start=T0, request_end=T0)  # fmt: skip
    window.add([late])
    window.at(T0 + 301 * S, elapsed=301.0)
    assert window.errors() == [("unanswered", 1)]


def test_the_view_takes_its_figures_at_the_run_s_capture_time():
    window = Window(seconds=10)
    window.add(steady(200, 3))
    stats = figures(capture_elapsed=3.0)
    text = shown(render("lo (tcp)", stats, window, [], T0 + 3 * S))
    assert re.search(r"Metadata +200\.0 ", text)


# -- lag and queue ----------------------------------------------------------------------------


class Capture:
    """A capture that never runs: only what LiveRun.stats() reads of one."""

    counters = {}
    warnings = []
    name = "fake"

    def __init__(self, started_ns=None):
        if started_ns is not None:
            self.started_ns = started_ns


def queued_run(capture, *ts):
    run = LiveRun(capture, Options())
    run._queue.extend(Packet(i + 1, t, 1, b"", 0) for i, t in enumerate(ts))
    return run


def test_lag_of_a_live_capture_is_the_age_of_the_oldest_queued_packet():
    now = time.time_ns()
    run = queued_run(Capture(started_ns=now - 60 * S), now - 7 * S, now - 2 * S)
    stats = run.stats()
    assert stats["queued"] == 2
    assert 7.0 <= stats["lag"] < 8.0
    assert queued_run(Capture(started_ns=now)).stats()["lag"] == 0.0  # nothing waits


def test_lag_of_a_stream_is_the_capture_time_queued():
    """A piped stream's clock may be another machine's: the lag is what the queue holds."""
    run = queued_run(Capture(), T0, T0 + 3 * S, T0 + 4 * S)
    assert run.stats()["lag"] == pytest.approx(4.0)


def test_queue_and_lag_are_shown():
    stats = figures(queued=150_000, lag=4.25)
    assert "queued 150,000 · lag 4.2 s" in shown(loss_line(stats))
    assert stats_line(stats).endswith("; queued 150000, lag 4.2 s")


def test_bytes_a_peer_abandoned_are_a_warning_not_a_loss():
    """Frames left unfinished when a peer ended its connection (a consumer resetting during a
    Fetch response) are shown, in yellow: the capture lost nothing."""
    stats = figures(bytes_abandoned=65536)
    line = loss_line(stats)
    assert "bytes abandoned 65,536" in shown(line)
    styles = {line.plain[s.start : s.end]: str(s.style) for s in line.spans}
    assert styles["bytes abandoned 65,536"] == "yellow"
    assert styles["bytes missing 0"] == "green"
    assert "resyncs 0, bytes abandoned 65536, expired requests 0" in stats_line(stats)


def test_the_run_reports_the_bytes_a_peer_abandoned(tmp_path):
    """kafka-python.pcap rewritten so that the consumer resets its connection during a Fetch
    response (as in test_holes): the run's figures carry the 65,536 bytes the core counts."""
    pcap = damage.read_pcap(CAPTURES / "kafka-python.pcap")
    reset = damage.reset_after(pcap.packets, 177, "127.0.0.1:38324")
    path = tmp_path / "reset.pcap"
    reset.write(path, pcap)
    run = LiveRun(Capture(), Options())
    for packet in open_capture(str(path)):
        run.dissector.feed(packet)
    assert run.stats()["bytes_abandoned"] == 65536
    assert "bytes abandoned 65,536" in shown(loss_line(run.stats() | {"lag": 0.0}))


# -- kernel drops -----------------------------------------------------------------------------

# tcpdump's reports of a 256 KiB ring on lo in immediate mode, while a reference capture with
# a large ring saw 329,262 packets: 235,131 of them missing. Halved, the drop counter would
# say 235,785; on an earlier run 259,669 for 277,454 missing.
ON_SIGUSR1 = (
    "tcpdump: 94131 packets captured, 658524 packets received by filter, "
    "471570 packets dropped by kernel"
)
AT_EXIT = ["82430 packets captured", "719768 packets received by filter",
           "519338 packets dropped by kernel"]  # fmt: skip


def test_loopback_drops_are_the_packets_missing():
    counters = read_counters(ON_SIGUSR1)
    assert counters == {"captured": 94131, "received": 658524, "kernel_drops": 471570}
    assert packets_dropped(counters, copies=2) == 235_131
    assert packets_dropped(counters, copies=1) == 471_570  # elsewhere: the kernel's count
    report = {}
    for line in AT_EXIT:
        report = with_report(report, read_counters(line), copies=2)
    assert report["packets_dropped"] == 277_454 and report["kernel_drops"] == 519_338


def test_packed_into_blocks_loopback_drops_are_the_counter_halved_until_the_end():
    """Blocks hold many packets not read yet: while tcpdump runs, received - captured would
    count them as missing."""
    counters = read_counters(
        "tcpdump: 200000 packets captured, 1000000 packets received by filter, "
        "20000 packets dropped by kernel"
    )
    assert packets_dropped(counters, copies=2, ring_read=False) == 10_000
    assert packets_dropped(counters, copies=2, ring_read=True) == 20_000  # bounded by drops


def test_packets_still_in_the_ring_are_not_drops():
    counters = read_counters(
        "tcpdump: 0 packets captured, 12 packets received by filter, 0 packets dropped by kernel"
    )
    assert packets_dropped(counters, copies=2) == 0


def test_stats_report_packets_dropped():
    capture = Capture()
    capture.counters = with_report({}, read_counters(ON_SIGUSR1), copies=2)
    assert LiveRun(capture, Options()).stats()["kernel_drops"] == 235_131


def test_which_interfaces_count_packets_twice():
    assert copies_counted("lo") == 2
    assert copies_counted("any") == copies_counted("no-such-if0") == 1


# -- on loopback, against a reference capture -------------------------------------------------

# Connections each sending 100-byte messages one at a time, echoed back: every message and
# echo its own segment (a stream of back-to-back writes would be merged into large ones).
BURST = """
import socket, sys, threading
server = socket.create_server(("127.0.0.1", 0), backlog=16)
print(server.getsockname()[1], flush=True)
sys.stdin.readline()
def echo(conn):
    while data := conn.recv(100):
        conn.sendall(data)
def ping(n):
    with socket.create_connection(server.getsockname()) as c:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(n):
            c.sendall(b"x" * 100)
            got = 0
            while got < 100:
                got += len(c.recv(100 - got))
clients = [threading.Thread(target=ping, args=({messages},)) for _ in range({connections})]
for t in clients:
    t.start()
for _ in clients:
    threading.Thread(target=echo, args=(server.accept()[0],), daemon=True).start()
for t in clients:
    t.join()
"""


@pytest.fixture(scope="module")
def can_capture():
    try:
        TcpdumpCapture("lo", "tcp port 1").close()
    except LiveCaptureError as e:
        pytest.skip(f"cannot capture on loopback: {e}")


def drain(live):
    for _ in live.batches():
        pass


class Counted:
    """A capture's packets counted by a thread, until it ends."""

    def __init__(self, capture):
        self.capture = capture
        self.n = 0
        self.thread = threading.Thread(target=self._count, daemon=True)
        self.thread.start()

    def _count(self):
        for _ in self.capture.packets():
            self.n += 1

    def close(self):
        n = -1
        while n != self.n:  # what the reference still holds reaches its reader first
            n = self.n
            time.sleep(0.2)
        self.capture.stop()
        self.thread.join(30)
        self.capture.close()
        return self.n


@pytest.mark.parametrize(("interface", "immediate"), [("lo", True), ("lo", False), ("any", True)])
def test_drops_reported_against_packets_missing(can_capture, interface, immediate):
    """A 256 KiB ring overflows in a fast burst; a reference tcpdump with a 256 MiB ring of
    short slots sees every packet, and the packets missing are those it has that the run has
    not. On lo the run reports them exactly, in immediate mode or packed into blocks (the
    kernel's own counter says about twice as many). On `any`, which doubles only its
    loopback traffic, it reports the kernel's count, at least the packets missing."""
    burst = subprocess.Popen(
        [sys.executable, "-c", BURST.format(messages=5_000, connections=4)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    port = int(burst.stdout.readline())
    bpf = port_filter([port])
    reference = Counted(TcpdumpCapture("lo", bpf, 262144, snaplen=256, immediate=True))
    live = dissector.sniff(interface, ports=[port], buffer_kib=256, immediate=immediate)
    with live:
        dissecting = threading.Thread(target=drain, args=(live,), daemon=True)
        dissecting.start()
        burst.communicate("go\n", timeout=60)
        time.sleep(0.5)  # the last ACKs and FINs, and the tiny ring read
        live.stop()
        dissecting.join(30)
    stats = live.stats()
    seen = reference.close()
    ref = reference.capture.counters
    assert ref["kernel_drops"] == 0 and ref["received"] == 2 * ref["captured"] == 2 * seen, ref
    assert stats["captured"] == stats["packets"]
    missing = seen - stats["packets"]
    counted = live.capture.counters["kernel_drops"]
    print(f"{interface} {'immediate' if immediate else 'blocks'}: {seen} packets, {missing} "
          f"missing, reported {stats['kernel_drops']}, kernel's counter {counted}")  # fmt: skip
    assert missing > 0
    if interface == "lo":
        assert stats["kernel_drops"] == missing < counted
    else:
        assert stats["kernel_drops"] == counted >= missing


def test_the_live_command_collects_garbage_as_analyze_does():
    """In its own process `live` puts what it loaded out of the collector's sight and makes
    young collections rarer, as `analyze` does: exchanges make no reference cycles, and
    collecting among a full queue of packets cost a fifth of a live run's CPU (the replay
    lab's drop-free rate went from 60,000 to 90,000 packets/s with it)."""
    probe = (
        "import gc, sys\n"
        "from dissector import cli\n"
        "seen = []\n"
        "real = cli.live_cli.run\n"
        "cli.live_cli.run = lambda args: seen.append((gc.get_threshold(), gc.get_freeze_count()))"
        " or 0\n"
        "own = sys.argv[1] == 'own'\n"
        "assert cli.main(['live', '-r', '-'], own_process=own) == 0\n"
        "print(seen[0][0], seen[0][1] > 0)\n"
    )
    own = subprocess.run([sys.executable, "-c", probe, "own"], capture_output=True, text=True)
    assert own.stdout.split("\n")[0] == "(100000, 50, 100) True", own.stderr
    called = subprocess.run([sys.executable, "-c", probe, "lib"], capture_output=True, text=True)
    default = subprocess.run(
        [sys.executable, "-c", "import gc; print(gc.get_threshold())"],
        capture_output=True,
        text=True,
    )
    # Called as a library function, it leaves the caller's process as it was.
    assert called.stdout.split("\n")[0] == f"{default.stdout.strip()} False", called.stderr
