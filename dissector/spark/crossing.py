"""What crosses connections, kept apart while each task dissects its own connections, and
settled once every task is done.

Two things in a whole-file dissection depend on other connections:

- stream numbers: connections are numbered in order of first appearance in the whole file.
  A task numbers its connections by the frame of their first packet, which is unique in a
  file; `renumber` turns those frames into ranks once all are known.
- Kafka endpoints: a connection whose first request looks odd is still Kafka when an
  earlier connection proved its broker endpoint to speak Kafka. A group dissected without
  knowing what other groups proved is dissected again, knowing it, when one of its lookups
  came after another group's proof (`stale_groups`); rarely needed, repeated until stable.
- topic ids: a request or response naming a topic by id shows the topic's name when a
  Metadata or CreateTopics response naming it completed EARLIER in the capture, on any
  connection. A task records, for each id it looks up, the moment of the lookup; and for each
  id it learns, the moment of the learning. The moment is (frame being fed, 0, sequence) while
  packets are fed and (END, first frame of the connection, sequence) while the capture's end
  flushes connections, as the core flushes them in stream order. Moments of different
  connections never tie (two connections never share a packet); those of one connection are
  ordered by the sequence. `settle_topics` then resolves each lookup against the earliest
  learning of its id.
"""

from ..session.directory import NO_TOPIC_ID, Directory

END = 1 << 62  # the frame of moments during the end-of-capture flush
MARK = "\x00topic\x00"  # prefix of a lookup not settled yet: MARK id \0 frame \0 sub \0 seq


class Clock:
    """The current moment of a task's dissection."""

    def __init__(self):
        self.frame = 0
        self.sub = 0
        self.seq = 0

    def now(self):
        self.seq += 1
        return (self.frame, self.sub, self.seq)


class PendingNames:
    """The id -> name map the core consults, answering every lookup with a mark to settle
    later, and recording every name it is taught with the moment."""

    def __init__(self, clock):
        self.clock = clock
        self.learned = {}  # id -> (moment, name), the earliest

    def __setitem__(self, topic_id, name):
        if topic_id not in self.learned:
            self.learned[topic_id] = (self.clock.now(), name)

    def __contains__(self, topic_id):
        return topic_id != NO_TOPIC_ID

    def __getitem__(self, topic_id):
        frame, sub, seq = self.clock.now()
        return f"{MARK}{topic_id}\x00{frame}\x00{sub}\x00{seq}"

    def get(self, topic_id, default=None):
        return default if topic_id == NO_TOPIC_ID else self[topic_id]


class KafkaEndpoints:
    """The set of broker endpoints proven to speak Kafka, as the core consults it: proven
    here, or by other groups (`seeds`, from an earlier round) before the moment of asking.
    Lookups answered no are kept: if another group proved the endpoint earlier, this group
    is dissected again with that knowledge."""

    def __init__(self, clock, seeds):
        self.clock = clock
        self.seeds = seeds  # endpoint -> moment
        self.proven = {}  # endpoint -> moment, the first time here
        self.missed = []  # (endpoint, moment) of lookups answered no

    def add(self, endpoint):
        if endpoint not in self.proven:
            self.proven[endpoint] = self.clock.now()

    def __contains__(self, endpoint):
        moment = self.clock.now()
        if endpoint in self.proven:
            return True
        seeded = self.seeds.get(endpoint)
        if seeded is not None and seeded < moment:
            return True
        self.missed.append((endpoint, moment))
        return False


class TaskDirectory(Directory):
    def __init__(self, clock, seeds):
        super().__init__()
        self.topic_names = PendingNames(clock)
        self.kafka_endpoints = KafkaEndpoints(clock, seeds)


def _parse(mark):
    topic_id, frame, sub, seq = mark[len(MARK) :].split("\x00")
    return topic_id, (int(frame), int(sub), int(seq))


def settle(value, learned):
    """A topic entry: a settled mark becomes the name, or the id when not known by then."""
    if not (isinstance(value, str) and value.startswith(MARK)):
        return value
    topic_id, moment = _parse(value)
    known = learned.get(topic_id)
    return known[1] if known is not None and known[0] < moment else topic_id


def settle_topics(exchange, learned):
    """Resolve the marks of one exchange in place: `topics` and `topic_names`."""
    if exchange.topics and any(isinstance(t, str) and t.startswith(MARK) for t in exchange.topics):
        exchange.topics = sorted({settle(t, learned) for t in exchange.topics})
    if exchange.topic_names:
        names = {}
        for topic_id, mark in exchange.topic_names.items():
            name = settle(mark, learned)
            if name != topic_id:
                names[topic_id] = name
        exchange.topic_names = names


def stale_groups(proven, missed):
    """Groups to dissect again: those that asked for an endpoint another group had proven
    before. proven: capture -> {endpoint: moment}; missed: [(capture, key, endpoint, moment)]."""
    return sorted(
        {
            (capture, key)
            for capture, key, ep, moment in missed
            if ep in proven.get(capture, {}) and proven[capture][ep] < moment
        }
    )


def renumber(first_frames):
    """First frames of every connection of a capture -> stream numbers."""
    return {frame: n for n, frame in enumerate(sorted(first_frames))}
