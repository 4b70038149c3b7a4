"""What the core tells its drivers besides exchanges (see Dissector.ended)."""

from typing import NamedTuple


class ConnectionEnded(NamedTuple):
    """A connection that carried payload has ended (FIN, RST, idle or the capture's end)."""

    id: int  # the dissection's own connection number: the streams table's `stream`
    rows: list  # its two accounting rows, request side first (Conversation.streams)
    kafka: bool  # whether it was taken as Kafka
