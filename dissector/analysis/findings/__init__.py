"""Findings: what a capture shows went wrong (or is worth knowing), each with the frames that
prove it and one sentence a person can act on.

    from dissector import analysis as ka
    found = ka.diagnose(pairs, streams=streams, partitions=partitions, records=records)

Each check module (connections.py, groups.py, transactions.py, records.py) declares
`CHECKS`: functions from the `Tables` to an iterable of `Finding`. A check that needs a table
it was not given finds nothing; none raises on a damaged or cut capture.
"""

from dataclasses import dataclass, field

import pandas as pd

SEVERITIES = ("error", "warning", "info")  # most severe first
COLUMNS = ("kind", "severity", "client", "client_id", "broker", "frames", "time", "detail")


@dataclass
class Finding:
    kind: str
    severity: str  # one of SEVERITIES
    detail: str  # one sentence a person can act on
    frames: list  # frame numbers: the evidence, in capture order
    client: str | None = None  # ip:port of the client side
    client_id: str | None = None
    broker: str | None = None  # ip:port of the broker side
    time: pd.Timestamp | None = None  # when it shows (its first evidence)
    extra: dict = field(default_factory=dict)  # the fields of its kind

    def row(self):
        return {**{name: getattr(self, name) for name in COLUMNS}, **self.extra}


def named(value):
    """A name a table gives (a client id, say), or None where it gives none (NaN, empty)."""
    return value if isinstance(value, str) and value else None


def client_label(client_id, client):
    """How a finding names a client: its client id and address, or the address alone."""
    name = named(client_id)
    return f"{name} ({client})" if name else str(client)


@dataclass
class Tables:
    """The tables a diagnosis reads; any but `pairs` may be missing (None)."""

    pairs: pd.DataFrame
    streams: pd.DataFrame | None = None
    partitions: pd.DataFrame | None = None
    records: pd.DataFrame | None = None


def _checks():
    from . import connections, groups, records, transactions

    return (*connections.CHECKS, *groups.CHECKS, *transactions.CHECKS, *records.CHECKS)


def diagnose(pairs, streams=None, partitions=None, records=None):
    """The findings of a capture's tables, most severe first, then in time order: one row a
    finding, columns COLUMNS and then the fields of each kind (NaN where a kind has none)."""
    tables = Tables(pairs, streams, partitions, records)
    found = [f for check in _checks() for f in check(tables)]
    for f in found:
        if f.severity not in SEVERITIES:
            raise ValueError(f"{f.kind}: severity {f.severity!r} is not one of {SEVERITIES}")
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    found.sort(key=lambda f: (rank[f.severity], f.time is None, f.time, f.frames[:1]))
    rows = [f.row() for f in found]
    extras = [k for r in rows for k in r if k not in COLUMNS]
    columns = list(COLUMNS) + list(dict.fromkeys(extras))
    return pd.DataFrame(rows, columns=columns)
