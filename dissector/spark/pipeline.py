"""The tables of a capture set as Spark DataFrames.

    whole captures ─▶ core per capture (whole.py) ───────────────────────────────┐
    split captures ─▶ byte ranges ─▶ packets ─▶ shuffle ─▶ core per group ─▶ settle ─┴▶ table
                      (plan.py)      (source)   (groupBy)  (tasks.py)       (crossing.py)

For split captures, the dissected groups are kept (persisted) because two things read them:
the small facts that cross connections, collected to the driver when the DataFrame is made,
and the table itself, built from them by every action on the DataFrame.
"""

import json
import pickle
import warnings
from collections import defaultdict
from dataclasses import fields

import pyarrow as pa

from ..options import Options
from ..tables.schema import SCHEMAS
from .crossing import renumber, settle_topics, stale_groups
from .notes import piece_warnings
from .plan import (
    LOCAL_SURVEY_BYTES,
    expand,
    pack_whole,
    plan_pieces,
    surveys_in_spark,
    whole_and_split,
)
from .source import MIN_TASK_BYTES, NAME, parse_size
from .tasks import (
    DISSECTED,
    EXCHANGE,
    LAST_FRAME,
    LEARNED,
    MISSED,
    OPENED,
    PIECE_NOTES,
    PROVEN,
    STREAM_ROW,
    dissect_group,
)
from .types import for_spark, spark_schema, table_schema
from .whole import NOTES, whole_tasks

DEFAULT_SPLIT = "128m"
MAX_ROUNDS = 5  # dissections of a group, at most (see crossing.stale_groups)
OPTION_NAMES = tuple(f.name for f in fields(Options))  # what a load may pass to the core


