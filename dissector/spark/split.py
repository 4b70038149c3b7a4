"""Captures split into byte ranges: planning the tasks, checking their facts until every range
agrees with the one before it, and the settled tasks that build the tables.

A split capture is cut into chunks of `read_back` bytes (at most `split_bytes`), each found
and numbered as capture/ranges.py does; a task owns the chunks of one range of `split_bytes`,
and first reads back over the chunk before them, then, where that fell short, further over
the packets of the connections it missed. Spark or a plain loop runs the tasks
(`split_tasks` takes a function from task specs to their facts); nothing here knows which.

    tasks (facts) ──▶ check ──▶ redo those that disagree (longer read-back, or seeds) ──▶ …
                                   └─ all agree ─▶ tasks (rows), each with its Settled facts
"""

import pickle
from bisect import bisect_right

from .. import heap
from ..options import Options
from ..tables.summary import summarised
from .ranges import RangeRun, partial, streams_rows
from .verify import check

DEFAULT_READ_BACK = 32 << 20
MAX_ROUNDS = 12  # rounds of redone tasks, at most; a read-back doubles each round
LAST_RESORT = 6  # from this round on, a range that still disagrees reads from the start


class SplitCapture:
    """One capture's chunks and tasks: task i owns chunks [bounds[i], bounds[i + 1])."""

    def __init__(self, capture, chunks, bounds):
        self.capture = capture
        self.chunks = chunks  # dicts of Piece fields, prefix in hex, in file order
        self.bounds = bounds  # task i owns chunks [bounds[i], bounds[i + 1])
        self.back = [min(1, b) for b in self.bounds[:-1]]  # read-back chunks per task
        # Per task, connections read back further on their own: key -> the chunks read for
        # their packets only (see `longer`).
        self.extra = [{} for _ in self.bounds[:-1]]
        self.frames = [c["frames"] + 1 for c in chunks]  # the first frame of each chunk

    @property
    def tasks(self):
        return len(self.bounds) - 1

    def spec(self, i):
        first, end = self.bounds[i], self.bounds[i + 1]
        start = first - self.back[i]
        # The chunks of their histories (before the read-back), each read once, for the
        # packets of the connections whose history holds it: what a connection's run is fed
        # is its own read-back only, so that a run for some of them alone (see `partial`)
        # feeds it as a run for all does.
        holders = {}  # chunk -> the connections reading it
        for key, read in self.extra[i].items():
            for c in read:
                if c < start:
                    holders.setdefault(c, set()).add(key)
        runs = []  # [first, stop, keys] of consecutive chunks read for the same connections
        for c in sorted(holders):
            if runs and runs[-1][1] == c and runs[-1][2] == holders[c]:
                runs[-1][1] = c + 1
            else:
                runs.append([c, c + 1, holders[c]])
        chunks, filtered = [], []
        for a, b, keys in runs:
            filtered.append((len(chunks), len(chunks) + b - a, keys))
            chunks += self.chunks[a:b]
        return {
            "capture": self.capture,
            "index": i,
            "chunks": chunks + self.chunks[start:end],
            "filtered": filtered,  # (first, stop, keys): chunks read for those keys only
            "full": len(chunks),  # where the read-back of every packet starts
            "own": len(chunks) + first - start,
            "first_frame": self.chunks[first]["frames"] + 1,
        }

    def longer(self, i, why_task=None, key=None, last_frame=None, history=()):
        """Read back further. For one connection (`key`) whose packet before the range lies
        beyond the read-back (`last_frame`): its own packets only, over the last chunks of
        its history (those of the ranges with a packet of it, `history`, up to that packet),
        6, then 18, 42, 90, ...: however long it was idle, what is read for it is some of
        its own history, never the traffic it was idle through. Else all packets: twice as
        far, and at least to where `why_task`'s read-back began (the range whose view this
        one did not reach). Returns whether only that connection reads further."""
        first = self.bounds[i]
        if key is not None and last_frame is not None:
            at = bisect_right(self.frames, last_frame) - 1  # the chunk of that packet
            chunks = [
                c for r in history for c in range(self.bounds[r], min(self.bounds[r + 1], at + 1))
            ]
            if chunks:
                read = self.extra[i].get(key, ())
                self.extra[i][key] = chunks[-(2 * len(read) + 6) :]
                return True
        want = 2 * self.back[i]
        if why_task is not None and why_task < i:
            want = max(want, first - self.bounds[why_task] + self.back[why_task])
        self.back[i] = min(first, max(want, 1))
        return False


