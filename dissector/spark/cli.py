"""`kafka-dissect spark`: a capture set dissected on Spark, written as parquet partitioned by
capture, with the `analyze` summary of each capture."""

import argparse
import contextlib
import logging
import os
import re
import sys
import threading
import warnings

from ..arguments import (
    add_bodies,
    add_compress_values,
    add_dissection_arguments,
    dissection_options,
)
from ..errors import DissectorError
from ..tables import TABLES


def add_parser(subparsers):
    p = subparsers.add_parser(
        "spark", help="dissect a capture set on Apache Spark and write parquet"
    )
    p.add_argument("captures", nargs="+", help="capture files or globs (local or any URI)")
    p.add_argument("-o", "--output", required=True, help="output directory (parquet)")
    p.add_argument("--table", choices=TABLES, default="pairs", help="default %(default)s")
    p.add_argument(
        "--master",
        default=None,
        help="local[*] (default), spark://host:7077, or sc://host:15002 for Spark Connect",
    )
    p.add_argument(
        "--split-bytes",
        default="auto",
        help="byte-range size for large captures: auto (one range per core, in whole rounds, "
        "128m to 4g) or a size such as 256m",
    )
    p.add_argument(
        "--read-back",
        default="32m",
        help="bytes a range first reads before its own, to join its connections (32m)",
    )
    p.add_argument(
        "--timestamps",
        choices=("us", "ns"),
        default="us",
        help="us: Spark timestamps (microseconds); ns: int64 nanoseconds since the epoch, exact",
    )
    add_bodies(p)
    add_compress_values(p)
    p.add_argument(
        "--conf",
        action="append",
        type=conf_setting,
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the session the command creates, e.g. "
        "spark.driver.memory=4g (repeatable)",
    )
    p.add_argument(
        "--spark-log",
        default=None,
        metavar="FILE",
        help="append the output of the JVM the command starts (Spark's log, the stack traces "
        "of failed tasks) to FILE; stderr shows only its progress bar",
    )
    add_dissection_arguments(p)
    return p


