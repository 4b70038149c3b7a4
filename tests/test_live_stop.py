"""Stopping a live run, and where its output goes.

`kafka-dissect live` ends on --duration, SIGTERM, Ctrl-C (SIGINT) and the end of its input in
every mode: -r FILE, -r - (a pipe its writer keeps open), -r FIFO (kept open) and -i IF (root,
on loopback). Each way it exits with status 0 within about a second plus the drain (what was
queued is dissected), prints the summary and leaves output files that read back with the rows
it says it wrote; also while the core is behind (a large capture fed as fast as it is read),
and a second Ctrl-C leaves the drain. With -o FILE stdout gets the summary only, -o - puts the
JSON lines there, and --rotate-mb rotates every file format by the bytes written.

Every run is a child process bounded in time: a run that does not end fails its test.
"""

import contextlib
import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_sniff_live import NOT_PERMITTED

import dissector
from dissector.live import runner
from dissector.live.capture import BLOCK_TIMEOUT
from dissector.live.output import RotatingWriter
from dissector.options import Options
from dissector.tables import arrow_batches
from dissector.tables.output import TableWriter, read_table

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "captures" / "kafka-python.pcap"  # 217 packets, 51 exchanges
SAMPLE_PACKETS, SAMPLE_ROWS = 217, 51
# The large capture: that many copies of SAMPLE played at once (130,200 packets, 103 MB),
# read in a fraction of a second, dissected in one and a half (compiled) to three.
COPIES = 600
MEDIUM = 100
# The children run this tree's code, whatever is installed.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
WITHIN = 1.0  # seconds a stop may take beyond the drain...
SLACK = 1.0  # ... and the interpreter's exit, on a machine busy with other tests
DEADLINE = 120  # seconds no run takes unless it hangs
DURATION = 2.0  # for a run that has read its input, else
BEHIND = 0.5  # for a run still reading it
WAYS = ["duration", "SIGTERM", "SIGINT", "end"]


def replicated(tmp_path_factory, copies):
    """A capture of `copies` copies of SAMPLE played at once."""
    out = tmp_path_factory.mktemp("replicated") / f"x{copies}.pcap"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "replicate.py"), str(SAMPLE), "--copies",
         str(copies), "-o", str(out), "--broker", "127.0.0.1:9092"],
        check=True, capture_output=True, timeout=DEADLINE, env=ENV,
    )  # fmt: skip
    return out


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    return replicated(tmp_path_factory, COPIES)


@pytest.fixture(scope="module")
def medium(tmp_path_factory):
    """Enough for a few batches of rows (5,100), quicker to read to its end."""
    return replicated(tmp_path_factory, MEDIUM)