def split_tasks(captures, options, run_facts, first=None):
    """Check the ranges of every split capture; returns, per capture, its Outcome (with the
    ranges run more than once, `again`), seeds and facts. A capture whose ranges still
    disagree after MAX_ROUNDS keeps an Outcome with `redo` (see `unjoined`).
    run_facts([(spec, seeds)]) -> [facts], in the same order (pickled or not); first: the
    facts of every range, in that order, taken already (by guess.py's tasks)."""
    facts = {c.capture: [None] * c.tasks for c in captures}
    seeds = {c.capture: {} for c in captures}
    again = {c.capture: set() for c in captures}
    todo = [(c, i, None) for c in captures for i in range(c.tasks)]
    outcomes = {}
    for _round in range(MAX_ROUNDS):
        if _round == 0 and first is not None:
            for (c, i, _keys), f in zip(todo, first, strict=True):
                facts[c.capture][i] = _loaded(f)
        else:
            _run(todo, facts, seeds, run_facts)
        for c, i, _keys in todo if _round else ():
            again[c.capture].add(i)
        todo = []
        for c in captures:
            # From the second check on, a range agreeing with one that was wrong is redone
            # with it: else each round would set right one range more.
            outcome = check(facts[c.capture], taint=_round > 0)
            outcome.again = again[c.capture]
            outcomes[c.capture] = outcome
            touched = _touched(facts[c.capture]) if outcome.redo else {}
            for i, wrong in sorted(outcome.redo.items()):
                if _round >= LAST_RESORT:  # from the capture's start: exact by construction
                    c.back[i], c.extra[i] = c.bounds[i], {}
                alone = _round < LAST_RESORT  # only some connections are run again
                for why, source, key, last_frame in wrong:
                    if why.startswith(("endpoint", "group")):
                        seeds[c.capture] = outcome.seeds
                        alone = False
                    elif _round < LAST_RESORT:
                        history = [r for r in touched.get(key, ()) if r < i]
                        alone = c.longer(i, source, key, last_frame, history) and alone
                keys = {key for _, _, key, _ in wrong} if alone else None
                todo.append((c, i, keys))
        if not todo:
            break
    return outcomes, seeds, facts


def unjoined(captures, outcomes):
    """{capture: why} of the split captures whose ranges still disagree after every round
    (mangled TCP can leave a connection in a state no read-back reproduces): they are to be
    dissected whole, by one task, which is exact."""
    out = {}
    for c in captures:
        redo = outcomes[c.capture].redo
        if redo:
            i, wrong = min(redo.items())
            out[c.capture] = f"range {i}: {wrong[0][0]}"
    return out


def _run(todo, facts, seeds, run_facts):
    """The facts of the ranges `todo` [(capture, range, keys)] into `facts`. A range whose
    keys are given disagreed only in what it says of those connections: they are run again
    alone, and their facts replace theirs (ranges.partial), where a range can be parted so;
    else, and for the others, the whole range is run."""
    items = [
        (c.spec(i) if keys is None else {**c.spec(i), "only": keys}, seeds[c.capture])
        for c, i, keys in todo
    ]
    results = run_facts(items)
    whole = []
    for (c, i, keys), f in zip(todo, results, strict=True):
        f = _loaded(f)
        if keys is not None:
            f = partial(facts[c.capture][i], f, keys)
            if f is None:
                whole.append((c, i, None))
                continue
        facts[c.capture][i] = f
    if whole:
        _run(whole, facts, seeds, run_facts)


def _touched(facts):
    """Connection key -> the ranges with a packet of it, in file order."""
    out = {}
    for r, f in enumerate(facts):
        for key, _, _ in f["checked"]:
            out.setdefault(key, []).append(r)
    return out


def _loaded(f):
    return pickle.loads(f) if isinstance(f, bytes) else f


def run_facts_task(spec, options, seeds):
    """A `facts` task (pickled, as it leaves a Spark task). Record sets are only sized: no
    fact depends on what is inside them."""
    run = RangeRun(spec, {**options, "records": "none", "decompress": False}, seeds)
    with heap.in_a_worker():
        for _ in run:
            pass
    return pickle.dumps(run.facts(), pickle.HIGHEST_PROTOCOL)


def run_rows_task(spec, options, seeds, settled, table, summary=None, streams=None):
    """A `rows` task: the table's record batches of the range's own exchanges (Arrow, the
    declared schema), or for "partitions" lists of rows and the completion moment of each
    row's exchange. `summary`: a Summary that sees every exchange; `streams`: a list that
    gets the accounting rows of the connections the range ends."""
    with heap.in_a_worker():
        yield from _rows(spec, options, seeds, settled, table, summary, streams)


def _rows(spec, options, seeds, settled, table, summary, streams):
    from ..tables import ROW_BUILDERS, arrow_batches

    run = RangeRun(spec, options, seeds, settled)
    kept = Options(**options).for_tables()
    wanted = kept["wanted"]
    exchanges = run if summary is None else summarised(run, summary)
    if table == "streams":
        for _ in exchanges:
            pass
    elif table == "partitions":
        partition_rows = ROW_BUILDERS["partitions"]()
        rows, order = [], []
        for e in exchanges:
            mine = partition_rows(e)
            if wanted is not None:
                mine = [r for r in mine if wanted(r["topic"], r["partition"])]
            rows += mine
            order += [(*e.moment, k) for k in range(len(mine))]
        yield rows, order
    else:
        for batch in arrow_batches(exchanges, table, **kept):
            yield batch, None
    ended = streams_rows(run, settled)
    if streams is not None:
        streams += ended
    if table == "streams":
        for batch in arrow_batches(ended, "streams"):
            yield batch, None
