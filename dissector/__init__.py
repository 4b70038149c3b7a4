"""Kafka wire-protocol dissector: packet captures in, decoded request/response pairs out.

import dissector
pairs = dissector.read_pcap("traffic.pcap")
for exchange in dissector.dissect("traffic.pcap"):
    ...
"""

from .errors import CaptureError, DecodeError, DissectorError
from .flow import Dissector
from .session.exchange import COLUMNS, Exchange
from .source import dissect, read_pcap

__all__ = [
    "COLUMNS",
    "CaptureError",
    "DecodeError",
    "Dissector",
    "DissectorError",
    "Exchange",
    "dissect",
    "read_pcap",
]
