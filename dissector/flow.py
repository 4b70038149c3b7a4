"""The sans-I/O core: packets in, exchanges out. Files, live capture and Spark all drive it."""

from typing import NamedTuple

from .net.decode import NetDecoder
from .options import Options
from .session.conversation import Conversation
from .session.directory import Directory
from .session.timeouts import DEFAULT_ALLOWANCE_NS
from .tcp import StreamData, StreamEnd, StreamGap
from .tcp.tracker import TcpTracker


class Snapshot(NamedTuple):
    """One open connection as it stands (Dissector.snapshot)."""

    id: int  # the dissection's own connection number
    state: tuple  # what decides how it goes on (Conversation.state)
    rare: tuple  # what matters only now and then: SYNs, the SASL mechanism, a gap
    syns: int  # SYN segments seen
    how: str | None  # how its client side was found: "syn", "port", "traffic"
    kafka: bool
    accounting: list  # its two streams rows as they stand


class Dissector:
    """Feed packets in capture order; collect the exchanges each call returns.

    With broker ports in the options, only connections to them are dissected, and they are
    taken as Kafka without further checks. Without, every TCP connection is examined and kept
    if its first request decodes as Kafka (0.8+) or has the shape of a 0.7 request.

    `directory`: the capture-wide facts the sessions learn and consult (a new Directory by
    default). `on_open`: called with each TCP connection as it opens (see TcpTracker).
    """

    def __init__(self, options=None, directory=None, on_open=None, **kw):
        self.options = options or Options(**kw)
        self.ports = self.options.ports
        self.net = NetDecoder(in_place=True)
        self.tcp = TcpTracker(broker_ports=self.ports, on_open=on_open)
        self.directory = Directory() if directory is None else directory
        self.records = self.options.record_decoder()
        self.conversations = {}  # connection id -> Conversation
        self.streams = []  # accounting rows of ended connections, two per connection
        self.packets = 0
        self.cut_packets = 0  # TCP segments whose payload the snap length cut

    @property
    def connections(self):
        """TCP connections that carried payload, ended or not."""
        return len(self.streams) // 2 + len(self.conversations)

    @property
    def kafka_connections(self):
        ended = sum(row["kafka"] for row in self.streams) // 2
        return ended + sum(c.kafka for c in self.conversations.values())

    def feed(self, packet):
        self.packets += 1
        seg = self.net.decode(packet)
        if seg is None:
            return []
        if self.ports and seg.sport not in self.ports and seg.dport not in self.ports:
            return []
        if seg.missing:
            self.cut_packets += 1  # its payload was cut by the snap length
        return self._events(self.tcp.feed(seg))

    def finish(self, only=None):
        """End of capture: flush every connection; unanswered requests come out here. `only`:
        the ids of the connections to end, one by one in id order, each with its own events
        (a driver that numbers or times them apart); the others stay open."""
        if only is None:
            return self._events(self.tcp.finish())
        out = []
        for conn_id in sorted(only):
            out += self._events(self.tcp.finish({conn_id}))
        return out

    def snapshot(self):
        """The open connections as plain values, for a driver that runs several dissections
        of one capture from different packets and checks that they agree where they meet:
        {key: Snapshot}, `key` the connection's endpoints sorted (see Snapshot)."""
        out = {}
        for conn in self.tcp.live:
            conv = self.conversations.get(conn.id)
            if conv is None:  # no payload yet: a conversation of nothing
                conv = Conversation(conn, self.options, self.directory, self.records)
            plain, rare = conv.state()
            out[connection_key(conn)] = Snapshot(
                conn.id, plain, rare, conn.syns, conn.how, conv.kafka, conv.streams()
            )
        return out

    def closed(self):
        """Keys (see snapshot) of the connections ended by FIN or RST that are remembered."""
        return self.tcp.closed()

    def expire(self, now, idle_ns=600 * 10**9, allowance_ns=DEFAULT_ALLOWANCE_NS):
        """Bounded state for endless input: requests past their deadline (see
        session/timeouts.py) come out `unanswered`, connections with no packet for `idle_ns`
        end ("idle"). `now` is capture time, in nanoseconds."""
        out = []
        for conv in self.conversations.values():
            if conv.session is not None and not conv.conn.ignored:
                out += conv.session.expire(now, allowance_ns)
        return out + self._events(self.tcp.expire(now - idle_ns))

    def events(self, events):
        """The exchanges that stream events of `tcp` complete: what feed and finish do after
        TCP, for a driver that runs the tracker itself (to flush connection by connection)."""
        return self._events(events)

    def _events(self, events):
        out = []
        for ev in events:
            conn = ev.conn
            conv = self.conversations.get(conn.id)
            kind = ev.__class__
            if kind is StreamEnd:
                if conv is not None:
                    del self.conversations[conn.id]
                    out += conv.end()
                    self.streams += conv.streams()
                continue
            if conn.ignored:
                continue
            if conv is None:
                conv = Conversation(conn, self.options, self.directory, self.records)
                self.conversations[conn.id] = conv
            if kind is StreamData:
                out += conv.data(ev.side, ev.data, ev.frame, ev.ts, ev.start)
            elif kind is StreamGap:
                out += conv.gap(ev.side, ev.size, ev.frame, ev.ts, ev.cut)
        return out


def connection_key(conn):
    """A connection's endpoints in sorted order: the same whichever side spoke first."""
    a, b = conn.endpoints
    return (a, b) if a <= b else (b, a)
