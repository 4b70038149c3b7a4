"""On the driver: the facts of every range of a capture checked against each other, and the
ranges joined into one dissection.

Ranges are checked in file order. The first range starts at the capture's start, so what it
says of the connections at its end is the truth. A later range's view of a connection where
its own packets start (what its read-back left) must equal that truth, for every connection
with a packet in its range: then the range's run from there on is the single process's run,
packet for packet, and what it says at its end is the truth in turn. A connection with no
packet in a range keeps its state across it. A range whose view differs, or whose answers to
capture-wide look-ups (a Kafka endpoint, a group's protocol type) differ from what the ranges
before the moment of asking learned, is redone: with a longer read-back, or with those facts
(`seeds`). The rare part of a state (a SYN's sequence number, the SASL mechanism, a gap in the
broker's bytes) is checked only where the range consulted it; elsewhere it is carried over.
So is what a connection's end looks back on, where a range ends one: whether each side was
framed in step from its start.

Joined from the checked facts: stream numbers (connections in the order they were opened),
the accounting of connections that cross ranges, topic names learned anywhere, and which range
ends each connection still open at the capture's end (the last one with a packet of it).
"""

from dataclasses import dataclass, field

from .crossing import END, settle
from .ranges import COUNTERS, LOST, SYN, Settled, clean

CLOSING = ("fin", "rst")  # ends after which a 4-tuple's late packets are absorbed


@dataclass
class Truth:
    """A connection open at a range boundary, as the ranges before it established."""

    state: tuple
    rare: tuple
    how: str | None
    first_frame: int  # the connection's first packet in the capture
    rows: dict  # its streams counters so far, by sending endpoint (ranges.delta)
    task: int  # the last range with a packet of it
    last_frame: int  # its last packet so far
    stream: int = -1


@dataclass
class Outcome:
    """What checking a capture's ranges found: `redo` {task index: [(why, the range the
    truth came from, a connection's key, its last packet before the range)]}, and, when
    empty, the settled facts of every range and the capture's packet count."""

    redo: dict
    settled: dict
    seeds: dict
    packets: int = 0
    again: set = field(default_factory=set)  # ranges run more than once (split_tasks)


def check(facts, taint=True):
    """facts: the `facts` of one capture's ranges, in file order. Returns an Outcome.
    taint: a range whose view equals a truth that came from a range to be redone is redone
    too (else it is checked again once that range is, a round later)."""
    truth, closed, redo = {}, {}, {}
    settled = {f["index"]: Settled() for f in facts}
    count = 0
    seeds, asked_wrong = _lookups(facts)
    for f in facts:
        i = f["index"]
        flagged = f["flagged"]
        wrong = _disagreement(f, truth, closed, flagged, redo if taint else ())
        wrong += _ends_disagree(f, truth)
        if i in asked_wrong:
            wrong.append((asked_wrong[i], None, None, None))
        if wrong:
            redo[i] = wrong
        s = settled[i]
        s.offset = count
        for key, _view, _closed in f["checked"]:
            t = truth.get(key)
            if t is not None:
                s.streams[key], s.first_frames[key] = t.stream, t.first_frame
                s.how[key], s.carried[key] = t.how, t.rows
        opened_numbers = {fr: count + n for n, (_at, fr, _key) in enumerate(f["opened"])}
        count += len(f["opened"])
        for key, frame in f["closes"]:
            closed[key] = frame
        for c in f["crossing"]:
            _carry(c, i, truth, closed, opened_numbers)
    for key, t in truth.items():  # open at the capture's end: the last range ends it
        settled[t.task].flush[key] = t.first_frame
    for f in facts:
        wrong = _flush_disagrees(f, settled[f["index"]].flush, truth)
        if wrong:
            redo.setdefault(f["index"], []).append((wrong, None, None, None))
    learned = [entry for f in facts for entry in f["topics"]]
    for f in facts:  # what ending a connection for the capture's end teaches, where it ends
        for key, first in settled[f["index"]].flush.items():
            moments = f["flushed_topics"].get(key, ())
            learned += [(t, (END, first, count), name) for t, count, name in moments]
    topics = settle(learned)
    for s in settled.values():
        s.topics = topics
    packets = facts[-1]["last_frame"] if facts else 0
    return Outcome(redo, settled, seeds, packets)


