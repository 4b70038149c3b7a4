"""The unit every capture source yields."""

from typing import NamedTuple


class Packet(NamedTuple):
    frame: int  # 1-based, counting every packet of the capture, as Wireshark numbers them
    ts: int  # nanoseconds since the Unix epoch, UTC
    linktype: int  # LINKTYPE_* value of the interface the packet came from
    data: bytes  # the captured bytes (may be shorter than wirelen)
    wirelen: int  # the packet's length on the wire
