"""The tables of a capture set as Spark DataFrames.

    whole captures ─▶ the core per capture, in one task (whole.py) ─────────────────────┐
    split captures ─▶ chunks ─▶ tasks (facts) ─▶ checked on the driver ─▶ tasks (rows) ─┴▶ table
                      (plan.py)  (ranges.py)      (verify.py, split.py)

No packet leaves the task that read it: a task of a split capture reads its byte range and a
read-back before it, and sends the driver small facts (split.py); once every range agrees
with the one before it, the same tasks build the table, each with the facts the driver settled
for it. Nothing is cached or shuffled (but the partitions table's committed offsets, whose lag
is taken over the whole capture in a window).
"""

import pickle
import warnings
from dataclasses import fields
from functools import partial

import pyarrow as pa

from ..options import Options
from ..tables.schema import SCHEMAS
from ..tls import KeyLog
from . import parts
from .guess import GUESSED, fixed, judge, judged_here, readable, run_guess_task
from .notes import piece_warnings
from .plan import expand, pack_whole, plan_split, surveys_in_spark
from .split import (
    DEFAULT_READ_BACK,
    MAX_ROUNDS,
    run_facts_task,
    run_rows_task,
    split_tasks,
    unjoined,
)
from .types import for_spark, spark_schema, table_schema
from .whole import SUMMARY, table_batches, whole_tasks

DEFAULT_SPLIT = "auto"
# "auto": ranges within these bounds, in whole rounds of tasks, one a core while they stay
# under the top, each capture's ranges cut so that each task is fed as many packets, its
# read-back included (the cost of a range follows its packets more than its bytes). Each
# range costs a read-back, a Spark task and a run that checks it before the run that builds
# its rows, so fewer, larger ranges are faster, while whole rounds of equal ranges keep
# every core busy to the end.
AUTO_SPLIT = (128 << 20, 4 << 30)
MIN_TASK_BYTES = 4 << 20  # captures read whole are packed into tasks of at least this
INLINE_ARGUMENTS = 1 << 20  # tasks' arguments up to this, all together, go with the function
OPTION_NAMES = tuple(f.name for f in fields(Options))  # what a load may pass to the core
FACTS = pa.schema([("id", pa.int64()), ("facts", pa.binary())])
# A write task's rows; a `guess` task's also its (facts, guess) and, where it fixed its rows
# itself, (the fix, the file written).
WRITTEN = parts.PARTS.append(pa.field("guess", pa.binary())).append(pa.field("fixed", pa.binary()))


