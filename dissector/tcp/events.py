"""What the TCP stage reports: ordered bytes, holes and ends, per connection side."""

from typing import NamedTuple

from .connection import Connection


class StreamData(NamedTuple):
    """The next in-order bytes of one side: data[start:]."""

    conn: Connection
    side: int
    data: bytes
    frame: int  # packet that made these bytes deliverable (in order)
    ts: int
    start: int = 0  # > 0: the bytes left in their packet (Segment.start)


class StreamGap(NamedTuple):
    """Bytes of one side known to be missing from the capture (size 0: amount unknown).
    cut: the bytes a packet had on the wire past its snap length, so exactly where they were
    (a lost segment is a hole only the later sequence numbers tell)."""

    conn: Connection
    side: int
    size: int
    frame: int
    ts: int
    cut: bool = False


class StreamEnd(NamedTuple):
    """The connection is over: "fin", "rst", "reused" (new SYN on its 4-tuple), "eof", or
    "idle" (no packet for longer than a live run keeps a connection)."""

    conn: Connection
    frame: int
    ts: int
    reason: str
