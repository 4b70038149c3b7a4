"""Findings of transactions and idempotent producers (see __init__.py).

* `aborted_records_read`: records of aborted transactions handed to a read_committed
  consumer (the response did not list them as aborted, so the consumer keeps them).
* `producer_fenced`: a transactional producer refused for an epoch a newer instance with its
  transactional.id replaced.
* `sequence_error`: Produce batches refused for their producer id or sequence.
"""

import pandas as pd

from ...protocol.errors import ERROR_NAMES, error_name
from ...tables.partitions import partition_index
from .._frames import ORDERED, api_rows, body, has, only, topic_names, topic_of, when
from ..transactions import _add_partitions, _batches, aborted_reads
from . import Finding


def _codes(names):
    """The error codes of these error names."""
    return tuple(code for code, name in ERROR_NAMES.items() if name in names)


FENCED = ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "TRANSACTION_COORDINATOR_FENCED")
FENCED_CODES = _codes(FENCED)
#: The requests of a transactional producer, all carrying its transactional id and epoch.
TXN_REQUESTS = (
    "InitProducerId",
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "Produce",
    "EndTxn",
    "TxnOffsetCommit",
)
SEQUENCE = (
    "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "DUPLICATE_SEQUENCE_NUMBER",
    "UNKNOWN_PRODUCER_ID",
    "INVALID_PRODUCER_ID_MAPPING",
)
SEQUENCE_CODES = _codes(SEQUENCE)
#: The columns of `pairs` the checks read.
COLUMNS = (
    *("api_name", "client", "client_id", "broker", "status", "request", "response"),
    *("request_frame", "response_frame", "request_start"),
)


