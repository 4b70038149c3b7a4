"""A lab for live capture: a veth pair, a recorded capture replayed onto one end by tcpreplay
at a chosen rate, and `kafka-dissect live` capturing on the other end.

    python tools/replay_lab.py captures/group-rebalance.pcap --pps 2000
    python tools/replay_lab.py benchmarks/out/real.pcap --pps 40000 -o pairs.parquet
    python tools/replay_lab.py --clean       # remove the labs of runs that were killed

A run prints what was replayed, what the live command saw (packets, kernel drops, exchanges),
whether its exchanges are those `kafka-dissect analyze` finds in the file, and the CPU time of
the live command. Needs root, iproute2, tcpreplay and tcpdump. The live and analyze commands
are `python -m dissector` of the interpreter running this, so PYTHONPATH picks the code.

The pair lives in the current network namespace with no address. Replayed frames keep the
capture's MAC addresses, none of them the receiving end's, so its IP stack discards them
unanswered: only the capture sees them, and nothing leaves the pair.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dissector.capture import Packet, open_capture  # noqa: E402
from dissector.live.ring import PcapRing  # noqa: E402
from dissector.net.link import HANDLERS, IPV4, IPV6, LINKTYPE_ETHERNET, OTHER  # noqa: E402

PREFIX = "kdlab"
OWNER = "kafka-dissector replay lab, pid"  # the sender end's alias, for clean()
# veth's largest MTU (the kernel's ETH_MAX_MTU). A loopback capture's IP packets reach 65,535
# bytes (lo's MTU is 65,536; IP's length field stops one short), so every one of them fits as
# recorded, Ethernet header on top; prepare() skips, and counts, any larger frame.
MTU = 65535
MAX_FRAME = MTU + 14
# What a frame of another link type gets in front of its IP packet to travel as Ethernet.
ETHERNET_HEADER = {IPV4: bytes(12) + b"\x08\x00", IPV6: bytes(12) + b"\x86\xdd"}
PYTHON_DISSECTOR = (sys.executable, "-m", "dissector")
# The dissector commands run from here, so that no checkout enters sys.path through the
# working directory: PYTHONPATH, else the installed package, decides which code runs.
RUN_DIR = "/"
KEY_COLUMNS = ["client", "broker", "api_key", "correlation_id", "status"]
# A live command far behind drains its queue (up to 200,000 packets) after SIGINT before it
# ends: ample for that, a bound for a hang.
STOP_TIMEOUT = 300


class LabError(RuntimeError):
    """The lab could not be built, or a command in it failed."""


def unavailable() -> str | None:
    """Why the lab cannot run here, or None."""
    if os.geteuid() != 0:
        return "the replay lab needs root (veth links, raw frames)"
    for tool in ("ip", "tcpreplay", "tcpdump"):
        if shutil.which(tool) is None:
            return f"{tool} not installed"
    return None


# -- the veth pair ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Lab:
    sender: str  # tcpreplay writes frames here...
    receiver: str  # ...and they arrive here, where the capture listens


def _ip(*args: str, check: bool = True) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise LabError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises KeyboardInterrupt as Ctrl-C does, so that either removes the lab.
    Signal handlers belong to the main thread: elsewhere SIGTERM is left as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def veth_pair(mtu: int = MTU):
    """A veth pair of fresh names (kdlab0-XXXXXX, kdlab1-XXXXXX), both ends up; removed on
    exit whatever happens, SIGTERM and Ctrl-C included."""
    suffix = secrets.token_hex(3)  # names stay within the kernel's 15 characters
    lab = Lab(f"{PREFIX}0-{suffix}", f"{PREFIX}1-{suffix}")
    with _sigterm_as_interrupt():
        try:
            _ip("link", "add", lab.sender, "mtu", str(mtu), "type", "veth",
                "peer", "name", lab.receiver, "mtu", str(mtu))  # fmt: skip
            _ip("link", "set", lab.sender, "alias", f"{OWNER} {os.getpid()}")
            for end in (lab.sender, lab.receiver):
                _ip("link", "set", end, "up")
            yield lab
        finally:
            _ip("link", "del", lab.sender, check=False)  # its peer goes with it


def lab_links() -> list[str]:
    """The names of every lab end that exists, whoever made it."""
    links = json.loads(_ip("-j", "link", "show", "type", "veth") or "[]")
    return sorted(link["ifname"] for link in links if link["ifname"].startswith(PREFIX))


def clean() -> list[str]:
    """Remove the labs whose process is gone (killed before it could); their names."""
    removed = []
    for link in json.loads(_ip("-j", "link", "show", "type", "veth") or "[]"):
        owner = link.get("ifalias", "")
        if link["ifname"].startswith(PREFIX) and owner.startswith(OWNER):
            pid = int(owner.removeprefix(OWNER))
            if not Path(f"/proc/{pid}").exists():
                _ip("link", "del", link["ifname"], check=False)
                removed.append(link["ifname"])
    return removed


# -- the capture as tcpreplay sends it -------------------------------------------------------


def prepare(capture: Path, workdir: Path) -> tuple[Path, int]:
    """The capture ready for an Ethernet veth, and the packets left out: the file itself when
    it is plain pcap of Ethernet frames that fit the MTU (as tcpdump writes on Linux, loopback
    included), else an Ethernet copy in `workdir`. tcpreplay sends frames as they are, and
    reads neither gzip nor the other link types' headers as Ethernet."""
    with open_capture(capture) as packets:
        if (
            packets.format == "pcap"
            and not packets.compressed
            and all(p.linktype == LINKTYPE_ETHERNET and len(p.data) <= MAX_FRAME for p in packets)
        ):
            return Path(capture), 0
    return _ethernet_copy(capture, workdir / "ethernet")


