"""Packets from a live interface: a tcpdump child writing pcap into a pipe.

tcpdump brings what a live capture needs and Python alone does not: libpcap with a BPF filter
in the kernel, a kernel ring of the size asked for (`-B`), immediate delivery (no batching
delay) and the kernel's drop counters, which it prints when asked (SIGUSR1) and when it
exits. The pipe is read by the project's streaming pcap reader, so a slow reader shows up as
kernel drops, counted, never as silent loss.

The kernel counts copies, not packets: a loopback interface hands each packet to the capture
socket twice, as it leaves and as it arrives, and libpcap discards the outgoing copy in user
space, after the kernel has counted both (and, with the ring full, dropped either). The
packets dropped are worked out from the counters by `packets_dropped`.
"""

import contextlib
import fcntl
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time

from ..capture import open_capture
from ..errors import DissectorError

DEFAULT_BUFFER_KIB = 65536  # the loopback MTU is 64 KiB: a small ring overflows in a burst
# In immediate mode libpcap gives every packet a ring slot as large as the interface's MTU:
# above this, a ring of a sane size holds too few packets (a 64 MiB ring on loopback: about
# 1,000), so packets are packed into blocks instead, at the cost of up to a second of delay.
IMMEDIATE_MAX_MTU = 16384
# Outside immediate mode the kernel hands a block over when it fills or after tcpdump's
# timeout (1 s); tcpdump stopped earlier never sees what the block holds. So stop waits this.
BLOCK_TIMEOUT = 1.2
PIPE_BYTES = 1 << 20  # pipe capacity asked for: tcpdump blocks less while the reader is busy
START_TIMEOUT = 10.0
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)

# tcpdump's statistics lines, on SIGUSR1 (one line) and at exit (one per counter).
_COUNTER = re.compile(
    r"(\d+) packets? (captured|received by filter|dropped by kernel|dropped by interface)"
)
_KEYS = {
    "captured": "captured",
    "received by filter": "received",
    "dropped by kernel": "kernel_drops",
    "dropped by interface": "interface_drops",
}
IFF_LOOPBACK = 0x8  # linux/if.h; /sys/class/net/IF/type is then 772 (ARPHRD_LOOPBACK)

NEEDS = (
    "capturing needs root, or CAP_NET_RAW and CAP_NET_ADMIN on tcpdump "
    "(setcap cap_net_raw,cap_net_admin=eip $(command -v tcpdump)); "
    "the wireshark group grants them to dumpcap only"
)


class LiveCaptureError(DissectorError):
    """A capture that cannot start: permission, interface or filter; one line, what to do."""


def port_filter(ports, extra=None):
    """The BPF filter of a run: TCP to or from any broker port, and `extra` if given."""
    parts = []
    if ports:
        parts.append("tcp and (" + " or ".join(f"port {int(p)}" for p in ports) + ")")
    else:
        parts.append("tcp")
    if extra:
        parts.append(f"({extra})")
    return " and ".join(parts)


def interface_mtu(interface):
    """The largest MTU of the interface (of all, for "any"); None if unknown."""
    names = os.listdir("/sys/class/net") if interface == "any" else [interface]
    mtus = []
    for name in names:
        with contextlib.suppress(OSError, ValueError), open(f"/sys/class/net/{name}/mtu") as f:
            mtus.append(int(f.read()))
    return max(mtus, default=None)


def wants_immediate(interface):
    mtu = interface_mtu(interface)
    return mtu is None or mtu <= IMMEDIATE_MAX_MTU


def copies_counted(interface):
    """How many times the kernel's capture counters count each packet of `interface`: 2 on a
    loopback interface (its outgoing and incoming copies), else 1. "any" is 1 too: it doubles
    its loopback traffic only, a share the counters do not tell, so there the drops stay the
    kernel's count, an upper bound of the packets missing."""
    with contextlib.suppress(OSError, ValueError), open(f"/sys/class/net/{interface}/flags") as f:
        return 2 if int(f.read(), 16) & IFF_LOOPBACK else 1
    return 1


def read_counters(line):
    """The counters in one of tcpdump's statistics lines, by key; {} for any other line."""
    return {_KEYS[what]: int(n) for n, what in _COUNTER.findall(line)}


