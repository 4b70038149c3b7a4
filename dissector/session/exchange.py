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
    "queue_ms",
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


# A body whose scan succeeded, decoded in full only when it is read: (decode, *args), which
# decode(*args) turns into the body. A plain tuple, not a class of its own: the session makes
# one for nearly every request and response, and a tuple costs no Python-level construction.
LazyBody = tuple


def decoded(body):
    """The body itself: a LazyBody decoded now, anything else as it is."""
    return body[0](*body[1:]) if body.__class__ is LazyBody else body


class _Body:
    """`request` or `response` of an Exchange: a LazyBody is decoded on first read."""

    def __set_name__(self, owner, name):
        self.slot = "_" + name

    def __get__(self, exchange, owner=None):
        if exchange is None:
            return self
        body = getattr(exchange, self.slot)
        if body.__class__ is LazyBody:
            body = decoded(body)
            setattr(exchange, self.slot, body)
        return body

    def __set__(self, exchange, body):
        setattr(exchange, self.slot, body)


class Exchange:
    """A request/response pair; timestamps are integer nanoseconds since the epoch (UTC).

    Columns not set are None (class defaults: an exchange sets only what it has). `request`
    and `response` are decoded on first access where the session only scanned them.
    """

    # topic id -> name for the ids this exchange uses that earlier Metadata responses named
    # (not a column: the partition and record tables resolve ids with it)
    topic_names = {}  # noqa: RUF012 (shared empty default, replaced, never mutated)
    # (side, frame data, [(topic name or id, partition, start, end)]): where the record sets lie
    record_sets = None
    _request = _response = None

    def __init__(self, **values):
        for side in ("request", "response"):
            if side in values:
                values["_" + side] = values.pop(side)
        self.__dict__.update(values)

    @classmethod
    def of(cls, columns):
        """An exchange that takes `columns` as its attributes, bodies under "_request" and
        "_response": the dict is its own, not copied."""
        exchange = cls.__new__(cls)
        exchange.__dict__ = columns
        return exchange

    request = _Body()
    response = _Body()

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


for _name in COLUMNS:
    if _name not in ("request", "response"):
        setattr(Exchange, _name, None)
del _name
