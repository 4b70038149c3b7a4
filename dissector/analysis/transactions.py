"""Transactions: one row per transaction of each transactional producer, and the aborted
records that read_committed consumers were sent anyway.

A transaction opens with the first AddPartitionsToTxn, AddOffsetsToTxn or transactional
Produce after the producer's previous one ended, and ends with its EndTxn (commit or abort),
with a successful InitProducerId for its transactional id (a newer instance fences it, and
the coordinator aborts it), or, where neither was captured, when a partition it already
holds is added again.
The control batches (markers) the broker wrote after it are found in Fetch responses: the
first control batch of that producer after the transaction's records in each partition.
Their type (COMMIT or ABORT) is in the control record, which a default dissection leaves
undecoded: it comes from the records decoded in full, else the `records` table, else the
EndTxn. Without an EndTxn in the capture the marker gives the outcome; a marker of unknown
type gives `ended`; without either it is `open`.
"""

import functools

import pandas as pd

from ..tables.partitions import partition_index
from ._frames import (
    ORDERED,
    api_rows,
    body,
    frame,
    has,
    ints,
    may_contain,
    only,
    scope,
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
    "duration_ms",
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
    "client",
    "broker",
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
    """{"topic/p": (first, last, records, producer id, epoch)} of a transactional Produce,
    for the partitions the broker took (a refused batch wrote nothing)."""
    base = {}
    for topic in resp.get("Responses") or ():
        for part in topic.get("PartitionResponses") or ():
            if not part.get("ErrorCode"):
                base[f"{topic_of(topic, names)}/{partition_index(part)}"] = part.get("BaseOffset")
    out = {}
    for topic in req.get("TopicData") or ():
        for part in topic.get("PartitionData") or ():
            key = f"{topic_of(topic, names)}/{partition_index(part)}"
            batches = [b for b in _batches(part.get("Records")) if b.get("transactional")]
            if not batches or (resp and key not in base):
                continue
            count = sum(b.get("last_offset_delta", 0) + 1 for b in batches)
            first = base.get(key)
            first = first if first is not None and first >= 0 else None
            last = first + count - 1 if first is not None else None
            records = sum(b.get("record_count", 0) for b in batches)
            b = batches[0]
            out[key] = (first, last, records, b.get("producer_id"), b.get("producer_epoch"))
    return out


def _control_types(records):
    """{(producer id, "topic/p", offset): "COMMIT" or "ABORT"} from a `records` table."""
    if not has(records, "control", "producer_id", "topic", "partition", "offset"):
        return {}
    columns = ["producer_id", "topic", "partition", "offset", "control"]
    known = records.loc[records["control"].isin(["COMMIT", "ABORT"]), columns]  # not the values
    return {
        (pid, f"{topic}/{part}", off): kind
        for pid, topic, part, off, kind in zip(
            known["producer_id"],
            known["topic"],
            known["partition"],
            known["offset"],
            known["control"],
            strict=True,
        )
    }


def _markers(pairs, names, types):
    """Control batches in Fetch responses: {(producer id, "topic/p"): {offset: type}}, the
    type from the control record where it was decoded, else from `types`, else None."""
    found = {}
    for row in api_rows(only(pairs, *ORDERED, "response"), "Fetch").itertuples(index=False):
        if isinstance(row.response, str) and '"control":true' not in row.response:
            continue  # JSON text without a control batch: not worth parsing
        for topic in body(row.response).get("Responses") or ():
            for part in topic.get("Partitions") or ():
                key = f"{topic_of(topic, names)}/{partition_index(part)}"
                for b in _batches(part.get("Records")):
                    if not b.get("control") or b.get("base_offset") is None:
                        continue
                    pid, offset = b.get("producer_id"), b["base_offset"]
                    recs = b.get("records") or [{}]
                    kind = (recs[0].get("control") or {}).get("type")
                    kind = kind if kind in ("COMMIT", "ABORT") else types.get((pid, key, offset))
                    seen = found.setdefault((pid, key), {})
                    seen[offset] = kind or seen.get(offset)
    return found


def _by_capture(analysis):
    """`per_capture` for an analysis of `pairs` and an optional `records` table: each
    capture of a capture set with its own records."""

    @functools.wraps(analysis)
    def run(pairs, records=None):
        if pairs is None or not scope(pairs) or pairs.empty:
            return analysis(pairs, records)
        parts = []
        for name, part in pairs.groupby("capture", sort=False):
            mine = records
            if records is not None and "capture" in records:
                mine = records[records["capture"] == name].drop(columns="capture")
            parts.append(analysis(part.drop(columns="capture"), mine).assign(capture=name))
        out = pd.concat([p for p in parts if not p.empty] or parts[:1], ignore_index=True)
        return out[["capture", *out.columns.drop("capture")]]

    return run


@_by_capture
def transactions(pairs, records=None):
    """One row per transaction: transactional id, producer id and epoch, the client, start,
    end and `duration_ms` (NaN while open), `outcome` (commit, abort, ended: a marker of
    unknown type, open, or the EndTxn error), `ended_by` (EndTxn, InitProducerId: a newer
    instance fenced it, or marker), the partitions added, the offsets written
    (`{"topic/p": [first, last]}`), the records and Produce requests, the groups whose
    offsets it committed, and the markers (`{"topic/p": "COMMIT@12"}`: the control batch at
    offset 12 is a COMMIT; `control@12` where the capture does not say which). A `records`
    table names the markers of a default dissection without EndTxn."""
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

    def end(txn, outcome, ended_by, row):
        txn.update(outcome=outcome, ended_by=ended_by, end=row.response_end)
        done.append(open_txns.pop(txn["transactional_id"]))

    read = ("request", "response", "client_id", "error_name", "status", "response_end")
    followed = TXN_APIS if _named(pairs) else ()  # none where no request names a transaction
    for row in api_rows(only(pairs, *ORDERED, *read), *followed).itertuples(index=False):
        req, resp = body(row.request), body(row.response)
        if row.api_name == "InitProducerId":
            tid = req.get("TransactionalId")
            if tid and resp.get("ErrorCode") == 0 and resp.get("ProducerId", -1) >= 0:
                ids[resp["ProducerId"]] = tid
                if tid in open_txns:  # the coordinator aborts what the old instance left open
                    end(open_txns[tid], "abort", "InitProducerId", row)
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
            for key, (first, last, count, *_) in produced.items():
                span = txn["offsets"].setdefault(key, [first, last])
                span[0] = first if span[0] is None else min(span[0], first or span[0])
                span[1] = last if span[1] is None else max(span[1], last or span[1])
                txn["records"] += count
                if key not in txn["partitions"]:
                    txn["partitions"].append(key)
        elif row.api_name == "EndTxn":
            txn = open_txns.get(req.get("TransactionalId"))
            if txn is None:
                continue
            if resp.get("ErrorCode") == 0:
                outcome = "commit" if req.get("Committed") else "abort"
            else:
                outcome = f"EndTxn {row.error_name or row.status}"
            end(txn, outcome, "EndTxn", row)
    done += open_txns.values()
    if done:
        _attach_markers(done, _markers(pairs, names, _control_types(records)))
    out = frame(done, COLUMNS)
    out["duration_ms"] = [_ms(t["start"], t["end"]) for t in done]
    out = out.sort_values("start", kind="stable").reset_index(drop=True)
    return ints(out, "producer_id", "producer_epoch", "records", "produce_requests")


def _named(pairs):
    """Whether a request of the table may name a transactional id, without which nothing is
    transactional."""
    return "request" not in pairs or may_contain(pairs["request"], '"TransactionalId":"').any()


def _ms(start, end):
    if pd.isna(start) or pd.isna(end):
        return float("nan")  # still open, or its start went uncaptured
    return (end - start).total_seconds() * 1000


def _pid(ids, tid):
    return next((pid for pid, t in ids.items() if t == tid), None)


def _attach_markers(txns, markers):
    for txn in txns:
        # the marker an ended transaction's coordinator wrote says its outcome
        told = txn["outcome"].upper() if txn["outcome"] in ("commit", "abort") else None
        for key, (_first, last) in txn["offsets"].items():
            if last is None:
                continue
            after = sorted(
                (off, kind)
                for off, kind in markers.get((txn["producer_id"], key), {}).items()
                if off > last
            )
            if after:
                offset, kind = after[0]
                txn["markers"][key] = f"{kind or told or 'control'}@{offset}"
        if txn["ended_by"] is not None or not txn["markers"]:
            continue
        kinds = {m.split("@")[0] for m in txn["markers"].values()}
        txn["outcome"] = kinds.pop().lower() if kinds in ({"COMMIT"}, {"ABORT"}) else "ended"
        txn["ended_by"] = "marker"


@_by_capture
def aborted_reads(pairs, records=None):
    """Record batches of aborted transactions in Fetch responses to read_committed requests
    (IsolationLevel 1). `listed_as_aborted`: the response's AbortedTransactions covers the
    batch, so the consumer drops it; False: the consumer hands the records to the
    application. `records`: the batch's records at or after the offset fetched (the
    `records` table, where given, counts those the response carried in full)."""
    txns = transactions(pairs, records)
    aborted = txns[txns["outcome"] == "abort"]
    if aborted.empty:
        return frame([], ABORTED_COLUMNS)
    spans = {}
    for txn in aborted.itertuples(index=False):
        for key, (first, last) in txn.offsets.items():
            spans.setdefault((txn.producer_id, key), []).append((first, last, txn.transactional_id))
    names = topic_names(pairs)
    carried = _carried(records)
    rows = []
    for row in api_rows(pairs, "Fetch").itertuples(index=False):
        req = body(row.request)
        if req.get("IsolationLevel") != 1:
            continue
        fetched = _fetch_offsets(req, names)
        for topic in body(row.response).get("Responses") or ():
            for part in topic.get("Partitions") or ():
                key = f"{topic_of(topic, names)}/{partition_index(part)}"
                listed = part.get("AbortedTransactions") or []
                for b in _batches(part.get("Records")):
                    if b.get("control") or b.get("base_offset") is None:
                        continue
                    lo = b["base_offset"]
                    hi = lo + b.get("last_offset_delta", 0)
                    for first, last, tid in spans.get((b.get("producer_id"), key), ()):
                        if first is None or hi < first or lo > last:
                            continue
                        # the consumer skips the records of a batch before its position
                        start = max(lo, fetched.get(key) or lo)
                        count = b.get("record_count") if start == lo else max(hi - start + 1, 0)
                        if carried is not None:
                            frame_key = (row.stream, row.response_frame, key)
                            count = sum(start <= o <= hi for o in carried.get(frame_key, ()))
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
                                "records": count,
                                "producer_id": b.get("producer_id"),
                                "transactional_id": tid,
                                "listed_as_aborted": any(
                                    a.get("ProducerId") == b.get("producer_id")
                                    and a.get("FirstOffset", 0) <= hi
                                    for a in listed
                                ),
                                "client": getattr(row, "client", None),
                                "broker": getattr(row, "broker", None),
                            }
                        )
    return ints(frame(rows, ABORTED_COLUMNS), "partition", "first_offset", "last_offset")


def _fetch_offsets(req, names):
    """{"topic/p": offset fetched} of a Fetch request."""
    return {
        f"{topic_of(topic, names)}/{partition_index(part)}": part.get("FetchOffset")
        for topic in req.get("Topics") or ()
        for part in topic.get("Partitions") or ()
        if part.get("FetchOffset") is not None
    }


def _carried(records):
    """{(stream, response frame, "topic/p"): [offsets]} of the data records Fetch responses
    carried, from a `records` table; None without one."""
    columns = ("direction", "control", "api_name", "stream", "frame", "topic", "partition")
    if not has(records, *columns, "offset"):
        return None
    carried = records["control"].isna() & records["direction"].eq("response")
    data = records.loc[carried & records["api_name"].eq("Fetch"), list(columns + ("offset",))]
    out = {}
    for stream, frame_no, topic, part, off in zip(
        data["stream"], data["frame"], data["topic"], data["partition"], data["offset"], strict=True
    ):
        out.setdefault((stream, frame_no, f"{topic}/{part}"), []).append(off)
    return out
