"""Live capture on loopback with a real Tansu broker and real clients: what `sniff` and
`kafka-dissect live` see equals `analyze` on a recording of the same moment and what the
clients did; a sustained load is captured without loss; a tiny ring loses packets and says
so; capture errors are one clear line.

Needs a capture-capable user (root, or tcpdump with CAP_NET_RAW and CAP_NET_ADMIN): skipped
with the reason otherwise.
"""

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import dissector
from dissector.live import LiveCaptureError, port_filter
from dissector.live.capture import TcpdumpCapture
from dissector.tables import build_table
from tools.broker import api_versions_ok

LOAD = Path(__file__).resolve().parent / "sniff_load.py"


def _capture_permitted():
    if shutil.which("tcpdump") is None:
        return "tcpdump not installed"
    try:
        cap = TcpdumpCapture("lo", "tcp port 1")
    except LiveCaptureError as e:
        return f"cannot capture on loopback: {e}"
    cap.close()
    return None


NOT_PERMITTED = _capture_permitted()
pytestmark = pytest.mark.skipif(NOT_PERMITTED is not None, reason=str(NOT_PERMITTED))


class Collector:
    """Runs a live run's iteration in a thread while the test drives the clients."""

    def __init__(self, live):
        self.live = live
        self.rows = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error = None
        self.thread.start()

    def _run(self):
        try:
            for batch in self.live.batches():
                self.rows += batch
        except BaseException as e:
            self.error = e

    def finish(self, settle=0.5):
        time.sleep(settle)  # the last ACKs and FINs pass through
        self.live.stop()
        self.thread.join(30)
        assert not self.thread.is_alive() and self.error is None
        return self.rows


def started(cli):
    """Wait for the command's first line on stderr: the capture is running."""
    line = cli.stderr.readline().decode()
    assert line.startswith("kafka-dissect: capturing on lo"), line


def load(port, seconds, processes, connections, prefix):
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(LOAD),
                "--port",
                str(port),
                "--seconds",
                str(seconds),
                "--connections",
                str(connections),
                "--prefix",
                f"{prefix}{i}",
            ],
            stdout=subprocess.PIPE,
        )  # fmt: skip
        for i in range(processes)
    ]
    return procs


def load_results(procs):
    per_client = Counter()
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        result = json.loads(out)
        for name, n in result["exchanges"].items():
            per_client[name] += n
    return per_client


def comparable(df):
    """Every column of the pairs table, as plain values."""
    return sorted(
        tuple(None if v is None or v != v else (v if not isinstance(v, list) else tuple(v))
              for v in row)
        for row in df.astype(object).itertuples(index=False)
    )  # fmt: skip


