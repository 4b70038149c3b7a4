"""How a dissection is set up: one object every stage can read."""

from dataclasses import dataclass, field

DEFAULT_MAX_FRAME = 128 * 1024 * 1024  # above Kafka's default socket.request.max.bytes


@dataclass(frozen=True)
class Options:
    ports: frozenset = field(default_factory=frozenset)  # broker ports; empty: detect Kafka
    protocol: str | None = None  # "0.7" or "0.8+" to force; None: decided per connection
    max_frame: int = DEFAULT_MAX_FRAME
    show_secrets: bool = False  # SASL passwords, proofs and tokens are redacted unless set
    records: bool = True  # decode record sets (batches and records) inside messages

    def __post_init__(self):
        object.__setattr__(self, "ports", frozenset(self.ports))
        if self.protocol not in (None, "0.7", "0.8+"):
            raise ValueError(f"protocol must be '0.7' or '0.8+', not {self.protocol!r}")
