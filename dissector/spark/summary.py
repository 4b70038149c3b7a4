"""The command line's summary, computed in Spark: each task summarises its exchanges per
capture, the driver adds the summaries up."""

import pickle
from collections import Counter

from ..options import Options
from ..tables.summary import Summary


def new_summary(options):
    """The summary of a dissection with these options (Options fields)."""
    return Summary.of(Options(**options))


def summarise(streams, learned, options):
    """mapInArrow: exchange and accounting blobs -> one summary per capture of the task."""

    def run(batches):
        import pyarrow as pa

        from .pipeline import settled

        summaries, connections, kafka = {}, Counter(), Counter()
        for blobs in batches:
            items, captures = settled(blobs, None, streams, learned)
            for item, capture in zip(items, captures, strict=True):
                if isinstance(item, dict):  # an accounting row: half a connection
                    connections[capture] += 1
                    kafka[capture] += bool(item["kafka"])
                    continue
                if capture not in summaries:
                    summaries[capture] = new_summary(options)
                summaries[capture].add(item)
        names = sorted(set(summaries) | set(connections))
        yield pa.RecordBatch.from_pydict(
            {
                "capture": names,
                "summary": [pickle.dumps(summaries.get(c)) for c in names],
                "connections": [connections[c] for c in names],
                "kafka": [kafka[c] for c in names],
            }
        )

    return run


def merge(rows, files, packets, options):
    """[(capture, title, Summary)] in the order of `files`, from the tasks' rows."""
    total = {c: new_summary(options) for c in files}
    halves, kafka = Counter(), Counter()
    for r in rows:
        capture = r["capture"]
        halves[capture] += r["connections"]
        kafka[capture] += r["kafka"]
        if r["summary"] is not None:
            part = pickle.loads(r["summary"])
            if part is not None:
                total[capture].merge(part)
    out = []
    for capture in files:
        s = total[capture]
        exchanges = sum(s.statuses.values())
        title = (
            f"{capture}: {packets.get(capture, 0)} packets, {halves[capture] // 2} TCP "
            f"connections examined, {kafka[capture] // 2} Kafka, {exchanges} exchanges"
        )
        out.append((capture, title, s))
    return out