class Dissected:
    """A capture set dissected in Spark; `table(name)` builds any table, `write` writes one
    and keeps the command line's summaries.

    Captures read whole by one task (no larger than `split_bytes`, or gzip) are dissected
    where they are read (`whole.py`). Larger ones are cut into byte ranges and checked when
    this is made (split.py): their tables are then built by one task a range. With
    `joined=False` the ranges are checked when first needed, and `write` of the pairs or
    records table then checks them with one run a range that builds the rows too (guess.py).

    `warnings`: what reading the captures noticed (a cut file, a timestamp out of range), one
    line each naming file, frame and offset. Those of split captures are known once this is
    made (and a capture none of whose packets has a link type the core reads is an error
    then); those of captures read whole come with their reading, in `summaries()`."""

    def __init__(
        self,
        spark,
        paths,
        split_bytes=DEFAULT_SPLIT,
        read_back=DEFAULT_READ_BACK,
        local_survey_bytes=None,
        joined=True,
        **options,
    ):
        self.spark = spark
        self.files = expand(paths)
        self.options = _options(options)
        surveys = surveys_in_spark(spark, local_survey_bytes)
        balanced = str(split_bytes).strip().lower() == "auto"
        if balanced:
            split_bytes = auto_split(self.files, _parallelism(spark))
        self.whole, self.split, self.warnings = plan_split(
            self.files, parse_size(split_bytes), parse_size(read_back), surveys, balanced
        )
        for message in self.warnings:
            warnings.warn(message, stacklevel=2)
        self.outcomes = self.seeds = self.packets = None
        self._summaries = None
        if joined:
            self._join()

    def _join(self, first=None):
        """Check the ranges of the split captures until they agree (split.py). first: the
        facts of every range, taken already (by `guess` tasks)."""
        self.outcomes, self.seeds, facts = split_tasks(self.split, self.options, self._facts, first)
        for capture, why in unjoined(self.split, self.outcomes).items():
            message = (
                f"{capture}: its byte ranges could not be joined after {MAX_ROUNDS} rounds "
                f"({why}): dissected whole, by one task"
            )
            self.warnings.append(message)
            warnings.warn(message, stacklevel=2)
            self.whole.append(capture)
            del self.outcomes[capture], facts[capture]
        self.split = [c for c in self.split if c.capture in self.outcomes]
        self.packets = {c: o.packets for c, o in self.outcomes.items()}
        ranges = [f for per_capture in facts.values() for f in per_capture]
        for message in piece_warnings(ranges, self.files):
            self.warnings.append(message)
            warnings.warn(message, stacklevel=2)

    def _joined(self):
        if self.outcomes is None:
            self._join()

    # -- tasks -----------------------------------------------------------------------------

    def _tasks(self, items):
        """A DataFrame of one row a task, one task a partition, and `arguments(batch)`: the
        (task id, item) of a batch of its rows, for the task items given. Items small all
        together (pickled) travel with the function every task gets; larger ones in the rows,
        from a table joined in (a Spark job more: 0.13 s), so that a task reads only its own."""
        blobs = [pickle.dumps(item, pickle.HIGHEST_PROTOCOL) for item in items]
        n = len(blobs)
        ids = self.spark.range(0, n, 1, n)
        if sum(map(len, blobs)) <= INLINE_ARGUMENTS:

            def inline(batch):
                return [(i, pickle.loads(blobs[i])) for i in batch.column("id").to_pylist()]

            return ids, inline
        from pyspark.sql import functions as F

        # From Arrow: made in the JVM, with no Python worker to convert the rows.
        table = pa.table({"id": pa.array(range(n), pa.int64()), "task": pa.array(blobs)})
        rows = self.spark.createDataFrame(table)
        return ids.join(F.broadcast(rows), "id"), _joined

    def _facts(self, items):
        """The `facts` of tasks [(spec, seeds)], run in Spark, in order."""
        if not items:  # no split capture: no job
            return []
        options = self.options
        tasks, arguments = self._tasks(items)

        def run(batches):
            for batch in batches:
                ids, out = [], []
                for task, (spec, seeds) in arguments(batch):
                    ids.append(task)
                    out.append(run_facts_task(spec, options, seeds))
                yield pa.RecordBatch.from_arrays(
                    [pa.array(ids, pa.int64()), pa.array(out, pa.binary())], schema=FACTS
                )

        got = tasks.mapInArrow(run, spark_schema(FACTS)).collect()
        by_id = {r["id"]: bytes(r["facts"]) for r in got}
        return [by_id[i] for i in range(len(items))]

    def _ranges(self):
        """The arguments of every range's `rows` task: (spec, seeds, settled facts)."""
        return [arguments for _c, _i, arguments in self._settled()]

    def _settled(self):
        """(capture, range index, the arguments of its `rows` task) of every range."""
        for c in self.split:
            for i in range(c.tasks):
                settled = self.outcomes[c.capture].settled[i]
                yield c, i, (c.spec(i), self.seeds[c.capture], settled)

    def _split_rows(self, table, timestamps, summaries):
        """The table of the split captures: one task a range."""
        options, schema = self.options, _split_schema(table, timestamps, summaries)
        tasks, arguments = self._tasks(self._ranges())

        def run(batches):
            for batch in batches:
                for _task, (spec, seeds, settled) in arguments(batch):
                    yield from rows_batches(spec, options, seeds, settled, table, schema, summaries)

        return tasks.mapInArrow(run, spark_schema(schema))

    def _whole(self, table, timestamps="us", summaries=False):
        """The captures read whole, as `table`. A task per group of captures
        (`pack_whole`), each task started by one row of a range."""
        groups = pack_whole(self.whole, MIN_TASK_BYTES)
        schema = table_schema(table, timestamps)
        if summaries:
            schema = schema.append(pa.field(SUMMARY, pa.binary()))
        tasks = self.spark.range(0, len(groups), 1, len(groups))
        run = whole_tasks(groups, table, self.options, timestamps, summaries)
        return tasks.mapInArrow(run, spark_schema(schema))

    # -- tables ----------------------------------------------------------------------------

    def table(self, table="pairs", timestamps="us", summaries=False):
        """A table of every capture, with `capture`. timestamps="ns": the capture-time
        columns as int64 nanoseconds since the epoch, exact (Spark timestamps keep
        microseconds). summaries: with a row per task holding its summary (`_summary`)."""
        if table not in SCHEMAS:
            raise ValueError(f"unknown table {table!r}; choose from {', '.join(SCHEMAS)}")
        table_schema(table, timestamps)  # a bad value is an error here
        self._joined()
        parts = [self._whole(table, timestamps, summaries)] if self.whole else []
        if self.split:
            rows = self._split_rows(table, timestamps, summaries)
            parts.append(lags(rows) if table == "partitions" else rows)
        if not parts:
            return self._whole(table, timestamps, summaries)
        out = parts[0]
        for part in parts[1:]:
            out = out.unionByName(part)
        return out

    def write(self, path, table="pairs", timestamps="us", compress_values=False):
        """Write `table` as parquet partitioned by capture, and keep the summaries the tasks
        made on the way (one pass over the captures). Returns the number of rows written.

        The tasks write their own files (parts.py) unless the table needs Spark between
        them (the committed lag of split captures' partitions, over the whole capture) or
        they cannot reach `path`: then Spark writes the DataFrame of `table`. Made with
        `joined=False`, the ranges of split captures of the pairs and records tables are
        dissected once (guess.py)."""
        if (table == "partitions" and self.split) or not parts.reachable(self.spark, path):
            self._joined()
            return self._write_in_spark(path, table, timestamps)
        table_schema(table, timestamps)  # a bad value is an error here
        job = parts.prepare(path)
        write = partial(self._write_tasks, path, job, table, timestamps, compress_values)
        items = [("whole", group) for group in pack_whole(self.whole, MIN_TASK_BYTES)]
        if self.outcomes is None and self.split and self._guessed_table(table):
            done = self._write_guessed(write, partial(parts.place, path, job), items)
        else:
            self._joined()
            done = write(items + [("range", *r) for r in self._ranges()])
        parts.commit(path)
        self._summaries = [(r["capture"], bytes(r["summary"])) for r in done if r["summary"]]
        return sum(r["rows"] for r in done)

    def _write_guessed(self, write, place, items):
        """The write tasks `items`, with a `guess` task for every range; then, once the
        ranges are checked, a task a range, fixing its rows or building them again (and
        those of captures whose ranges were never joined). Where every task runs at once,
        each guess task gathers the facts of all and fixes its own rows as the driver would:
        the driver then moves those files into place (`place(file, capture, task)`), and
        runs a second job only for what it judges otherwise. Returns their WRITTEN rows."""
        ranges = [(c, i) for c in self.split for i in range(c.tasks)]
        ahead = len(items)  # the guess tasks' numbers follow those of the captures read whole
        items = items + [("guess", c.spec(i)) for c, i in ranges]
        done, guesses = [], {}
        for r in write(items, together=self._at_once(len(items))):
            if r["guess"] is None:
                done.append(r)
            else:
                facts, guess = pickle.loads(r["guess"])
                here = pickle.loads(r["fixed"]) if r["fixed"] is not None else (None, None)
                guesses[facts["capture"], facts["index"]] = (facts, guess, r["rows"], here)
        whole = set(self.whole)
        self._join([guesses[c.capture, i][0] for c, i in ranges])
        later = [c for c in self.whole if c not in whole]  # ranges never joined: whole
        fixes = [("whole", group) for group in pack_whole(later, MIN_TASK_BYTES)]
        for c, i, arguments in self._settled():  # the captures whose ranges were joined
            _facts, guess, rows, (fix, file) = guesses[c.capture, i]
            judged = None
            if i not in self.outcomes[c.capture].again:
                judged = judge(guess, arguments[2])
            if judged is None:
                fixes.append(("range", *arguments))
                continue
            # its summary stays here: only its rows are fixed, by its task or in a task
            done.append({"capture": c.capture, "rows": 0, "summary": judged[1]})
            if fix == judged[0]:
                if rows:
                    place(file, c.capture, ahead + ranges.index((c, i)))
                done[-1]["rows"] = rows
            else:
                fixes.append(("fix", c.capture, judged[0], *arguments))
        return done + (write(fixes, first=len(items)) if fixes else [])

    def _at_once(self, tasks):
        """Whether `tasks` tasks run at the same time, in one barrier job: in local mode,
        within its cores (a cluster's executors may hold fewer slots than it will have, and a
        barrier job waits for them all; Spark Connect's client cannot tell)."""
        try:
            master = self.spark.sparkContext.master
        except Exception:  # Spark Connect: no SparkContext here
            return False
        return master.startswith("local") and tasks <= (_parallelism(self.spark) or 0)

    def _guessed_table(self, table):
        """Whether a table's rows can be guessed (guess.py): not where a filter names
        topics, which a range may know only by their ids."""
        return table in GUESSED and not self.options.get("topics")

    def _write_tasks(
        self, path, job, table, timestamps, compress_values, items, first=0, together=False
    ):
        """Run the tasks `items` in one job: each writes its parts of `table` (task numbers
        from `first`), or, for a `guess`, its rows to be fixed. `together`: in a barrier job,
        every task gathers the facts of all, and a `guess` task fixes its rows itself where
        its capture's ranges agree (into `_temporary/`). Returns their WRITTEN rows."""
        options = self.options
        schema = _split_schema(table, timestamps, summaries=True)
        base = table_schema(table, timestamps)
        wide = base.append(pa.field(SUMMARY, pa.binary()))

        def write(batches, task):
            return parts.write_capture(batches, path, job, task, table, compress_values)

        def fix_here(spec, facts, guess, task):
            """A guess task's rows, fixed where every range's facts say how (else None)."""
            judged = judged_here(_gathered(path, job, facts), facts, guess)
            if judged is None:
                return None
            made = fixed(judged[0], path, spec["capture"], base)
            rows = (b.drop_columns(["capture"]) for b in made)
            out = parts.write_temporary(
                rows, path, job, f"fixed-{task:05d}", table, compress_values
            )
            return out.rows, pickle.dumps((judged[0], out.file), pickle.HIGHEST_PROTOCOL)

        def run_task(task, kind, *args):
            if kind == "whole":
                return [write(table_batches(c, table, options, wide, True), task) for c in args[0]]
            if kind == "range":
                spec, seeds, settled = args
                made = rows_batches(spec, options, seeds, settled, table, schema, True)
                return [write(made, task)]
            if kind == "guess":
                (spec,) = args
                facts, guess = run_guess_task(spec, options, table, path, job, f"guess-{task:05d}")
                # pickled for the driver before judging here adds to the guess's summary
                blob = pickle.dumps((facts, guess), pickle.HIGHEST_PROTOCOL)
                rows, here = (fix_here(spec, facts, guess, task) if together else None) or (0, None)
                return [
                    {
                        "capture": spec["capture"],
                        "rows": rows,
                        "summary": None,
                        "guess": blob,
                        "fixed": here,
                    }
                ]
            capture, fix, spec, seeds, settled = args  # "fix": its summary is the driver's
            if readable(fix, path):
                made = (b.drop_columns(["capture"]) for b in fixed(fix, path, capture, base))
                rows = parts.write_part(made, path, job, task, table, compress_values, capture)
            else:  # its file is on the disk of another machine: built again here
                made = rows_batches(spec, options, seeds, settled, table, schema, True)
                rows = write(made, task)["rows"]
            return [{"capture": capture, "rows": rows, "summary": None}]

        tasks, arguments = self._tasks(items)

        def run(batches):
            for batch in batches:
                for task, item in arguments(batch):
                    out = run_task(first + task, *item)
                    if together and item[0] != "guess":
                        _gathered(path, job, None)  # every task of a barrier job meets
                    yield pa.RecordBatch.from_pylist(out, schema=WRITTEN)

        return tasks.mapInArrow(run, spark_schema(WRITTEN), barrier=together).collect()

    def _write_in_spark(self, path, table, timestamps):
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        seen = Observation("kafka_dissect_summaries")
        df = self.table(table, timestamps, summaries=True)
        part = F.when(F.col(SUMMARY).isNotNull(), F.struct("capture", SUMMARY))
        df = df.observe(seen, F.collect_list(part).alias("s"))
        df = df.filter(F.col(SUMMARY).isNull()).drop(SUMMARY)
        df.write.mode("overwrite").partitionBy("capture").parquet(path)
        self._summaries = [(r["capture"], bytes(r[SUMMARY])) for r in seen.get["s"]]
        return self.spark.read.parquet(path).count()

    def summaries(self):
        """Per capture, in the order given: the `analyze` summary, its title and its TLS line
        (a list, empty without TLS), added up from the summaries of each task (of the last
        `write`, else a pass of their own). Adds the warnings of the captures read whole to
        `warnings`."""
        from .summary import merge

        if self._summaries is None:
            from pyspark.sql import functions as F

            df = self.table("pairs", summaries=True).filter(F.col(SUMMARY).isNotNull())
            got = df.select("capture", SUMMARY).collect()
            self._summaries = [(r["capture"], bytes(r[SUMMARY])) for r in got]
        out, said = merge(self._summaries, self.files, self.packets, self.options)
        for message in said:
            if message not in self.warnings:
                self.warnings.append(message)
                warnings.warn(message, stacklevel=2)
        return out


