"""`kafka-dissect spark`: a capture set dissected on Spark, written as parquet partitioned by
capture, with the `analyze` summary of each capture."""

import sys
import warnings

from ..arguments import add_dissection_arguments, dissection_options
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
        "--split-bytes", default="128m", help="byte-range size for large captures (128m)"
    )
    p.add_argument(
        "--timestamps",
        choices=("us", "ns"),
        default="us",
        help="us: Spark timestamps (microseconds); ns: int64 nanoseconds since the epoch, exact",
    )
    add_dissection_arguments(p)
    return p


def session(master):
    """A SparkSession for the command line (Spark's console progress bar on stderr), with the
    package sent to executors that are not local."""
    from pyspark.sql import SparkSession

    from .ship import ship

    if master and master.startswith("sc://"):
        spark = SparkSession.builder.remote(master).getOrCreate()
        ship(spark)
        return spark
    builder = SparkSession.builder.appName("kafka-dissect").config(
        "spark.ui.showConsoleProgress", "true"
    )
    if master:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    if not spark.sparkContext.master.startswith("local"):
        ship(spark)  # executors elsewhere may not have the package installed
    return spark


def run(args, spark=None):
    """The subcommand; an error raised inside a Spark task comes back as one line."""
    try:
        with warnings.catch_warnings():  # the reader's warnings are printed as `analyze` does
            warnings.filterwarnings("ignore", category=UserWarning, module=r"dissector\.")
            return _run(args, spark)
    except DissectorError:
        raise
    except Exception as e:
        if type(e).__module__.startswith(("pyspark", "py4j")):
            raise DissectorError(_last_line(str(e))) from e
        raise


def _last_line(text):
    """The line naming the error in a task's traceback: ours name file, frame and offset, as
    `analyze` says them; else Spark's last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("dissector.errors."):
            return line.split(": ", 1)[1]
    return f"spark: {lines[-1] if lines else text}"


def _run(args, spark):
    from . import Dissected, register

    spark = spark or session(args.master)
    register(spark)
    dissected = Dissected(
        spark,
        args.captures,
        args.split_bytes,
        ports=args.port,
        **dissection_options(args, args.table),
    )
    try:
        table = dissected.table(args.table, args.timestamps)
        table.write.mode("overwrite").partitionBy("capture").parquet(args.output)
        summaries = dissected.summaries()
        for message in dissected.warnings:  # as `analyze` says them
            print(f"kafka-dissect: warning: {message}", file=sys.stderr)
        for _capture, title, summary in summaries:
            print(summary.text(title))
            print()
        rows = spark.read.parquet(args.output).count()
        print(f"wrote {rows} rows of {args.table} to {args.output}, partitioned by capture")
    finally:
        dissected.unpersist()
    return 0
