"""One pass over split captures, for the tables whose rows hang only on what the driver
settles of stream numbers and topic names (pairs, records), written by the tasks.

A `guess` task runs its range once: it takes the range's facts, as a `facts` run does, and
builds the range's rows as it goes, guessing what only the driver knows (`RangeRun` with
`guess`):

- stream numbers: provisional ones, the connections of its view first (in view order), then
  those it opens; the driver maps them to the settled numbers (`judge`);
- topic names: the name the range learned last, read-back included, or for an id it never
  learned, the id and a random text after it; every answer is recorded (as runs) and checked
  against the settled names, which replace those of unknown ids (crossing.renames);
- Kafka endpoints and group protocol types: answered as a `facts` run answers them, which
  the driver checks anyway (verify.py);
- the connections the capture's end ends: the range ends every connection open at its end
  (it does so for its facts), and keeps the rows of each apart; the driver keeps those of
  the connections the range does end.

Its rows go to an Arrow file under the output's `_temporary/`. Once the ranges are checked,
a range that agreed at once, whose topic answers hold and whose kept ends looked nothing up,
has its file read back and written as parquet with the settled stream numbers (`fixed`);
any other is built again by a `rows` task with its settled facts, as without guessing.
Where all the guess tasks run at once, each fixes its own rows once it has every range's
facts (`judged_here`), and the driver keeps what it judges the same.

    tasks (guess) ──▶ check, redo (split.py) ──▶ agreed, answers hold: rows fixed ──▶ table
                                              └▶ the others: `rows` tasks ─────────┘
"""

import secrets
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import fs as pa_fs

from .. import heap
from ..options import Options
from ..tables.summary import summarised
from .crossing import renames
from .parts import Temporary, filesystem
from .ranges import RangeRun
from .summary import new_summary, summary_row
from .types import for_spark
from .verify import check

GUESSED = ("pairs", "records")
# Compressed: the file holds the range's rows until they are fixed, at some GiB a range for
# records. LZ4 for the pairs (their body text: a fraction of what parquet's encoding costs);
# zstd at level 3 for the records, whose values repeat (a record crosses the wire in its
# produce and again in each fetch of it) further apart than LZ4's 64 KiB window reaches:
# on a range of real8x.pcap, 2.1 GB of records took 1.4 s to write and 0.5 s to read instead
# of 3.5 s and 0.5 s, in a file of 96 MB instead of 850 MB.
IPC = {
    "pairs": pa.ipc.IpcWriteOptions(compression="lz4"),
    "records": pa.ipc.IpcWriteOptions(compression=pa.Codec("zstd", compression_level=3)),
}


def run_guess_task(spec, options, table, path, job, name):
    """A `guess` task over one range: its rows written to `<path>/_temporary/<job>/<name>
    .arrow` (the declared schema; the range's own rows first, then those of the ends of the
    connections open at its end); returns (facts, guess)."""
    from ..tables import arrow_batches

    suffix = f"#{secrets.token_hex(16)}"  # after an unknown topic id: no name in a capture
    run = RangeRun(spec, options, guess=suffix)
    kept = Options(**options).for_tables()
    summary = new_summary(options)
    out = Temporary(path, job, f"{name}.arrow", partial(pa.ipc.new_file, options=IPC[table]))
    with heap.in_a_worker():
        try:
            for batch in arrow_batches(summarised(run, summary), table, **kept):
                out.write(batch)
            main = out.rows
            facts = run.facts()  # ends the connections open at the range's end
            flushed, made = {}, []
            for number, (key, exchanges, ended, consulted) in run.flushed.items():
                part = new_summary(options) if exchanges else None
                for e in exchanges:
                    part.add(e)
                flushed[number] = (key, consulted, part, ended)
                made += exchanges
            for batch in arrow_batches(made, table, **kept):
                out.write(batch)
        finally:
            out.close()
    guess = {
        "file": out.file if out.rows else None,
        "main": main,
        "view": run.view_keys,
        "used": run.used,
        "suffix": suffix,
        "topics": run.directory.topic_names.runs,
        "flushed": flushed,
        "summary": summary,
        "ended": [row for rows in run.ended_rows.values() for row in rows],
    }
    return facts, guess


