"""Stage 3: TCP connection tracking and stream reassembly."""

from .connection import Connection
from .events import StreamData, StreamEnd, StreamGap
from .tracker import DEFAULT_MAX_BUFFER, TcpTracker

__all__ = [
    "DEFAULT_MAX_BUFFER",
    "Connection",
    "StreamData",
    "StreamEnd",
    "StreamGap",
    "TcpTracker",
]
