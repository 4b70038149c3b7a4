"""Topic ids, settled across ranges: a request or response naming a topic by id shows the
topic's name when a Metadata or CreateTopics response naming it completed EARLIER in the
capture, on any connection. A task answers every lookup of an id with a mark holding the
moment of the lookup, and records each id its own range learns with the moment of the
learning; once all are known, `settle_topics` resolves each mark against the earliest learning
of its id.

A moment is (frame being fed, 0, count within it) while packets are fed, and (END, the
connection's first frame, count) while the capture's end ends connections, in stream order.
Two tasks feeding the same packet in the same state count alike, and moments of different
connections never tie (two connections never share a packet).
"""

from ..session.directory import NO_TOPIC_ID

END = 1 << 62  # the frame of moments during the end-of-capture flush
MARK = "\x00topic\x00"  # prefix of a lookup not settled yet: MARK id \0 frame \0 sub \0 seq


class Clock:
    """The current moment of a task's dissection: the packet being fed (or, during the
    capture's end, END and the connection being ended) and a count within it, which two tasks
    feeding the same packet in the same state count alike."""

    def __init__(self):
        self.frame = 0
        self.sub = 0
        self.seq = 0

    def at(self, frame, sub=0):
        self.frame, self.sub, self.seq = frame, sub, 0

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