def _gathered(path, job, facts):
    """In a barrier job: the facts of every task that has some, once all have said theirs
    (None: a task without)."""
    from pyspark import BarrierTaskContext

    context = BarrierTaskContext.get()
    # A stage run again finds its earlier attempt's files: the same facts, of the same ranges.
    meeting = f"facts-{context.stageId()}"
    count, me = len(context.getTaskInfos()), context.partitionId()
    blob = b"" if facts is None else pickle.dumps(facts, pickle.HIGHEST_PROTOCOL)
    got = parts.rendezvous(path, job, meeting, count, me, blob)
    return [pickle.loads(b) for b in got if b]


def _joined(batch):
    """(task id, item) of a batch of rows that carry them pickled."""
    ids, blobs = batch.column("id").to_pylist(), batch.column("task").to_pylist()
    return [(i, pickle.loads(b)) for i, b in zip(ids, blobs, strict=True)]


def _split_schema(table, timestamps, summaries):
    schema = table_schema(table, timestamps)
    if table == "partitions":
        schema = _ordered(schema)
    if summaries:
        schema = schema.append(pa.field(SUMMARY, pa.binary()))
    return schema


def rows_batches(spec, options, seeds, settled, table, schema, summaries):
    """Record batches (Spark's schema) of one range's `rows` task; with `summaries`, a last
    row holding the task's summary and its accounting."""
    from ..tables.schema import SCHEMAS as DECLARED
    from .summary import new_summary, summary_row

    capture = spec["capture"]
    summary = new_summary(options) if summaries else None
    extra = 1 if summaries else 0
    streams = []  # the accounting rows of the connections the range ends
    for batch, order in run_rows_task(spec, options, seeds, settled, table, summary, streams):
        if table == "partitions":
            if not batch:
                continue
            rb = pa.RecordBatch.from_pylist(batch, schema=DECLARED["partitions"])
            base = pa.schema(list(schema)[: len(schema) - len(ORDER) - extra])
            rb = for_spark(rb, capture, base)
            columns = list(zip(*order, strict=True))
            arrays = rb.columns + [pa.array(c, pa.int64()) for c in columns]
        else:
            base = pa.schema(list(schema)[: len(schema) - extra])
            arrays = for_spark(batch, capture, base).columns
        if summaries:
            arrays.append(pa.nulls(len(arrays[0]), pa.binary()))
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)
    if summaries:
        row = {name: None for name in schema.names}
        row["capture"] = capture
        row[SUMMARY] = summary_row(summary, streams)
        yield pa.RecordBatch.from_pylist([row], schema=schema)


