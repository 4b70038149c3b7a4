"""Transactions: one row per transaction of each transactional producer, and the aborted
records that read_committed consumers were sent anyway.

A transaction opens with the first AddPartitionsToTxn, AddOffsetsToTxn or transactional
Produce after the producer's previous one ended, and ends with its EndTxn (commit or abort),
or, where that went uncaptured, when a partition it already holds is added again.
The control batches (markers) the broker wrote after it are found in Fetch responses: the
first control batch of that producer after the transaction's records in each partition.
Without an EndTxn in the capture the marker gives the outcome; without either it is `open`.
"""

import pandas as pd

from ..tables.partitions import partition_index
from ._frames import (
    api_rows,
    body,
    frame,
    ints,
    per_capture,
    topic_names,
    topic_of,
)

COLUMNS = [
    "transactional_id",
    "producer_id",
    "producer_epoch",
    "client_id",
    "start",
    "end",
    "outcome",
    "ended_by",
    "partitions",
    "offsets",
    "records",
    "produce_requests",
    "groups",
    "markers",
]
ABORTED_COLUMNS = [
    "time",
    "client_id",
    "stream",
    "response_frame",
    "topic",
    "partition",
    "first_offset",
    "last_offset",
    "records",
    "producer_id",
    "transactional_id",
    "listed_as_aborted",
]
TXN_APIS = ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "Produce", "EndTxn")


def _batches(records):
    return (records or {}).get("batches") or [] if isinstance(records, dict) else []


def _add_partitions(req):
    """(transactional id, producer id, epoch, ["topic/p"]) per transaction in the request."""
    if "Transactions" in req:  # v4+: several producers in one request
        for txn in req["Transactions"] or ():
            yield (
                txn.get("TransactionalId"),
                txn.get("ProducerId"),
                txn.get("ProducerEpoch"),
                [f"{t['Name']}/{p}" for t in txn.get("Topics") or () for p in t["Partitions"]],
            )
        return
    topics = req.get("V3AndBelowTopics") or req.get("Topics") or ()
    yield (
        req.get("V3AndBelowTransactionalId") or req.get("TransactionalId"),
        req.get("V3AndBelowProducerId", req.get("ProducerId")),
        req.get("V3AndBelowProducerEpoch", req.get("ProducerEpoch")),
        [f"{t['Name']}/{p}" for t in topics for p in t["Partitions"]],
    )


def _produced(req, resp, names):
    """{"topic/p": (first, last, records, producer id, epoch)} of a transactional Produce."""
    base = {}
    for topic in resp.get("Responses") or ():
        for part in topic.get("PartitionResponses") or ():
            base[f"{topic_of(topic, names)}/{partition_index(part)}"] = part.get("BaseOffset")
    out = {}
    for topic in req.get("TopicData") or ():
        for part in topic.get("PartitionData") or ():
            key = f"{topic_of(topic, names)}/{partition_index(part)}"
            batches = [b for b in _batches(part.get("Records")) if b.get("transactional")]
            if not batches:
                continue
            count = sum(b.get("last_offset_delta", 0) + 1 for b in batches)
            first = base.get(key)
            last = first + count - 1 if first is not None and first >= 0 else None
            records = sum(b.get("record_count", 0) for b in batches)
            b = batches[0]
            out[key] = (first, last, records, b.get("producer_id"), b.get("producer_epoch"))
    return out


def _markers(pairs, names):
    """Control batches in Fetch responses: {(producer id, "topic/p"): {offset: type}}."""
    found = {}
    for row in api_rows(pairs, "Fetch").itertuples(index=False):
        if isinstance(row.response, str) and '"control":true' not in row.response:
            continue  # JSON text without a control batch: not worth parsing
        for topic in body(row.response).get("Responses") or ():
            for part in topic.get("Partitions") or ():
                key = f"{topic_of(topic, names)}/{partition_index(part)}"
                for b in _batches(part.get("Records")):
                    if not b.get("control"):
                        continue
                    recs = b.get("records") or [{}]
                    kind = (recs[0].get("control") or {}).get("type") or "marker"
                    found.setdefault((b.get("producer_id"), key), {})[b["base_offset"]] = kind
    return found


