"""Consumer lag per group, topic and partition over time, two ways:

* `fetch`: from each Fetch response, high watermark - the consumer's position (the offset
  after the last record returned, else the fetch offset): how far the reader is behind.
* `commit`: from each OffsetCommit, the latest high watermark known at that time (from
  Fetch responses and Produce responses, any connection) - the committed offset: what a
  restart would have to read again.
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
]


def client_groups(pairs):
    """client_id -> group id, from the JoinGroup and OffsetCommit requests in `pairs`."""
    groups = {}
    for row in api_rows(pairs, "JoinGroup", "OffsetCommit", "SyncGroup").itertuples(index=False):
        group = body(row.request).get("GroupId")
        if group and isinstance(row.client_id, str):
            groups.setdefault(row.client_id, group)
    return groups


def _watermarks(partitions):
    """(time, topic, partition, high_watermark) seen in Fetch and Produce responses."""
    fetch = partitions[partitions["api_name"].eq("Fetch") & partitions["high_watermark"].notna()]
    fetch = fetch.assign(hw=fetch["high_watermark"])
    produce = partitions[
        partitions["api_name"].eq("Produce") & partitions["base_offset"].fillna(-1).ge(0)
    ]
    produce = produce.assign(hw=produce["base_offset"] + produce["records"].fillna(0))
    keys = [*scope(partitions), "topic", "partition"]
    marks = pd.concat([fetch, produce])[["response_end", *keys, "hw"]]
    marks = marks.dropna().rename(columns={"response_end": "time"})
    marks["hw"] = marks["hw"].astype("int64")
    # a high watermark never goes back: keep the running maximum per partition
    marks = marks.sort_values("time", kind="stable")
    marks["hw"] = marks.groupby(keys)["hw"].cummax()
    return marks


def lag(partitions, pairs=None):
    """One row per Fetch response partition (`source` "fetch") and committed partition
    (`source` "commit"): time, group (from `pairs`, when given), client, topic, partition,
    high watermark, the position or committed offset (`offset`) and `lag`."""
    if not has(partitions, "api_name", "high_watermark", "topic", "partition"):
        return frame([], COLUMNS)
    groups = client_groups(pairs) if pairs is not None else {}
    keys = [*scope(partitions), "topic", "partition"]
    fetch = partitions[partitions["api_name"].eq("Fetch") & partitions["high_watermark"].notna()]
    position = fetch["high_watermark"] - fetch["lag"] if "lag" in fetch else fetch["fetch_offset"]
    fetch = pd.DataFrame(
        {
            **{k: fetch[k] for k in scope(partitions)},
            "time": fetch["response_end"],
            "client_id": fetch["client_id"],
            "topic": fetch["topic"],
            "partition": fetch["partition"],
            "source": "fetch",
            "high_watermark": fetch["high_watermark"],
            "offset": position.fillna(fetch["fetch_offset"]),
        }
    )
    commits = partitions[
        partitions["api_name"].eq("OffsetCommit") & partitions["committed_offset"].notna()
    ]
    commits = pd.DataFrame(
        {
            **{k: commits[k] for k in scope(partitions)},
            "time": commits["response_end"].fillna(commits["request_start"]),
            "client_id": commits["client_id"],
            "topic": commits["topic"],
            "partition": commits["partition"],
            "source": "commit",
            "offset": commits["committed_offset"],
        }
    )
    marks = _watermarks(partitions)
    if not commits.empty and not marks.empty:
        commits = commits.dropna(subset=["time", *keys]).sort_values("time")
        commits = pd.merge_asof(
            commits.astype({"partition": "int64"}),
            marks.astype({"partition": "int64"}),
            on="time",
            by=keys,
        ).rename(columns={"hw": "high_watermark"})
    else:
        commits["high_watermark"] = pd.NA
    out = pd.concat([fetch, commits], ignore_index=True)
    if out.empty:
        return frame([], COLUMNS)
    out["group_id"] = out["client_id"].map(groups).astype(out["client_id"].dtype)
    out = ints(out, "partition", "high_watermark", "offset")
    out["lag"] = out["high_watermark"] - out["offset"]
    out = out.sort_values(["time", "source", *keys], kind="stable").reset_index(drop=True)
    return out[[*scope(partitions), *COLUMNS]]
