"""Stage 4: split each side's byte stream into size-prefixed Kafka frames."""

from .framer import (
    DEFAULT_MAX_FRAME,
    DEFAULT_MIN_FRAME,
    CutFrame,
    Frame,
    Framer,
    ShortFrame,
    Skipped,
)

__all__ = [
    "DEFAULT_MAX_FRAME",
    "DEFAULT_MIN_FRAME",
    "CutFrame",
    "Frame",
    "Framer",
    "ShortFrame",
    "Skipped",
]
