"""`kafka-dissect spark`: a failed job said in one line a user can act on (our own errors as
`analyze` says them, a task out of memory with what to do about it, else the root cause), and
`--conf` settings reaching the session the command creates.

The texts below are those of real failures (pyspark 4, Java 17), their stack traces cut short:
a task of a local job raising CaptureError, MemoryError and ValueError; a Python worker
killed; a Java OutOfMemoryError in a task of a local session (the JVM exits with status 52
and the job says only that the SparkContext was shut down) and one in the driver, planning;
and, in the shapes Spark gives them, the failures of executors on a cluster."""

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

from dissector.cli import build_parser, main  # noqa: E402
from dissector.errors import DissectorError  # noqa: E402
from dissector.spark import cli  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = str(ROOT / "captures" / "kafka-python.pcap")
# Sessions of these tests: no UI, no progress bar, one core (the command gives its JVM the
# JIT's quick tier itself: one that starts sooner).
QUICK = [
    "--master",
    "local[1]",
    "--conf",
    "spark.ui.enabled=false",
    "--conf",
    "spark.ui.showConsoleProgress=false",
]

MORE_MEMORY = (
    "give Spark more memory (--conf spark.driver.memory=4g in local mode, spark.executor.memory "
    "on a cluster) or use smaller byte ranges (--split-bytes 64m)"
)
MORE_PYTHON_MEMORY = (
    "give the Python workers more memory (fewer tasks at once: --master local[2]; "
    "spark.executor.memoryOverhead on a cluster) or use smaller byte ranges (--split-bytes 64m)"
)
OURS = "/data/caps/big.pcap: frame 12, offset 4096: record claims 1073741824 bytes"


def _lines(*lines):
    return "\n".join(lines)


# A CaptureError raised in a mapInArrow task: the PythonException pyspark raises...
CAPTURE_ERROR = _lines(
    "An exception was thrown from the Python worker:",
    "Traceback (most recent call last):",
    '  File "/tmp/sparkcap/capture.py", line 12, in capture_error',
    '    raise CaptureError("/data/caps/big.pcap", "record claims 1073741824 bytes", frame=12, '
    "offset=4096)",
    "dissector.errors.CaptureError: /data/caps/big.pcap: frame 12, offset 4096: record claims "
    "1073741824 bytes",
)

# ... and the py4j error it converts (a parquet write).
CAPTURE_ERROR_JVM = _lines(
    "An error occurred while calling o50.parquet.",
    ": org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown "
    "from the Python worker: Traceback (most recent call last):",
    '  File "/tmp/sparkcap/real.py", line 12, in capture_error',
    '    raise CaptureError("/data/caps/big.pcap", "record claims 1073741824 bytes", frame=12, '
    "offset=4096)",
    "dissector.errors.CaptureError: /data/caps/big.pcap: frame 12, offset 4096: record claims "
    "1073741824 bytes",
    " SQLSTATE: 38000",
    "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException("
    "PythonRunner.scala:1097)",
    "\tat org.apache.spark.sql.execution.python.PythonArrowOutput$$anon$1.read("
    "PythonArrowOutput.scala:145)",
    "\tat java.base/java.lang.Thread.run(Thread.java:840)",
)

MEMORY_ERROR = _lines(
    "An exception was thrown from the Python worker:",
    "Traceback (most recent call last):",
    '  File "/tmp/sparkcap/capture.py", line 17, in memory_error',
    "    raise MemoryError()",
    "MemoryError",
)

