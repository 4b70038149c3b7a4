"""Exchanges turned into tables."""

from .pairs import pairs_frame
from .partitions import partitions_frame
from .records import records_frame
from .streams import streams_frame

EXCHANGE_TABLES = {"pairs": pairs_frame, "partitions": partitions_frame, "records": records_frame}
TABLES = (*EXCHANGE_TABLES, "streams")


def build_table(exchanges, table="pairs", streams=None):
    """A table from exchanges; "streams" is built from the dissector's accounting rows."""
    if table == "streams":
        return streams_frame(streams or [])
    try:
        build = EXCHANGE_TABLES[table]
    except KeyError:
        raise ValueError(f"unknown table {table!r}; choose from {', '.join(TABLES)}") from None
    return build(exchanges)
