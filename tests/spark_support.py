"""Helpers of the Spark tests: rows normalised for comparison, and the Spark plan run in one
process (the same planning, packet, group and settling functions, groups in random order),
so that hypothesis can try many split sizes quickly."""

import math
import random
from collections import defaultdict
from datetime import datetime

import pandas as pd
import pyarrow as pa

import dissector
from dissector.capture.ranges import Piece
from dissector.spark.crossing import stale_groups
from dissector.spark.pipeline import (
    MAX_ROUNDS,
    ORDER,
    _options,
    _ordered,
    _texts,
    builder,
    cross_facts,
    endpoint_facts,
)
from dissector.spark.plan import expand, plan_locally, whole_and_split
from dissector.spark.tasks import OPENED, dissect_group, piece_packets
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


def run_in_process(paths, table, split_bytes, seed=0, timestamps="us", **options):
    """The Spark plan without Spark: returns the table as an Arrow table."""
    rng = random.Random(seed)
    files = expand(paths)
    whole, pieces = whole_and_split(plan_locally(files, split_bytes))
    if table == "records":
        options.setdefault("records", "full")
    opts = _options(options)
    schema = table_schema(table, timestamps)
    out = [b for c in whole for b in table_batches(c, table, opts, schema)]
    if pieces:
        out += split_in_process(pieces, table, opts, rng, timestamps).to_batches()
    return pa.Table.from_batches(out, schema=schema)


def split_in_process(pieces, table, opts, rng, timestamps="us"):
    """The shuffle path of split captures, groups in random order."""
    groups = defaultdict(list)
    for capture, piece in pieces:
        piece = Piece(**{**piece, "prefix": bytes.fromhex(piece["prefix"])})
        for batch in piece_packets(piece, capture):
            for i in range(batch.num_rows):
                row = batch.slice(i, 1)
                groups[(capture, row.column("key")[0].as_py())].append(row)
    outputs = {}
    order = list(groups)
    rng.shuffle(order)
    for key in order:
        part = groups[key]
        rng.shuffle(part)
        outputs[key] = dissect_group(opts)(pa.Table.from_batches(part))
    for _round in range(MAX_ROUNDS):
        facts = [r for t in outputs.values() for r in t.to_pylist() if r["kind"] >= OPENED]
        proven, missed = endpoint_facts(facts)
        stale = stale_groups(proven, missed)
        if not stale:
            break
        for key in stale:
            outputs[key] = dissect_group(opts, _texts(proven))(pa.Table.from_batches(groups[key]))
    dissected = pa.concat_tables(outputs.values())
    streams, learned = cross_facts(facts)
    kind = 1 if table == "streams" else 0
    blobs = dissected.filter(pa.compute.equal(dissected.column("kind"), kind))
    if table == "partitions":  # one task, exchanges in completion order: lags as a whole run
        blobs = blobs.sort_by([("frame", "ascending"), ("sub", "ascending"), ("seq", "ascending")])
    blobs = blobs.combine_chunks()
    build = builder(table, streams, learned, timestamps)
    schema = build_schema(table, timestamps)
    out = pa.Table.from_batches(list(build(blobs.to_batches())), schema=schema)
    return out.drop_columns([c for c in ORDER if c in out.column_names])


def build_schema(table, timestamps="us"):
    schema = table_schema(table, timestamps)
    return _ordered(schema) if table == "partitions" else schema