class Feed:
    """What `-r` reads: a file, or a capture's bytes written by a thread into stdin or a FIFO
    that it keeps open until end()."""

    def __init__(self, mode, capture, tmp_path):
        self.mode = mode
        self.data = capture.read_bytes()
        self.path = capture
        self._end = threading.Event()
        if mode == "fifo":
            self.path = tmp_path / "in.fifo"
            os.mkfifo(self.path)

    @property
    def args(self):
        return ["-r", "-" if self.mode == "stdin" else str(self.path)]

    @property
    def stdin(self):
        return subprocess.PIPE if self.mode == "stdin" else subprocess.DEVNULL

    def start(self, proc):
        if self.mode != "file":
            threading.Thread(target=self._write, args=(proc,), daemon=True).start()

    def _write(self, proc):
        # A FIFO opens once the run opened it for reading.
        out = proc.stdin if self.mode == "stdin" else open(self.path, "wb")  # noqa: SIM115
        with contextlib.suppress(OSError):  # a larger pipe: the reader gets ahead of the core
            fcntl.fcntl(out.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
        try:
            out.write(self.data)
            out.flush()
            self._end.wait(DEADLINE)
            out.close()
        except BrokenPipeError:
            pass  # the run stopped before reading it all

    def end(self):
        self._end.set()


class Run:
    """`kafka-dissect live ARGS` in a child, stdout and stderr to files (no terminal)."""

    def __init__(self, tmp_path, args, stdin=subprocess.DEVNULL):
        self.out = tmp_path / "stdout.txt"
        self.err = tmp_path / "stderr.txt"
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dissector", "live", *map(str, args)],
                stdin=stdin, stdout=out, stderr=err, env=ENV, cwd=tmp_path,
            )  # fmt: skip

    def stderr(self):
        return self.err.read_text()

    def said(self):
        """The end of stderr, for a failure's message."""
        return self.stderr()[-3000:]

    def stdout(self):
        return self.out.read_text()

    def wait_for(self, pattern, timeout=60):
        """Wait for `pattern` on stderr; its match, and when it was seen."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.stderr(), re.MULTILINE)
            if found:
                return found, time.monotonic()
            assert self.proc.poll() is None, f"ended before {pattern!r}:\n{self.said()}"
            time.sleep(0.02)
        pytest.fail(f"no {pattern!r} within {timeout} s:\n{self.said()}")

    def started(self):
        return self.wait_for(r"^kafka-dissect: (reading|capturing on) ")[1]

    def signal(self, sig):
        self.proc.send_signal(sig)
        return time.monotonic()

    def ended(self):
        """Wait for the exit: its status, and when it came."""
        try:
            status = self.proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running after {DEADLINE} s:\n{self.said()}")
        return status, time.monotonic()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def runs():
    """Starts runs; those still running when the test ends are killed."""
    started = []

    def start(*args, **kwargs):
        started.append(Run(*args, **kwargs))
        return started[-1]

    yield start
    for run in started:
        run.kill()


def drain_seconds(run, summary):
    """How long the drain the run announced should take, at the rate the run dissected."""
    said = re.search(r"^kafka-dissect: stopping(?:: dissecting the ([\d,]+) packets)?",
                     run.stderr(), re.MULTILINE)  # fmt: skip
    assert said, run.stderr()
    queued = int((said.group(1) or "0").replace(",", ""))
    seconds, packets = re.search(r"^live: ([\d.]+) s, (\d+) packets", summary, re.M).groups()
    return queued * float(seconds) / max(1, int(packets))


def check_ended(run, status, out):
    """Exit status 0, the summary on stdout and nothing else there, the output file readable
    with the rows the summary says: their number."""
    summary = run.stdout()
    assert status == 0, run.stderr()
    title = re.search(r"^.+?: (\d+) packets.*, (\d+) exchanges$", summary, re.MULTILINE)
    assert title and "status: ok " in summary, summary
    assert not re.search(r"^\{", summary, re.MULTILINE)  # no JSON lines beside the summary
    wrote = re.search(rf"^wrote (\d+) rows of pairs to {re.escape(str(out))}$", summary, re.M)
    assert wrote, summary
    rows = int(wrote.group(1))
    assert len(read_table(out)) == rows == int(title.group(2))
    return rows, summary


def output(tmp_path, mode, way):
    """parquet and jsonl in turn, so that each mode and each way writes both."""
    turn = (["file", "stdin", "fifo"].index(mode) + WAYS.index(way)) % 2
    return tmp_path / ("out.parquet", "out.jsonl")[turn]


def duration(way, seconds):
    return ["--duration", seconds] if way == "duration" else []


def stop(run, feed, way, started, seconds=DURATION):
    """Stop the run `way`; when the stop was due."""
    if way == "duration":
        return started + seconds  # the run began before it said so
    if way == "end":
        feed.end()
        return time.monotonic()
    return run.signal(getattr(signal, way))


# -- -r -, -r FIFO: an open stream that sends nothing more ----------------------------------


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("mode", ["stdin", "fifo"])
def test_an_open_stream_stops(tmp_path, runs, mode, way):
    """The writer keeps the pipe open but sends nothing more: every way ends the run at once,
    after every exchange was written."""
    feed = Feed(mode, SAMPLE, tmp_path)
    out = output(tmp_path, mode, way)
    args = [*feed.args, "-o", out, "--stats-every", "0.1", *duration(way, DURATION)]
    run = runs(tmp_path, args, stdin=feed.stdin)
    feed.start(run.proc)
    started = run.started()
    run.wait_for(rf"^live: .* {SAMPLE_PACKETS} packets")  # all read and dissected
    due = stop(run, feed, way, started)
    status, exited = run.ended()
    rows, _ = check_ended(run, status, out)
    assert rows == SAMPLE_ROWS
    assert exited - due < WITHIN + SLACK


def test_a_fifo_nobody_opens_stops(tmp_path, runs):
    """A FIFO no writer ever opens: the run starts all the same, and stops."""
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    run = runs(tmp_path, ["-r", fifo, "-o", tmp_path / "out.parquet"])
    run.started()
    sent = run.signal(signal.SIGTERM)
    status, exited = run.ended()
    assert check_ended(run, status, tmp_path / "out.parquet")[0] == 0
    assert exited - sent < WITHIN + SLACK


# -- -r FILE, -r -, -r FIFO: the core behind ----------------------------------------------------


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("mode", ["file", "stdin", "fifo"])
def test_stops_while_the_core_is_behind(tmp_path, runs, large, medium, mode, way):
    """A large capture read faster than it is dissected: a stop ends the reading at once and
    the run once what was queued is dissected; the end of the input, once all of it is."""
    feed = Feed(mode, medium if way == "end" else large, tmp_path)
    out = output(tmp_path, mode, way)
    args = [*feed.args, "-o", out, "--stats-every", "0.1", *duration(way, BEHIND)]
    run = runs(tmp_path, args, stdin=feed.stdin)
    feed.start(run.proc)
    started = run.started()
    run.wait_for(r"^live: .* [1-9]\d* packets")  # the core is at work
    due = stop(run, feed, way, started, BEHIND)
    status, exited = run.ended()
    rows, summary = check_ended(run, status, out)
    if way == "end":
        assert rows == SAMPLE_ROWS * MEDIUM
    else:
        drain = drain_seconds(run, summary)
        assert drain > 0 and 0 < rows <= SAMPLE_ROWS * COPIES
        assert exited - due < WITHIN + SLACK + drain


def test_a_second_ctrl_c_leaves_the_drain(tmp_path, runs, large):
    feed = Feed("stdin", large, tmp_path)
    out = tmp_path / "out.parquet"
    run = runs(tmp_path, [*feed.args, "-o", out, "--stats-every", "0.1"], stdin=feed.stdin)
    feed.start(run.proc)
    run.started()
    run.wait_for(r"^live: .* [1-9]\d* packets")
    run.signal(signal.SIGINT)
    said, _ = run.wait_for(r"^kafka-dissect: stopping: dissecting the ([\d,]+) packets")
    assert int(said.group(1).replace(",", "")) > 0
    again = run.signal(signal.SIGINT)
    status, exited = run.ended()
    rows, _ = check_ended(run, status, out)
    assert exited - again < WITHIN + SLACK
    left = re.search(r"^kafka-dissect: warning: stopped at once: (\d+) queued packets left",
                     run.stderr(), re.MULTILINE)  # fmt: skip
    assert left and int(left.group(1)) > 0, run.stderr()
    assert rows < SAMPLE_ROWS * COPIES


# -- -i: root on loopback -------------------------------------------------------------------


def unused_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(NOT_PERMITTED is not None, reason=str(NOT_PERMITTED))
@pytest.mark.parametrize("way", ["duration", "SIGTERM", "SIGINT"])
def test_a_capture_stops(tmp_path, runs, way):
    """On loopback, packed into blocks: the stop waits for the kernel's last block (tcpdump's
    timeout), and tcpdump, asked for no counters once stopping, ends without complaint."""
    port = unused_port()
    out = tmp_path / ("out.parquet" if way != "SIGINT" else "out.jsonl")
    run = runs(tmp_path, ["-i", "lo", "--port", port, "-o", out, *duration(way, DURATION)])
    started = run.started()
    for _ in range(3):  # refused connections: a few packets, no Kafka
        with socket.socket() as s, pytest.raises(ConnectionRefusedError):
            s.connect(("127.0.0.1", port))
    time.sleep(0.5)
    due = stop(run, None, way, started)
    status, exited = run.ended()
    rows, summary = check_ended(run, status, out)
    assert rows == 0 and " (0 dropped by the kernel)" in summary
    assert exited - due < BLOCK_TIMEOUT + WITHIN + SLACK
    assert "pcap_stats" not in run.stderr() and "warning" not in run.stderr()


class SlowToEnd:
    """A capture that ends a while after its stop, as tcpdump does, and records the calls."""

    name = "slow"
    counters = {}
    warnings = []

    def __init__(self, after_stop):
        self.after_stop = after_stop
        self.calls = []
        self._stopped = threading.Event()

    def packets(self):
        self._stopped.wait(DEADLINE)
        time.sleep(self.after_stop)
        yield from ()

    def refresh(self):
        self.calls.append("refresh")

    def stop(self):
        self.calls.append("stop")
        self._stopped.set()

    def close(self):
        self.stop()


def test_no_counters_asked_once_stopping():
    """tcpdump asked for its counters (SIGUSR1) after its SIGINT answers "pcap_stats: ... Bad
    file descriptor": once stopped, the run asks no more."""
    capture = SlowToEnd(after_stop=3 * runner.TICK)
    with runner.LiveRun(capture, Options(), duration=2 * runner.TICK) as live:
        list(live)
    first_stop = capture.calls.index("stop")
    assert "refresh" in capture.calls[:first_stop]
    assert "refresh" not in capture.calls[first_stop:]