def _ethernet_copy(capture: Path, directory: Path) -> tuple[Path, int]:
    ring = PcapRing(directory, files=1, file_bytes=1 << 62)  # one file, never rotated
    skipped = 0
    with open_capture(capture) as packets:
        for p in packets:
            frame = _as_ethernet(p)
            if frame is None or len(frame) > MAX_FRAME:
                skipped += 1
                continue
            wirelen = p.wirelen + len(frame) - len(p.data)
            ring.write(p._replace(linktype=LINKTYPE_ETHERNET, data=frame, wirelen=wirelen))
    ring.close()
    if not ring.written:
        raise LabError(f"{capture}: no IP packet to replay")
    return ring.written[0], skipped


def _as_ethernet(p: Packet) -> bytes | None:
    """The packet as an Ethernet frame; None when it carries no IP (nothing Kafka)."""
    if p.linktype == LINKTYPE_ETHERNET:
        return p.data
    handler = HANDLERS.get(p.linktype)
    version, offset = handler(p.data) if handler else (OTHER, 0)
    if version == OTHER:
        return None
    return ETHERNET_HEADER[version] + p.data[offset:]


# -- tcpreplay -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Replayed:
    packets: int  # sent
    failed: int
    seconds: float
    pps: float  # the rate reached


_REPLAY_STATS = {
    "packets": r"Successful packets:\s+(\d+)",
    "failed": r"Failed packets:\s+(\d+)",
    "seconds": r"sent in ([\d.]+) seconds",
    "pps": r"Rated: .*?([\d.]+) pps",
}


def parse_replay(text: str) -> Replayed:
    """tcpreplay's closing statistics."""
    found = {k: re.search(pattern, text) for k, pattern in _REPLAY_STATS.items()}
    if not all(found.values()):
        raise LabError(f"tcpreplay printed no statistics:\n{text}")
    return Replayed(
        packets=int(found["packets"][1]),
        failed=int(found["failed"][1]),
        seconds=float(found["seconds"][1]),
        pps=float(found["pps"][1]),
    )


