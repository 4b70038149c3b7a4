"""The `streams` table: every byte of every connection accounted for, per direction.

The columns add up, by construction of independent counters:

    bytes_seen      = bytes_delivered + bytes_duplicate + bytes_dropped
    bytes_delivered = bytes_framed + bytes_skipped          (Kafka connections)
    bytes_framed    = bytes_decoded + bytes_malformed + bytes_unused

bytes_seen: payload captured; bytes_duplicate: retransmitted or overlapping copies;
bytes_dropped: payload after a FIN or with a RST, or of a connection found not to be Kafka;
bytes_missing: never captured (gaps); bytes_delivered: the in-order stream; bytes_framed: in
Kafka frames; bytes_skipped: passed over while re-finding frame boundaries (after a gap or a
mid-stream start) or in a frame cut off at the end; bytes_malformed: frames that did not
decode; bytes_unused: frames that could not be used (not requests, or responses before any
request).
"""

import pandas as pd

COLUMNS = (
    "stream",
    "direction",
    "client",
    "broker",
    "kafka",
    "protocol",
    "client_side_from",
    "end",
    "first_frame",
    "last_frame",
    "bytes_seen",
    "bytes_duplicate",
    "bytes_dropped",
    "bytes_missing",
    "bytes_delivered",
    "bytes_framed",
    "bytes_skipped",
    "bytes_decoded",
    "bytes_malformed",
    "bytes_unused",
    "frames",
    "malformed_frames",
    "gaps",
)


def streams_frame(rows):
    df = pd.DataFrame.from_records(list(rows), columns=[c for c in COLUMNS if c != "bytes_decoded"])
    df.insert(
        COLUMNS.index("bytes_decoded"),
        "bytes_decoded",
        df["bytes_framed"] - df["bytes_malformed"] - df["bytes_unused"],
    )
    return df.sort_values(["stream", "direction"], kind="stable").reset_index(drop=True)
