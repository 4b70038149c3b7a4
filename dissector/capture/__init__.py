"""Stage 1: reading capture files into Packets."""

from dissector.capture.packet import Packet
from dissector.capture.reader import PacketReader, open_capture

__all__ = ["Packet", "PacketReader", "open_capture"]
