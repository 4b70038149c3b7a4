"""Topic ids, settled across ranges: a request or response naming a topic by id shows the
name the latest Metadata or CreateTopics response naming it gave, among those that completed
EARLIER in the capture, on any connection (as one process's Directory, which overwrites). A
`facts` run records each change of an id's name its own range learns, with the moment of the
learning, and, apart, what ending each connection open at its end teaches (a response held
behind a hole completes then), which counts for the range that ends it for the capture's
end; it takes a moment for every lookup. Once all are known, the driver settles each id's
names in moment order (`settle`), and the `rows` run answers each lookup with the name
learned last before its moment, else the id.

A moment is (frame being fed, 0, count within it) while packets are fed, and (END, the
connection's first frame, count) while the capture's end ends connections, in stream order.
Two tasks feeding the same packet in the same state count alike, and moments of different
connections never tie (two connections never share a packet).
"""

from bisect import bisect_left

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
    """The id -> name map the core consults: records each change of an id's name it is taught,
    with the moment; answers a lookup with the name `settled` (see `settle`: what the driver
    settled for a `rows` run) learned last before the lookup's moment, else with the id
    (`named` then drops the ids from the exchange's `topic_names`, as one process never puts
    them there). `guess` (a string no capture can foresee): answers with the name this task
    learned last instead, an id it never learned with the id and `guess` after it (a name
    the driver gives it once settled), and records every answer as runs, for the driver to
    check and map (see `renames`)."""

    def __init__(self, clock, settled=None, guess=None):
        self.clock = clock
        self.settled = settled or {}
        self.guess = guess
        self.learned = []  # (id, moment, name): each change of an id's name, in order
        self._last = {}  # id -> the name it was last taught (since `forget`)
        self._known = {}  # id -> the name it was last taught, read-back included (guess)
        self.runs = {} if guess else None  # id -> [[first moment, last moment, answer]]

    def forget(self):
        """Record afresh from here (the task's own range starts)."""
        self.learned, self._last = [], {}

    def __setitem__(self, topic_id, name):
        moment = self.clock.now()
        self._known[topic_id] = name
        if self._last.get(topic_id) != name:
            self._last[topic_id] = name
            self.learned.append((topic_id, moment, name))

    def __contains__(self, topic_id):
        return topic_id != NO_TOPIC_ID

    def __getitem__(self, topic_id):
        # Every lookup takes a moment, in a `facts` run too: moments count alike in both.
        moment = self.clock.now()
        if self.guess:
            answer = self._known.get(topic_id)
            if answer is None:
                answer = topic_id + self.guess
            if self.runs is not None:
                runs = self.runs.setdefault(topic_id, [])
                if runs and runs[-1][2] == answer:
                    runs[-1][1] = moment
                else:
                    runs.append([moment, moment, answer])
            return answer
        known = self.settled.get(topic_id)
        if known is None:
            return topic_id
        before = bisect_left(known[0], moment)  # moments never tie
        return known[1][before - 1] if before else topic_id

    def get(self, topic_id, default=None):
        return default if topic_id == NO_TOPIC_ID else self[topic_id]


def settle(learned):
    """{id: ([moment], [name])}, in moment order, a name kept where it changes, from the
    (id, moment, name) every range learned."""
    out = {}
    for topic_id, moment, name in sorted(learned):
        moments, names = out.setdefault(topic_id, ([], []))
        if not names or names[-1] != name:
            moments.append(moment)
            names.append(name)
    return out


def renames(runs, settled, guess):
    """{answer given: the settled answer} of a guessing task's runs ({id: [[first, last,
    answer]]}), where they differ: an id answered with `guess` after it, whose settled name
    stays the same over each run; None where an answer cannot be mapped (a name learned
    otherwise than settled, a name that changes within a run)."""
    out = {}
    for topic_id, id_runs in runs.items():
        moments, names = settled.get(topic_id, ((), ()))
        for first, last, answer in id_runs:
            at = bisect_left(moments, first)
            if bisect_left(moments, last) != at:
                return None
            truth = names[at - 1] if at else topic_id
            if answer == truth:
                continue
            if answer != topic_id + guess or out.setdefault(answer, truth) != truth:
                return None
    return out


def named(exchange):
    """An exchange of a `rows` run as one process gives it: `topic_names` without the ids
    that were answered as themselves."""
    names = exchange.topic_names
    if names:
        exchange.topic_names = {k: v for k, v in names.items() if v != k}
