"""Consumer lag per group, topic and partition over time, two ways:

* `fetch`: from each Fetch response, high watermark - the consumer's position (the offset
  after the last record returned, else the fetch offset): how far the reader is behind.
* `commit`: from each OffsetCommit, the `partitions` table's `committed_lag`: the newest high
  watermark of the topic-partition seen before the commit completed, in capture order, minus
  the committed offset: what a restart would have to read again. The table works it out as
  it reads the capture; taking it from there keeps one definition, row for row.
"""

import pandas as pd

from ._frames import api_rows, body, frame, has, ints, scope

COLUMNS = [
    "time",
    "group_id",
    "client_id",
    "topic",
    "partition",
    "source",
    "high_watermark",
    "offset",
    "lag",
    "client",
    "broker",
    "frame",  # the evidence: the Fetch response's frame, the OffsetCommit request's
]


def client_groups(pairs):
    """(capture..., client_id) -> group id, from the JoinGroup, SyncGroup and OffsetCommit
    requests in `pairs`: the group of a client's Fetch requests, which do not name it."""
    groups = {}
    keys = scope(pairs)
    for row in api_rows(pairs, "JoinGroup", "OffsetCommit", "SyncGroup").itertuples(index=False):
        group = body(row.request).get("GroupId")
        if group and isinstance(row.client_id, str):
            groups.setdefault((*(getattr(row, k) for k in keys), row.client_id), group)
    return groups


def commit_groups(pairs):
    """(capture..., request_frame) -> the GroupId of each OffsetCommit request."""
    keys = scope(pairs)
    rows = api_rows(pairs, "OffsetCommit")
    return {
        (*(getattr(row, k) for k in keys), row.request_frame): body(row.request).get("GroupId")
        for row in rows.itertuples(index=False)
        if pd.notna(row.request_frame)
    }


def _lookup(table, columns, found):
    """`found[(row's columns...)]` per row of `table`, None where it has none."""
    keys = zip(*(table[c] for c in columns), strict=True)
    return pd.Series([found.get(k) for k in keys], index=table.index, dtype=object)


def lag(partitions, pairs=None):
    """One row per Fetch response partition (`source` "fetch") and committed partition
    (`source` "commit"): time, group (from `pairs`, when given: the OffsetCommit request's
    `GroupId`; for a fetch, the group its client joined or committed to), client, topic,
    partition, high watermark, the position or committed offset (`offset`) and `lag`.
    Commit rows are the table's OffsetCommit rows in its order, their lag its
    `committed_lag` and their high watermark the committed offset plus that lag. `client`,
    `broker` and `frame` (the Fetch response's, the OffsetCommit request's) say where each
    row was seen."""
    if not has(partitions, "api_name", "high_watermark", "topic", "partition"):
        return frame([], COLUMNS)
    capture = scope(partitions)
    fetch = partitions[partitions["api_name"].eq("Fetch") & partitions["high_watermark"].notna()]
    position = fetch["high_watermark"] - fetch["lag"] if "lag" in fetch else fetch["fetch_offset"]
    fetch = pd.DataFrame(
        {
            **{k: fetch[k] for k in capture},
            "time": fetch["response_end"],
            "client_id": fetch["client_id"],
            "topic": fetch["topic"],
            "partition": fetch["partition"],
            "source": "fetch",
            "high_watermark": fetch["high_watermark"],
            "offset": position.fillna(fetch["fetch_offset"]),
            "client": fetch["client"],
            "broker": fetch["broker"],
            "frame": fetch["response_frame"],
        }
    )
    commits = partitions[
        partitions["api_name"].eq("OffsetCommit") & partitions["committed_offset"].notna()
    ]
    behind = commits.get("committed_lag", pd.NA)
    commits = pd.DataFrame(
        {
            **{k: commits[k] for k in capture},
            "time": commits["response_end"].fillna(commits["request_start"]),
            "client_id": commits["client_id"],
            "topic": commits["topic"],
            "partition": commits["partition"],
            "source": "commit",
            "high_watermark": commits["committed_offset"] + behind,
            "offset": commits["committed_offset"],
            "client": commits["client"],
            "broker": commits["broker"],
            "frame": commits["request_frame"],
        }
    )
    if pairs is not None and has(pairs, "api_name", "request"):
        fetch["group_id"] = _lookup(fetch, [*capture, "client_id"], client_groups(pairs))
        commits["group_id"] = _lookup(commits, [*capture, "frame"], commit_groups(pairs))
    out = pd.concat([fetch, commits], ignore_index=True)
    if out.empty:
        return frame([], [*capture, *COLUMNS])
    if "group_id" not in out:
        out["group_id"] = None
    out["group_id"] = out["group_id"].astype(partitions["client_id"].dtype)
    out = ints(out, "partition", "high_watermark", "offset", "frame")
    out["lag"] = out["high_watermark"] - out["offset"]
    # stable: the rows of one exchange stay in the table's order
    out = out.sort_values([*capture, "time", "source"], kind="stable").reset_index(drop=True)
    return out[[*capture, *COLUMNS]]
