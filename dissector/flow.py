"""The sans-I/O core: packets in, exchanges out. Files, live capture and Spark all drive it."""

from typing import NamedTuple

from .events import ConnectionEnded
from .net.decode import NetDecoder
from .options import Options
from .session.conversation import Conversation
from .session.directory import Directory
from .session.timeouts import DEFAULT_ALLOWANCE_NS
from .tcp import StreamData, StreamEnd, StreamGap
from .tcp.connection import endpoints_key
from .tcp.tracker import DEFAULT_MAX_BUFFER, TcpTracker
from .tls import DECRYPTED, KeyLog


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

    The contract with drivers: `feed`, `finish` and `expire` return the exchanges they
    complete; `ended()` the ConnectionEnded events since its last call; `stats()` the
    counters; `waiting()` the oldest requests in flight; `snapshot()` and `open_connections()`
    the open connections. Drivers use these, not the sub-objects (`net`, `tcp`, ...).

    With broker ports in the options, only connections to them are dissected, and they are
    taken as Kafka without further checks. Without, every TCP connection is examined and kept
    if its first request decodes as Kafka (0.8+) or has the shape of a 0.7 request.

    `directory`: the capture-wide facts the sessions learn and consult (a new Directory by
    default). `on_open`: called with each TCP connection as it opens (see TcpTracker).
    `max_buffer`: bytes of out-of-order data a direction holds before it declares the hole
    a gap (TcpTracker's default if None).
    """

    def __init__(self, options=None, directory=None, on_open=None, max_buffer=None, **kw):
        self.options = options or Options(**kw)
        self.ports = self.options.ports
        self.net = NetDecoder(in_place=True)
        if max_buffer is None:
            max_buffer = DEFAULT_MAX_BUFFER
        self.tcp = TcpTracker(
            broker_ports=self.ports,
            on_open=on_open,
            max_buffer=max_buffer,
            max_connections=self.options.max_connections,
        )
        self.directory = Directory() if directory is None else directory
        if self.options.tls_keylog is not None:
            self.directory.tls_keys = KeyLog(self.options.tls_keylog)
        if self.options.tls_secrets:
            self.directory.tls_keys.add(self.options.tls_secrets)
        self.records = self.options.record_decoder()
        self.conversations = {}  # connection id -> Conversation
        self.packets = 0
        self.cut_packets = 0  # TCP segments whose payload the snap length cut
        self._ended = []  # ConnectionEnded events not yet taken by ended()
        self._sums = dict.fromkeys(ENDED_SUMS, 0)  # of the connections ended so far
        self._not_kafka = {}  # broker port -> ended connections not taken as Kafka
        self._tls = {}  # TLS status -> ended connections that opened TLS

    @property
    def connections(self):
        """TCP connections that carried payload, ended or not."""
        return self._sums["connections"] + len(self.conversations)

    @property
    def kafka_connections(self):
        return self._sums["kafka_connections"] + sum(c.kafka for c in self.conversations.values())

    def ended(self):
        """The ConnectionEnded events since the last call, in the order the connections
        ended; they are forgotten once returned."""
        out = self._ended
        self._ended = []
        return out

    def stats(self):
        """The counters of the dissection so far: packets, cut_packets (TCP segments whose
        payload the snap length cut), connections (that carried payload, ended or open),
        kafka_connections, open_connections, the ROW_SUMS (bytes_seen, bytes_missing,
        bytes_skipped, bytes_abandoned, gaps, and the EVASIONS a receiver would have decided
        otherwise) and
        midstream (connections whose client side was not found from the SYN) over ended and
        open connections, tls (TLS status -> connections that opened TLS), evicted
        (connections ended to stay within Options.max_connections, the longest idle first),
        not_kafka_ports (broker port -> ended connections not taken as Kafka, TLS ones not
        decrypted apart), unsupported (link type -> [packets, first frame] of those the
        decoder skipped), requests_waiting (requests awaiting their response)."""
        sums = self._sums
        out = {
            "packets": self.packets,
            "cut_packets": self.cut_packets,
            "connections": sums["connections"] + len(self.conversations),
            "kafka_connections": sums["kafka_connections"],
            "open_connections": len(self.conversations),
            "evicted": self.tcp.evicted,
        }
        for key in ROW_SUMS:
            out[key] = sums[key]
        midstream = sums["midstream"]
        tls = dict(self._tls)
        for conv in list(self.conversations.values()):
            conn = conv.conn
            out["kafka_connections"] += conv.kafka
            out["bytes_seen"] += sum(conn.bytes_seen)
            out["bytes_missing"] += sum(conn.bytes_gap)
            out["bytes_skipped"] += sum(f.bytes_skipped for f in conv.framers)
            out["bytes_abandoned"] += sum(conv.abandoned)
            out["gaps"] += sum(conv.gaps)
            for key in EVASIONS:
                out[key] += sum(getattr(conn, key))
            midstream += conn.how != "syn"
            if conv.tls is not None:
                tls[conv.tls.status] = tls.get(conv.tls.status, 0) + 1
        out["midstream"] = midstream
        out["not_kafka_ports"] = dict(self._not_kafka)
        out["tls"] = tls
        out["unsupported"] = {lt: list(v) for lt, v in self.net.unsupported.items()}
        out["requests_waiting"] = sum(len(q) for _, q in self._pending())
        return out

    def waiting(self, limit=5):
        """The oldest requests still waiting for their response: [(request, connection)]."""
        found = [(queue[0], conn) for conn, queue in self._pending() if queue]
        found.sort(key=lambda rc: rc[0].frame.first_ts)
        return found[:limit]

    def _pending(self):
        """(connection, requests waiting in one of its queues, oldest first)."""
        out = []
        for conv in list(self.conversations.values()):
            if conv.session is not None:
                out += [(conv.conn, queue) for queue in conv.session.queues()]
        return out

    def open_connections(self):
        """[(id, key)] of the open connections, in id order (`key` as in snapshot)."""
        return [(conn.id, connection_key(conn)) for conn in self.tcp.live]

    def add_tls_secrets(self, text):
        """Key log lines (as a pcapng Decryption Secrets Block holds them): the secrets of TLS
        sessions, for connections whose encrypted records come after."""
        self.directory.tls_keys.add(text)

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
                    self._connection_ended(conv)
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

    def _connection_ended(self, conv):
        """Once a connection: its event queued, its figures added to the running sums."""
        rows = conv.streams()
        kafka = conv.kafka
        self._ended.append(ConnectionEnded(conv.conn.id, rows, kafka))
        sums = self._sums
        sums["connections"] += 1
        sums["kafka_connections"] += kafka
        sums["midstream"] += conv.conn.how != "syn"
        for row in rows:
            for key in ROW_SUMS:
                sums[key] += row[key]
        tls = rows[0]["tls"]
        if tls is not None:
            self._tls[tls] = self._tls.get(tls, 0) + 1
        if not kafka and tls in (None, DECRYPTED):  # else TLS kept it from being seen
            port = rows[0]["broker"].rsplit(":", 1)[1]
            self._not_kafka[port] = self._not_kafka.get(port, 0) + 1


# Running sums of Dissector.stats, kept as connections end: accounting-row columns, and more.
# EVASIONS: what a receiving TCP stack would have decided otherwise (summary.evasion_notes).
EVASIONS = ("bytes_conflicting", "rsts_ignored", "syns_ignored")
ROW_SUMS = ("bytes_seen", "bytes_missing", "bytes_skipped", "bytes_abandoned", "gaps", *EVASIONS)
ENDED_SUMS = ("connections", "kafka_connections", "midstream", *ROW_SUMS)


def connection_key(conn):
    """A connection's endpoints in sorted order: the same whichever side spoke first."""
    return endpoints_key(*conn.endpoints)