# A MemoryError in the Python worker of an RDD job: py4j's text, the stage named.
MEMORY_ERROR_IN_STAGE = _lines(
    "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.",
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 2 in stage 5.0 "
    "failed 1 times, most recent failure: Lost task 2.0 in stage 5.0 (TID 9) (192.0.2.2 executor "
    "driver): org.apache.spark.api.python.PythonException: Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/dissector/spark/tasks.py", line 212, in dissect',
    "    batches = [b for b in pieces]",
    "               ^^^^^^^^^^^^^^^^^^",
    "MemoryError",
    "",
    "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException("
    "PythonRunner.scala:1097)",
    "\tat java.base/java.lang.Thread.run(Thread.java:840)",
    "",
    "Driver stacktrace:",
    "\tat org.apache.spark.scheduler.DAGScheduler.$anonfun$abortStage$3(DAGScheduler.scala:4568)",
    "\tat org.apache.spark.api.python.PythonRDD$.collectAndServe(PythonRDD.scala:181)",
    "Caused by: org.apache.spark.api.python.PythonException: Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/dissector/spark/tasks.py", line 212, in dissect',
    "    batches = [b for b in pieces]",
    "               ^^^^^^^^^^^^^^^^^^",
    "MemoryError",
    "",
    "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException("
    "PythonRunner.scala:1097)",
    "\t... 1 more",
)

# The Python worker killed (SIGKILL, as the system does when memory runs out).
WORKER_KILLED = _lines(
    "An error occurred while calling o46.collectToPython.",
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 "
    "failed 1 times, most recent failure: Lost task 0.0 in stage 0.0 (TID 0) (192.0.2.2 executor "
    "driver): org.apache.spark.SparkException: Python worker exited unexpectedly (crashed). "
    "Consider setting 'spark.sql.execution.pyspark.udf.faulthandler.enabled' "
    "or'spark.python.worker.faulthandler.enabled' configuration to 'true' for the better Python "
    "traceback.",
    "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator$$anonfun$1.applyOrElse("
    "PythonRunner.scala:1136)",
    "\tat scala.runtime.AbstractPartialFunction.apply(AbstractPartialFunction.scala:35)",
    "\tat java.base/java.lang.Thread.run(Thread.java:840)",
    "Caused by: java.io.EOFException",
    "\tat java.base/java.io.DataInputStream.readInt(DataInputStream.java:386)",
    "\t... 21 more",
    "",
    "Driver stacktrace:",
    "\tat org.apache.spark.scheduler.DAGScheduler.$anonfun$abortStage$3(DAGScheduler.scala:4568)",
    "\tat java.base/java.lang.Thread.run(Thread.java:840)",
    "Caused by: org.apache.spark.SparkException: Python worker exited unexpectedly (crashed). "
    "Consider setting 'spark.sql.execution.pyspark.udf.faulthandler.enabled' "
    "or'spark.python.worker.faulthandler.enabled' configuration to 'true' for the better Python "
    "traceback.",
    "\tat scala.runtime.AbstractPartialFunction.apply(AbstractPartialFunction.scala:35)",
    "\t... 1 more",
    "Caused by: java.io.EOFException",
    "\tat java.base/java.io.DataInputStream.readInt(DataInputStream.java:386)",
    "\t... 21 more",
)

# A Java OutOfMemoryError in a task of a local session: Spark's handler of uncaught errors
# ends the JVM (status 52) and the job says only that. The last line is what the command
# printed before (`spark: at java.base/java.lang.Thread.run(Thread.java:840)`).
LOCAL_JAVA_OOM = _lines(
    "An error occurred while calling o35.collectToPython.",
    ": org.apache.spark.SparkException: Job 0 cancelled because SparkContext was shut down",
    "\tat org.apache.spark.scheduler.DAGScheduler.$anonfun$cleanUpAfterSchedulerStop$1("
    "DAGScheduler.scala:2060)",
    "\tat org.apache.spark.util.SparkShutdownHookManager.runAll(ShutdownHookManager.scala:205)",
    "\tat java.base/java.lang.Thread.run(Thread.java:840)",
    "\tat org.apache.spark.scheduler.DAGScheduler.runJob(DAGScheduler.scala:1549)",
    "\tat py4j.ClientServerConnection.run(ClientServerConnection.java:108)",
    "\tat java.base/java.lang.Thread.run(Thread.java:840)",
)

