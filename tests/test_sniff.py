"""Live capture without a capture device: pcap streams through pipes, bounded state (request
deadlines, idle connections), rotating outputs, the terminal view and the `live` command."""

import gzip
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from rich.console import Console

import dissector
from dissector.capture import open_capture
from dissector.live.capture import explain, port_filter, tcpdump_command
from dissector.live.output import RotatingWriter
from dissector.live.ring import PcapRing
from dissector.live.view import render
from dissector.live.window import Window
from dissector.session.modern import EARLY_WINDOW
from dissector.session.timeouts import EXPIRED, asked_wait_ns, deadline
from dissector.tables import build_table
from dissector.tables.output import read_table

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
SAMPLE = CAPTURES / "kafka-python.pcap"


def piped(data, piece=7):
    """A pipe's read end, written `piece` bytes at a time by a thread: a stream that never
    holds a whole record at once."""
    r, w = os.pipe()

    def write():
        with os.fdopen(w, "wb", buffering=0) as f:
            for i in range(0, len(data), piece):
                f.write(data[i : i + piece])

    threading.Thread(target=write, daemon=True).start()
    return os.fdopen(r, "rb", buffering=0)


def key(e):
    return (e.stream, e.api_key, e.api_version, e.correlation_id, e.request_frame,
            e.response_frame, e.request_start, e.response_end, e.status)  # fmt: skip


# -- pcap streams -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["pcap", "pcapng", "pcap.gz"])
def test_stream_reads_like_the_file(tmp_path, kind):
    data = SAMPLE.read_bytes()
    if kind == "pcapng":
        out = tmp_path / "s.pcapng"
        subprocess.run(["editcap", "-F", "pcapng", str(SAMPLE), str(out)], check=True)
        data = out.read_bytes()
    elif kind == "pcap.gz":
        data = gzip.compress(data)
    with open_capture(SAMPLE) as r:
        expected = list(r)
    with piped(data) as stream, open_capture(stream, name="pipe") as r:
        got = list(r)
        assert r.path == "pipe" and r.total_bytes is None and r.bytes_read == len(data)
    assert got == expected and len(got) == 217


def test_stream_errors_name_the_stream():
    with piped(b"GET / HTTP/1.1\r\n\r\n") as stream, pytest.raises(dissector.CaptureError) as e:
        open_capture(stream, name="pipe")
    assert str(e.value).startswith("pipe: frame 1, offset 0: not a capture file")
    with piped(b"") as stream, pytest.raises(dissector.CaptureError, match="empty"):
        open_capture(stream, name="pipe")


def test_sniff_a_stream_equals_dissect():
    expected = list(dissector.dissect(SAMPLE))
    with dissector.sniff(read=piped(SAMPLE.read_bytes(), 1000)) as live:
        got = list(live)
        stats = live.stats()
    assert sorted(map(key, got)) == sorted(map(key, expected))
    assert len(got) == 51
    assert stats["packets"] == 217 and stats["exchanges"] == 51
    assert stats["gaps"] == stats["bytes_missing"] == stats["expired_requests"] == 0
    assert stats["kernel_drops"] is None  # a stream's writer has them, not this end


def test_cli_reads_stdin_as_json_lines(tmp_path):
    with SAMPLE.open("rb") as f:
        done = subprocess.run(
            [sys.executable, "-m", "dissector", "live", "-r", "-"],
            stdin=f,
            capture_output=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.decode().splitlines()]
    expected = build_table(list(dissector.dissect(SAMPLE)), "pairs")
    assert len(rows) == len(expected) == 51
    got = sorted((r["request_frame"], r["api_name"], r["correlation_id"]) for r in rows)
    want = sorted(
        zip(expected.request_frame, expected.api_name, expected.correlation_id, strict=True)
    )
    assert got == want
    produce = [r for r in rows if r["api_name"] == "Produce"]
    assert set().union(*(r["topics"] for r in produce)) == {"kp-events", "kp-orders"}
    assert rows[0]["request_start"].endswith("Z")
    err = done.stderr.decode()
    assert "<stdin>: 217 packets" in err and "status: ok 50, error 1" in err
    assert "kernel drops ?" in err


# -- bounded state ------------------------------------------------------------------------------


def test_asked_wait():
    assert asked_wait_ns({"MaxWaitMs": 500, "MinBytes": 1}) == 500_000_000
    assert asked_wait_ns({"SessionTimeoutMs": 10_000, "RebalanceTimeoutMs": 300_000}) == 3e11
    assert asked_wait_ns({"Acks": 1, "TimeoutMs": 30_000}) == 30_000_000_000
    assert asked_wait_ns(None) == asked_wait_ns({"TimeoutMs": -1}) == 0