def test_a_reader_that_cannot_be_interrupted_is_not_waited_for(monkeypatch):
    """A capture whose reader ignores the stop: the run ends STOP_GRACE after, without
    spinning while it waits, and says what happened."""
    monkeypatch.setattr(runner, "STOP_GRACE", 0.5)
    capture = SlowToEnd(after_stop=DEADLINE)
    live = runner.LiveRun(capture, Options(), duration=0.2)
    done = threading.Event()
    threading.Thread(target=lambda: (list(live), done.set()), daemon=True).start()
    began, cpu = time.monotonic(), time.process_time()
    assert done.wait(10), "the run waited for its reader"
    assert time.monotonic() - began < 0.2 + 0.5 + runner.TICK + SLACK
    assert time.process_time() - cpu < 0.3
    assert any("did not end within 0.5 s of the stop" in w for w in live.warnings)


# -- output rules -------------------------------------------------------------------------------


@pytest.mark.parametrize("output", ["-", "file"])
def test_the_written_tables_keep_what_the_options_say(tmp_path, runs, output):
    """--topic keeps a records table's rows of that topic, and --no-bodies leaves the pairs'
    bodies empty, in a file and in JSON lines, as read_pcap does."""
    compression = SAMPLE.parent / "compression.pcap"
    for table, options, kept in (
        ("records", ["--topic", "comp-lz4"], {"topics": ["comp-lz4"]}),
        ("pairs", ["--no-bodies"], {"bodies": False}),
    ):
        file = tmp_path / f"{table}.jsonl"
        where = ["-o", "-" if output == "-" else file]
        run = runs(tmp_path, ["-r", compression, "--table", table, *where, *options])
        status, _ = run.ended()
        assert status == 0, run.stderr()
        text = run.stdout() if output == "-" else file.read_text()
        got = [json.loads(line) for line in text.splitlines()]
        expected = dissector.read_pcap(compression, table=table, **kept)
        assert len(got) == len(expected) > 0, table
        if table == "records":
            assert {r["topic"] for r in got} == {"comp-lz4"}
        else:
            assert all(r["request"] is None and r["response"] is None for r in got)


