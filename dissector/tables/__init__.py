"""Exchanges turned into tables."""

from .pairs import pairs_frame
from .partitions import partitions_frame
from .records import records_frame

TABLES = {"pairs": pairs_frame, "partitions": partitions_frame, "records": records_frame}


def build_table(exchanges, table="pairs"):
    try:
        build = TABLES[table]
    except KeyError:
        raise ValueError(f"unknown table {table!r}; choose from {', '.join(TABLES)}") from None
    return build(exchanges)
