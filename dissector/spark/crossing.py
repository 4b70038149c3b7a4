"""Topic ids, settled across ranges: a request or response naming a topic by id shows the
topic's name when a Metadata or CreateTopics response naming it completed EARLIER in the
capture, on any connection. A `facts` run records each id its own range learns with the
moment of the learning, and takes a moment for every lookup; once all are known, the driver
settles the earliest learning of each id, and the `rows` run answers each lookup with the
name learned before its moment, else the id.

A moment is (frame being fed, 0, count within it) while packets are fed, and (END, the
connection's first frame, count) while the capture's end ends connections, in stream order.
Two tasks feeding the same packet in the same state count alike, and moments of different
connections never tie (two connections never share a packet).
"""

from ..session.directory import NO_TOPIC_ID

END = 1 << 62  # the frame of moments during the end-of-capture flush


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


class TopicNames:
    """The id -> name map the core consults: records every name it is taught with the moment;
    answers a lookup with the name `settled` (id -> (moment, name), what the driver settled
    for a `rows` run) learned before the lookup's moment, else with the id (`named` then
    drops the ids from the exchange's `topic_names`, as one process never puts them there)."""

    def __init__(self, clock, settled=None):
        self.clock = clock
        self.settled = settled or {}
        self.learned = {}  # id -> (moment, name), the earliest

    def __setitem__(self, topic_id, name):
        if topic_id not in self.learned:
            self.learned[topic_id] = (self.clock.now(), name)

    def __contains__(self, topic_id):
        return topic_id != NO_TOPIC_ID

    def __getitem__(self, topic_id):
        # Every lookup takes a moment, in a `facts` run too: moments count alike in both.
        moment = self.clock.now()
        known = self.settled.get(topic_id)
        return known[1] if known is not None and known[0] < moment else topic_id

    def get(self, topic_id, default=None):
        return default if topic_id == NO_TOPIC_ID else self[topic_id]


def named(exchange):
    """An exchange of a `rows` run as one process gives it: `topic_names` without the ids
    that were answered as themselves."""
    names = exchange.topic_names
    if names:
        exchange.topic_names = {k: v for k, v in names.items() if v != k}