@pytest.mark.parametrize("output", [None, "-", "file"])
def test_stdout_holds_json_lines_or_the_summary(tmp_path, runs, output):
    """Without -o (stdout no terminal) and with -o -: JSON lines on stdout, the summary on
    stderr; with -o FILE: the summary alone on stdout."""
    file = tmp_path / "out.jsonl"
    args = ["-r", SAMPLE] + {None: [], "-": ["-o", "-"], "file": ["-o", file]}[output]
    run = runs(tmp_path, args)
    status, _ = run.ended()
    assert status == 0, run.stderr()
    lines = run.stdout().splitlines()
    if output == "file":
        check_ended(run, status, file)
        assert lines[0].startswith(f"{SAMPLE}: {SAMPLE_PACKETS} packets")
    else:
        assert len(lines) == SAMPLE_ROWS and all(line.startswith("{") for line in lines)
        assert f"{SAMPLE}: {SAMPLE_PACKETS} packets" in run.stderr()
        assert ("wrote 51 rows of pairs to <stdout>" in run.stderr()) == (output == "-")


def test_rotation_needs_a_file(tmp_path, runs):
    run = runs(tmp_path, ["-r", SAMPLE, "-o", "-", "--rotate-mb", "0.2"])
    status, _ = run.ended()
    assert status == 2
    assert run.stderr().endswith("need -o FILE\n")


def body_bytes(path):
    """A file's size without parquet's footer (written at close, after the rows)."""
    size = path.stat().st_size
    if path.suffix != ".parquet":
        return size
    with path.open("rb") as f:
        f.seek(-8, os.SEEK_END)
        return size - int.from_bytes(f.read(4), "little") - 8


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_rotating_writer_by_size(tmp_path, suffix):
    """A file is closed at the first batch that takes it past the size, counted as written:
    what the file object still buffers counts too."""
    exchanges = [e for e in dissector.dissect(SAMPLE) if e.api_name == "ApiVersions"] * 10
    one = TableWriter(tmp_path / f"one{suffix}")
    one.write(next(arrow_batches(exchanges[:1], "pairs")))
    one.close()
    batch = body_bytes(one.path)  # rows of alike size: a batch of one row, a header
    limit = 4000
    w = RotatingWriter(tmp_path / f"p{suffix}", rotate_bytes=limit, batch_rows=1)
    for e in exchanges:
        w.add([e])
        w.tick()
    w.close()
    sizes = [body_bytes(f) for f in w.files]
    assert len(sizes) >= 3
    assert all(limit <= s < limit + 1.1 * batch for s in sizes[:-1]), (sizes, batch)
    assert sum(len(read_table(f)) for f in w.files) == w.rows == len(exchanges)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_cli_rotates_by_size(tmp_path, runs, medium, suffix):
    out = tmp_path / f"p{suffix}"
    run = runs(tmp_path, ["-r", medium, "-o", out, "--rotate-mb", "0.2"])
    status, _ = run.ended()
    assert status == 0, run.stderr()
    files = sorted(tmp_path.glob(f"p-*{suffix}"))
    assert len(files) >= 2 and all(f.stat().st_size > 2e5 for f in files[:-1])
    rows = SAMPLE_ROWS * MEDIUM
    assert f"wrote {rows} rows of pairs to {', '.join(map(str, files))}\n" in run.stdout()
    assert sum(len(read_table(f)) for f in files) == rows
