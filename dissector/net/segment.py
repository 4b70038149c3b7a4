"""What the network layer hands to TCP reassembly."""

from typing import NamedTuple

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


class Segment(NamedTuple):
    frame: int
    ts: int  # nanoseconds since the epoch
    src: str  # source IP address, text form
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int  # TCP flag bits (FIN, SYN, RST, PSH, ACK above)
    payload: bytes  # TCP payload as captured (may be cut by the snap length), from `start`
    missing: int = 0  # payload bytes the snap length cut off (IP length says more than captured)
    # Where the TCP payload starts in `payload`: 0 but from a NetDecoder(in_place=True), which
    # leaves the payload in the packet's bytes rather than copying it out.
    start: int = 0