def test_live_rows_equal_a_recording_and_the_clients(tansu, record):
    kafka = pytest.importorskip("kafka")
    topic = f"sniff-{uuid.uuid4().hex[:8]}"
    values = [f"value-{i}".encode() for i in range(6)]
    with record("same.pcap", fmt="pcap-ns") as rec:
        live = dissector.sniff("lo", ports=[tansu.port], records="full")
        with live:
            collector = Collector(live)
            admin = kafka.KafkaAdminClient(bootstrap_servers=tansu.bootstrap, client_id="s-admin")
            admin.create_topics([kafka.admin.NewTopic(topic, 1, 1)])
            admin.close()
            producer = kafka.KafkaProducer(
                bootstrap_servers=tansu.bootstrap, client_id="s-producer", acks=1, linger_ms=0
            )
            for v in values:
                producer.send(topic, key=b"k", value=v, partition=0).get(timeout=10)
            producer.close()
            consumer = kafka.KafkaConsumer(
                topic,
                bootstrap_servers=tansu.bootstrap,
                client_id="s-consumer",
                group_id=f"g-{topic}",
                auto_offset_reset="earliest",
                # Tansu holds JoinGroup for a time tied to the rebalance timeout: keep it short.
                session_timeout_ms=6000,
                max_poll_interval_ms=6000,
                heartbeat_interval_ms=1000,
            )
            consumed = []
            deadline = time.monotonic() + 30
            while len(consumed) < len(values) and time.monotonic() < deadline:
                for msgs in consumer.poll(timeout_ms=500).values():
                    consumed += [m.value for m in msgs]
            consumer.close()
            rows = collector.finish()
            stats = live.stats()
    assert consumed == values
    assert stats["kernel_drops"] == 0 and stats["gaps"] == 0 and stats["expired_requests"] == 0
    live_pairs = build_table(rows, "pairs")
    recorded = dissector.read_pcap(rec.path, ports=[tansu.port], records="full")
    assert len(live_pairs) == len(recorded) > 20
    # Each capture socket stamps packets itself: times agree to a millisecond, not exactly.
    timed = ["request_start", "request_end", "response_start", "response_end", "latency_ms",
             "server_ms", "queue_ms"]  # fmt: skip
    # Packets sent at the same moment from two CPUs can reach the two sockets in either
    # order, so a frame's number may differ by the few packets sent beside it.
    numbered = ["request_frame", "response_frame"]
    exact = [c for c in recorded.columns if c not in timed + numbered]
    assert comparable(live_pairs[exact]) == comparable(recorded[exact])
    # Rows side by side by exchange, not by place (two near rows may swap).
    key = ["stream", "correlation_id", "api_key"]
    live_by, recorded_by = live_pairs.set_index(key), recorded.set_index(key)
    assert live_by.index.is_unique and live_by.index.sort_values().equals(
        recorded_by.index.sort_values()
    )
    live_by = live_by.loc[recorded_by.index]
    for column in numbered:
        assert (live_by[column] - recorded_by[column]).abs().max() <= 4, column
    for column in timed[:4]:
        delta = (live_by[column] - recorded_by[column]).abs().max()
        assert delta < pd.Timedelta(milliseconds=1), column
    for column in timed[4:]:
        assert ((live_by[column] - recorded_by[column]).abs().fillna(0) < 1).all(), column
    # ... and what the clients did.
    produce = live_pairs[live_pairs.api_name == "Produce"]
    assert len(produce) == len(values) and set(produce.client_id) == {"s-producer"}
    assert (produce.status == "ok").all()
    records = build_table(rows, "records")
    sent = records[(records.api_name == "Produce") & (records.topic == topic)]
    assert list(sent.value) == values and set(sent.key) == {b"k"}
    fetched = records[(records.api_name == "Fetch") & (records.topic == topic)]
    assert sorted(set(fetched.value)) == sorted(values)
    joins = live_pairs[live_pairs.api_name == "JoinGroup"]
    assert set(joins.client_id) == {"s-consumer"}
    assert all(json.loads(r)["GroupId"] == f"g-{topic}" for r in joins.request)


def test_sustained_load_without_loss(tansu):
    """At least 20,000 packets/s through the whole path, every packet and exchange kept.
    A kernel ring of 256 MiB (four times the default) rides out the scheduling stalls of a
    machine busy with other tests, as a broker host would size it for a burst."""
    with dissector.sniff("lo", ports=[tansu.port], buffer_kib=262144) as live:
        collector = Collector(live)
        procs = load(tansu.port, 4, 3, 2, "fast")
        clients = load_results(procs)
        rows = collector.finish()
        stats = live.stats()
    assert stats["kernel_drops"] == 0 and stats["captured"] == stats["packets"]
    assert stats["gaps"] == stats["bytes_missing"] == stats["resyncs"] == 0
    got = Counter(e.api_name for e in rows if e.status == "ok")
    assert got == clients and sum(clients.values()) == len(rows)
    assert {e.client_id.rsplit("-", 1)[0] for e in rows} == {"fast0", "fast1", "fast2"}
    assert stats["packets"] >= len(rows) * 4  # request in two segments, response, ACK
    rate = stats["packets"] / stats["capture_seconds"]
    assert rate >= 20_000, f"only {rate:.0f} packets/s reached"


