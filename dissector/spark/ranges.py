"""One task's byte range of a capture, dissected by the core: the function Spark runs.

A task reads its range's packets after a read-back: the packets of the ranges just before
it, which the core reads like a capture joined mid-stream, re-finding each connection's frame
boundaries and the requests in flight. It then reads its own packets and keeps only what they
complete (exchanges, connection ends). No packet leaves the task.

It runs twice, the same way each time:

- `facts`: what the driver needs to check that the read-back was long enough and to join
  the ranges (see verify.py): each connection's state where the task's own range starts, as
  the read-back left it, and where it ends; the connections it opened; the facts other
  connections learn from (topic names, Kafka endpoints, group protocol types) and look up,
  with the moment of each (crossing.py); the accounting of connections that cross its ends.
- `rows`: the table itself, with the settled facts the driver hands it (`Settled`): stream
  numbers, topic names, the accounting carried in from earlier ranges, and the connections
  it ends for the capture's end because no later range has a packet of theirs.
"""

from dataclasses import dataclass, field

from .. import heap
from ..capture.ranges import Piece, range_packets
from ..flow import Dissector, connection_key
from ..net.decode import NetDecoder
from ..options import Options
from ..protocol.apikeys import SASL_AUTHENTICATE, SASL_HANDSHAKE
from ..session import exchange as ex
from ..session.directory import Directory
from ..source import TAKE_ENDED
from ..tables.schema import STREAM_COUNTERS
from ..tcp.connection import endpoints_key
from .crossing import END, Clock, TopicNames, named

SASL = (SASL_HANDSHAKE, SASL_AUTHENTICATE)
SYN, SASL_PART, LOST = range(3)  # the parts of a connection's rare state
# Streams-row columns that add up over ranges (the core's counters); the others describe the
# connection.
COUNTERS = tuple(name for name in STREAM_COUNTERS if name != "bytes_decoded")


def piece_of(chunks):
    """One Piece reading consecutive chunks (dicts of Piece fields, prefix in hex)."""
    first, last = chunks[0], chunks[-1]
    return Piece(first["path"], first["start"], last["stop"], first["frames"], _prefix(first))


def _prefix(chunk):
    prefix = chunk["prefix"]
    return bytes.fromhex(prefix) if isinstance(prefix, str) else prefix


# -- capture-wide facts, with their moments -----------------------------------------------------


class Lookups:
    """A capture-wide fact the core consults, answered from what this task learned or, when the
    driver knows better (`seeds`), from that; every lookup and learning made in the task's
    own range is recorded with its moment. `latest`: the newest learning before the moment
    counts (group types, overwritten); else the first (an endpoint proven Kafka)."""

    def __init__(self, clock, seeds=None, latest=False):
        self.clock = clock
        self.seeds = seeds  # key -> [(moment, value)], sorted; None: not seeded
        self.latest = latest
        self.mine = {}  # key -> [(moment, value)] learned by this task
        self.owned = False  # in the task's own range: record
        self.learned = []  # (key, moment, value)
        self.asked = []  # (key, moment, answer)

    def learn(self, key, value):
        moment = self.clock.now()
        self.mine.setdefault(key, []).append((moment, value))
        if self.owned:
            self.learned.append((key, moment, value))

    def answer(self, key):
        moment = self.clock.now()
        if self.seeds is not None:
            known = [v for m, v in self.seeds.get(key, ()) if m < moment]
        else:
            known = [v for _, v in self.mine.get(key, ())]
        value = (known[-1] if self.latest else known[0]) if known else None
        if self.owned:
            self.asked.append((key, moment, value))
        return value


class _Endpoints:
    """Kafka endpoints as the core consults them (a set)."""

    def __init__(self, lookups):
        self.lookups = lookups

    def add(self, endpoint):
        if endpoint not in self.lookups.mine:
            self.lookups.learn(endpoint, True)

    def __contains__(self, endpoint):
        return bool(self.lookups.answer(endpoint))


class _GroupTypes:
    """Group protocol types as the core consults them (a dict)."""

    def __init__(self, lookups):
        self.lookups = lookups

    def __setitem__(self, group, kind):
        self.lookups.learn(group, kind)

    def get(self, group, default=None):
        found = self.lookups.answer(group)
        return default if found is None else found


