"""Helpers of the Spark tests: rows normalised for comparison, and the Spark plan run in one
process (the same planning, packet, group and settling functions, groups in random order),
so that hypothesis can try many split sizes quickly."""

import math
import pickle
import random
import tempfile
from collections import defaultdict
from datetime import datetime

import pandas as pd
import pyarrow as pa

import dissector
from dissector.spark.guess import GUESSED, fixed, judge, judged_here, run_guess_task
from dissector.spark.pipeline import ORDER, _options, _split_schema, rows_batches
from dissector.spark.plan import expand, plan_split, survey_here
from dissector.spark.split import run_facts_task, split_tasks, unjoined
from dissector.spark.types import table_schema
from dissector.spark.whole import table_batches
from dissector.tables.schema import SCHEMAS


def _value(v):
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, pd.Timestamp):
        return v.value // 1000  # Spark keeps microseconds
    if isinstance(v, datetime):
        return pd.Timestamp(v).value // 1000
    if isinstance(v, dict):
        return tuple(sorted((k, _value(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)) or hasattr(v, "tolist"):
        v = v.tolist() if hasattr(v, "tolist") else v
        return tuple(_value(x) for x in v) if isinstance(v, (list, tuple)) else _value(v)
    if hasattr(v, "item"):
        return v.item()
    return v


def rows(records, columns):
    """Sorted tuples of normalised values: a table's rows as a multiset."""
    out = [tuple(_value(r[c]) for c in columns) for r in records]
    return sorted(out, key=repr)


def reference(path, table, **options):
    df = dissector.read_pcap(path, table=table, **options)
    return rows(df.to_dict("records"), SCHEMAS[table].names)


def spark_rows(arrow_table, capture=None):
    """Rows of a Spark result (toArrow), optionally of one capture only."""
    records = arrow_table.to_pylist()
    if capture is not None:
        records = [r for r in records if r["capture"] == capture]
    names = [n for n in arrow_table.column_names if n != "capture"]
    return rows(records, names)


def run_in_process(
    paths,
    table,
    split_bytes,
    seed=0,
    timestamps="us",
    read_back=None,
    balanced=False,
    guess=False,
    counts=None,
    **options,
):
    """The Spark plan without Spark, ranges run in random order: returns the table as an
    Arrow table. read_back: bytes (default: a random fraction of split_bytes, from seed);
    balanced: ranges cut to hold as many packets each, as the split size "auto" cuts them;
    guess: the ranges of pairs and records dissected once (guess.py), as `kafka-dissect
    spark` writes them, and `counts` (a dict) told how many ranges were `fixed` (`renamed`:
    with topic names the driver settled) and how many built again (`rows`)."""
    rng = random.Random(seed)
    files = expand(paths)
    if table == "records":
        options.setdefault("records", "full")
    opts = _options(options)
    if read_back is None:
        read_back = max(1, int(split_bytes * rng.choice((0.1, 0.5, 1.0))))
    whole, split, _warnings = plan_split(files, split_bytes, read_back, survey_here, balanced)
    schema = table_schema(table, timestamps)
    out = [b for c in whole for b in table_batches(c, table, opts, schema)]
    if split:
        joined, whole_after_all = split_in_process(
            split, table, opts, rng, timestamps, guess and table in GUESSED, counts
        )
        out += joined.to_batches()
        out += [b for c in whole_after_all for b in table_batches(c, table, opts, schema)]
    return pa.Table.from_batches(out, schema=schema)


def ranges_never_agree(monkeypatch):
    """Ranges made to disagree in every round (range 1, whatever it says)."""
    from dissector.spark import split as split_module

    checked = split_module.check

    def check(facts, taint=True):
        outcome = checked(facts, taint)
        outcome.redo.setdefault(1, [("held apart by this test", None, None, None)])
        return outcome

    monkeypatch.setattr(split_module, "check", check)


def split_in_process(split, table, opts, rng, timestamps="us", guess=False, counts=None):
    """The ranges of split captures, facts and rows, each task run on its own (or with
    `guess`, guessed rows, facts, then fixed or built again; and what each guess task would
    judge itself once it has every range's facts, checked against the driver's judgement);
    and the captures whose ranges could not be joined (split.unjoined), left out."""
    ranges = [(c, i) for c in split for i in range(c.tasks)]
    with tempfile.TemporaryDirectory() as root:
        first, guesses, here = None, {}, {}
        if guess:
            for k in rng.sample(range(len(ranges)), len(ranges)):
                c, i = ranges[k]
                made = run_guess_task(c.spec(i), opts, table, root, "job", f"guess-{k}")
                blob = pickle.dumps(made)  # its own copy for each judge: judging adds to it
                guesses[c.capture, i] = pickle.loads(blob)
                here[c.capture, i] = blob
            first = [guesses[c.capture, i][0] for c, i in ranges]
            gathered = pickle.loads(pickle.dumps(first))
            for key, blob in here.items():
                facts, guessed = pickle.loads(blob)
                here[key] = judged_here(gathered, facts, guessed)

        def facts(items):
            order = list(range(len(items)))
            rng.shuffle(order)
            done = {i: run_facts_task(*items[i][:1], opts, items[i][1]) for i in order}
            return [done[i] for i in range(len(items))]

        outcomes, seeds, _facts = split_tasks(split, opts, facts, first)
        left = unjoined(split, outcomes)
        schema = _split_schema(table, timestamps, False)
        tasks = [(c, i) for c, i in ranges if c.capture not in left]
        rng.shuffle(tasks)
        batches = []
        for c, i in tasks:
            settled = outcomes[c.capture].settled[i]
            fix = None
            if guess and i not in outcomes[c.capture].again:
                judged = judge(guesses[c.capture, i][1], settled)
                fix = (judged or (None,))[0]
                if here[c.capture, i] is not None:  # as the task would fix them, if it did
                    assert here[c.capture, i] == judged, (c.capture, i)
                    if counts is not None:
                        counts["here"] = counts.get("here", 0) + 1
            if counts is not None:
                for name in ("fixed" if fix else "rows",) + (
                    ("renamed",) if fix and fix["names"] else ()
                ):
                    counts[name] = counts.get(name, 0) + 1
            if fix:
                batches += fixed(fix, root, c.capture, schema)
            else:
                spec, seeds_of = c.spec(i), seeds[c.capture]
                batches += rows_batches(spec, opts, seeds_of, settled, table, schema, False)
        out = pa.Table.from_batches(batches, schema=schema)
    if table == "partitions":
        out = _lags(out)
    return out.drop_columns([c for c in ORDER if c in out.column_names]), list(left)


def _lags(t):
    """committed_lag as pipeline.lags computes it in Spark: the newest high watermark of the
    topic-partition among the rows before (completion order), less the committed offset."""
    rows = t.to_pylist()
    newest = defaultdict(lambda: None)
    for r in sorted(rows, key=lambda r: tuple(r[c] for c in ORDER)):
        key = (r["capture"], r["topic"], r["partition"])
        if r["high_watermark"] is not None and r["high_watermark"] >= 0:
            newest[key] = r["high_watermark"]
        committed = r["committed_offset"]
        top = newest[key]
        ok = committed is not None and committed >= 0 and top is not None
        r["committed_lag"] = top - committed if ok else None
    return pa.Table.from_pylist(rows, schema=t.schema)


def local_spark(name, memory=None):
    """A local Spark session on 2 cores for tests (UI off, 4 shuffle partitions, quiet), with
    the `kafka_pcap` format registered; and whether it is this caller's to stop (else
    another module's, left running)."""
    from pyspark.sql import SparkSession

    from dissector.spark import register

    owned = SparkSession.getActiveSession() is None
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
    )
    if memory:
        builder = builder.config("spark.driver.memory", memory)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session, owned
