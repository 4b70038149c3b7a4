"""The command line's summary, computed in Spark: each task summarises the exchanges it
completes, the driver adds the summaries up."""

import pickle
from collections import Counter

from ..options import Options
from ..tables.summary import Summary, tls_notes


def new_summary(options):
    """The summary of a dissection with these options (Options fields)."""
    return Summary.of(Options(**options))


def summary_row(summary, streams, packets=None, warnings=()):
    """A task's part of its capture's summary: the Summary, the accounting rows it ended
    (two a connection), and for a capture read whole its packets and the reader's warnings."""
    halves = len(streams)
    kafka = sum(bool(r["kafka"]) for r in streams)
    tls = Counter(r["tls"] for r in streams if r["tls"] is not None and r["direction"] == "request")
    row = (summary, halves, kafka, packets, list(warnings), tls)
    return pickle.dumps(row, pickle.HIGHEST_PROTOCOL)


def merge(rows, files, packets, options):
    """[(capture, title, Summary, TLS notes)] in the order of `files`, and the warnings of
    captures read whole, from the tasks' rows [(capture, blob)]; `packets`: those of split
    captures."""
    total = {c: new_summary(options) for c in files}
    halves, kafka, counted = Counter(), Counter(), Counter(packets)
    tls = {c: Counter() for c in files}
    warnings = []
    for capture, blob in rows:
        part, n, k, read, said, opened = pickle.loads(blob)
        total[capture].merge(part)
        tls[capture].update(opened)
        halves[capture] += n
        kafka[capture] += k
        if read is not None:
            counted[capture] += read
        warnings += said
    out = []
    for capture in files:
        s = total[capture]
        exchanges = sum(s.statuses.values())
        title = (
            f"{capture}: {counted.get(capture, 0)} packets, {halves[capture] // 2} TCP "
            f"connections examined, {kafka[capture] // 2} Kafka, {exchanges} exchanges"
        )
        out.append((capture, title, s, tls_notes({"tls": tls[capture]})))
    return out, warnings