class RangeDirectory(Directory):
    """The Directory of a range: topic names answered as the driver settled them (crossing.py),
    Kafka endpoints and group types answered and recorded (verify.py checks the answers)."""

    def __init__(self, clock, seeds, topics=None, guess=None):
        super().__init__()
        self.topic_names = TopicNames(clock, topics, guess)
        self.endpoints = Lookups(clock, seeds.get("endpoints"))
        self.groups = Lookups(clock, seeds.get("groups"), latest=True)
        self.kafka_endpoints = _Endpoints(self.endpoints)
        self.group_types = _GroupTypes(self.groups)

    def own(self):
        """From now on, the task's own range: record what is learned and looked up."""
        self.endpoints.owned = self.groups.owned = True
        self.topic_names.forget()


# -- one run over a range ---------------------------------------------------------------------


@dataclass
class Settled:
    """What the driver settled for a task's `rows` run (all keys are connection keys)."""

    offset: int = 0  # connections opened in earlier ranges of the capture
    streams: dict = field(default_factory=dict)  # key -> stream number, carried in
    first_frames: dict = field(default_factory=dict)  # key -> its first frame, carried in
    how: dict = field(default_factory=dict)  # key -> how its client side was found
    carried: dict = field(default_factory=dict)  # key -> earlier ranges' counters by sender
    # key -> the first frame of a connection this task ends for the capture's end (not the
    # one carried in under the same key, which a reuse of its ports may end in this range)
    flush: dict = field(default_factory=dict)
    topics: dict = field(default_factory=dict)  # topic id -> its names by moment (settle)