def conf_setting(text):
    """`--conf KEY=VALUE` as a (key, value) pair; anything else is a usage error."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(
            f"expected KEY=VALUE, a Spark setting such as spark.driver.memory=4g, not {text!r}"
        )
    return key.strip(), value


# The JVM the command starts (in local mode, executor too) schedules the tasks and takes their
# one-row outputs while the tasks' Python workers dissect and write, so its JIT stops at the
# quick compiler. On 2 cores the JVM's CPU fell from 12-13 to 7-9 s while it started and from
# 2.0 to 1.1 s while a 2.6 GB capture was dissected (time the workers get back); Spark's
# start-up went from 10.7 s to 8.3 to 9.5 s, the JVM's peak from 457 MB to 394 to 403 MB. The
# partitions table of a split capture keeps the full JIT: Spark computes its lag over every row
# in the JVM (the quick tier with the throughput collector took 53 and 62 s on that capture
# where the defaults took 48 to 54 s).
LEAN_JVM = ("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")


def session(master, conf=(), log=None, lean=False):
    """A SparkSession for the command line (Spark's console progress bar on stderr), with the
    package sent to executors that are not local. conf: (key, value) pairs (or a dict) for the
    builder; a session already running keeps its static settings (Spark's rule). log: a file
    the output of a JVM started here is appended to, else it is dropped. lean: a JVM started
    here gets LEAN_JVM's options, unless conf sets that key."""
    from pyspark.sql import SparkSession

    from .ship import ship

    conf = list(conf.items() if isinstance(conf, dict) else conf)
    if master and master.startswith("sc://"):
        builder = SparkSession.builder.remote(master)
        for key, value in conf:
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        ship(spark)
        return spark
    builder = SparkSession.builder.appName("kafka-dissect").config(
        "spark.ui.showConsoleProgress", "true"
    )
    if lean:
        builder = builder.config(*LEAN_JVM)
    for key, value in conf:  # after our defaults, so that they can be overridden
        builder = builder.config(key, value)
    if master:
        builder = builder.master(master)
    with _jvm_stderr_filtered(log):
        spark = builder.getOrCreate()
    if not spark.sparkContext.master.startswith("local"):
        ship(spark)  # executors elsewhere may not have the package installed
    return spark


def run(args, spark=None):
    """The subcommand; a failed Spark job comes back as one line (`spark_errors`), with
    nothing else on stderr: pyspark's warnings and py4j's and pyspark's loggers are silenced,
    and the JVM the command starts writes only its progress bar there."""
    with spark_errors(), warnings.catch_warnings(), _loggers_silenced("py4j", "pyspark"):
        # the reader's warnings are printed as `analyze` does
        warnings.filterwarnings("ignore", category=UserWarning, module=r"dissector\.")
        warnings.filterwarnings("ignore", module=r"pyspark\.")
        return _run(args, spark)


@contextlib.contextmanager
def _loggers_silenced(*names):
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


# The JVM's console progress bar: a carriage return, the bar, and a line of spaces to clear it.
_PROGRESS = re.compile(rb"\r\[Stage [^\r\n]*|\r +\r")


@contextlib.contextmanager
def _jvm_stderr_filtered(log=None):
    """A JVM started inside (pyspark launches it with our stderr) gets a pipe for its stderr,
    which a thread drains, passing on the progress bar only: Spark's log lines, the stack
    traces of a failed task and the JVM's own notices would bury the one line that says what
    failed. They go to the file `log`, if given. Our own stderr is ours again once the JVM
    has started."""
    sink = open(log, "ab", buffering=0) if log else None  # noqa: SIM115 - the thread closes it
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    ours = os.dup(2)
    # Drained from the start: a JVM that fills the pipe while starting would wait for ever.
    threading.Thread(
        target=_pass_progress, args=(read_end, ours, sink), daemon=True, name="spark-stderr"
    ).start()
    try:
        os.dup2(write_end, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(ours, 2)
        os.close(write_end)


def _pass_progress(read_end, ours, sink=None):
    """Drain the JVM's stderr until it exits, writing the progress bar's pieces to `ours`
    and everything to `sink`, if given."""
    with (
        os.fdopen(read_end, "rb", buffering=0) as pipe,
        os.fdopen(ours, "wb", 0) as out,
        sink or contextlib.nullcontext(),
    ):
        while chunk := pipe.read(65536):
            bar = b"".join(_PROGRESS.findall(chunk))
            with contextlib.suppress(OSError):  # a write failed: keep draining all the same
                if bar:
                    out.write(bar)
                if sink is not None:
                    sink.write(chunk)


@contextlib.contextmanager
def spark_errors():
    """Errors of Spark (pyspark, py4j, Spark Connect) raised inside become a DissectorError of
    one line (`error_line`); our own errors and anything else pass through unchanged."""
    try:
        yield
    except DissectorError:
        raise
    except Exception as e:
        failure = _spark_failure(e)
        if failure is None:
            raise
        text = _texts(failure)
        raise DissectorError(error_line(text, _jvm_exit(text))) from e


def _is_spark(e):
    return type(e).__module__.startswith(("pyspark", "py4j"))


def _spark_failure(e):
    """The Spark error that started it, or None if `e` is not Spark's: a failed job whose
    clean-up (unpersist, a call to a JVM that has gone) failed too is the context of the
    clean-up's error, Spark's or a connection's (OSError). Other errors are ours to show."""
    found = None
    seen = set()
    while isinstance(e, Exception) and id(e) not in seen:
        seen.add(id(e))
        if _is_spark(e):
            found = e
        elif not isinstance(e, OSError):
            break  # ours, raised while handling Spark's: ours to show
        if e.__suppress_context__:
            break
        e = e.__context__
    return found


def _texts(failure):
    """The failure's text; pyspark's own exceptions (PythonException...) are raised from the
    py4j error they convert, whose text may add the stage of the failed task."""
    texts = [_text(failure)]
    context = failure.__context__
    if failure.__suppress_context__ and context is not None and _is_spark(context):
        texts.append(_text(context))
    return "\n".join(t for t in texts if t)


def _text(e):
    try:
        return str(e)
    except Exception:  # str() of a py4j error asks the JVM, which may be gone
        return " ".join(str(a) for a in getattr(e, "args", ()))


def _jvm_exit(text, wait=10):
    """The exit status of the JVM this process started for Spark (local mode), when it has
    exited: a task's Java OutOfMemoryError ends it with status 52."""
    pyspark = sys.modules.get("pyspark")
    gateway = getattr(getattr(pyspark, "SparkContext", None), "_gateway", None)
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return None
    status = proc.poll()
    if status is None and "SparkContext was shut down" in text:
        with contextlib.suppress(Exception):  # it may still be on its way out
            status = proc.wait(wait)
    return status


# What a failed job says, and what to do about it.

MAX_LINE = 300
JVM_OOM_EXIT = 52  # Spark's exit status for an uncaught OutOfMemoryError
MORE_MEMORY = (
    "give Spark more memory (--conf spark.driver.memory=4g in local mode, "
    "spark.executor.memory on a cluster)"
)
MORE_PYTHON_MEMORY = (
    "give the Python workers more memory (fewer tasks at once: --master local[2]; "
    "spark.executor.memoryOverhead on a cluster)"
)
MORE_CONTAINER_MEMORY = (
    "give the executors more memory (--conf spark.executor.memoryOverhead=2g, or "
    "spark.executor.memory)"
)
SMALLER_RANGES = "or use smaller byte ranges (--split-bytes 64m)"

_OURS = re.compile(r"^dissector\.[\w.]*Error: (.+)$")
_STAGE = re.compile(r"\bin stage (\d+)\.\d+")
_JAVA_OOM = re.compile(r"java\.lang\.OutOfMemoryError(?:: ([^\n]+))?")
_SPARK_OOM = re.compile(r"SparkOutOfMemoryError: ([^\n]+)")
_PY_OOM = re.compile(r"^(?:[\w.]+\.)?(\w*MemoryError)\b(?::|$)")
_CONTAINER_OOM = re.compile(
    r"killed by YARN for exceeding (?:\w+ )?memory limits|OOMKilled|exit code 137\b"
)
_CRASHED = re.compile(r"Python worker exited unexpectedly \(crashed\)")
_GRPC = re.compile(r'status = StatusCode\.(\w+)\s+details = "([^"\n]*)"')
_CONDITION = re.compile(r"^\[[A-Z0-9_.]+\]\s*")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?\s*$")
_IN_A_TASK = ("Lost task", "Python worker", "spark.executor.Executor", "ExecutorLostFailure")
_NOISE = (
    "at ",
    'File "',
    "...",
    "Traceback (most recent call last)",
    "Driver stacktrace:",
    "JVM stacktrace:",
    "An error occurred while calling",
    "An exception was thrown from the Python worker",
    "[Previous line repeated",
    "During handling of the above exception",
    "The above exception was the direct cause",
)


def error_line(text, jvm_exit=None):
    """One line a user can act on, from the text of a failed Spark job (a py4j, pyspark or
    Spark Connect exception; jvm_exit: the exit status of the local JVM, if it exited):

    - our own error raised in a task (`dissector.errors.CaptureError: <path>: frame N, offset
      M: reason`): its message, as `analyze` says it;
    - a task out of memory (Java or Python): `spark: a task of stage N ran out of memory
      (<kind>): <what to give more memory> or use smaller byte ranges (--split-bytes 64m)`;
    - else `spark: ` and the exception line of the root cause: the Python exception of a
      task's traceback, the deepest `Caused by:` of a Java trace, or the first line that is
      not a stack frame; whitespace collapsed, at most 300 characters."""
    lines = text.splitlines()
    stripped = [line.strip() for line in lines]
    for line in reversed(stripped):
        ours = _OURS.match(line)
        if ours:
            return _one_line(ours.group(1))
    memory = _out_of_memory(text, stripped, jvm_exit)
    if memory:
        return _one_line(memory)
    if _CRASHED.search(text):
        who = _who(text, jvm_exit, "a task")
        return _one_line(
            f"spark: {who} failed: its Python worker crashed; if the system killed it for "
            f"lack of memory, {MORE_PYTHON_MEMORY} {SMALLER_RANGES}"
        )
    grpc = _GRPC.search(text)
    if grpc:  # Spark Connect: the server's status and what it says
        return _one_line(f"spark: Spark Connect: {grpc.group(1)}: {grpc.group(2)}")
    line = _python_exception(lines) or _root_cause(lines) or _first_meaningful(stripped)
    return _one_line(f"spark: {_SQLSTATE.sub('', line or text)}")


def _out_of_memory(text, stripped, jvm_exit):
    """The out-of-memory line, if the text says a task (or the driver) ran out of memory."""
    kind, advice = _memory_kind(text, stripped, jvm_exit)
    if kind is None:
        return None
    kind = _SQLSTATE.sub("", _CONDITION.sub("", " ".join(kind.split())))
    if len(kind) > 80:
        kind = kind[:79].rstrip() + "…"
    who = _who(text, jvm_exit, "Spark")  # Spark: the driver itself, planning a job
    return f"spark: {who} ran out of memory ({kind}): {advice} {SMALLER_RANGES}"


def _memory_kind(text, stripped, jvm_exit):
    """What ran out of memory, as the text says it, and what to give more memory."""
    for pattern in (_JAVA_OOM, _SPARK_OOM):
        found = pattern.search(text)
        if found:
            return found.group(1) or "java.lang.OutOfMemoryError", MORE_MEMORY
    for words in ("GC overhead limit exceeded", "Java heap space", "Not enough space to cache"):
        if words in text:
            return words, MORE_MEMORY
    for line in stripped:  # MemoryError, pyarrow's ArrowMemoryError...
        found = _PY_OOM.match(line)
        if found:
            return f"{found.group(1)} in Python", MORE_PYTHON_MEMORY
    if "Cannot allocate memory" in text:  # the machine's memory, not a heap's
        return "cannot allocate memory", MORE_PYTHON_MEMORY
    found = _CONTAINER_OOM.search(text)
    if found:
        return found.group(0), MORE_CONTAINER_MEMORY
    if jvm_exit == JVM_OOM_EXIT:
        return f"java.lang.OutOfMemoryError: Spark's JVM exited with status {jvm_exit}", MORE_MEMORY
    return None, None


def _who(text, jvm_exit, otherwise):
    stage = _STAGE.search(text)
    if stage:
        return f"a task of stage {stage.group(1)}"
    if jvm_exit == JVM_OOM_EXIT or any(words in text for words in _IN_A_TASK):
        return "a task"
    return otherwise


def _python_exception(lines):
    """The exception line of the last Python traceback in the text: the first line after
    its frames that is not indented (frames and source lines are)."""
    starts = [i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line]
    if not starts:
        return None
    after_frame = False
    for line in lines[starts[-1] + 1 :]:
        s = line.strip()
        if not s:
            continue
        if line[0].isspace() or s.startswith(('File "', "[Previous line repeated")):
            after_frame = s.startswith('File "')
            continue
        if set(s) <= set("^~ "):
            continue
        if after_frame and not re.match(r"^[\w.]+(?::|$)", s):
            after_frame = False  # a source line, its indentation lost
            continue
        return s
    return None


def _root_cause(lines):
    """The deepest `Caused by:` of a Java trace (the last one not indented: indented ones
    belong to suppressed exceptions); or the exception of the task that failed the job."""
    causes = [line for line in lines if line.startswith("Caused by: ")]
    causes = causes or [line.strip() for line in lines if line.strip().startswith("Caused by: ")]
    if causes:
        return causes[-1].removeprefix("Caused by: ").strip()
    for line in lines:
        lost = re.search(r"most recent failure: Lost task [^:]*\): (.+)$", line)
        if lost:
            return lost.group(1)
    return None


def _first_meaningful(stripped):
    for line in stripped:
        line = line.removeprefix(": ").strip()
        if line and not line.startswith(_NOISE):
            return line
    return None


def _one_line(text):
    text = " ".join(text.split())
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1].rstrip() + "…"


def _run(args, spark):
    from . import Dissected, register

    conf = getattr(args, "conf", None) or ()
    lean = args.table != "partitions"  # whose lag the JVM computes (LEAN_JVM)
    spark = spark or session(args.master, conf, getattr(args, "spark_log", None), lean)
    register(spark)
    dissected = Dissected(
        spark,
        args.captures,
        args.split_bytes,
        args.read_back,
        joined=False,  # its table is written by one pass over each range where it can be
        ports=args.port,
        **dissection_options(args, args.table),
    )
    rows = dissected.write(args.output, args.table, args.timestamps, args.compress_values)
    summaries = dissected.summaries()
    for message in dissected.warnings:  # as `analyze` says them
        print(f"kafka-dissect: warning: {message}", file=sys.stderr)
    for _capture, title, summary, notes in summaries:
        print(summary.text(title))
        for line in notes:
            print(line)
        print()
    print(f"wrote {rows} rows of {args.table} to {args.output}, partitioned by capture")
    return 0
