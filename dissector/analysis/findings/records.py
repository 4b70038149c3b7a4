"""Findings of record data (see __init__.py), read from the `partitions` table.

- unreadable_batches: record batches that could not be read (a decompression bomb, a
  payload that does not decompress, an unknown codec, records that do not parse), per
  client and direction: what a producer sent that no broker or consumer can read, or what
  a broker handed a consumer. As far as the dissection read the batches: past their headers
  only with --records full or --decompress.
"""

import pandas as pd

from .._frames import has, scope
from . import Finding, client_label, named

COLUMNS = ("failed_batches", "batch_errors", "api_name", "client", "broker", "topic")
# Bounds of the dissection, not damage: the data may be that compressible.
_BOUNDS = {"decompression_bomb", "too_many_records"}


def _advice(statuses, produced):
    if statuses <= _BOUNDS:
        return (
            "they decompress past the dissection's bounds (--max-ratio, --max-decompressed) "
            "or hold more records than it reads: raise those if the data is that "
            "compressible, else the traffic is hostile"
        )
    if produced:
        return (
            "the broker cannot read them either: check the producer's compression library "
            "and its codec settings"
        )
    return (
        "the consumer cannot read them: the log holds them as they were written, so check "
        "the producer that wrote them and the broker's storage"
    )


def unreadable_batches(tables):
    parts = tables.partitions
    if not has(parts, *COLUMNS):
        return
    failed = parts[pd.to_numeric(parts["failed_batches"], errors="coerce").fillna(0) > 0]
    if failed.empty:
        return
    captured = scope(failed)
    keys = [*captured, "client", "broker", "client_id", "api_name"]
    failed = failed.assign(client_id=failed["client_id"].where(failed["client_id"].notna(), ""))
    for key, rows in failed.groupby(keys, sort=False, dropna=False):
        first = rows.iloc[0]
        produced = first["api_name"] == "Produce"
        count = int(rows["failed_batches"].sum())
        statuses = sorted({s for text in rows["batch_errors"] for s in str(text).split(",")})
        topics = list(dict.fromkeys(str(t) for t in rows["topic"]))
        client_id = named(first["client_id"])
        who = client_label(client_id, first["client"])
        where = (
            f"Produce requests of {who} to {first['broker']}"
            if produced
            else f"Fetch responses from {first['broker']} to {who}"
        )
        side = "request_frame" if produced else "response_frame"
        frames = sorted({int(f) for f in rows[side] if pd.notna(f)})
        yield Finding(
            kind="unreadable_batches",
            severity="error",
            detail=(
                f"{count} record batch(es) in {where} could not be read ({', '.join(statuses)}; "
                f"topics {', '.join(topics)}): {_advice(set(statuses), produced)}"
            ),
            frames=frames,
            client=first["client"],
            client_id=client_id,
            broker=first["broker"],
            time=first.get("request_start" if produced else "response_end"),
            extra={
                **({"capture": key[0]} if captured else {}),
                "count": count,
                "statuses": statuses,
                "topics": topics,
            },
        )


CHECKS = (unreadable_batches,)