# The driver out of memory, planning a job (a literal too big for its heap).
DRIVER_JAVA_OOM = _lines(
    "An error occurred while calling o38.collectToPython.",
    ": java.lang.OutOfMemoryError: Java heap space",
    "\tat java.base/jdk.internal.misc.Unsafe.allocateUninitializedArray(Unsafe.java:1375)",
    "\tat java.base/java.lang.StringConcatHelper.newArray(StringConcatHelper.java:497)",
    "\tat org.apache.spark.sql.execution.SparkStrategies.plan(SparkStrategies.scala:79)",
)


def _job_aborted(stage, failure, *caused_by):
    """A job failed by a task of an executor on a cluster, as py4j says it."""
    frames = (
        "\tat org.apache.spark.unsafe.types.UTF8String.repeat(UTF8String.java:1200)",
        "\tat org.apache.spark.executor.Executor$TaskRunner.run(Executor.scala:906)",
        "\tat java.base/java.lang.Thread.run(Thread.java:840)",
    )
    causes = [line for cause in caused_by for line in (f"Caused by: {cause}", *frames)]
    return _lines(
        "An error occurred while calling o212.parquet.",
        f": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage "
        f"{stage}.0 failed 4 times, most recent failure: Lost task 0.3 in stage {stage}.0 "
        f"(TID 17) (10.0.0.12 executor 1): {failure}",
        *frames,
        "",
        "Driver stacktrace:",
        "\tat org.apache.spark.scheduler.DAGScheduler.abortStage(DAGScheduler.scala:4568)",
        "\tat org.apache.spark.rdd.RDD.collect(RDD.scala:1122)",
        *causes,
    )


EXECUTOR_JAVA_OOM = _job_aborted(
    3, "java.lang.OutOfMemoryError: Java heap space", "java.lang.OutOfMemoryError: Java heap space"
)

GC_OVERHEAD = _job_aborted(
    7,
    "java.lang.OutOfMemoryError: GC overhead limit exceeded",
    "java.lang.OutOfMemoryError: GC overhead limit exceeded",
)

UNABLE_TO_ACQUIRE = _job_aborted(
    2,
    "org.apache.spark.memory.SparkOutOfMemoryError: [UNABLE_TO_ACQUIRE_MEMORY] Unable to "
    "acquire 65536 bytes of memory, got 0. SQLSTATE: 53200",
)

YARN_CONTAINER = _lines(
    "An error occurred while calling o212.parquet.",
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 4.0 "
    "failed 4 times, most recent failure: Lost task 1.3 in stage 4.0 (TID 40) (worker-2 executor "
    "3): ExecutorLostFailure (executor 3 exited caused by one of the running tasks) Reason: "
    "Container killed by YARN for exceeding physical memory limits. 5.6 GB of 5.5 GB physical "
    "memory used. Consider boosting spark.executor.memoryOverhead.",
    "Driver stacktrace:",
    "\tat org.apache.spark.scheduler.DAGScheduler.$anonfun$abortStage$3(DAGScheduler.scala:4568)",
)

FILE_GONE = _job_aborted(
    1,
    "org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to "
    "file:/out/pairs. SQLSTATE: 58030",
    "org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to "
    "file:/out/pairs. SQLSTATE: 58030",
    "java.io.FileNotFoundException: /out/pairs/_temporary/0/part-00000.parquet "
    "(No space left on device)",
)

# A Java failure whose exception carries a suppressed one with a cause of its own: the
# suppressed block is indented, and is not the root cause.
SUPPRESSED = _lines(
    "An error occurred while calling o9.count.",
    ": java.lang.IllegalStateException: reading /caps/a.pcap failed",
    "\tat org.example.Reader.read(Reader.java:10)",
    "\tSuppressed: java.io.IOException: close failed",
    "\t\tat org.example.Reader.close(Reader.java:20)",
    "\tCaused by: java.net.SocketException: Connection reset",
    "\t\t... 3 more",
    "Caused by: java.io.IOException: s3a://caps/a.pcap: 403 Forbidden",
    "\tat org.apache.hadoop.fs.s3a.S3AUtils.translateException(S3AUtils.java:255)",
    "\t... 12 more",
)

