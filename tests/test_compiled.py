"""The compiled hot path (setup.py) is in use, up to date, and agrees with the Python source."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dissector"
EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)
CAPTURES = ROOT / "captures"

# Modules every packet or exchange passes through: setup.py compiles them.
HOT = (
    "dissector.flow",
    "dissector.capture.pcap",
    "dissector.capture.walk",
    "dissector.net.decode",
    "dissector.tcp.tracker",
    "dissector.tcp.halfstream",
    "dissector.tls.connection",
    "dissector.framing.framer",
    "dissector.protocol.primitives",
    "dissector.session.modern",
    "dissector.session.conversation",
    "dissector.tables.summary",
    "dissector.tables.pairs",
    "dissector.tables.body_text",
    "dissector.tables.record_columns",
    "dissector.tables.text_buffers",
    "dissector.tuples",
)


def _built() -> bool:
    """Whether the install compiled the hot path: it does wherever a C compiler is (pip
    builds with Cython, a build requirement), unless told not to."""
    return not os.environ.get("KAFKA_DISSECT_PURE") and shutil.which("cc") is not None


@pytest.mark.skipif(not _built(), reason="installed without a C compiler: pure Python")
def test_hot_path_is_compiled():
    pure = [m for m in HOT if not importlib.import_module(m).__file__.endswith(EXTENSIONS)]
    assert not pure, f"not compiled (run `pip install -e .`): {pure}"


def test_no_compiled_module_is_older_than_its_source():
    """An edited module whose old build still shadows it would run the old code."""
    stale = []
    for built in PACKAGE.rglob("*.so"):
        for suffix in (".py", ".pyx", ".pxd"):
            source = built.with_name(built.name.split(".", 1)[0] + suffix)
            if source.exists() and source.stat().st_mtime > built.stat().st_mtime:
                stale.append(str(source.relative_to(ROOT)))
    assert not stale, f"edited since built (run `pip install -e .`): {stale}"


def test_tuples_new_builds_the_named_tuple():
    """tuples.new, compiled from tuples.pyx or run from tuples.py: cls(*fields), no less."""
    from dissector.capture.packet import Packet
    from dissector.tuples import new

    fields = (7, 1_700_000_000_123_456_789, 1, b"\x00\x01", 60)
    packet = new(Packet, fields)
    assert type(packet) is Packet
    assert packet == Packet(*fields) and packet.data == b"\x00\x01" and packet.wirelen == 60
    assert hash(packet) == hash(fields)
    with pytest.raises(TypeError):
        new(int, (1,))


# Runs the command line from the package found first on sys.path, and says where that was.
RUN = """
import sys
import dissector.flow
from dissector.cli import main
print(dissector.flow.__file__, file=sys.stderr)
sys.argv[0] = "kafka-dissect"
main()
"""


def _table(python_path: Path, capture: Path, out: Path, *extra: str) -> tuple[str, str]:
    """The table's text and the summary printed, and the file the run's `dissector.flow`
    came from."""
    done = subprocess.run(
        [sys.executable, "-c", RUN, "analyze", str(capture), "--no-progress", "-o", str(out)]
        + list(extra),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(python_path)},
        cwd=python_path,  # sys.path starts with the working directory
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    summary = done.stdout.replace(str(out), "OUT")
    return out.read_text() + summary, done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "capture,extra",
    [
        ("confluent-kafka.pcap", ()),
        ("compression.pcap", ("--table", "records")),
        ("compression.pcap", ("--decompress",)),
        ("group-rebalance.pcap", ("--table", "partitions")),
        ("legacy-0.7-mixed.pcap", ()),
        ("sasl.pcap", ("--table", "streams")),
    ],
)
def test_compiled_and_pure_python_agree(tmp_path, capture, extra):
    pure = tmp_path / "pure"
    skip = shutil.ignore_patterns("*.so", "__pycache__")
    shutil.copytree(PACKAGE, pure / "dissector", ignore=skip)
    source, ran = _table(pure, CAPTURES / capture, tmp_path / "pure.jsonl", *extra)
    assert ran == str(pure / "dissector" / "flow.py")
    assert source.count("\n") > 3
    installed, ran = _table(ROOT, CAPTURES / capture, tmp_path / "built.jsonl", *extra)
    if _built():
        assert ran.endswith(EXTENSIONS)
    assert installed == source


def test_a_build_without_cython_says_it_compiles_nothing(tmp_path):
    """`setup.py` run where Cython cannot be imported compiles nothing, and says so (a stale
    build would otherwise go on shadowing the edited source unnoticed)."""
    (tmp_path / "Cython").mkdir()
    (tmp_path / "Cython" / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("KAFKA_DISSECT_PURE", None)
    done = subprocess.run(
        [sys.executable, "setup.py", "--name"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Cython is not installed: nothing is compiled" in done.stderr
