"""Captures read whole by one task: dissected right there, as `read_pcap` does.

A capture that is not split into byte ranges (no larger than `split_bytes`, or gzip) is read
from start to end by one task, so every connection of it is whole in that task. The task runs
the core exactly as `read_pcap` does (`source.Dissection`): stream numbers, topic ids, Kafka
endpoints and `committed_lag` are settled within the file as they are there, and the table's
rows leave the task as Arrow batches of the table's Spark schema; with `summaries`, a last row
holds the capture's summary, its packet count and the reader's warnings.
"""

from contextlib import ExitStack

import pyarrow as pa

from .. import heap
from ..capture.ranges import open_input
from ..options import Options
from ..source import Dissection
from ..tables.summary import summarised
from .summary import new_summary, summary_row
from .types import for_spark

SUMMARY = "_summary"


def _dissection(capture, options, stack):
    """The core over one whole capture, local or at any URI pyarrow reaches."""
    if "://" in capture:
        return Dissection(stack.enter_context(open_input(capture)), options, False, capture)
    return Dissection(capture, options, progress=False)


def table_batches(capture, table, options, schema, summaries=False):
    """Record batches of `table` of one whole capture, in Spark's `schema` (with `capture`,
    and `_summary` last when `summaries`)."""
    from ..tables import arrow_batches

    base = pa.schema([f for f in schema if f.name != SUMMARY])
    summary = new_summary(options) if summaries else None
    with ExitStack() as stack:
        stack.enter_context(heap.in_a_worker())
        chosen = Options(**options)
        dissection = _dissection(capture, chosen, stack)
        items = dissection if summary is None else summarised(dissection, summary)
        if table == "streams":
            for _ in items:
                pass
            items = dissection.ended  # the core's connection-ended events
        for batch in arrow_batches(items, table, **chosen.for_tables()):
            arrays = for_spark(batch, capture, base).columns
            if summaries:
                arrays.append(pa.nulls(batch.num_rows, pa.binary()))
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)
    if summaries:
        row = dict.fromkeys(schema.names)
        row["capture"] = capture
        packets = dissection.stats()["packets"]
        row[SUMMARY] = summary_row(summary, dissection.streams, packets, dissection.warnings)
        yield pa.RecordBatch.from_pylist([row], schema=schema)


def whole_tasks(groups, table, options, timestamps, summaries=False):
    """The function of `mapInArrow` over task numbers: task i yields the rows of `table` of
    every capture of groups[i]."""

    def run(batches):
        from .types import table_schema

        schema = table_schema(table, timestamps)
        if summaries:
            schema = schema.append(pa.field(SUMMARY, pa.binary()))
        for batch in batches:
            for i in batch.column(0).to_pylist():
                for capture in groups[i]:
                    yield from table_batches(capture, table, options, schema, summaries)

    return run