def test_waiting_requests_expire_at_their_deadline():
    """Cut the capture after JoinGroup's request: it waits its rebalance timeout, then is
    reported unanswered; the others only the allowance."""
    packets = list(open_capture(SAMPLE))
    d = dissector.Dissector(dissector.options.Options())
    for p in packets:
        d.feed(p)
    d2 = dissector.Dissector(dissector.options.Options())
    every = list(dissector.dissect(SAMPLE))
    join = next(e for e in every if e.api_name == "JoinGroup" and e.status == "ok")
    out = []
    for p in packets[: join.response_frame - 1]:
        out += d2.feed(p)
    assert d2.stats()["requests_waiting"] == 1
    waiting = d2.waiting()
    assert [r.api_name for r, _conn in waiting] == ["JoinGroup"]
    req = waiting[0][0]
    allowance = 10 * 10**9
    due = deadline(req, allowance)
    assert due == req.frame.last_ts + allowance + join.request["RebalanceTimeoutMs"] * 10**6
    assert d2.expire(due - 1, allowance_ns=allowance) == []
    (row,) = d2.expire(due + 1, allowance_ns=allowance)
    assert (row.api_name, row.status, row.reason) == ("JoinGroup", "unanswered", EXPIRED)
    assert row.request_frame == join.request_frame and row.response_frame is None
    # Its response, when it comes after all, has no request left: an orphan, not a pair,
    # once the window for a request captured after its response has passed.
    late = packets[join.response_frame - 1]
    held = d2.feed(late)
    orphans = d2.expire(late.ts + EARLY_WINDOW + 1, allowance_ns=allowance)
    assert [e.status for e in held + orphans] == ["orphan_response"]
    assert (held + orphans)[0].response_frame == join.response_frame


def test_idle_connections_end_and_rejoin_mid_stream():
    packets = list(open_capture(SAMPLE))
    d = dissector.Dissector(dissector.options.Options())
    half = len(packets) // 2
    rows = []
    for p in packets[:half]:
        rows += d.feed(p)
    now = packets[half - 1].ts
    # connections that carried payload: they have rows
    open_before = d.stats()["open_connections"]
    assert open_before > 0
    streams = [r for event in d.ended() for r in event.rows]
    rows += d.expire(now + 2, idle_ns=1)
    assert d.open_connections() == [] and d.stats()["open_connections"] == 0
    events = d.ended()
    streams += [r for event in events for r in event.rows]
    assert len(events) == open_before
    ended = [r for r in streams if r["end"] == "idle"]
    assert len(ended) == 2 * open_before
    # Traffic that comes later on those connections is taken as new ones joined mid-stream.
    for p in packets[half:]:
        rows += d.feed(p)
    rows += d.finish()
    streams += [r for event in d.ended() for r in event.rows]
    assert {r["client_side_from"] for r in streams if r["first_frame"] > half} <= {
        "port",
        "traffic",
        "syn",
    }
    assert sum(r.status in ("ok", "error") for r in rows) >= 40


# -- outputs ------------------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl", ".csv"])
def test_rotating_writer_by_time(tmp_path, suffix):
    exchanges = list(dissector.dissect(SAMPLE))
    clock = Clock()
    w = RotatingWriter(tmp_path / f"pairs{suffix}", rotate_seconds=10, batch_rows=8, clock=clock)
    for i in range(0, len(exchanges), 5):
        w.add(exchanges[i : i + 5])
        clock.now += 3
        w.tick()
    w.close()
    assert w.rows == 51 and len(w.files) == len({f.name for f in w.files}) >= 3
    assert all(f.name.startswith("pairs-0") for f in w.files)
    import pandas as pd

    parts = pd.concat([read_table(f) for f in w.files], ignore_index=True)
    whole = build_table(exchanges, "pairs")
    assert sorted(parts.request_frame.dropna()) == sorted(whole.request_frame.dropna())
    assert set(parts.api_name) == set(whole.api_name)


def test_rotating_writer_by_size_and_plain(tmp_path):
    exchanges = list(dissector.dissect(SAMPLE))
    w = RotatingWriter(tmp_path / "p.jsonl", rotate_bytes=20_000, batch_rows=4)
    w.add(exchanges)
    w.close()
    sizes = [f.stat().st_size for f in w.files]
    assert len(sizes) > 2 and all(s >= 20_000 for s in sizes[:-1])
    assert sum(len(f.read_text().splitlines()) for f in w.files) == 51
    plain = RotatingWriter(tmp_path / "all.parquet")
    plain.add(exchanges)
    plain.close()
    assert plain.files == [tmp_path / "all.parquet"] and len(read_table(plain.files[0])) == 51


def test_rotating_writer_rejects_a_bad_suffix(tmp_path):
    with pytest.raises(ValueError, match="output format"):
        RotatingWriter(tmp_path / "x.txt")


# -- the view and the capture command -----------------------------------------------------------


