"""What the programs compiled from the schema share: the layout of a message version, the
notes a body's fields carry, and the Context those notes go into.

A message version compiles to two programs: a decode program (decoder.py) that builds the
body as a dict, and a scan program (scanner.py) that builds nothing. Both note in a Context
what the exchange tables need (topic names, error codes, throttle time, acks, where record
sets lie), so nothing walks a decoded dict afterwards; `note_kind` says which field carries
which note.
"""

from .primitives import I16, I32, VAR
from .schema import in_range

FIXED = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "bool": ("?", 1),
    "uuid": ("16s", 16),
}


# Top-level fields noted by name (Context.fields): the session and the tables need them.
TOP_FIELDS = frozenset({"ThrottleTimeMs", "Acks"})


class Context:
    """What a decoder notes on the way: topic names and ids, the top-level and first nested
    error, TOP_FIELDS, and (scanning) where each record set lies, under which topic and
    partition; a scan program compiled for it notes a Produce response's base offsets in
    `assigned`.
    `records(raw, ctx)` gives the value of a record set (default: its size); what a body's
    record sets may decompress to together is kept in `allowance`."""

    __slots__ = (
        "topics",
        "topic_ids",
        "top_error",
        "first_error",
        "records",
        "fields",
        "topic",
        "partition",
        "record_sets",
        "allowance",
        "assigned",
    )

    def __init__(self, records=None):
        self.topics = []
        self.topic_ids = []
        self.top_error = 0
        self.first_error = 0
        self.records = records or record_set_size
        self.fields = {}
        self.topic = None  # the topic name or id being scanned
        self.partition = None  # the partition index being scanned, beside a record set
        # (topic name or id, partition, start, end) in the scanned buffer
        self.record_sets = []
        self.allowance = None  # what the body's record sets may still decompress to
        # (topic name or id, partition) -> base offset, by a scan program compiled for it
        self.assigned = None

    @property
    def error(self):
        return self.top_error or self.first_error


def record_set_size(raw, ctx=None):
    """Default view of a record set: only its size."""
    return None if raw is None else {"size": len(raw)}


class Layout:
    """Which fields a message version has, and how each is encoded at that version."""

    def __init__(self, flexible, version):
        self.flexible = flexible
        self.version = version

    def present(self, f):
        return in_range(self.version, f["versions"])

    def tagged(self, f):
        return self.flexible and in_range(self.version, f.get("tagged"))

    def nullable(self, f):
        return in_range(self.version, f.get("nullable"))

    def compact(self, f):
        if "flexible" in f:
            return in_range(self.version, f["flexible"])
        return self.flexible

    def width(self, f):
        """How f's length or count is encoded (I16, I32 or VAR) at this version."""
        if self.compact(f):
            return VAR
        return I16 if f["type"] == "string" else I32

    def fields(self, fields):
        """(regular fields in order, tagged fields) present at this version."""
        present = [f for f in fields if self.present(f)]
        return [f for f in present if not self.tagged(f)], [f for f in present if self.tagged(f)]


def note_kind(f, depth):
    """The note a field carries into a Context, or None: "top_error" and "first_error" (an
    int16 error code at the top level or nested), "field" (TOP_FIELDS), "topic_id",
    "topic" (a topic name) or "topics" (an array of them)."""
    if f["type"] == "int16" and f["name"].endswith("ErrorCode"):
        return "top_error" if depth == 0 else "first_error"
    if depth == 0 and f["name"] in TOP_FIELDS:
        return "field"
    if f["name"] == "TopicId" and f["type"] == "uuid":
        return "topic_id"
    if f.get("topic"):
        if f["type"] == "string":
            return "topic"
        if f["type"] == "[]string":
            return "topics"
    return None
