"""A capture's tables from one dissection: the exchanges are kept as they complete and each
table is built from them, so a command that needs pairs, partitions and records reads the
file once. Beside a records table, the pairs table's bodies hold their record sets as
batches, without the records (which the records table holds): every record's value written
again as JSON took most of the memory and time of `doctor --records full`."""

import dataclasses

from .. import source
from ..tables import build_table


def read_tables(path, tables, ports=(), progress=None, check=iter, **options):
    """{table: DataFrame} for each of `tables` ("pairs", "partitions", "records", "streams").
    `check` wraps the stream of exchanges (the command line's error reporting)."""
    if "records" in tables:
        options["records"] = "full"  # a record is only known once its batch is parsed
    dissection = source.dissect(
        path, ports, progress=progress, streams="streams" in tables, **options
    )
    exchanges = list(check(dissection))
    bodies = None
    if "records" in tables:
        options = dissection.dissector.options
        bodies = dataclasses.replace(options, records="batches").record_decoder()
    out = {}
    for table in tables:
        items = dissection.ended if table == "streams" else exchanges
        out[table] = build_table(items, table, bodies=bodies if table == "pairs" else None)
    return out
