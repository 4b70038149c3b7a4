"""Captures read whole by one task: dissected right there, with no shuffle.

A capture that is not split into byte ranges (smaller than `split_bytes`, or gzip) is read
from start to end by one task, so every connection of it is whole in that task. The task runs
the core exactly as `read_pcap` does (`source.Dissection`): stream numbers, topic ids, Kafka
endpoints and `committed_lag` are settled within the file as they are there, and the table's
rows leave the task as Arrow batches of the table's Spark schema.

A second kind of pass over the same captures (`notes_batches`) gives, per capture, what the
command line prints besides the table: the `analyze` summary, the counts of its title, and
the reader's warnings. `whole_tasks` runs either in Spark tasks, a group of captures a task.
"""

import pickle
from contextlib import ExitStack

import pyarrow as pa

from ..capture.ranges import open_input
from ..options import Options
from ..source import Dissection
from .types import for_spark

# One row per capture of a notes pass.
NOTES = pa.schema(
    [
        ("capture", pa.string()),
        ("summary", pa.binary()),  # a pickled tables.summary.Summary
        ("connections", pa.int64()),  # connection halves (accounting rows)
        ("kafka", pa.int64()),  # of them, Kafka
        ("packets", pa.int64()),
        ("warnings", pa.list_(pa.string())),
    ]
)


def _dissection(capture, options, stack):
    """The core over one whole capture, local or at any URI pyarrow reaches."""
    if "://" in capture:
        return Dissection(stack.enter_context(open_input(capture)), options, False, capture)
    return Dissection(capture, options, progress=False)


def table_batches(capture, table, options, schema):
    """Record batches of `table` of one whole capture, in Spark's `schema` (with `capture`)."""
    from ..tables import arrow_batches

    with ExitStack() as stack:
        dissection = _dissection(capture, Options(**options), stack)
        if table == "streams":
            for _ in dissection:
                pass
            items = dissection.dissector.streams
        else:
            items = dissection
        for batch in arrow_batches(items, table):
            yield for_spark(batch, capture, schema)


def notes_batches(capture, options):
    """The one NOTES row of a whole capture."""
    from .summary import new_summary

    summary = new_summary(options)
    with ExitStack() as stack:
        dissection = _dissection(capture, Options(**options), stack)
        for exchange in dissection:
            summary.add(exchange)
    d = dissection.dissector
    row = {
        "capture": [capture],
        "summary": [pickle.dumps(summary, pickle.HIGHEST_PROTOCOL)],
        "connections": [len(d.streams)],
        "kafka": [sum(bool(r["kafka"]) for r in d.streams)],
        "packets": [d.packets],
        "warnings": [dissection.warnings],
    }
    yield pa.RecordBatch.from_pydict(row, schema=NOTES)


def whole_tasks(groups, table, options, timestamps):
    """The function of `mapInArrow` over task numbers: task i yields the rows of `table` (or
    the NOTES rows) of every capture of groups[i]."""

    def run(batches):
        from .types import table_schema

        schema = NOTES if table == "notes" else table_schema(table, timestamps)
        for batch in batches:
            for i in batch.column(0).to_pylist():
                for capture in groups[i]:
                    if table == "notes":
                        yield from notes_batches(capture, options)
                    else:
                        yield from table_batches(capture, table, options, schema)

    return run