# A Python error in a task, chained (raised while handling another), in Python 3.11's format.
PYTHON_CHAINED = _lines(
    "An exception was thrown from the Python worker:",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/dissector/spark/tasks.py", line 90, in opened',
    "    return table[key]",
    "           ~~~~~^^^^^",
    "KeyError: 'x'",
    "",
    "During handling of the above exception, another exception occurred:",
    "",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/dissector/spark/tasks.py", line 92, in opened',
    "    raise ValueError(f'no table {key!r}')",
    "ValueError: no table 'x'",
)

ANALYSIS = "[PATH_NOT_FOUND] Path does not exist: file:/nonexistent/dir. SQLSTATE: 42K03"

# Spark Connect, its server not there (the gRPC status of SparkConnectGrpcException).
CONNECT_UNAVAILABLE = _lines(
    "<_MultiThreadedRendezvous of RPC that terminated with:",
    "\tstatus = StatusCode.UNAVAILABLE",
    '\tdetails = "failed to connect to all addresses; last error: UNKNOWN: '
    'ipv4:127.0.0.1:15002: Failed to connect to remote host: Connection refused"',
    '\tdebug_error_string = "UNKNOWN:Error received from peer  {grpc_status:14}"',
    ">",
)


@pytest.mark.parametrize(
    ("text", "jvm_exit", "line"),
    [
        (CAPTURE_ERROR, None, OURS),
        (CAPTURE_ERROR_JVM, None, OURS),
        (
            MEMORY_ERROR,
            None,
            f"spark: a task ran out of memory (MemoryError in Python): {MORE_PYTHON_MEMORY}",
        ),
        (
            MEMORY_ERROR_IN_STAGE,
            None,
            "spark: a task of stage 5 ran out of memory (MemoryError "
            f"in Python): {MORE_PYTHON_MEMORY}",
        ),
        (
            WORKER_KILLED,
            None,
            "spark: a task of stage 0 failed: its Python worker crashed; if "
            f"the system killed it for lack of memory, {MORE_PYTHON_MEMORY}",
        ),
        (
            LOCAL_JAVA_OOM,
            52,
            "spark: a task ran out of memory (java.lang.OutOfMemoryError: "
            f"Spark's JVM exited with status 52): {MORE_MEMORY}",
        ),
        (
            LOCAL_JAVA_OOM,
            None,
            "spark: org.apache.spark.SparkException: Job 0 cancelled "
            "because SparkContext was shut down",
        ),
        (DRIVER_JAVA_OOM, None, f"spark: Spark ran out of memory (Java heap space): {MORE_MEMORY}"),
        (
            EXECUTOR_JAVA_OOM,
            None,
            f"spark: a task of stage 3 ran out of memory (Java heap space): {MORE_MEMORY}",
        ),
        (
            GC_OVERHEAD,
            None,
            "spark: a task of stage 7 ran out of memory (GC overhead limit "
            f"exceeded): {MORE_MEMORY}",
        ),
        (
            UNABLE_TO_ACQUIRE,
            None,
            "spark: a task of stage 2 ran out of memory (Unable to "
            f"acquire 65536 bytes of memory, got 0.): {MORE_MEMORY}",
        ),
        (
            YARN_CONTAINER,
            None,
            "spark: a task of stage 4 ran out of memory (killed by YARN for "
            "exceeding physical memory limits): give the executors more memory (--conf "
            "spark.executor.memoryOverhead=2g, or spark.executor.memory) or use smaller byte "
            "ranges (--split-bytes 64m)",
        ),
        (
            FILE_GONE,
            None,
            "spark: java.io.FileNotFoundException: "
            "/out/pairs/_temporary/0/part-00000.parquet (No space left on device)",
        ),
        (SUPPRESSED, None, "spark: java.io.IOException: s3a://caps/a.pcap: 403 Forbidden"),
        (PYTHON_CHAINED, None, "spark: ValueError: no table 'x'"),
        (ANALYSIS, None, "spark: [PATH_NOT_FOUND] Path does not exist: file:/nonexistent/dir."),
        (
            CONNECT_UNAVAILABLE,
            None,
            "spark: Spark Connect: UNAVAILABLE: failed to connect to all "
            "addresses; last error: UNKNOWN: ipv4:127.0.0.1:15002: Failed to connect to remote "
            "host: Connection refused",
        ),
    ],
)
def test_a_failed_job_is_one_line(text, jvm_exit, line):
    got = cli.error_line(text, jvm_exit)
    assert got == line
    assert "\n" not in got and len(got) <= cli.MAX_LINE
    assert not got.removeprefix("spark: ").startswith(("at ", 'File "'))


