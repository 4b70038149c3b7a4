"""How a dissection is set up: one object every stage can read."""

from dataclasses import dataclass, field

from .protocol.records import Limits, RecordSets

DEFAULT_MAX_FRAME = 128 * 1024 * 1024  # above Kafka's default socket.request.max.bytes
# Connections followed at once; beyond, the longest idle are ended ("evicted"): one spoofed
# packet makes a connection, and each costs a few KB.
DEFAULT_MAX_CONNECTIONS = 1 << 16
RECORD_MODES = ("full", "batches", "none")


@dataclass(frozen=True)
class Options:
    ports: frozenset = field(default_factory=frozenset)  # broker ports; empty: detect Kafka
    protocol: str | None = None  # "0.7" or "0.8+" to force; None: decided per connection
    max_frame: int = DEFAULT_MAX_FRAME
    show_secrets: bool = False  # SASL passwords, proofs and tokens are redacted unless set
    # Record sets inside messages: "full" (every record), "batches" (batch headers, CRCs and
    # sizes, without parsing the records), "none" (sizes only).
    records: str = "batches"
    # Decompress compressed batches even when their records are not wanted, to know their
    # uncompressed size ("full" always does).
    decompress: bool = False
    max_decompressed: int = 256 * 1024 * 1024  # bytes one body's record sets decompress to
    max_ratio: int = 1000  # decompressed/compressed, per body and per run: past it, a bomb
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    # An NSS key log (SSLKEYLOGFILE) with the secrets of TLS connections; read again for the
    # sessions it does not hold yet, as a live capture's clients add to it.
    tls_keylog: str | None = None
    # Key log lines given as text (what a Spark task gets of the driver's key log): secrets,
    # so never in the repr that an error message might show.
    tls_secrets: str | None = field(default=None, repr=False)
    # The records and partitions tables hold only these topics and partitions (empty: all);
    # the records of others are not decompressed.
    topics: frozenset = field(default_factory=frozenset)
    partitions: frozenset = field(default_factory=frozenset)
    # The pairs table's request and response as JSON text; False: left empty, for work that
    # reads no body (their text is much of the table's time and memory).
    bodies: bool = True

    def __post_init__(self):
        object.__setattr__(self, "ports", frozenset(self.ports))
        object.__setattr__(self, "topics", frozenset(self.topics))
        object.__setattr__(self, "partitions", frozenset(self.partitions))
        if self.protocol not in (None, "0.7", "0.8+"):
            raise ValueError(f"protocol must be '0.7' or '0.8+', not {self.protocol!r}")
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if self.records not in RECORD_MODES:
            raise ValueError(f"records must be one of {', '.join(RECORD_MODES)}")

    @property
    def decompresses(self):
        """Whether compressed batches are decompressed: asked for, or needed for the records."""
        return self.decompress or self.records == "full"

    def wanted(self):
        """The filter of the records and partitions tables: a TopicPartitions, or None."""
        if self.topics or self.partitions:
            return TopicPartitions(self.topics, self.partitions)
        return None

    def for_tables(self):
        """The keywords of `tables.arrow_batches` these options give: the topics and
        partitions kept, and whether the pairs keep their bodies."""
        return {"wanted": self.wanted(), "with_bodies": self.bodies}

    def record_decoder(self):
        """The function a decoder applies to record-set bytes (None: keep only their size)."""
        if self.records == "none":
            return None
        limits = Limits(
            max_output=self.max_decompressed,
            max_ratio=self.max_ratio,
            records=self.records == "full",
            decompress=self.decompresses,
        )
        return RecordSets(limits)


class TopicPartitions:
    """Which topics and partitions a table keeps (an empty set: any)."""

    __slots__ = ("topics", "partitions")

    def __init__(self, topics, partitions):
        self.topics = frozenset(topics)
        self.partitions = frozenset(partitions)

    def __call__(self, topic, partition):
        return (not self.topics or topic in self.topics) and (
            not self.partitions or partition in self.partitions
        )
