"""Kafka wire-protocol dissector: packet captures in, decoded request/response pairs out.

import dissector
pairs = dissector.read_pcap("traffic.pcap")
for exchange in dissector.dissect("traffic.pcap"):
    ...
"""

from .errors import CaptureError, DecodeError, DissectorError
from .flow import Dissector
from .live import sniff
from .session.exchange import COLUMNS, Exchange
from .source import dissect, read_pcap
from .tables import parse_bodies
from .tables.output import read_table

__all__ = [
    "COLUMNS",
    "CaptureError",
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
