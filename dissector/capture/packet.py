"""The unit every capture source yields."""

from typing import NamedTuple

# Readers keep timestamps within signed 64-bit nanoseconds (years 1677 to 2262), what every
# table can hold; the minimum itself is left out, as pandas reads it as "no time".
TS_MAX = (1 << 63) - 1
TS_MIN = -TS_MAX


class Packet(NamedTuple):
    frame: int  # 1-based, counting every packet of the capture, as Wireshark numbers them
    ts: int  # nanoseconds since the Unix epoch, UTC, within TS_MIN..TS_MAX
    linktype: int  # LINKTYPE_* value of the interface the packet came from
    data: bytes  # the captured bytes (may be shorter than wirelen)
    wirelen: int  # the packet's length on the wire