def _disagreement(f, truth, closed, flagged, redone):
    """How this range's view of its connections differs from the truth: a list of (why, the
    range the truth came from, the connection's key, its last packet before the range). A
    truth that came from a range to be redone is none: a view equal to it likely made the
    same mistake, and is redone with it (rather than found wrong a round later)."""
    out = []
    for key, view, view_closed in f["checked"]:
        t = truth.get(key)
        if t is not None:
            if t.task in redone:
                why = "its state came from a range being redone"
            elif view is None:
                why = "open, but the read-back saw no packet of it"
            elif view[0] != t.state:
                why = "the read-back left it in another state"
            elif any(view[1][p] != t.rare[p] for p in _consulted(flagged.get(key), view, t)):
                why = "the read-back missed what its range consults"
            else:
                continue
            out.append((f"{_text(key)}: {why}", t.task, key, t.last_frame))
        elif view is not None:
            why = "ended before the range, open in the read-back"
            out.append((f"{_text(key)}: {why}", None, None, None))
        elif key in closed and not view_closed:
            why = "closed before the range, unknown to the read-back"
            out.append((f"{_text(key)}: {why}", None, None, None))
    return out


def _ends_disagree(f, truth):
    """A connection's end decides a frame its sender left open by whether that side was
    framed in step from its start (no gap, nothing skipped): cut short by its sender, or
    truncated. A read-back's view may say otherwise than the truth (its own start skipped
    bytes, or it missed a skip long before). Where the range's end of a connection it carried
    in shows such a frame (bytes skipped, or a malformed frame, in the range), the two must
    agree."""
    out = []
    for c in f["crossing"]:
        key = c["key"]
        t = truth.get(key)
        if c["live"] or not c["carried"] or t is None or t.rows is None:
            continue
        for by, view_clean in c["clean"].items():
            d, was = c["delta"].get(by), t.rows.get(by)
            if d is None or was is None or not (d["bytes_skipped"] or d["malformed_frames"]):
                continue
            if view_clean != clean(was):
                why = "its end hangs on whether bytes were skipped before the range"
                out.append((f"{_text(key)}: {why}", t.task, key, t.last_frame))
                break
    return out


def _consulted(parts, view, truth):
    """The parts of a connection's rare state its packets in a range consulted: those the
    range flagged, and a new SYN waiting for the peer's answer, in the view or the truth,
    which every packet of the connection looks at."""
    parts = set(parts or ())
    if any(side[2] is not None for rare in (view[1], truth.rare) for side in rare[SYN]):
        parts.add(SYN)
    return parts


def _carry(c, task, truth, closed, opened_numbers):
    """The truth after a range, for one connection crossing its ends."""
    key = c["key"]
    before = truth.pop(key, None) if c["carried"] else None
    if before is None:
        closed.pop(key, None)
        first, rows, how, rare = c["first_frame"], None, c["how"], None
        stream = opened_numbers.get(c["first_frame"], -1)
    else:
        first, rows, how, rare, stream = (
            before.first_frame,
            before.rows,
            before.how,
            before.rare,
            before.stream,
        )
    if not c["live"]:
        reason, frame = c["end"]
        if reason in CLOSING:
            closed[key] = frame
        return
    rows = _add(rows, c["delta"])
    if c["how_known"]:
        how = c["how"]
    state, end_rare, _how, _kafka = c["after"]
    if rare is None or c["rare_before"] is None:
        rare = end_rare
    else:  # what the range changed is the range's; the rest stays as it was
        rare = tuple(
            e if e != b else t for t, b, e in zip(rare, c["rare_before"], end_rare, strict=True)
        )
    truth[key] = Truth(state, rare, how, first, rows, task, c["last_frame"], stream)


def _flush_disagrees(f, flush, truth):
    """A range that ends connections for the capture's end must hold their rare state."""
    if not flush:
        return None
    ends = {c["key"]: c for c in f["crossing"] if c["live"]}
    for key in flush:
        c = ends.get(key)
        if c is not None and c["after"][1][LOST] != truth[key].rare[LOST]:
            return f"{_text(key)}: ended by the capture's end, its rare state unknown here"
    return None


def _lookups(facts):
    """Seeds of capture-wide facts (what each range learned, with moments), and the ranges
    whose answers to look-ups differ from them: {task index: reason}."""
    seeds = {"endpoints": {}, "groups": {}}
    for f in facts:
        for name in ("endpoints", "groups"):
            for key, moment, value in f[name][0]:
                seeds[name].setdefault(key, []).append((moment, value))
    for table in seeds.values():
        for values in table.values():
            values.sort()
    wrong = {}
    for f in facts:
        for name, latest in (("endpoints", False), ("groups", True)):
            for key, moment, answer in f[name][1]:
                known = [v for m, v in seeds[name].get(key, ()) if m < moment]
                truth = (known[-1] if latest else known[0]) if known else None
                if truth != answer:
                    wrong.setdefault(f["index"], f"{name[:-1]} {key}: answered {answer!r}")
    return seeds, wrong


def _add(rows, delta):
    """Counters by sending endpoint (ranges.delta), summed."""
    if rows is None:
        return {e: dict(d) for e, d in delta.items()}
    return {e: {k: rows[e][k] + d[k] for k in COUNTERS} for e, d in delta.items()}


def _text(key):
    (a, pa), (b, pb) = key
    return f"{a}:{pa} <-> {b}:{pb}"