def _options(options):
    out = {k: v for k, v in options.items() if k in OPTION_NAMES and v is not None}
    unknown = set(options) - set(OPTION_NAMES)
    if unknown:
        raise ValueError(f"unknown option(s): {', '.join(sorted(unknown))}")
    if "ports" in out:
        ports = out["ports"]
        if isinstance(ports, str):
            ports = [int(p) for p in ports.replace(",", " ").split()]
        out["ports"] = sorted(int(p) for p in ports)
    if isinstance(out.get("topics"), str):  # .option("topics", "orders,payments")
        out["topics"] = [t for t in out["topics"].split(",") if t]
    if "partitions" in out:
        parts = out["partitions"]
        if isinstance(parts, str):
            parts = parts.replace(",", " ").split()
        out["partitions"] = sorted(int(p) for p in parts)
    if "topics" in out:
        out["topics"] = sorted(out["topics"])
    for name in ("max_frame", "max_decompressed", "max_ratio", "max_connections"):
        if name in out:
            out[name] = int(out[name])
    if "tls_keylog" in out:  # the tasks get its lines: they may run where the file is not
        out["tls_secrets"] = KeyLog(out.pop("tls_keylog")).text()
    for name in ("show_secrets", "decompress", "bodies"):
        if isinstance(out.get(name), str):
            out[name] = out[name].lower() == "true"
    return out


