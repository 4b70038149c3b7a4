"""The command line's summary, computed in Spark: each task summarises its exchanges per
capture, the driver adds the summaries up."""

import pickle
from array import array
from collections import Counter

from ..tables.summary import Summary


def _new_summary(options):
    return Summary(decompress=options.get("decompress", False) or options.get("records") == "full")


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
                    summaries[capture] = _new_summary(options)
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
    total = {c: _new_summary(options) for c in files}
    halves, kafka = Counter(), Counter()
    for r in rows:
        capture = r["capture"]
        halves[capture] += r["connections"]
        kafka[capture] += r["kafka"]
        if r["summary"] is not None:
            part = pickle.loads(r["summary"])
            if part is not None:
                _add(total[capture], part)
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


def _add(into, other):
    """Add the counters of `other` into `into`: counters and numbers sum, sample arrays
    concatenate, maps merge key by key; flags stay."""
    names = getattr(type(other), "__slots__", None) or vars(other).keys()
    for name in names:
        setattr(into, name, _sum(getattr(into, name), getattr(other, name)))


def _sum(a, b):
    if isinstance(a, bool) or a is None or isinstance(a, str):
        return a
    if isinstance(a, Counter):
        a.update(b)
        return a
    if isinstance(a, dict):
        for k, v in b.items():
            a[k] = _sum(a[k], v) if k in a else v
        return a
    if isinstance(a, (array, list)):
        a.extend(b)
        return a
    if isinstance(a, (int, float)):
        return a + b
    _add(a, b)
    return a