class RangeRun:
    """The core over one task's read-back and range. Iterate for the exchanges (and, once
    ended, connection accounting rows) the range's own packets complete; then `facts()`."""

    def __init__(self, spec, options, seeds=None, settled=None, guess=None):
        self.spec = spec
        self.clock = Clock()
        # A `guess` run (guess.py): rows with provisional stream numbers and topic names;
        # `guess` is the text after an unknown topic id (none a capture can foresee).
        self.guess = guess
        topics = None if settled is None else settled.topics
        self.directory = RangeDirectory(self.clock, seeds or {}, topics, guess)
        self.opened = []  # every connection the run opened, read-back included
        # connection id -> the frame fed when it was opened (a packet opens one at most); later
        # than its first packet when a port's reuse is known only from the answer to its SYN
        self.opened_at = {}
        self.numbers = {}  # connection id -> stream number (a `rows` or `guess` run)
        self.view_keys = []  # a `guess` run: the keys of the view, its provisional numbers
        self.flushed = {}  # a `guess` run: provisional number -> what ending it made
        self.used = set()  # a `guess` run: the provisional numbers of its own exchanges
        self.core = Dissector(Options(**options), self.directory, on_open=self._opened)
        self.first = spec["first_frame"]  # the first frame of the task's own range
        self.settled = settled
        self.view = None  # Dissector.snapshot where the own range starts
        self.view_closed = set()
        self.end = None
        self.consulted = {}  # connection id -> parts of its rare state its exchanges used
        self.ended_rows = {}  # connection id -> streams rows, for those ended in the range
        self._carried = 0
        self.warnings = []
        self.first_of_linktype = {}
        self.unsupported_before = {}
        self.last_frame = spec["chunks"][0]["frames"]
        self.net = NetDecoder()  # to tell the packets of some connections apart
        self.fed = []  # a run for some connections alone: the frames of its own range fed

    def __iter__(self):
        spec = self.spec
        chunks, own, full = spec["chunks"], spec["own"], spec["full"]
        only = spec.get("only")  # a run for these connections alone: see `partial`
        core, clock = self.core, self.clock
        heap.keep_top()
        for a, b, keys in spec["filtered"]:  # further back, the packets of a few connections
            keys = keys if only is None else keys & only
            for packet in self._of(range_packets(piece_of(chunks[a:b])), keys):
                clock.at(packet.frame)
                core.feed(packet)
        if own > full:
            for packet in self._of(range_packets(piece_of(chunks[full:own])), only):
                clock.at(packet.frame)
                core.feed(packet)  # what the read-back completes was another range's
        self._own()
        ended, feed, at = core.ended, core.feed, clock.at
        packets = range_packets(piece_of(chunks[own:]), self.warnings, self.first_of_linktype)
        frame = self.last_frame
        for packet in self._of(packets, only, self.fed):
            frame = packet.frame
            at(frame)
            out = feed(packet)
            if out:  # most packets complete no exchange
                yield from self._kept(out)
            if not frame & (TAKE_ENDED - 1):
                self._ended(ended())
        self._ended(ended())
        self.last_frame = frame
        self.end = core.snapshot()
        if self.settled is not None and self.settled.flush:
            yield from self._flush()

    def _of(self, packets, keys, fed=None):
        """The packets of the connections `keys` (None: all, as they come), their frames
        added to `fed` if given."""
        return packets if keys is None else self._only(packets, keys, fed)

    def _only(self, packets, keys, fed):
        net = self.net
        for packet in packets:
            seg = net.decode(packet)
            if (
                seg is not None
                and endpoints_key((seg.src, seg.sport), (seg.dst, seg.dport)) in keys
            ):
                if fed is not None:
                    fed.append(packet.frame)
                yield packet

    def _opened(self, conn):
        self.opened.append(conn)
        self.opened_at[conn.id] = self.clock.frame
        if self.view is not None and (self.settled is not None or self.guess):
            # A `guess` run numbers the view's connections first, then those it opens.
            base = 0 if self.settled is None else self.settled.offset - self._carried
            self.numbers[conn.id] = base + len(self.numbers)

    def _own(self):
        self.view = self.core.snapshot()
        if self.settled is not None:
            streams = self.settled.streams
            self.numbers = {s.id: streams[k] for k, s in self.view.items() if k in streams}
            self._carried = len(self.numbers)
        elif self.guess:
            self.view_keys = list(self.view)
            self.numbers = {s.id: j for j, s in enumerate(self.view.values())}
        self.view_closed = self.core.closed()
        self.directory.own()
        self.unsupported_before = {k: v[0] for k, v in self.core.stats()["unsupported"].items()}
        self.core.ended()  # connections the read-back ended were another range's

    def _kept(self, out):
        """Exchanges of the range's own packets: noted for the facts; in a `rows` run, with
        their stream numbers and topic names settled and the moment each completed."""
        consulted = self.consulted
        for e in out:
            if e.status == ex.UNANSWERED:
                consulted.setdefault(e.stream, set()).add(LOST)
            if e.api_key in SASL:
                consulted.setdefault(e.stream, set()).add(SASL_PART)
        if self.settled is None:
            if self.guess:
                self.used.update(e.stream for e in self._numbered(out))
            return out
        now = self.clock.now
        for e in self._numbered(out):
            e.moment = now()
        return out

    def _numbered(self, out):
        for e in out:
            e.stream = self.numbers[e.stream]
            named(e)
        return out

    def _ended(self, events):
        for event in events:
            self.ended_rows.setdefault(event.id, []).extend(event.rows)

    def _flush(self):
        """End, as the capture's end does, the connections no later range has a packet of:
        one by one in stream order, each at its own moment."""
        ids = dict(self.core.open_connections())
        first = self.settled.flush
        order = sorted((i for i, k in ids.items() if k in first), key=lambda i: first[ids[i]])
        for conn_id in order:
            self.clock.at(END, first[ids[conn_id]])
            out = self.core.finish({conn_id})
            yield from self._kept(out)
            self._ended(self.core.ended())

    # -- what the driver checks and joins -----------------------------------------------------

    def touched(self):
        """Connections with a packet in the task's own range, ended or not, and those its
        packets ended (a SYN of the read-back that a packet here answered: the port reused)."""
        ended = self.ended_rows
        return [c for c in self.opened if c.last_frame >= self.first or c.id in ended]

    def flagged(self, touched):
        """Which parts of the rare state (Conversation.state) this range consulted, per
        connection key: SYN (a SYN came), SASL_PART (a SASL exchange), LOST (a request left
        unanswered, or the connection's end)."""
        ids = {c.id: connection_key(c) for c in self.opened}
        out = {}
        for i, parts in self.consulted.items():
            out.setdefault(ids[i], set()).update(parts)
        for i in self.ended_rows:
            out.setdefault(ids[i], set()).add(LOST)
        for c in touched:
            key = connection_key(c)
            before = self.view.get(key)
            if c.syns != (before.syns if before is not None and before.id == c.id else 0):
                out.setdefault(key, set()).add(SYN)
        return out

    def facts(self):
        """The facts of a `facts` run (see verify.py); the run's connections are ended after
        (`_flushed_topics`)."""
        view, end = self.view, self.end
        touched = self.touched()
        opened, crossing = [], []
        for c in touched:
            key = connection_key(c)
            carried = key in view and view[key].id == c.id
            if not carried:  # numbered in the order one process opens them
                opened.append((self.opened_at[c.id], c.first_frame, key))
            live = key in end and end[key].id == c.id
            if carried or live:
                crossing.append(self._crossing(c, key, carried, live))
        unsupported = {
            lt: [n - self.unsupported_before.get(lt, 0), frame]
            for lt, (n, frame) in self.core.stats()["unsupported"].items()
            if n > self.unsupported_before.get(lt, 0)
        }
        d = self.directory
        return {
            "index": self.spec["index"],
            "first_frame": self.first,
            "capture": self.spec["capture"],
            "opened": sorted(opened),
            "crossing": crossing,
            # Connections with a packet in the range, and those its read-back ended: a packet
            # of theirs here was taken for a late one of an ended connection (an RST the
            # read-back believed, which the run from the start found out of window).
            "checked": [
                (key, _state(view.get(key)), key in self.view_closed)
                for key in {connection_key(c) for c in touched} | self.view_closed
            ],
            "closes": [
                (connection_key(c), c.end_frame) for c in touched if c.end_reason in ("fin", "rst")
            ],
            "flagged": self.flagged(touched),
            "topics": d.topic_names.learned,
            "endpoints": (d.endpoints.learned, d.endpoints.asked),
            "groups": (d.groups.learned, d.groups.asked),
            "packets": self.last_frame - self.first + 1,
            "last_frame": self.last_frame,
            "warnings": self.warnings,
            "unsupported": {
                lt: [n, frame, self.first_of_linktype.get(lt, (frame, None))[1]]
                for lt, (n, frame) in unsupported.items()
            },
            "fed": self.fed,
            "flushed_topics": self._flushed_topics(),
        }

    def _flushed_topics(self):
        """{key: [(topic id, count, name)]}: what ending each connection open at the range's
        end, as the capture's end does (`_flush`), teaches of topic names (a Metadata response
        held behind a hole completes then), each learning counted within its connection's
        end. The driver keeps those of the range that does end it, with that connection's
        first frame (verify.py). Ends the run's connections: the last use of the run. A
        `guess` run keeps what each end made in `flushed`: its exchanges, accounting rows,
        and whether it learned or looked anything up (then its rows are not guessed)."""
        d, clock = self.directory, self.clock
        names, own, runs = d.topic_names, d.topic_names.learned, d.topic_names.runs
        d.endpoints.owned = d.groups.owned = False  # their facts are taken: leave them be
        names.runs = None  # what ends look up is not checked: see `flushed`
        out = {}
        for conn_id, key in self.core.open_connections():
            names.forget()
            clock.at(END)
            made = self.core.finish({conn_id})
            if names.learned:
                out[key] = [(t, m[2], n) for t, m, n in names.learned]
            if self.guess:
                ended = [row for event in self.core.ended() for row in event.rows]
                number = self.numbers.get(conn_id)
                if number is None:  # not open where the range starts, nor opened in it
                    number, made = -1 - len(self.flushed), []
                made = self._numbered(made)
                self.flushed[number] = (key, made, ended, clock.seq > 0 or number < 0)
        names.learned, names.runs = own, runs
        return out

    def _crossing(self, c, key, carried, live):
        """A connection that crosses an end of the range: where it stands at each end, and
        its accounting within the range."""
        before = self.view[key] if carried else None
        after = self.end[key] if live else None
        rows = after.accounting if live else self.ended_rows.get(c.id, [])
        return {
            "key": key,
            "first_frame": c.first_frame,
            "last_frame": c.last_frame,
            "carried": carried,
            "live": live,
            "end": None if live else (c.end_reason, c.end_frame),
            "after": None if after is None else (after.state, after.rare, after.how, after.kafka),
            "how": c.how,
            "rare_before": None if before is None else before.rare,
            "how_known": before is None or not before.kafka,
            "delta": delta(rows, before.accounting if before is not None else None),
            # by sender: framed in step so far (see verify._ends_disagree), where it began
            "clean": None if before is None else {sender(r): clean(r) for r in before.accounting},
        }


