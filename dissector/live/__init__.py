"""Live capture: the core fed from an interface (through tcpdump) or from a pcap stream.

with dissector.sniff("eth0", ports=[9092]) as live:
    for exchange in live:  # as each completes
        ...
    live.stats()  # packets, bytes, kernel drops, queued, lag, gaps, resyncs, expired requests
"""

from ..options import Options
from .capture import DEFAULT_BUFFER_KIB, LiveCaptureError, StreamCapture, TcpdumpCapture
from .capture import port_filter as port_filter
from .runner import LiveRun

__all__ = ["LiveCaptureError", "LiveRun", "sniff"]


def sniff(
    interface=None,
    ports=(),
    *,
    read=None,
    bpf=None,
    duration=None,
    buffer_kib=DEFAULT_BUFFER_KIB,
    snaplen=0,
    idle=600.0,
    unanswered=120.0,
    max_buffer=None,
    immediate=None,
    ring=None,
    **options,
):
    """A live run on `interface` (tcpdump starts now; LiveCaptureError if it cannot), or on
    the pcap/pcapng stream `read` ("-" for standard input, a path or a binary file object).

    ports: broker ports (the capture filter keeps only their TCP traffic; without them every
    TCP connection is examined). bpf: a further capture filter. duration: seconds to run
    (None: until stop()). buffer_kib: the kernel ring. idle: seconds after which a silent
    connection is ended. unanswered: seconds a request waits for its response beyond its own
    timeout (a Fetch's MaxWaitMs, a JoinGroup's RebalanceTimeoutMs). max_buffer: out-of-order
    bytes held per direction. immediate: hand each packet over as it comes (default: unless
    the interface's MTU is above 16 KiB, as loopback's). ring: a PcapRing keeping the raw
    packets. Other keywords are Options fields, as for `dissect`.
    """
    opts = Options(ports=ports, **options)
    if read is not None:
        capture = StreamCapture(read)
    else:
        if not interface:
            raise ValueError("sniff needs an interface, or read= for a pcap stream")
        capture = TcpdumpCapture(interface, port_filter(ports, bpf), buffer_kib, snaplen, immediate)
    return LiveRun(
        capture,
        opts,
        duration=duration,
        idle=idle,
        unanswered=unanswered,
        max_buffer=max_buffer,
        ring=ring,
    )
