"""A capture's tables from one dissection: every table is built as the exchanges complete,
all in step, so a command that needs pairs, partitions and records reads the file once and
holds the tables and a batch's worth of exchanges, never the whole capture's. Beside a
records table, the pairs table's bodies hold their record sets as batches, without the
records (which the records table holds): every record's value written again as JSON took
most of the memory and time of `doctor --records full`."""

import dataclasses
import itertools
from functools import partial

from .. import source
from ..tables import arrow_batches, build_table, whole_table


def read_tables(path, tables, ports=(), progress=None, check=iter, **options):
    """{table: DataFrame} for each of `tables` ("pairs", "partitions", "records", "streams").
    `check` wraps the stream of exchanges (the command line's error reporting)."""
    if "records" in tables:
        options["records"] = "full"  # a record is only known once its batch is parsed
    dissection = source.dissect(
        path, ports, progress=progress, streams="streams" in tables, **options
    )
    lean = {}  # table -> the record decoder of its bodies, where not the dissection's
    if "records" in tables:
        options = dissection.dissector.options
        lean["pairs"] = dataclasses.replace(options, records="batches").record_decoder()
    built = [t for t in tables if t != "streams"]
    makers = [partial(arrow_batches, table=t, bodies=lean.get(t)) for t in built]
    made = dict(zip(built, in_step(check(dissection), makers), strict=True))
    out = {t: whole_table(_drained(made.pop(t)), t) for t in built}  # one table's batches at a time
    if "streams" in tables:
        out["streams"] = build_table(dissection.ended, "streams")
    return {t: out[t] for t in tables}


def in_step(items, makers):
    """What each of `makers` (a function from an iterable to a generator) makes of the same
    `items`, as lists: the one that has taken the fewest items goes next, so the items taken
    by one and not yet by all (all that is held of them) are at most one output's worth."""
    taken = [0] * len(makers)

    def counted(k, copy):
        for item in copy:
            taken[k] += 1
            yield item

    copies = itertools.tee(items, len(makers))
    made = [make(counted(k, c)) for k, (make, c) in enumerate(zip(makers, copies, strict=True))]
    outs = [[] for _ in makers]
    going = set(range(len(makers)))
    while going:
        k = min(going, key=taken.__getitem__)
        try:
            outs[k].append(next(made[k]))
        except StopIteration:
            going.discard(k)
    return outs


def _drained(items):
    """The items of a list, each let go by the list as it is taken."""
    items.reverse()
    while items:
        yield items.pop()