class Dissected:
    """A capture set dissected in Spark; `table(name)` builds any table, `summaries()` the
    command line's summary.

    Captures read whole by one task (smaller than `split_bytes`, or gzip) are dissected where
    they are read, once per table built (`whole.py`). Captures split into byte ranges are
    dissected once, by groups of connections after a shuffle; the groups are kept and the
    cross-connection facts settled here, and every table is built from them.

    `warnings`: what reading the captures noticed (a cut file, a timestamp out of range), one
    line each naming file, frame and offset. Those of split captures are known once this is
    made (and a capture none of whose packets has a link type the core reads is an error
    then); those of captures read whole come with their reading, in `summaries()` (and that
    error with any table's action)."""

    def __init__(self, spark, paths, split_bytes=DEFAULT_SPLIT, local_survey_bytes=None, **options):
        from . import register_sources

        register_sources(spark)
        self.spark = spark
        self.files = expand(paths)
        split = parse_size(split_bytes)
        if local_survey_bytes is None:
            local_survey_bytes = LOCAL_SURVEY_BYTES
        surveys = surveys_in_spark(spark, local_survey_bytes)
        pieces, self.warnings = plan_pieces(self.files, split, surveys)
        for message in self.warnings:
            warnings.warn(message, stacklevel=2)
        self.options = _options(options)
        self.whole, split_pieces = whole_and_split(pieces)
        self.groups = None
        self.streams, self.learned, self.packets = {}, {}, {}
        self._notes = None
        if split_pieces:
            self._dissect_split(split_pieces, split)

    def _dissect_split(self, pieces, split):
        """Packets, shuffle by connection, the core per group (kept), facts settled."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        spark = self.spark
        packets = (
            spark.read.format(NAME)
            .option("pieces", json.dumps(pieces))
            .option("split_bytes", str(split))
            .load()
        )
        schema = spark_schema(DISSECTED)
        self.groups = (
            packets.groupBy("capture", "key")
            .applyInArrow(dissect_group(self.options), schema)
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        for _round in range(MAX_ROUNDS):
            facts = (
                self.groups.filter(F.col("kind") >= OPENED)
                .select("capture", "key", "kind", "blob", "frame", "sub", "seq", "topic_id", "name")
                .collect()
            )
            proven, missed = endpoint_facts(facts)
            stale = stale_groups(proven, missed)
            if not stale:
                break
            # Dissect again the groups that asked for an endpoint another group had proven.
            again = spark.createDataFrame(stale, "capture string, key long")
            redone = (
                packets.join(again, ["capture", "key"], "left_semi")
                .groupBy("capture", "key")
                .applyInArrow(dissect_group(self.options, _texts(proven)), schema)
            )
            kept = self.groups.join(again, ["capture", "key"], "left_anti")
            previous = self.groups
            self.groups = kept.unionByName(redone).persist(StorageLevel.MEMORY_AND_DISK)
            self.groups.count()
            previous.unpersist()
        self.streams, self.learned = cross_facts(facts)
        self.packets = {r["capture"]: r["frame"] for r in facts if r["kind"] == LAST_FRAME}
        notes = [(r["capture"], r["blob"]) for r in facts if r["kind"] == PIECE_NOTES]
        for message in piece_warnings(notes, self.files):
            self.warnings.append(message)
            warnings.warn(message, stacklevel=3)

    def _whole(self, table, timestamps="us"):
        """The captures read whole, as `table` (or "notes"): no shuffle. A task per group of
        captures (`pack_whole`), each task started by one row of a range: unlike a data
        source, this needs no planning process on the driver (0.9 s a load)."""
        groups = pack_whole(self.whole, MIN_TASK_BYTES)
        schema = NOTES if table == "notes" else table_schema(table, timestamps)
        tasks = self.spark.range(0, len(groups), 1, len(groups))
        run = whole_tasks(groups, table, self.options, timestamps)
        return tasks.mapInArrow(run, spark_schema(schema))

    def table(self, table="pairs", timestamps="us"):
        """A table of every capture, with `capture`. timestamps="ns": the capture-time
        columns as int64 nanoseconds since the epoch, exact (Spark timestamps keep
        microseconds)."""
        if table not in SCHEMAS:
            raise ValueError(f"unknown table {table!r}; choose from {', '.join(SCHEMAS)}")
        table_schema(table, timestamps)  # a bad value is an error here
        parts = [self._whole(table, timestamps)] if self.whole else []
        if self.groups is not None:
            parts.append(self._split_table(table, timestamps))
        out = parts[0]
        for part in parts[1:]:
            out = out.unionByName(part)
        return out

    def _split_table(self, table, timestamps):
        from pyspark.sql import functions as F

        kind = STREAM_ROW if table == "streams" else EXCHANGE
        blobs = self.groups.filter(F.col("kind") == kind).select("capture", "blob")
        build = builder(table, self.streams, self.learned, timestamps)
        schema = table_schema(table, timestamps)
        if table != "partitions":
            return blobs.mapInArrow(build, spark_schema(schema))
        blobs = self.groups.filter(F.col("kind") == kind)
        blobs = blobs.select("capture", "blob", "frame", "sub", "seq")
        return lags(blobs.mapInArrow(build, spark_schema(_ordered(schema))))

    def summaries(self):
        """Per capture, in the order given: the `analyze` summary and its title, summed in
        Spark from the summaries of each task. Adds the warnings of the captures read whole
        to `warnings` (the first time)."""
        from pyspark.sql import functions as F

        from .summary import merge, summarise

        rows, packets = [], dict(self.packets)
        if self.groups is not None:
            blobs = self.groups.filter(F.col("kind") <= STREAM_ROW)
            blobs = blobs.select("capture", "kind", "blob")
            schema = "capture string, summary binary, connections long, kafka long"
            parts = blobs.mapInArrow(summarise(self.streams, self.learned, self.options), schema)
            rows += parts.collect()
        if self.whole:
            notes = self._whole_notes()
            rows += notes
            packets.update({r["capture"]: r["packets"] for r in notes})
        return merge(rows, self.files, packets, self.options)

    def _whole_notes(self):
        if self._notes is None:
            self._notes = self._whole("notes").collect()
            order = {c: i for i, c in enumerate(self.files)}
            for r in sorted(self._notes, key=lambda r: order[r["capture"]]):
                for message in r["warnings"] or ():
                    self.warnings.append(message)
                    warnings.warn(message, stacklevel=3)
        return self._notes

    def unpersist(self):
        if self.groups is not None:
            self.groups.unpersist()


def cross_facts(rows):
    """Rows of OPENED and LEARNED facts (all tasks) -> per capture: first frame -> stream
    number, and topic id -> (earliest moment it was learned, name)."""
    opened = defaultdict(list)
    learned = defaultdict(dict)
    for r in rows:
        if r["kind"] == OPENED:
            opened[r["capture"]].append(r["frame"])
        elif r["kind"] == LEARNED:
            moment = (r["frame"], r["sub"], r["seq"])
            known = learned[r["capture"]].get(r["topic_id"])
            if known is None or moment < known[0]:
                learned[r["capture"]][r["topic_id"]] = (moment, r["name"])
    return {c: renumber(frames) for c, frames in opened.items()}, dict(learned)


def endpoint_facts(rows):
    """Per capture, each endpoint's earliest proof; and every lookup answered no."""
    proven = defaultdict(dict)
    missed = []
    for r in rows:
        if r["kind"] == PROVEN:
            moment = (r["frame"], r["sub"], r["seq"])
            known = proven[r["capture"]].get(r["topic_id"])
            if known is None or moment < known:
                proven[r["capture"]][r["topic_id"]] = moment
        elif r["kind"] == MISSED:
            missed.append((r["capture"], r["key"], r["topic_id"], (r["frame"], r["sub"], r["seq"])))
    return dict(proven), missed