@per_capture
def transactions(pairs):
    """One row per transaction: transactional id, producer id and epoch, the client, start
    and end, `outcome` (commit, abort, open, or the EndTxn error), `ended_by` (EndTxn or
    marker), the partitions added, the offsets written (`{"topic/p": [first, last]}`), the
    records and Produce requests, the groups whose offsets it committed, and the markers
    (`{"topic/p": "COMMIT@12"}`)."""
    if pairs is None or pairs.empty or "api_name" not in pairs:
        return frame([], COLUMNS)
    names = topic_names(pairs)
    ids = {}  # producer id -> transactional id
    open_txns, done = {}, []

    def txn_for(tid, pid, epoch, row):
        tid = tid or ids.get(pid)
        if tid is None:
            return None
        if tid not in open_txns:
            open_txns[tid] = {
                "transactional_id": tid,
                "producer_id": pid if pid is not None else _pid(ids, tid),
                "producer_epoch": epoch,
                "client_id": row.client_id,
                "start": row.request_start,
                "end": pd.NaT,
                "outcome": "open",
                "ended_by": None,
                "partitions": [],
                "offsets": {},
                "records": 0,
                "produce_requests": 0,
                "groups": [],
                "markers": {},
            }
        return open_txns[tid]

    for row in api_rows(pairs, *TXN_APIS).itertuples(index=False):
        req, resp = body(row.request), body(row.response)
        if row.api_name == "InitProducerId":
            if req.get("TransactionalId") and resp.get("ProducerId", -1) >= 0:
                ids[resp["ProducerId"]] = req["TransactionalId"]
        elif row.api_name == "AddPartitionsToTxn":
            for tid, pid, epoch, parts in _add_partitions(req):
                txn = open_txns.get(tid or ids.get(pid))
                if txn is not None and txn["records"] and set(parts) & set(txn["partitions"]):
                    # a partition is added once per transaction: its EndTxn went uncaptured
                    done.append(open_txns.pop(txn["transactional_id"]))
                txn = txn_for(tid, pid, epoch, row)
                if txn is not None:
                    txn["partitions"] += [p for p in parts if p not in txn["partitions"]]
        elif row.api_name == "AddOffsetsToTxn":
            txn = txn_for(req.get("TransactionalId"), req.get("ProducerId"), None, row)
            if txn is not None:
                txn["groups"].append(req.get("GroupId"))
        elif row.api_name == "Produce":
            produced = _produced(req, resp, names)
            if not produced:
                continue
            pid, epoch = next(iter(produced.values()))[3:]
            txn = txn_for(req.get("TransactionalId"), pid, epoch, row)
            if txn is None:
                continue
            txn["produce_requests"] += 1
            for key, (first, last, records, *_) in produced.items():
                span = txn["offsets"].setdefault(key, [first, last])
                span[0] = first if span[0] is None else min(span[0], first or span[0])
                span[1] = last if span[1] is None else max(span[1], last or span[1])
                txn["records"] += records
                if key not in txn["partitions"]:
                    txn["partitions"].append(key)
        elif row.api_name == "EndTxn":
            tid = req.get("TransactionalId")
            txn = open_txns.pop(tid, None)
            if txn is None:
                continue
            code = resp.get("ErrorCode")
            if code == 0:
                txn["outcome"] = "commit" if req.get("Committed") else "abort"
            else:
                txn["outcome"] = f"EndTxn {row.error_name or row.status}"
            txn["end"] = row.response_end
            txn["ended_by"] = "EndTxn"
            done.append(txn)
    done += open_txns.values()
    _attach_markers(done, _markers(pairs, names))
    out = frame(done, COLUMNS).sort_values("start", kind="stable").reset_index(drop=True)
    return ints(out, "producer_id", "producer_epoch", "records", "produce_requests")


def _pid(ids, tid):
    return next((pid for pid, t in ids.items() if t == tid), None)


def _attach_markers(txns, markers):
    for txn in txns:
        for key, (_first, last) in txn["offsets"].items():
            if last is None:
                continue
            after = sorted(
                (off, kind)
                for off, kind in markers.get((txn["producer_id"], key), {}).items()
                if off > last
            )
            if after:
                txn["markers"][key] = f"{after[0][1]}@{after[0][0]}"
        kinds = {m.split("@")[0] for m in txn["markers"].values()}
        if txn["ended_by"] is None and len(kinds) == 1 and kinds <= {"COMMIT", "ABORT"}:
            txn["outcome"] = kinds.pop().lower()
            txn["ended_by"] = "marker"


@per_capture
def aborted_reads(pairs):
    """Record batches of aborted transactions in Fetch responses to read_committed requests
    (IsolationLevel 1). `listed_as_aborted`: the response's AbortedTransactions covers the
    batch, so the consumer drops it; False: the consumer hands the records to the
    application."""
    txns = transactions(pairs)
    aborted = txns[txns["outcome"] == "abort"]
    if aborted.empty:
        return frame([], ABORTED_COLUMNS)
    spans = {}
    for txn in aborted.itertuples(index=False):
        for key, (first, last) in txn.offsets.items():
            spans.setdefault((txn.producer_id, key), []).append((first, last, txn.transactional_id))
    names = topic_names(pairs)
    rows = []
    for row in api_rows(pairs, "Fetch").itertuples(index=False):
        if body(row.request).get("IsolationLevel") != 1:
            continue
        for topic in body(row.response).get("Responses") or ():
            for part in topic.get("Partitions") or ():
                key = f"{topic_of(topic, names)}/{partition_index(part)}"
                listed = part.get("AbortedTransactions") or []
                for b in _batches(part.get("Records")):
                    if b.get("control"):
                        continue
                    lo = b["base_offset"]
                    hi = lo + b.get("last_offset_delta", 0)
                    for first, last, tid in spans.get((b.get("producer_id"), key), ()):
                        if first is None or hi < first or lo > last:
                            continue
                        rows.append(
                            {
                                "time": row.response_end,
                                "client_id": row.client_id,
                                "stream": row.stream,
                                "response_frame": row.response_frame,
                                "topic": key.rsplit("/", 1)[0],
                                "partition": int(key.rsplit("/", 1)[1]),
                                "first_offset": lo,
                                "last_offset": hi,
                                "records": b.get("record_count"),
                                "producer_id": b.get("producer_id"),
                                "transactional_id": tid,
                                "listed_as_aborted": any(
                                    a.get("ProducerId") == b.get("producer_id")
                                    and a.get("FirstOffset", 0) <= hi
                                    for a in listed
                                ),
                            }
                        )
    return ints(frame(rows, ABORTED_COLUMNS), "partition", "first_offset", "last_offset")