def replay(interface: str, capture: Path, pps: float | None = None, loop: int = 1) -> Replayed:
    """Send the capture's frames onto `interface` at `pps` packets a second (None: as fast as
    tcpreplay can), `loop` times over."""
    rate = ["--pps", str(pps)] if pps else ["--topspeed"]
    cmd = ["tcpreplay", "-i", interface, *rate, "--loop", str(loop), str(capture)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise LabError(f"tcpreplay failed: {(done.stderr or done.stdout).strip()}")
    return parse_replay(done.stdout)


# -- kafka-dissect, live and from the file ---------------------------------------------------


@dataclass
class LiveRun:
    replayed: Replayed
    packets: int  # the live command saw
    kernel_drops: int
    exchanges: list[tuple]  # exchange_keys() of its table
    cpu_seconds: float  # user + system, its tcpdump included, from capture start to exit
    stop_seconds: float  # from SIGINT to exit: the drain of what it had not yet dissected
    stderr: str


@dataclass
class Reference:
    exchanges: list[tuple]  # exchange_keys() of analyze's table
    ports: list[int]  # the brokers' ports in it


def exchange_keys(table: Path) -> list[tuple]:
    """Who asked what, and how it ended, one sorted tuple an exchange: the columns a live run
    and a file agree on whatever the timing (`stream` numbers, times and frames differ)."""
    import pyarrow.parquet as pq

    if not table.exists():  # a run that saw no exchange writes nothing
        return []
    columns = pq.read_table(table, columns=KEY_COLUMNS).to_pydict().values()
    return sorted(zip(*columns, strict=True), key=str)  # str: 0.7's correlation ids are None


def reference(capture: Path, workdir: Path, dissector=PYTHON_DISSECTOR) -> Reference:
    """What `kafka-dissect analyze` finds in the capture (Kafka on any port)."""
    table = workdir / "analyze.parquet"
    cmd = [*dissector, "analyze", str(capture.resolve()), "--no-progress", "-o", str(table)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=RUN_DIR)
    if done.returncode != 0:
        raise LabError(f"kafka-dissect analyze failed: {done.stderr.strip()}")
    keys = exchange_keys(table)
    return Reference(keys, sorted({int(broker.rsplit(":", 1)[1]) for _, broker, *_ in keys}))


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _started(proc: subprocess.Popen) -> None:
    """Wait for the live command's first line: from then on the capture is running."""
    line = proc.stderr.readline()
    if not line.startswith("kafka-dissect: capturing"):
        raise LabError(f"kafka-dissect live did not start: {line}{proc.stderr.read()}")


def _stop(proc: subprocess.Popen) -> tuple[str, str, float, float]:
    """Ctrl-C the live command, as a person would; its stdout (the summary), its stderr, the
    CPU time it and its reaped children (tcpdump) used in its life, and the seconds it took
    to end."""
    # Reaped children's usage: from here on the live command is the only child to be reaped.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise LabError(f"kafka-dissect live still running {STOP_TIMEOUT} s after SIGINT") from None
    stopping = time.monotonic() - start
    if proc.returncode != 0:
        raise LabError(f"kafka-dissect live failed ({proc.returncode}):\n{err}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return out, err, cpu, stopping


_TITLE = re.compile(r": (\d+) packets \((\d+) dropped by the kernel\), ")


def live_replay(lab: Lab, capture: Path, ports, output: Path, pps=None, loop=1,
                dissector=PYTHON_DISSECTOR) -> LiveRun:  # fmt: skip
    """Replay the capture onto the lab while `kafka-dissect live -i RECEIVER --port P -o
    OUTPUT` captures, then stop it with SIGINT, as at a terminal."""
    port_args = [arg for port in ports for arg in ("--port", str(port))]
    cmd = [*dissector, "live", "-i", lab.receiver, *port_args, "-o", str(output.resolve())]
    # With -o FILE its stdout holds the summary alone, at the end.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=RUN_DIR)  # fmt: skip
    try:
        _started(proc)
        before = _cpu_seconds(proc.pid)
        replayed = replay(lab.sender, capture, pps, loop)
        summary, err, cpu, stopping = _stop(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    title = _TITLE.search(summary)
    if title is None:
        raise LabError(f"no summary from kafka-dissect live:\n{summary}{err}")
    return LiveRun(replayed, int(title[1]), int(title[2]), exchange_keys(output),
                   cpu - before, stopping, err)  # fmt: skip


# -- command line ----------------------------------------------------------------------------


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("capture", nargs="?", type=Path, help="pcap or pcapng (gzip too)")
    p.add_argument("--pps", type=float, help="packets a second (default: top speed)")
    p.add_argument("--loop", type=int, default=1, help="times to replay the capture")
    p.add_argument("--port", type=int, action="append",
                   help="broker port (repeatable; default: those analyze finds)")  # fmt: skip
    p.add_argument("-o", "--output", type=Path, help="keep the live table (.parquet)")
    p.add_argument("--clean", action="store_true", help="remove labs of killed runs, then end")
    a = p.parse_args(argv)
    if a.clean:
        print("\n".join(clean()) or "no lab left behind")
        return 0
    if a.capture is None or (why := unavailable()):
        p.error(why if a.capture else "a capture is needed")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        capture, skipped = prepare(a.capture, workdir)
        ref = reference(capture, workdir)
        output = a.output.resolve() if a.output else workdir / "live.parquet"
        with veth_pair() as lab:
            run = live_replay(lab, capture, a.port or ref.ports, output, a.pps, a.loop)
    r = run.replayed
    print(f"replayed {r.packets} packets ({r.failed} failed, {skipped} left out) in "
          f"{r.seconds:.2f} s, {r.pps:,.0f} packets/s")  # fmt: skip
    print(f"live: {run.packets} packets, {run.kernel_drops} dropped by the kernel, "
          f"{len(run.exchanges)} exchanges; analyze: {len(ref.exchanges)} exchanges, "
          f"{'the same' if run.exchanges == ref.exchanges else 'DIFFERENT'}")  # fmt: skip
    print(f"CPU of kafka-dissect live (its tcpdump included): {run.cpu_seconds:.2f} s")
    return 0 if run.exchanges == ref.exchanges or a.loop != 1 else 1


if __name__ == "__main__":
    sys.exit(main())
