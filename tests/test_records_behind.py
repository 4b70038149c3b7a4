"""The records table written by a second process (dissector/tables/records_behind.py), as
`analyze --table records -o` does with two cores, against the table one process writes
(the command pinned to one core): the same file, errors told the same way, a clean stop.

Every command runs in a process of its own: the child is forked, which the test runner's
threads make unsafe in-process."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
ONE = str(min(os.sched_getaffinity(0))) if CORES > 1 else "0"  # a core this test may use
USABLE = "from dissector.tables import records_behind; print(records_behind.usable())"

pytestmark = [
    pytest.mark.skipif(CORES < 2, reason="one core: the table is written by one process"),
    pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset keeps one process"),
]


def analyze(*args, one_core=False, **popen):
    cmd = [sys.executable, "-m", "dissector", "analyze", *map(str, args)]
    if one_core:
        cmd = ["taskset", "-c", ONE, *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **popen)


@pytest.fixture(scope="module", autouse=True)
def two_processes():
    """The plain command takes the two-process path here (compiled, two cores); pinned to
    one core it does not."""
    out = subprocess.run([sys.executable, "-c", USABLE], capture_output=True, text=True)
    if out.stdout.strip() != "True":
        pytest.skip("built without a C compiler: the rows path writes the table")
    pinned = ["taskset", "-c", ONE, sys.executable, "-c", USABLE]
    assert subprocess.run(pinned, capture_output=True, text=True).stdout.strip() == "False"


@pytest.mark.parametrize(
    "captures, extra",
    [
        (["transactions.pcap"], []),  # control batches: the rows path, in the child
        (["kcat.pcap"], []),  # magic 0 and 1 message sets
        (["compression.pcap"], []),  # every codec
        (["compression.pcap"], ["--topic", "comp-zstd"]),  # others passed over
        (["legacy-0.7.pcap", "kafka-python.pcap", "findings-txn-aborted.pcap"], []),  # several
    ],
)
def test_the_same_table_as_one_process(tmp_path, captures, extra):
    paths = [CAPTURES / c for c in captures]
    one, two = tmp_path / "one.parquet", tmp_path / "two.parquet"
    alone = analyze(*paths, "--table", "records", "-o", one, *extra, one_core=True)
    behind = analyze(*paths, "--table", "records", "-o", two, *extra)
    assert alone.returncode == 0 and behind.returncode == 0, alone.stderr + behind.stderr
    a, b = pq.read_table(one), pq.read_table(two)
    assert a.num_rows > 0
    assert b.equals(a)
    said = alone.stdout.replace(str(one), "OUT")
    assert behind.stdout.replace(str(two), "OUT") == said  # the summary, "wrote N rows"
    assert f"wrote {a.num_rows} rows of records" in behind.stdout
    if extra:
        assert set(b.column("topic").to_pylist()) == {"comp-zstd"}


def test_errors_are_told_as_one_process_tells_them(tmp_path):
    (tmp_path / "full.parquet").symlink_to("/dev/full")  # every write fails: no space left
    for out in (tmp_path / "missing" / "r.parquet", tmp_path / "full.parquet"):
        args = (CAPTURES / "compression.pcap", "--table", "records", "-o", out)
        alone, behind = analyze(*args, one_core=True), analyze(*args)
        assert alone.returncode == behind.returncode == 2
        assert behind.stderr == alone.stderr
        assert behind.stderr.startswith("kafka-dissect: error: ") and str(out) in behind.stderr
        assert "Traceback" not in behind.stderr


def test_ctrl_c_leaves_a_readable_file_and_no_process(tmp_path):
    """Ctrl-C reaches both processes (the terminal signals the group): the parent says
    "interrupted", the child closes the file on what it was given, and both are gone."""
    out = tmp_path / "r.parquet"
    many = [CAPTURES / "compression.pcap"] * 3000  # 14 s on a 2-core Xeon: interrupted
    proc = subprocess.Popen(
        [sys.executable, "-m", "dissector", "analyze", *many, "--table", "records", "-o", out],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (out.exists() and out.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert err.strip() == "kafka-dissect: interrupted"
    table = pq.read_table(out)
    assert 0 < table.num_rows < 3000 * 40  # some of the captures, every row whole
    assert set(table.column("capture").to_pylist()) == {str(many[0])}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)  # the child is in the group
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the child outlived the command")


CHILD_DIES = """
import os, signal, sys
from dissector import dissect
from dissector.errors import DissectorError
from dissector.options import Options
from dissector.tables.records_behind import RecordsBehind

behind = RecordsBehind(sys.argv[2])
os.kill(behind._child.pid, signal.SIGKILL)
try:
    behind.write(dissect(sys.argv[1], records="full"), sys.argv[1], Options(records="full"))
    behind.close()
except DissectorError as e:
    print(e)
"""


def test_a_child_that_dies_is_an_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", CHILD_DIES, CAPTURES / "compression.pcap", tmp_path / "r.parquet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() == "the process writing the records table ended (exit -9)"
    assert done.returncode == 0, done.stderr
