"""The `streams` table: every byte of every connection accounted for, per direction.

The columns add up, by construction of independent counters:

    bytes_seen      = bytes_delivered + bytes_duplicate + bytes_dropped
    bytes_delivered = bytes_tls + bytes_framed + bytes_skipped          (Kafka connections)
    bytes_framed    = bytes_decoded + bytes_malformed + bytes_unused

bytes_seen: payload captured; bytes_duplicate: retransmitted or overlapping copies;
bytes_dropped: payload after a FIN or with a RST, or of a connection found not to be Kafka;
bytes_missing: never captured (gaps); bytes_delivered: the in-order stream; bytes_framed: in
Kafka frames (a frame its sender cut short with its FIN included); bytes_skipped: passed over
while re-finding frame boundaries (after a gap or a mid-stream start), after a hole in a
frame, or in a frame the capture cut off at the end; bytes_abandoned: of bytes_skipped, those
of a frame left unfinished when the other side ended the connection (its RST or FIN), which a
peer abandoned and the capture did not lose; bytes_tls: of a TLS connection, the bytes that
were not plaintext handed to framing (record headers and tags, the handshake, records that
could not be decrypted); bytes_malformed: frames that did not decode or that their sender cut
short; bytes_unused: frames that could not be used (not requests, responses before any
request, frames a hole took the header of, a request cut short on a connection not Kafka).
"""


def stream_rows(item):
    """The table rows of a ConnectionEnded event of the core (its two accounting rows), or
    of one accounting row (as Spark's range tasks hand them), with bytes_decoded derived."""
    rows = (item,) if type(item) is dict else item.rows
    return [
        dict(row, bytes_decoded=row["bytes_framed"] - row["bytes_malformed"] - row["bytes_unused"])
        for row in rows
    ]
