"""Analyses of the tables, for notebooks and scripts: each takes a table (`pairs`,
`partitions` or `records`, from `read_pcap` or Spark as pandas) and returns
a DataFrame with documented columns, empty when the capture has no such traffic.

    from dissector import analysis as ka
    ka.latency(pairs, by="client_id", freq="1s")
    ka.group_generations(pairs)
    ka.plots.group_gantt(pairs)

Bodies (`request`, `response`) may be dicts or JSON text.
"""

from . import plots
from ._frames import body
from .advertised import advertised
from .clients import clients
from .compatibility import compatibility
from .delivery import delivery, delivery_summary
from .errors import error_counts, errors
from .findings import diagnose
from .groups import group_generations, group_timeline, rebalances
from .lag import lag
from .latency import components, latency, slowest
from .throughput import compression, throughput
from .transactions import aborted_reads, transactions

__all__ = [
    "aborted_reads",
    "advertised",
    "body",
    "clients",
    "compatibility",
    "components",
    "compression",
    "delivery",
    "delivery_summary",
    "diagnose",
    "error_counts",
    "errors",
    "group_generations",
    "group_timeline",
    "lag",
    "latency",
    "plots",
    "rebalances",
    "slowest",
    "throughput",
    "transactions",
]