def test_a_long_root_cause_is_cut_to_one_line_of_300_characters():
    text = _lines(
        "An error occurred while calling o9.count.",
        ": java.lang.IllegalStateException: " + "a reason,\tsaid at  length " * 30,
        "\tat org.example.Reader.read(Reader.java:10)",
    )
    got = cli.error_line(text)
    assert len(got) == cli.MAX_LINE and got.endswith("…")
    assert got.startswith("spark: java.lang.IllegalStateException: a reason, said at length a ")


class Py4JJavaError(Exception):
    """Stands for py4j's error (whose text asks a JVM) in the chain tests."""


Py4JJavaError.__module__ = "py4j.protocol"


def test_a_job_whose_clean_up_failed_too_is_said_by_the_job():
    """The JVM gone after a failed job, the clean-up's error has the job's as context."""
    with pytest.raises(DissectorError) as info, cli.spark_errors():
        try:
            raise Py4JJavaError(EXECUTOR_JAVA_OOM)
        finally:
            raise ConnectionRefusedError(111, "Connection refused")
    assert str(info.value) == (
        f"spark: a task of stage 3 ran out of memory (Java heap space): {MORE_MEMORY}"
    )


def test_other_errors_pass_through():
    with pytest.raises(DissectorError, match="^x.pcap: not a capture$"), cli.spark_errors():
        raise DissectorError("x.pcap: not a capture")
    with pytest.raises(ConnectionRefusedError), cli.spark_errors():
        raise ConnectionRefusedError(111, "Connection refused")
    with pytest.raises(KeyError), cli.spark_errors():  # a bug of ours, Spark's error its context
        try:
            raise Py4JJavaError(EXECUTOR_JAVA_OOM)
        finally:
            raise KeyError("x")


def test_conf_is_key_equals_value_repeatable(capsys):
    args = build_parser().parse_args(
        [
            "spark",
            "a.pcap",
            "-o",
            "out",
            "--conf",
            "spark.driver.memory=4g",
            "--conf",
            "spark.driver.extraJavaOptions=-Da=b -Dc=d",
            "--conf",
            "spark.x=",
        ]
    )
    assert args.conf == [
        ("spark.driver.memory", "4g"),
        ("spark.driver.extraJavaOptions", "-Da=b -Dc=d"),
        ("spark.x", ""),
    ]
    assert build_parser().parse_args(["spark", "a.pcap", "-o", "out"]).conf == []
    for bad in ("spark.driver.memory", "=4g"):
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args(["spark", "a.pcap", "-o", "out", "--conf", bad])
        assert exit_.value.code == 2
        assert (
            f"kafka-dissect spark: error: argument --conf: expected KEY=VALUE, a Spark setting "
            f"such as spark.driver.memory=4g, not {bad!r}"
        ) in capsys.readouterr().err