ORDER = ("_frame", "_sub", "_seq", "_row")  # completion moment of a partition row's exchange
MOMENT = ("frame", "sub", "seq")


def _ordered(schema):
    for name in ORDER:
        schema = schema.append(pa.field(name, pa.int64()))
    return schema


def lags(df):
    """committed_lag over the whole capture: the newest high watermark of the topic-partition
    among the rows before (in completion order), minus the committed offset."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    window = (
        Window.partitionBy("capture", "topic", "partition")
        .orderBy(*ORDER)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    hwm = F.col("high_watermark")
    newest = F.last(F.when(hwm >= 0, hwm), ignorenulls=True).over(window)
    committed = F.col("committed_offset")
    lag = F.when((committed >= 0) & newest.isNotNull(), newest - committed)
    columns = [lag.alias(c) if c == "committed_lag" else F.col(c) for c in df.columns]
    return df.select(*columns).drop(*ORDER)


def load(
    spark,
    paths,
    table="pairs",
    split_bytes=DEFAULT_SPLIT,
    timestamps="us",
    read_back=DEFAULT_READ_BACK,
    **options,
):
    """A DataFrame of one table of a capture set (paths and globs), with a `capture` column;
    timestamps="ns" gives the capture-time columns as int64 nanoseconds."""
    if table == "records":
        options.setdefault("records", "full")
    return Dissected(spark, paths, split_bytes, read_back, **options).table(table, timestamps)


def auto_split(files, parallelism):
    """The split size "auto" gives: the files' bytes cut into whole rounds of tasks (a
    multiple of the cores, ranges of at most 4 GiB), rounded up to a MiB and at least
    128 MiB. A last round with fewer tasks than cores leaves cores idle."""
    from ..capture.ranges import file_size

    low, high = AUTO_SPLIT
    if not parallelism:
        return low
    total = sum(file_size(f) for f in files)
    ranges = max(parallelism, -(-total // high))
    ranges = -(-ranges // parallelism) * parallelism
    mib = 1 << 20
    return max(low, -(-total // (ranges * mib)) * mib)


def _parallelism(spark):
    """The session's default parallelism (its cores in local mode), or None if unknown."""
    try:
        return spark.sparkContext.defaultParallelism
    except Exception:  # Spark Connect: no SparkContext here
        try:
            return int(spark.conf.get("spark.default.parallelism", "0")) or None
        except Exception:
            return None


UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text):
    """ "128m", "1g", "65536" -> bytes."""
    text = str(text).strip().lower().removesuffix("b")
    if text and text[-1] in UNITS:
        return int(float(text[:-1]) * UNITS[text[-1]])
    return int(text)
