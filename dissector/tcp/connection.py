"""One TCP connection as later stages see it."""


def endpoints_key(a, b):
    """Two endpoints in sorted order: a connection's key, whichever side spoke first."""
    return (a, b) if a <= b else (b, a)


class Connection:
    """A TCP connection: identity, direction and byte counters of both sides.

    Side 0 is the sender of the first packet seen. The counters live in the two half-streams
    and stay readable after the connection has ended.
    """

    __slots__ = (
        "id",
        "endpoints",
        "client_side",
        "how",
        "first_frame",
        "first_ts",
        "last_frame",
        "last_ts",
        "end_reason",
        "ended_by",
        "end_frame",
        "end_ts",
        "syns",
        "_ignored",
        "_halves",
    )

    def __init__(self, id, endpoints, frame, ts):
        self.id = id  # stream number, 0-based, in order of first appearance
        self.endpoints = endpoints  # ((ip, port), (ip, port))
        self.client_side = None  # 0 or 1 when known
        self.how = None  # "syn", "port" or "traffic": how client_side was decided
        self.first_frame = frame
        self.first_ts = ts
        self.last_frame = frame
        self.last_ts = ts
        self.end_reason = None  # reason of the StreamEnd, once ended
        # Who ended it: the side that sent the first FIN or the RST, with that packet's frame
        # and time (None: the capture or a reused port ended it, at end_frame).
        self.ended_by = None
        self.end_frame = None
        self.end_ts = None
        self.syns = 0  # SYN segments seen: a later one may start a new connection
        self._ignored = False
        self._halves = ()

    def __repr__(self):
        (a, pa), (b, pb) = self.endpoints
        return f"Connection({self.id}, {a}:{pa} <-> {b}:{pb}, client_side={self.client_side})"

    @property
    def ignored(self):
        """Not Kafka: the tracker drops its payload and only watches for its end."""
        return self._ignored

    @ignored.setter
    def ignored(self, value):
        if not value:
            if self._ignored:
                raise ValueError("a connection's payload cannot be restored once ignored")
            return
        if not self._ignored:
            self._ignored = True
            for half in self._halves:
                half.drop_buffered()

    # Counters, as (side 0, side 1).

    @property
    def bytes_seen(self):
        """Captured payload bytes."""
        return tuple(h.seen for h in self._halves)

    @property
    def bytes_delivered(self):
        return tuple(h.nxt - h.gap for h in self._halves)

    @property
    def bytes_gap(self):
        """Bytes reported missing in StreamGaps."""
        return tuple(h.gap for h in self._halves)

    @property
    def bytes_dup(self):
        """Retransmitted or overlapping bytes dropped because they were already had."""
        return tuple(h.dup for h in self._halves)

    @property
    def bytes_dropped(self):
        """Other bytes not delivered: payload of RSTs, past a FIN, or of an ignored connection."""
        return tuple(h.dropped for h in self._halves)

    @property
    def bytes_buffered(self):
        """Out-of-order bytes waiting for a hole to fill."""
        return tuple(h.pbytes for h in self._halves)

    @property
    def bytes_conflicting(self):
        """Buffered bytes a later overlapping copy contradicted: its bytes were kept."""
        return tuple(h.conflicting for h in self._halves)

    @property
    def rsts_ignored(self):
        """RSTs sent out of the receiver's window: a receiver ignores them, and so do we."""
        return tuple(h.rsts_ignored for h in self._halves)

    @property
    def syns_ignored(self):
        """New SYNs sent on the open connection that its traffic went on past."""
        return tuple(h.syns_ignored for h in self._halves)