def partial(facts, part, keys):
    """The facts of a range with those of connections `keys` replaced by `part`, the facts of
    a run for them alone (spec["only"]), which fed the frames `part["fed"]` of its own
    range: what a range says of a connection, and what it learns and looks up, comes from
    that connection's packets only. None where the range's facts cannot be parted: a topic id
    learned there by one of them (a range records only changes of a name)."""
    mine = set(part["fed"])
    if any(moment[0] in mine for _, moment, _ in facts["topics"]):
        return None
    out = dict(facts)
    out["crossing"] = [c for c in facts["crossing"] if c["key"] not in keys] + part["crossing"]
    for name in ("checked", "closes"):
        out[name] = [c for c in facts[name] if c[0] not in keys] + part[name]
    flagged = {k: v for k, v in facts["flagged"].items() if k not in keys}
    out["flagged"] = {**flagged, **part["flagged"]}
    # What it says of those connections, opened in its read-back or its own range, is theirs.
    out["opened"] = sorted([o for o in facts["opened"] if o[2] not in keys] + part["opened"])
    out["topics"] = facts["topics"] + part["topics"]  # none of the first came from `mine`
    flushed = {k: v for k, v in facts["flushed_topics"].items() if k not in keys}
    out["flushed_topics"] = {**flushed, **part["flushed_topics"]}
    for name in ("endpoints", "groups"):
        out[name] = tuple(
            [e for e in old if e[1][0] not in mine] + new
            for old, new in zip(facts[name], part[name], strict=True)
        )
    out["fed"] = []
    return out