# With a JVM: the command on a file that is not a capture, in a process of its own (started
# first, so that its JVM and the one of this process start side by side), and the command
# creating this process's session with --conf.


def _command(capture, out, *more):
    """`kafka-dissect spark CAPTURE -o OUT`, running in a process of its own."""
    command = [shutil.which("kafka-dissect") or sys.executable]
    if command[0] == sys.executable:
        command += ["-m", "dissector.cli"]
    command += ["spark", str(capture), "-o", str(out), *QUICK, *more]
    # This tree's package, wherever the console script was installed from.
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=out.parent,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": path},
    )


def _ended(proc):
    """The process's stderr once it ended; killed if it does not within 300 s."""
    try:
        _out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return err


@contextlib.contextmanager
def _running(proc):
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


@pytest.fixture(scope="module")
def not_a_capture(tmp_path_factory):
    """`kafka-dissect spark notes.txt -o OUT`, running: (path, process)."""
    tmp = tmp_path_factory.mktemp("not-a-capture")
    notes = tmp / "notes.txt"
    notes.write_text("hello, this is not a capture\n")
    with _running(_command(notes, tmp / "out")) as proc:
        yield notes, proc


@pytest.fixture(scope="module")
def bad_record(tmp_path_factory):
    """`kafka-dissect spark bad.pcap -o OUT`, running, where bad.pcap's 12th record claims a
    gigabyte: the error is raised in a task, which Spark logs with its stack traces."""
    tmp = tmp_path_factory.mktemp("bad-record")
    data = bytearray(Path(CAPTURE).read_bytes())
    pos = 24
    for _ in range(11):
        pos += 16 + int.from_bytes(data[pos + 8 : pos + 12], "little")
    data[pos + 8 : pos + 12] = (1 << 30).to_bytes(4, "little")
    bad = tmp / "bad.pcap"
    bad.write_bytes(bytes(data))
    log = tmp / "spark.log"
    with _running(_command(bad, tmp / "out", "--spark-log", str(log))) as proc:
        yield bad, pos, proc, log