def _texts(proven):
    return {c: {ep: list(m) for ep, m in eps.items()} for c, eps in proven.items()}


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
    for name in ("max_frame", "max_decompressed", "max_ratio"):
        if name in out:
            out[name] = int(out[name])
    for name in ("show_secrets", "decompress"):
        if isinstance(out.get(name), str):
            out[name] = out[name].lower() == "true"
    return out


def settled(blobs, kind, streams, learned):
    """Unpickled exchanges (or accounting rows) of one batch, with stream numbers and topic
    names settled, and their captures."""
    items, captures = [], []
    kinds = blobs.column("kind").to_pylist() if "kind" in blobs.schema.names else None
    for i, (capture, blob) in enumerate(
        zip(blobs.column("capture").to_pylist(), blobs.column("blob").to_pylist(), strict=True)
    ):
        item = pickle.loads(blob)
        if (kinds[i] if kinds else kind) == STREAM_ROW:
            item["stream"] = streams[capture][item["stream"]]
        else:
            item.stream = streams[capture][item.stream]
            settle_topics(item, learned.get(capture, {}))
        items.append(item)
        captures.append(capture)
    return items, captures


ORDER = ("_frame", "_sub", "_seq", "_row")  # completion moment of a partition row's exchange
MOMENT = ("frame", "sub", "seq")


def builder(table, streams, learned, timestamps="us"):
    """mapInArrow: blobs -> batches of `table`. Partition rows carry ORDER, for the lag of
    committed offsets behind the newest high watermark seen anywhere before (`_lags`)."""
    base = schema = table_schema(table, timestamps)
    kind = STREAM_ROW if table == "streams" else EXCHANGE
    if table == "partitions":
        schema = _ordered(base)

    def build(batches):
        from ..tables import ROW_BUILDERS, arrow_batches
        from ..tables.schema import SCHEMAS

        partition_rows = ROW_BUILDERS["partitions"]()
        for blobs in batches:
            items, captures = settled(blobs, kind, streams, learned)
            if table == "partitions":
                moments = zip(*(blobs.column(c).to_pylist() for c in MOMENT), strict=True)
                rows, order, row_captures = [], [], []
                for e, capture, moment in zip(items, captures, moments, strict=True):
                    mine = partition_rows(e)
                    rows += mine
                    order += [(*moment, i) for i in range(len(mine))]
                    row_captures += [capture] * len(mine)
                if rows:
                    batch = pa.RecordBatch.from_pylist(rows, schema=SCHEMAS["partitions"])
                    batch = for_spark(batch, row_captures, base)
                    columns = list(zip(*order, strict=True))
                    arrays = batch.columns + [pa.array(c, pa.int64()) for c in columns]
                    yield pa.RecordBatch.from_arrays(arrays, schema=schema)
                continue
            for capture in dict.fromkeys(captures):
                mine = [it for it, c in zip(items, captures, strict=True) if c == capture]
                for batch in arrow_batches(mine, table):
                    yield for_spark(batch, capture, schema)

    return build


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


def load(spark, paths, table="pairs", split_bytes=DEFAULT_SPLIT, timestamps="us", **options):
    """A DataFrame of one table of a capture set (paths and globs), with a `capture` column;
    timestamps="ns" gives the capture-time columns as int64 nanoseconds."""
    if table == "records":
        options.setdefault("records", "full")
    return Dissected(spark, paths, split_bytes, **options).table(table, timestamps)