def _state(snap):
    return None if snap is None else (snap.state, snap.rare)


def sender(row):
    """The endpoint that sent a streams row's bytes. Counters are carried by it: a range
    that has not yet found which side is the client names the directions otherwise. (A
    connection from an endpoint to itself keeps its directions.)"""
    if row["client"] == row["broker"]:
        return row["client"], row["direction"]
    return row["client"] if row["direction"] == "request" else row["broker"]


def clean(row):
    """Whether a streams row's side was framed in step: no gap, no byte skipped."""
    return not (row["bytes_skipped"] or row["gaps"])


def delta(rows, before):
    """{sender: the counters of its streams row less those it had at `before` (None: all)}."""
    base = {} if before is None else {sender(row): row for row in before}
    out = {}
    for row in rows:
        by = sender(row)
        was = base.get(by)
        out[by] = {k: row[k] - (was[k] if was else 0) for k in COUNTERS}
    return out


def streams_rows(run, settled):
    """The accounting rows of the connections the range ended (for the capture's end too):
    a connection carried in adds its earlier ranges' counters, and keeps its first frame and
    how its client side was found from where it began."""
    keys = {c.id: connection_key(c) for c in run.opened}
    out = []
    for conn_id, rows in run.ended_rows.items():
        key = keys[conn_id]
        before = run.view.get(key)
        carried = before is not None and before.id == conn_id
        stream = run.numbers[conn_id]
        base = {sender(row): row for row in before.accounting} if carried else {}
        for row in rows:
            row = dict(row, stream=stream)
            if carried:
                was, earlier = base[sender(row)], settled.carried[key][sender(row)]
                for k in COUNTERS:
                    row[k] += earlier[k] - was[k]
                row["first_frame"] = settled.first_frames[key]
                if before.kafka:  # its client side was found before this range
                    row["client_side_from"] = settled.how[key]
            out.append(row)
    return out
