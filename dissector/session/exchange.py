"""One request and its response: a row of the `pairs` table."""

COLUMNS = (
    "stream",
    "client",
    "broker",
    "protocol",
    "api_key",
    "api_name",
    "api_version",
    "correlation_id",
    "client_id",
    "request_frame",
    "response_frame",
    "request_start",
    "request_end",
    "response_start",
    "response_end",
    "latency_ms",
    "server_ms",
    "request_bytes",
    "response_bytes",
    "error_code",
    "error_name",
    "throttle_ms",
    "topics",
    "status",
    "reason",
    "request",
    "response",
)

# Statuses, in the order the summary lists them.
OK = "ok"
ERROR = "error"
NO_RESPONSE_EXPECTED = "no_response_expected"
UNANSWERED = "unanswered"
ORPHAN_RESPONSE = "orphan_response"
MALFORMED = "malformed"
STATUSES = (OK, ERROR, NO_RESPONSE_EXPECTED, UNANSWERED, ORPHAN_RESPONSE, MALFORMED)


class Exchange:
    """A request/response pair; timestamps are integer nanoseconds since the epoch (UTC)."""

    # topic_names: topic id -> name, for the ids this exchange uses that earlier Metadata
    # responses named (not a column: the partition and record tables resolve ids with it)
    __slots__ = (*COLUMNS, "topic_names")

    def __init__(self, **values):
        for name in COLUMNS:
            setattr(self, name, values.get(name))
        self.topic_names = {}

    def row(self):
        return tuple(getattr(self, name) for name in COLUMNS)

    def as_dict(self):
        return {name: getattr(self, name) for name in COLUMNS}

    @property
    def first_frame(self):
        """The frame a table is ordered by: the request's, or the response's for an orphan."""
        return self.request_frame if self.request_frame is not None else self.response_frame

    def __repr__(self):
        return (
            f"<Exchange stream={self.stream} {self.api_name} v{self.api_version} "
            f"corr={self.correlation_id} frames={self.request_frame}->{self.response_frame} "
            f"{self.status}>"
        )