def _listing(items, limit=4):
    items = list(dict.fromkeys(items))
    shown = ", ".join(str(i) for i in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


# --------------------------------------------------------------------------- aborted reads


def aborted_records_read(tables):
    """One finding per read_committed connection that was sent aborted records the response
    did not list in AbortedTransactions."""
    if not has(tables.pairs, *COLUMNS):
        return
    reads = aborted_reads(tables.pairs, tables.records)
    reads = reads[~reads["listed_as_aborted"].astype(bool)]
    for (client, broker, client_id), rows in reads.groupby(
        ["client", "broker", "client_id"], dropna=False, sort=False
    ):
        count = int(rows["records"].fillna(0).sum())
        if count == 0:
            continue
        parts = [f"{t}/{p}" for t, p in zip(rows["topic"], rows["partition"], strict=True)]
        tids = list(dict.fromkeys(rows["transactional_id"]))
        yield Finding(
            kind="aborted_records_read",
            severity="error",
            detail=(
                f"{client_id or client} fetches with isolation level read_committed but was "
                f"sent {count} records in "
                f"{len(rows)} batches of aborted transactions of {_listing(tids)} "
                f"({_listing(parts)}) that the Fetch responses did not list in "
                "AbortedTransactions, so the application got them: the broker does not filter "
                "aborted records, fix it or have the application drop them itself"
            ),
            frames=sorted(set(rows["response_frame"].dropna().astype(int))),
            client=client,
            client_id=client_id,
            broker=broker,
            time=rows["time"].min(),
            extra={
                "count": count,
                "batches": len(rows),
                "partitions": list(dict.fromkeys(parts)),
                "transactional_ids": tids,
            },
        )


# --------------------------------------------------------------------------- fenced producers


def _producer_of(api, req):
    """(transactional id, producer id, epoch) a transactional request speaks for."""
    if api == "AddPartitionsToTxn":
        tid, pid, epoch, _parts = next(_add_partitions(req), (None, None, None, None))
        return tid, pid, epoch
    if api == "Produce":
        for topic in req.get("TopicData") or ():
            for part in topic.get("PartitionData") or ():
                for b in _batches(part.get("Records")):
                    return req.get("TransactionalId"), b.get("producer_id"), b.get("producer_epoch")
        return req.get("TransactionalId"), None, None
    return req.get("TransactionalId"), req.get("ProducerId"), req.get("ProducerEpoch")


def producer_fenced(tables):
    """One finding per fenced producer (transactional id, producer id and epoch): its answers
    PRODUCER_FENCED or INVALID_PRODUCER_EPOCH, with the InitProducerId of the newer instance
    that fenced it and the requests of the old epoch the broker left unanswered."""
    pairs = tables.pairs
    if not has(pairs, *COLUMNS):
        return
    inits = []  # (row, transactional id, producer id, epoch) of each successful InitProducerId
    refused = {}  # (tid, pid, epoch) -> evidence rows and their errors
    read = ("status", "request", "response", "request_frame", "response_frame", "client_id")
    rows = api_rows(only(pairs, *ORDERED, *read, "client", "broker"), *TXN_REQUESTS)
    for row in rows.itertuples(index=False):
        if row.api_name == "InitProducerId" and row.status == "ok":
            tid, resp = body(row.request).get("TransactionalId"), body(row.response)
            if tid and resp.get("ErrorCode") == 0:
                inits.append((row, tid, resp.get("ProducerId"), resp.get("ProducerEpoch")))
        if row.status != "unanswered" and not _may_hold(row.response, FENCED_CODES):
            continue
        tid, pid, epoch = _producer_of(row.api_name, body(row.request))
        names = _error_names(row)
        if set(names) & set(FENCED) or _stale(row, tid, pid, epoch, inits):
            refused.setdefault((tid, pid, epoch), []).append((row, names))
    for (tid, pid, epoch), evidence in refused.items():
        errors = [n for _row, names in evidence for n in names if n in FENCED]
        if not errors:
            continue  # only unanswered requests: no answer says the producer was fenced
        first = evidence[0][0]
        newer = _newer_init(inits, tid, pid, epoch, when(first))
        unanswered = [row for row, _names in evidence if row.status == "unanswered"]
        frames = [r.response_frame for r, names in evidence if set(names) & set(FENCED)]
        frames += [r.request_frame for r in unanswered]
        by = ""
        if newer is not None:
            frames.append(newer[0].response_frame)
            by = (
                f" after {newer[0].client_id or newer[0].client} initialised the same "
                f"transactional.id (epoch {newer[3]}, frame {newer[0].response_frame})"
            )
        apis = list(dict.fromkeys(r.api_name for r, names in evidence if names))
        left = ""
        if unanswered:
            left = (
                f" and {len(unanswered)} of its later requests "
                f"({_listing(r.api_name for r in unanswered)}) went unanswered"
            )
        yield Finding(
            kind="producer_fenced",
            severity="error",
            detail=(
                f"{first.client_id or first.client} (transactional.id {tid}, producer id {pid} "
                f"epoch {epoch}) is fenced: {_listing(apis)} answered "
                f"{_listing(errors)}{by}{left}, so its transaction was aborted; run one "
                "instance per transactional.id and close an instance once it is fenced"
            ),
            frames=sorted({int(f) for f in frames if pd.notna(f)}),
            client=first.client,
            client_id=first.client_id,
            broker=first.broker,
            time=when(first),
            extra={
                "count": len(errors),
                "transactional_id": tid,
                "producer_id": pid,
                "producer_epoch": epoch,
                "errors": list(dict.fromkeys(errors)),
                "fenced_by": None if newer is None else newer[0].client_id,
                "fenced_by_epoch": None if newer is None else newer[3],
                "unanswered": len(unanswered),
            },
        )


def _error_names(row):
    """The names of every non-zero error code in a response, at any depth."""
    found, stack = [], [body(row.response)]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(reversed(node))
        elif isinstance(node, dict):
            for key, value in node.items():
                if key.endswith("ErrorCode") and isinstance(value, int) and value:
                    found.append(error_name(value))
                elif isinstance(value, (list, dict)) and key != "Records":
                    stack.append(value)
    return found


def _stale(row, tid, pid, epoch, inits):
    """An unanswered request of an epoch a later InitProducerId for its id replaced."""
    return (
        row.status == "unanswered"
        and row.api_name != "InitProducerId"  # it names the epoch it means to replace
        and tid is not None
        and epoch is not None
        and epoch >= 0
        and _newer_init(inits, tid, pid, epoch, when(row)) is not None
    )


def _newer_init(inits, tid, pid, epoch, before):
    """The first InitProducerId before `before` that gave `tid` a newer producer or epoch."""
    for init in inits:
        row, init_tid, init_pid, init_epoch = init
        if init_tid != tid or when(row) > before or init_epoch is None or epoch is None:
            continue
        if init_pid != pid or init_epoch > epoch:
            return init
    return None


# --------------------------------------------------------------------------- sequences

_WHY = {
    "OUT_OF_ORDER_SEQUENCE_NUMBER": (
        "a batch before it never arrived (lost, or retried out of order with more than 5 "
        "requests in flight), so these records are not written; the producer must reset its "
        "sequence (a new producer id or epoch) and resend them"
    ),
    "DUPLICATE_SEQUENCE_NUMBER": (
        "it is a resend of a batch the log already holds; the records are written once, "
        "and the producer should count them delivered, not failed"
    ),
    "UNKNOWN_PRODUCER_ID": (
        "the broker holds no state for this producer id (never handed out, or expired with "
        "its records), so the batch is refused; the producer must get a new producer id"
    ),
    "INVALID_PRODUCER_ID_MAPPING": (
        "the producer id does not belong to the transactional id the request names; the "
        "producer must initialise again (InitProducerId)"
    ),
}


def _sequence_events(pairs):
    """Refused batches: dicts of the Produce exchange, partition, producer id, epoch, base
    sequence, records, error and the sequence the accepted batches before it lead to."""
    names = topic_names(pairs)
    next_seq, events = {}, []
    for row in api_rows(pairs, "Produce").itertuples(index=False):
        codes = {
            f"{topic_of(topic, names)}/{partition_index(part)}": part.get("ErrorCode")
            for topic in body(row.response).get("Responses") or ()
            for part in topic.get("PartitionResponses") or ()
        }
        for key, b in _produced_batches(body(row.request), names):
            code, seq = codes.get(key), b.get("base_sequence")
            state = (b["producer_id"], b.get("producer_epoch"), key)
            if code == 0 and seq is not None and seq >= 0:
                next_seq[state] = seq + b.get("record_count", 0)
            elif code and error_name(code) in SEQUENCE:
                events.append(
                    {
                        "row": row,
                        "partition": key,
                        "producer_id": state[0],
                        "producer_epoch": state[1],
                        "sequence": seq,
                        "records": b.get("record_count", 0),
                        "error": error_name(code),
                        "expected": next_seq.get(state),
                    }
                )
    return events


def _produced_batches(req, names):
    """("topic/p", batch) of the idempotent or transactional batches of a Produce request."""
    for topic in req.get("TopicData") or ():
        for part in topic.get("PartitionData") or ():
            key = f"{topic_of(topic, names)}/{partition_index(part)}"
            for b in _batches(part.get("Records")):
                pid = b.get("producer_id")
                if pid is not None and pid >= 0:  # -1: a plain producer, no sequence
                    yield key, b


def sequence_error(tables):
    """One finding per producer connection, producer id and error: the Produce batches the
    broker refused for their sequence or producer id."""
    pairs = tables.pairs
    if not has(pairs, *COLUMNS):
        return
    answers = pairs.loc[pairs["api_name"] == "Produce", "response"]
    if not any(_may_hold(r, SEQUENCE_CODES) for r in answers):
        return
    handed_out = _producer_ids(pairs)
    groups = {}
    for event in _sequence_events(pairs):
        row = event["row"]
        key = (row.client, row.broker, row.client_id, event["producer_id"], event["error"])
        groups.setdefault(key, []).append(event)
    for (client, broker, client_id, pid, error), events in groups.items():
        first = events[0]
        sent = _listing(
            f"sequence {e['sequence']} to {e['partition']}"
            + ("" if e["expected"] is None else f" where {e['expected']} was next")
            for e in events
        )
        why = _WHY[error]
        if error == "UNKNOWN_PRODUCER_ID" and pid not in handed_out:
            why = "no InitProducerId in the capture handed it out; " + why
        batches = "batch" if len(events) == 1 else "batches"
        yield Finding(
            kind="sequence_error",
            severity="error",
            detail=(
                f"{client_id or client} (producer id {pid}) had {len(events)} Produce "
                f"{batches} refused with {error}, {sent}: {why}"
            ),
            frames=sorted({int(e["row"].response_frame) for e in events}),
            client=client,
            client_id=client_id,
            broker=broker,
            time=when(first["row"]),
            extra={
                "count": len(events),
                "records": sum(e["records"] for e in events),
                "error_name": error,
                "producer_id": pid,
                "producer_epoch": first["producer_epoch"],
                "partitions": list(dict.fromkeys(e["partition"] for e in events)),
                "sequences": [e["sequence"] for e in events],
                "expected_sequences": [e["expected"] for e in events],
            },
        )


def _producer_ids(pairs):
    """The producer ids InitProducerId responses handed out."""
    answers = api_rows(pairs, "InitProducerId")["response"]
    return {body(r).get("ProducerId") for r in answers} - {None, -1}


def _may_hold(response, codes):
    """Whether a response may carry one of these error codes: JSON text is searched for them
    before it is parsed, in whatever field ending in ErrorCode."""
    if not isinstance(response, str):
        return isinstance(response, dict)
    return any(f'ErrorCode":{code}' in response for code in codes)


CHECKS = (aborted_records_read, producer_fenced, sequence_error)