def packets_dropped(counters, copies=1, ring_read=True):
    """Packets of the traffic the kernel dropped, each counted once, from tcpdump's counters.

    Where the kernel counts `copies` of each packet (2 on loopback), the packets the filter
    saw (received / copies) that tcpdump did not get (captured) are the packets missing, once
    the kernel's ring is read (`ring_read`: tcpdump has exited, or in immediate mode, where the
    ring holds few packets, a slot each); never more than the drops. While packets packed into
    blocks wait unread, the drop counter halved stands in. It is close but low: with the ring
    full, the incoming copy, which comes second, loses its place more often (measured on
    loopback: 1 to 180 fewer than the packets missing packed into blocks, up to 9% fewer in
    immediate mode with a 256 KiB ring)."""
    drops = counters.get("kernel_drops")
    if drops is None or copies == 1:
        return drops
    if not ring_read or "received" not in counters or "captured" not in counters:
        return drops // copies
    return max(0, min(drops, counters["received"] // copies - counters["captured"]))


def with_report(counters, found, copies=1, ring_read=True):
    """`counters` with those of a report (`read_counters`) and the packets they mean dropped:
    a new dict, so a reader in another thread sees the figures of one report."""
    counters = {**counters, **found}
    counters["packets_dropped"] = packets_dropped(counters, copies, ring_read)
    return counters


def tcpdump_command(interface, bpf, buffer_kib, snaplen=0, tcpdump="tcpdump", immediate=True):
    return [
        tcpdump,
        "-i",
        interface,
        "-U",  # each packet flushed into the pipe as it is captured
        # No TPACKET_V3 batching: packets handed over at once, but each takes a whole
        # snaplen-sized slot of the ring (see README: loopback's 64 KiB MTU).
        *(["--immediate-mode"] if immediate else []),
        "-B",
        str(buffer_kib),
        "-n",
        "--time-stamp-precision",
        "nano",  # the kernel's timestamps as they are: the tables hold nanoseconds
        "-s",
        str(snaplen),
        "-w",
        "-",
        bpf,
    ]


def explain(stderr, interface, bpf):
    """tcpdump's complaint as one line saying what is wrong and what would fix it."""
    text = " ".join(stderr.split())
    low = text.lower()
    if "permission" in low or "not permitted" in low:
        return f"no permission to capture on {interface}: {NEEDS}"
    if "no such device" in low or "doesn't exist" in low or "no such interface" in low:
        return f"unknown interface {interface!r} (list them with: tcpdump -D)"
    if any(w in low for w in ("syntax error", "unknown port", "unknown host", "parse error")) or (
        "filter" in low and "expression" in low
    ):
        detail = text.removeprefix("tcpdump: ")
        return f"bad capture filter {bpf!r}: {detail}"
    return f"tcpdump on {interface} failed: {text or 'no message'}"


class TcpdumpCapture:
    """A running tcpdump on one interface; iterate `packets()`, then `stop()`.

    `counters` holds the kernel's figures (captured, received, kernel_drops,
    interface_drops) from tcpdump's latest report, and the packets they mean dropped
    (packets_dropped); `refresh()` asks for a new one. `started_ns`: this machine's clock
    (which stamps the packets) when tcpdump began to capture.
    """

    def __init__(self, interface, bpf, buffer_kib=DEFAULT_BUFFER_KIB, snaplen=0, immediate=None):
        if immediate is None:
            immediate = wants_immediate(interface)
        self.interface = interface
        self.bpf = bpf
        self.immediate = immediate
        self.name = f"{interface} ({bpf})"
        self.counters = {}
        self.copies = copies_counted(interface)
        self.started_ns = None
        self._stderr = []
        self._stopping = None
        tcpdump = shutil.which("tcpdump")
        if tcpdump is None:
            raise LiveCaptureError("tcpdump not found: install it (Debian package tcpdump)")
        try:
            self.proc = subprocess.Popen(
                tcpdump_command(interface, bpf, buffer_kib, snaplen, tcpdump, immediate),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                start_new_session=True,  # Ctrl-C reaches us; we stop tcpdump in order
            )
        except OSError as e:
            raise LiveCaptureError(f"cannot run tcpdump: {e}") from e
        with contextlib.suppress(OSError):
            fcntl.fcntl(self.proc.stdout.fileno(), F_SETPIPE_SZ, PIPE_BYTES)
        self.listening = False  # tcpdump said it captures
        self._listening = threading.Event()  # it did, or its stderr ended
        self._err_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._err_thread.start()
        self._wait_listening()

    def _read_stderr(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            if "listening on" in line:
                self.started_ns = time.time_ns()
                self.listening = True
                self._listening.set()
                continue
            found = read_counters(line)
            if found:
                self.counters = with_report(self.counters, found, self.copies, self.immediate)
                continue
            self._stderr.append(line)
            del self._stderr[:-20]
        # tcpdump has exited: its last report, with nothing more to read from the ring.
        self.counters = with_report(self.counters, {}, self.copies, ring_read=True)
        self._listening.set()

    def _wait_listening(self):
        deadline = time.monotonic() + START_TIMEOUT
        while not self._listening.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                break
        if not self.listening:
            self._kill()
            self._err_thread.join(2)
            raise LiveCaptureError(explain("\n".join(self._stderr), self.interface, self.bpf))

    def packets(self):
        """The captured packets, as they come, until tcpdump stops."""
        with open_capture(self.proc.stdout, name=self.interface) as reader:
            yield from reader

    def refresh(self):
        """Ask tcpdump for its counters (it answers on stderr, read by a thread)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGUSR1)

    def stop(self):
        """SIGINT (once what the kernel still holds has been handed over): tcpdump flushes the
        pipe, reports its final counters and exits."""
        if self._stopping is None:
            self._stopping = threading.Timer(
                0 if self.immediate else BLOCK_TIMEOUT, self._interrupt
            )
            self._stopping.daemon = True
            self._stopping.start()

    def _interrupt(self):
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGINT)

    def close(self):
        """Wait for tcpdump to end (it ends on stop(); killed if it does not) and its report."""
        self.stop()
        try:
            self.proc.wait(timeout=5 + BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._kill()
        self._err_thread.join(5)
        with contextlib.suppress(OSError):
            self.proc.stdout.close()

    def _kill(self):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    @property
    def warnings(self):
        return list(self._stderr)


class Stopped(Exception):
    """Raised by a stream's read once its capture was stopped: the reader ends where it is."""


class StreamCapture:
    """A pcap or pcapng stream already being written elsewhere: standard input, a FIFO, a
    file or a binary file object.

    Reads wait for data with poll, POLL seconds at a time, and give up once `stop()` was
    called: a writer that keeps the pipe open but sends nothing cannot hold the run. A path is
    opened at once, without waiting for a FIFO's writer, so that a wrong one fails here.
    Drop counters are not known here (the writer has them); the stream's own cuts are reported
    by the reader as warnings.
    """

    # Called with the key log lines of each Decryption Secrets Block of a pcapng stream.
    on_secrets = None

    def __init__(self, source):
        self.name = _stream_name(source)
        self.counters = {}
        self.warnings = []
        self._stopped = False  # a plain flag: set by the run loop, read by the reader thread
        self._owned = not hasattr(source, "read")
        self._raw = _opened(source) if self._owned else source
        self._stream = _Interruptible(self._raw, lambda: self._stopped)

    def packets(self):
        try:
            with open_capture(self._stream, name=self.name) as reader:
                reader.on_secrets = self.on_secrets  # a pcapng stream's secrets
                try:
                    yield from reader
                finally:
                    self.warnings = list(reader.warnings)
        except Stopped:
            pass  # the cut is ours: no warning about a record it split

    def refresh(self):
        pass

    def stop(self):
        self._stopped = True

    def close(self):
        self.stop()
        if self._owned:
            self._raw.close()


def _stream_name(source):
    if source == "-":
        return "<stdin>"
    name = getattr(source, "name", source)  # a file object's name (a pipe's is its number)
    return str(name) if isinstance(name, str | os.PathLike) else "<stream>"


POLL = 0.1  # seconds a stream's read waits for data before it looks at the stop flag again


def _opened(source):
    """Standard input (not closed with the capture) or a path, unbuffered. A path opens
    non-blocking: a FIFO without its writer yet would block the open (poll then waits for
    it, as a read would)."""
    if source == "-":
        return open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)  # noqa: SIM115
    return open(os.open(source, os.O_RDONLY | os.O_NONBLOCK), "rb", buffering=0)  # noqa: SIM115


class _Interruptible:
    """A binary stream whose reads raise Stopped once `stopped()`: each waits for data at most
    POLL seconds at a time. A buffered stream (poll would not see what its buffer holds) or
    one without a file descriptor is read as it is: the run loop does not wait for it."""

    def __init__(self, raw, stopped):
        self._read = getattr(raw, "read1", raw.read)  # what one system call delivers
        self._stopped = stopped
        self._poll = None
        if not hasattr(raw, "read1"):
            with contextlib.suppress(AttributeError, OSError, ValueError):
                fd = raw.fileno()
                self._poll = select.poll()
                self._poll.register(fd, select.POLLIN)  # hang-ups and errors: always reported

    def read(self, n=-1):
        while True:
            if self._stopped():
                raise Stopped
            if self._poll is None or self._poll.poll(POLL * 1000):
                data = self._read(n)
                if data is not None:  # None: a non-blocking descriptor had nothing after all
                    return data

    read1 = read