def judge(guess, settled):
    """How a range's guessed rows become its rows, given what the driver settled for it: a
    dict for `fixed`, and the summary row of its task (the guess's summary is added to);
    None where they cannot be (a topic name learned otherwise than settled, a connection its
    rows name that the truth does not carry in, a kept end that learned or looked something
    up)."""
    names = renames(guess["topics"], settled.topics, guess["suffix"])
    if names is None:
        return None
    ends = {key: number for number, (key, *_rest) in guess["flushed"].items()}
    kept = [ends.get(key) for key in settled.flush]
    if None in kept or any(guess["flushed"][number][1] for number in kept):
        return None
    carried = [settled.streams.get(key, -1) for key in guess["view"]]
    if any(n < len(carried) and carried[n] < 0 for n in guess["used"].union(kept)):
        return None
    summary, streams = guess["summary"], list(guess["ended"])
    for number in kept:
        _key, _consulted, part, ended = guess["flushed"][number]
        if part is not None:
            summary.merge(part)
        streams += ended
    summary.rename_topics(names)
    return {
        "file": guess["file"],
        "main": guess["main"],
        "carried": carried,
        "offset": settled.offset,
        "kept": kept,
        "names": names,
    }, summary_row(summary, streams)


def judged_here(gathered, facts, guess):
    """`judge` in the range's own task, where the facts of every range are at hand (a job
    whose tasks all run at once): as the driver judges, where the capture's ranges agreed at
    once; else None (the driver then decides)."""
    capture = facts["capture"]
    mine = sorted((f for f in gathered if f["capture"] == capture), key=lambda f: f["index"])
    outcome = check(mine, taint=False)
    if outcome.redo:
        return None
    return judge(guess, outcome.settled[facts["index"]])


def readable(fix, path):
    """Whether the guessed rows of a judged range can be read here: a task of another
    machine may have written them to its own disk (an output path local to each)."""
    if fix["file"] is None:
        return True
    fs, _root = filesystem(path)
    return fs.get_file_info(fix["file"]).type != pa_fs.FileType.NotFound


def fixed(fix, path, capture, schema):
    """The rows of a judged range, in Spark's `schema` (with `capture`): its own, then those
    of the connections it ends for the capture's end, with their settled stream numbers."""
    if fix["file"] is None:
        return
    fs, _root = filesystem(path)
    seen = 0
    with fs.open_input_file(fix["file"]) as f:
        reader = pa.ipc.open_file(f)
        for k in range(reader.num_record_batches):
            batch = reader.get_batch(k)
            mine = min(batch.num_rows, max(0, fix["main"] - seen))
            seen += batch.num_rows
            parts = [batch.slice(0, mine)]
            if mine < batch.num_rows:
                ends = batch.slice(mine)
                keep = pc.is_in(ends.column("stream"), pa.array(fix["kept"], pa.int64()))
                parts.append(ends.filter(keep))
            for part in parts:
                if part.num_rows:
                    yield for_spark(_renamed(_numbered(part, fix), fix["names"]), capture, schema)


def _numbered(batch, fix):
    """The batch with its provisional stream numbers mapped to the settled ones."""
    at = batch.schema.get_field_index("stream")
    column = batch.column(at)
    provisional = column.to_numpy(zero_copy_only=False)
    carried = np.asarray(fix["carried"], dtype=np.int64)
    opened = fix["offset"] + provisional - len(carried)
    if len(carried):
        from_view = carried[np.minimum(provisional, len(carried) - 1)]
        numbers = np.where(provisional < len(carried), from_view, opened)
    else:
        numbers = opened
    return batch.set_column(at, batch.schema.field(at), pa.array(numbers, column.type))


def _renamed(batch, names):
    """The batch with the topic names the driver settled for those its task guessed: the
    records' `topic`, and the pairs' `topics` (a list, sorted and without repeats, as built)."""
    if not names:
        return batch
    keys, values = pa.array(list(names), pa.string()), pa.array(list(names.values()), pa.string())
    for name in ("topic", "topics"):
        at = batch.schema.get_field_index(name)
        if at < 0:
            continue
        column = batch.column(at)
        if name == "topic":
            column = pc.coalesce(pc.take(values, pc.index_in(column, value_set=keys)), column)
        else:  # only the lists that name a renamed topic are made again, then spliced in
            found = pc.is_valid(pc.index_in(pc.list_flatten(column), value_set=keys))
            hit = pc.unique(pc.list_parent_indices(column).filter(found))
            if not len(hit):
                continue
            lists = [sorted({names.get(t, t) for t in ts}) for ts in column.take(hit).to_pylist()]
            order = np.arange(len(column))
            order[hit.to_numpy()] = len(column) + np.arange(len(hit))
            column = pa.concat_arrays([column, pa.array(lists, column.type)]).take(order)
        batch = batch.set_column(at, batch.schema.field(at), column)
    return batch
