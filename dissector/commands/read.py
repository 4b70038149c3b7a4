"""A capture's tables from one dissection: the exchanges are kept as they complete and each
table is built from them, so a command that needs pairs, partitions and records reads the
file once."""

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
    out = {}
    for table in tables:
        items = dissection.ended if table == "streams" else exchanges
        out[table] = build_table(items, table)
    return out