def test_tiny_ring_reports_drops(tansu, tmp_path):
    """A 256 KiB ring in immediate mode holds three loopback packets: the kernel drops, and
    the run says how many, with the gaps and lost responses they cause."""
    out = tmp_path / "rows.jsonl"
    with out.open("w") as stdout:
        cli = subprocess.Popen(
            [sys.executable, "-m", "dissector", "live", "-i", "lo", "--port", str(tansu.port),
             "--buffer-kib", "256", "--immediate", "--duration", "5"],
            stdout=stdout,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        started(cli)
        clients = load_results(load(tansu.port, 2, 2, 2, "tiny"))
        _, err = cli.communicate(timeout=60)
    err = err.decode()
    assert cli.returncode == 0, err
    dropped = int(re.search(r" packets \((\d+) dropped by the kernel\)", err).group(1))
    assert dropped > 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    ok = sum(r["status"] == "ok" for r in rows)
    assert 0 < ok < sum(clients.values())
    last = err.strip().splitlines()[-1]
    assert f"kernel drops {dropped}," in last and "bytes missing 0 " not in last


def test_ctrl_c_ends_cleanly_with_the_summary(tansu):
    cli = subprocess.Popen(
        [sys.executable, "-m", "dissector", "live", "-i", "lo", "--port", str(tansu.port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    started(cli)
    for _ in range(3):
        assert api_versions_ok("127.0.0.1", tansu.port)
    time.sleep(0.5)
    cli.send_signal(signal.SIGINT)
    out, err = cli.communicate(timeout=30)
    assert cli.returncode == 0, err
    rows = [json.loads(line) for line in out.decode().splitlines()]
    assert [r["api_name"] for r in rows] == ["ApiVersions"] * 3
    assert all(r["status"] == "ok" for r in rows)
    err = err.decode()
    assert "(0 dropped by the kernel)" in err and "status: ok 3," in err


def test_a_tcpdump_pipe_read_from_stdin(tansu):
    """`tcpdump -w - | kafka-dissect live -r -`: the stream ends when tcpdump does."""
    tcpdump = subprocess.Popen(
        [
            "tcpdump",
            "-i",
            "lo",
            "-U",
            "-B",
            "65536",
            "-w",
            "-",
            "-n",
            "-s",
            "0",
            port_filter([tansu.port]),
        ],  # fmt: skip
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    cli = subprocess.Popen(
        [sys.executable, "-m", "dissector", "live", "-r", "-"],
        stdin=tcpdump.stdout,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    tcpdump.stdout.close()
    try:
        assert b"listening on lo" in tcpdump.stderr.readline()
        clients = load_results(load(tansu.port, 1, 1, 1, "piped"))
        # Without --immediate-mode the kernel hands packets over in blocks, at the latest
        # after tcpdump's 1 s timeout: stopped sooner, it would never see the last block.
        time.sleep(1.5)
    finally:
        tcpdump.send_signal(signal.SIGINT)
        tcpdump.wait(10)
    assert b"\n0 packets dropped by kernel" in tcpdump.stderr.read()
    out, err = cli.communicate(timeout=60)
    assert cli.returncode == 0, err
    rows = [json.loads(line) for line in out.decode().splitlines()]
    assert Counter(r["api_name"] for r in rows if r["status"] == "ok") == clients
    assert {r["client_id"] for r in rows} == {"piped0-0"}


def test_capture_errors_are_one_clear_line(tmp_path):
    with pytest.raises(LiveCaptureError) as e:
        dissector.sniff("no-such-if0", ports=[9092])
    assert str(e.value) == "unknown interface 'no-such-if0' (list them with: tcpdump -D)"
    with pytest.raises(LiveCaptureError, match=r"^bad capture filter 'tcp and \(port 9\) and"):
        dissector.sniff("lo", ports=[9], bpf="port nonsense-port")
    done = subprocess.run(
        [sys.executable, "-m", "dissector", "live", "-i", "no-such-if0"],
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert done.stderr.decode() == (
        "kafka-dissect: error: unknown interface 'no-such-if0' (list them with: tcpdump -D)\n"
    )


def test_no_permission_says_what_is_needed(tmp_path, monkeypatch):
    """tcpdump run as an unprivileged user fails as it would for one: the message names root,
    the capabilities and the wireshark group."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) not installed")
    wrapper = tmp_path / "tcpdump"
    wrapper.write_text(
        f"#!/bin/sh\nexec {setpriv} --reuid=65534 --regid=65534 --clear-groups "
        f'--inh-caps=-all {shutil.which("tcpdump")} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(LiveCaptureError) as e:
        dissector.sniff("lo", ports=[9092])
    assert str(e.value).startswith("no permission to capture on lo: capturing needs root")
    assert "CAP_NET_RAW and CAP_NET_ADMIN" in str(e.value)


def test_any_interface(tansu):
    """`-i any` captures in Linux cooked mode (SLL/SLL2 headers), which the net layer reads."""
    with dissector.sniff("any", ports=[tansu.port]) as live:
        collector = Collector(live)
        for _ in range(3):
            assert api_versions_ok("127.0.0.1", tansu.port)
        rows = collector.finish()
    assert [(e.api_name, e.status) for e in rows] == [("ApiVersions", "ok")] * 3
    assert len({e.stream for e in rows}) == 3
    assert live.dissector.stats()["unsupported"] == {}
