"""Kafka wire-protocol dissector: packet captures in, decoded request/response pairs out.

import dissector
pairs = dissector.read_pcap("traffic.pcap")
for exchange in dissector.dissect("traffic.pcap"):
    ...
"""

from .errors import CaptureError, DecodeError, DissectorError
from .events import ConnectionEnded
from .flow import Dissector
from .session.exchange import COLUMNS, Exchange
from .source import dissect, read_pcap

__all__ = [
    "COLUMNS",
    "CaptureError",
    "ConnectionEnded",
    "DecodeError",
    "Dissector",
    "DissectorError",
    "Exchange",
    "dissect",
    "parse_bodies",
    "read_pcap",
    "read_table",
    "sniff",
]


def __getattr__(name):
    # Live capture (its subprocess and signal handling), and table helpers (Arrow and pandas)
    # load only when asked for: a file's dissection starts without them.
    if name == "sniff":
        from .live import sniff

        return sniff
    if name == "parse_bodies":
        from .tables.arrow import parse_bodies

        return parse_bodies
    if name == "read_table":
        from .tables.output import read_table

        return read_table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