def test_view_shows_rates_latency_errors_and_loss():
    exchanges = list(dissector.dissect(SAMPLE))
    window = Window(seconds=10)
    window.add(exchanges)
    apis = {r["api"]: r for r in window.apis()}
    assert apis["Metadata"]["rate"] == pytest.approx(10 / 10)
    assert apis["JoinGroup"]["errors"] == 1
    assert window.errors() == [("MEMBER_ID_REQUIRED", 1)]
    assert window.slowest(1)[0].api == "JoinGroup"
    stats = {
        "seconds": 75, "packets": 217, "bytes": 168775, "open_connections": 2, "exchanges": 51,
        "kernel_drops": 3, "bytes_missing": 0, "gaps": 0, "resyncs": 0, "bytes_abandoned": 0,
        "expired_requests": 1, "queued": 0,
    }  # fmt: skip
    console = Console(record=True, width=130, color_system=None)
    console.print(render("lo (tcp)", stats, window, [], None))
    text = console.export_text()
    assert "00:01:15 · 217 packets" in text
    assert (
        "kernel drops 3 · bytes missing 0 · gaps 0 · resyncs 0 · bytes abandoned 0 · "
        "expired requests 1" in text
    )
    assert "MEMBER_ID_REQUIRED" in text and "kp-orders" in text and "JoinGroup" in text


def test_tcpdump_command_and_errors():
    bpf = port_filter([9092, 9093], "host 10.0.0.1")
    assert bpf == "tcp and (port 9092 or port 9093) and (host 10.0.0.1)"
    assert port_filter([]) == "tcp"
    cmd = tcpdump_command("eth0", bpf, 4096, immediate=True)
    assert cmd[cmd.index("-B") + 1] == "4096" and "--immediate-mode" in cmd
    assert cmd[-3:] == ["-w", "-", bpf] and "-U" in cmd
    assert "--immediate-mode" not in tcpdump_command("lo", bpf, 4096, immediate=False)
    perm = explain("tcpdump: eth0: You don't have permission to perform this capture", "eth0", "")
    assert perm.startswith("no permission to capture on eth0: capturing needs root")
    assert "CAP_NET_RAW" in perm and "wireshark group" in perm
    assert explain("tcpdump: foo: No such device exists", "foo", "") == (
        "unknown interface 'foo' (list them with: tcpdump -D)"
    )
    assert explain("tcpdump: syntax error in filter expression", "lo", "port x").startswith(
        "bad capture filter 'port x': syntax error"
    )


def test_raw_packets_in_a_ring_of_pcap_files(tmp_path):
    ring = PcapRing(tmp_path / "ring", files=2, file_bytes=50_000)
    with dissector.sniff(read=piped(SAMPLE.read_bytes(), 4096), ring=ring) as live:
        rows = list(live)
    kept = sorted((tmp_path / "ring").iterdir())
    assert [p.name for p in kept] == ["ring-0002.pcap", "ring-0003.pcap"]  # the first deleted
    packets = [p for path in kept for p in open_capture(path)]
    original = list(open_capture(SAMPLE))
    tail = original[-len(packets) :]
    assert [(p.ts, p.data, p.wirelen, p.linktype) for p in packets] == [
        (p.ts, p.data, p.wirelen, p.linktype) for p in tail
    ]
    assert len(rows) == 51 and 0 < len(packets) < 217


def test_waiting_07_requests_expire_in_order():
    path = CAPTURES / "legacy-0.7.pcap"
    packets = list(open_capture(path))
    every = list(dissector.dissect(path))
    answered = [e for e in every if e.response_frame is not None and e.request_frame is not None]
    first = min(answered, key=lambda e: e.response_frame)
    d = dissector.Dissector(dissector.options.Options())
    for p in packets[: first.response_frame - 1]:
        d.feed(p)
    rows = d.expire(first.request_end + 10**12, allowance_ns=1)
    assert {(r.protocol, r.status, r.reason) for r in rows} == {("0.7", "unanswered", EXPIRED)}
    assert first.request_frame in [r.request_frame for r in rows]
    assert d.expire(first.request_end + 10**12, allowance_ns=1) == []  # reported once


def test_a_long_poll_waits_its_max_wait():
    """A Fetch's body is only scanned when it arrives; its MaxWaitMs is read once the request
    has waited past the base allowance."""
    packets = list(open_capture(SAMPLE))
    fetch = next(e for e in dissector.dissect(SAMPLE) if e.api_name == "Fetch")
    d = dissector.Dissector(dissector.options.Options())
    for p in packets[: fetch.response_frame - 1]:
        d.feed(p)
    allowance = 10**9
    wait = fetch.request["MaxWaitMs"] * 10**6
    assert wait > 0
    end = fetch.request_end
    assert d.expire(end + allowance + wait - 1, allowance_ns=allowance) == []
    (row,) = d.expire(end + allowance + wait + 1, allowance_ns=allowance)
    assert (row.api_name, row.status, row.reason) == ("Fetch", "unanswered", EXPIRED)
    assert row.request["MaxWaitMs"] == fetch.request["MaxWaitMs"]