@pytest.fixture(scope="module")
def made_by_the_command(not_a_capture, tmp_path_factory):
    """The session `kafka-dissect spark CAPTURE -o OUT --conf ...` made, run in this process:
    (session, status, stdout, stderr, output directory); stopped at the end."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    already = SparkContext._active_spark_context is not None  # another test file's session
    before = None
    if already:
        before = SparkSession.getActiveSession().conf.get("spark.sql.shuffle.partitions", None)
    out = tmp_path_factory.mktemp("spark-cli") / "out"
    argv = ["spark", CAPTURE, "-o", str(out), *QUICK, "--conf", "spark.sql.shuffle.partitions=3"]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = main(argv)
    spark = SparkSession.getActiveSession()
    yield spark, status, stdout.getvalue(), stderr.getvalue(), out, already
    if spark is None:
        return
    if already:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    else:
        spark.stop()


def test_the_command_passes_conf_to_the_session_it_creates(made_by_the_command):
    import dissector

    spark, status, out, err, output, already = made_by_the_command
    assert status == 0, err
    rows = len(dissector.read_pcap(CAPTURE, table="pairs"))
    assert out.rstrip("\n").endswith(
        f"wrote {rows} rows of pairs to {output}, partitioned by capture"
    )
    assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    if not already:  # settings of the JVM's start: only a session the command created has them
        conf = spark.sparkContext.getConf()
        assert conf.get("spark.ui.enabled") == "false"
        assert conf.get("spark.driver.extraJavaOptions").endswith(f" {cli.LEAN_JVM[1]}")
        jvm = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
        assert "-XX:TieredStopAtLevel=1" in list(jvm.getInputArguments())  # the JVM's own
        assert spark.sparkContext.master == "local[1]"
    again = cli.session(None, {"spark.sql.shuffle.partitions": "5"})  # the one running
    assert again is spark and spark.conf.get("spark.sql.shuffle.partitions") == "5"
    spark.conf.set("spark.sql.shuffle.partitions", "3")


@pytest.mark.parametrize("table, lean", [("pairs", True), ("records", True), ("partitions", False)])
def test_the_command_starts_a_lean_jvm_but_for_the_partitions_table(
    table, lean, monkeypatch, tmp_path
):
    asked = []

    def session(master, conf=(), log=None, lean=False):
        asked.append((master, lean))
        raise DissectorError("stopped before Spark")

    monkeypatch.setattr(cli, "session", session)
    argv = ["spark", CAPTURE, "-o", str(tmp_path / "o"), "--table", table, "--master", "local[1]"]
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(argv) == 2
    assert asked == [("local[1]", lean)]
    assert "stopped before Spark" in err.getvalue()


def _fails(spark, task, tmp_path):
    """What the command says of a job (a parquet write) one of whose tasks runs `task`."""
    df = spark.range(4, numPartitions=1)
    with pytest.raises(DissectorError) as info, cli.spark_errors():
        df.mapInArrow(task, df.schema).write.mode("overwrite").parquet(str(tmp_path / "o"))
    return str(info.value)


def test_our_error_in_a_task_is_said_as_analyze_says_it(made_by_the_command, tmp_path):
    def capture_error(batches):
        from dissector.errors import CaptureError

        for _ in batches:
            raise CaptureError(
                "/data/caps/big.pcap", "record claims 1073741824 bytes", frame=12, offset=4096
            )
        yield from ()

    assert _fails(made_by_the_command[0], capture_error, tmp_path) == OURS


def test_a_task_out_of_memory_says_what_to_do(made_by_the_command, tmp_path):
    def memory_error(batches):
        for _ in batches:
            raise MemoryError()
        yield from ()

    assert _fails(made_by_the_command[0], memory_error, tmp_path) == (
        f"spark: a task ran out of memory (MemoryError in Python): {MORE_PYTHON_MEMORY}"
    )


def test_another_error_in_a_task_is_its_exception_line(made_by_the_command, tmp_path):
    def value_error(batches):
        for _ in batches:
            int("zz")
        yield from ()

    spark = made_by_the_command[0]
    assert _fails(spark, value_error, tmp_path) == (
        "spark: ValueError: invalid literal for int() with base 10: 'zz'"
    )
    missing = tmp_path / "nothing"
    with pytest.raises(DissectorError) as info, cli.spark_errors():
        spark.read.parquet(str(missing)).count()
    assert str(info.value) == f"spark: [PATH_NOT_FOUND] Path does not exist: file:{missing}."


def test_not_a_capture_is_one_line_and_status_2(not_a_capture, capsys):
    """The command run as a user runs it: the error `analyze` gives the file, in one line,
    no stack trace, exit status 2."""
    notes, proc = not_a_capture
    err = _ended(proc)
    capsys.readouterr()
    assert main(["analyze", str(notes)]) == 2
    expected = capsys.readouterr().err.splitlines()
    assert expected == [
        f"kafka-dissect: error: {notes}: frame 1, offset 0: not a capture file (unknown magic "
        "68656c6c)"
    ]
    assert proc.returncode == 2, err
    assert err.splitlines() == expected  # nothing else: neither the JVM's nor pyspark's


def test_an_error_in_a_task_is_one_line_and_nothing_else(bad_record):
    """The job fails in a task: Spark's logs of it (the task's Python traceback, the executor's
    and the task set manager's errors, Java stack traces) stay off stderr, in --spark-log."""
    bad, offset, proc, log = bad_record
    err = _ended(proc)
    message = f"{bad}: frame 12, offset {offset}: record claims 1073741824 captured bytes"
    assert proc.returncode == 2, err
    assert err.splitlines() == [f"kafka-dissect: error: {message}"]
    text = log.read_text()
    assert f"dissector.errors.CaptureError: {message}" in text
    assert "ERROR Executor: Exception in task" in text
