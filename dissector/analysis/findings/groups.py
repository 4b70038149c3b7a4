"""Findings of consumer groups (see __init__.py): rebalances that never completed, rebalances
in quick succession, coordinators that moved or were not there, lag that keeps growing."""

from collections import Counter

import pandas as pd

from .._frames import api_rows, body, has, scope, when
from ..groups import GROUP_APIS, generation_rounds, round_members
from ..lag import lag
from . import Finding

#: A storm: this many rounds of one group started within STORM_TIMEOUTS session timeouts.
STORM_ROUNDS = 3
STORM_TIMEOUTS = 2
COORDINATOR_ERRORS = ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE")
#: The group APIs a coordinator answers (FindCoordinator finds it).
COORDINATOR_APIS = (*GROUP_APIS, "DescribeGroups")
#: Fewest lag samples of a partition to tell a trend.
LAG_SAMPLES = 4


def _rounds(tables):
    return generation_rounds(tables.pairs) if has(tables.pairs, "api_name") else []


def _frames(values):
    return sorted({int(v) for v in values if v is not None and pd.notna(v)})


def _seconds(ms):
    return f"{ms / 1000:.1f} s".replace(".0 s", " s")


def failed_rebalances(tables):
    """A round that never synced: its SyncGroups answered with an error, or a later round
    began before any SyncGroup succeeded; the leader is named, and whether it was gone."""
    rounds = _rounds(tables)
    for i, gen in enumerate(rounds):
        if gen["outcome"] != "failed":
            continue
        same = (gen["capture"], gen["group_id"])
        later = [r for r in rounds[i + 1 :] if (r["capture"], r["group_id"]) == same]
        leader = gen["leader"]
        leader_client = gen["member_client_ids"].get(leader)
        left = [m for m, _ in gen["left"]]
        leader_left = bool(leader) and (
            leader in left or (bool(later) and leader not in round_members(later[0]))
        )
        errors = Counter(name for _, name, _ in gen["sync_errors"])
        why = (
            "its SyncGroups were answered " + ", ".join(f"{n} ×{c}" for n, c in errors.items())
            if errors
            else "no SyncGroup was answered before the group started over"
        )
        gone = (
            f"; the leader {leader_client or leader} sent no assignment and is not a member "
            "of the round after it: it left or its session timed out while it assigned"
            if leader_left
            else f"; the leader was {leader_client or leader}"
        )
        nxt = (
            f", and the group rebalanced again as generation {later[0]['generation_id']} "
            f"(trigger: {later[0]['trigger']})"
            if later
            else ""
        )
        advice = (
            "find why the leader went away (a crash, a long GC or assignor pause, "
            "max.poll.interval.ms)"
            if leader_left
            else "find what made the group rebalance again before the sync"
        )
        yield Finding(
            "failed_rebalance",
            "error",
            f"Generation {gen['generation_id']} of group {gen['group_id']} "
            f"({len(round_members(gen))} members, trigger: {gen['trigger']}) never synced: "
            f"{why}{gone}{nxt}; no member held partitions meanwhile — {advice}.",
            _frames(
                [*gen["join_frames"], *(f for f, _, _ in gen["sync_errors"])]
                + [f for m, f in gen["left"] if m == leader]
            ),
            client_id=leader_client,
            time=gen["started"],
            extra={
                "group_id": gen["group_id"],
                "generation_id": gen["generation_id"],
                "leader": leader,
                "leader_left": leader_left,
                "sync_errors": dict(errors),
                "trigger": gen["trigger"],
            },
        )


def rebalance_storms(tables):
    """STORM_ROUNDS or more rounds of one group started within STORM_TIMEOUTS times the
    longest session timeout its members asked for; overlapping windows make one storm."""
    by_group = {}
    for gen in _rounds(tables):
        if pd.notna(gen["started"]):
            by_group.setdefault((gen["capture"], gen["group_id"]), []).append(gen)
    for (_, group), gens in by_group.items():
        timeouts = [g["session_timeout_ms"] for g in gens if g["session_timeout_ms"]]
        if len(gens) < STORM_ROUNDS or not timeouts:
            continue
        window_ms = STORM_TIMEOUTS * max(timeouts)
        window = pd.Timedelta(milliseconds=window_ms)
        starts = [g["started"] for g in gens]
        stormy = set()
        for i, start in enumerate(starts):
            inside = [j for j in range(i, len(gens)) if starts[j] - start <= window]
            if len(inside) >= STORM_ROUNDS:
                stormy.update(inside)
        for storm in _runs(sorted(stormy)):
            part = [gens[j] for j in storm]
            span = (part[-1]["started"] - part[0]["started"]).total_seconds() * 1000
            triggers = Counter(g["trigger"] for g in part)
            yield Finding(
                "rebalance_storm",
                "warning",
                f"Group {group} rebalanced {len(part)} times in {_seconds(span)} "
                f"(generations {', '.join(str(g['generation_id']) for g in part)}; "
                f"{STORM_ROUNDS} or more rebalances within {_seconds(window_ms)}, "
                f"{STORM_TIMEOUTS} × the session timeout of {max(timeouts)} ms, is a storm), "
                "each stopping consumption: started by "
                + ", ".join(f"{t} ×{c}" for t, c in triggers.items())
                + " — stagger member starts and restarts, or use static membership or "
                "cooperative rebalancing.",
                _frames(g["join_frames"][0] for g in part if g["join_frames"]),
                time=part[0]["started"],
                extra={
                    "group_id": group,
                    "count": len(part),
                    "generations": [g["generation_id"] for g in part],
                    "window_ms": window_ms,
                    "triggers": dict(triggers),
                },
            )


def _runs(indexes):
    """Consecutive runs of sorted integers."""
    run = []
    for i in indexes:
        if run and i != run[-1] + 1:
            yield run
            run = []
        run.append(i)
    if run:
        yield run


def _group_keys(api, req):
    if api == "FindCoordinator":
        if req.get("KeyType", 0) != 0:
            return []  # a transaction coordinator
        return [k for k in req.get("CoordinatorKeys") or [req.get("Key")] if k]
    if api == "OffsetFetch" and req.get("Groups"):
        return [g.get("GroupId") for g in req["Groups"] if isinstance(g, dict)]
    if api == "DescribeGroups":
        return list(req.get("Groups") or [])
    return [req.get("GroupId")]


def coordinators_moved(tables):
    """NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE answers to a client's group requests,
    per client id and group."""
    pairs = tables.pairs
    if not has(pairs, "api_name", "error_name"):
        return
    rows = api_rows(pairs, *COORDINATOR_APIS)
    rows = rows[rows["error_name"].isin(COORDINATOR_ERRORS)]
    seen = {}
    for row in rows.itertuples(index=False):
        for group in _group_keys(row.api_name, body(row.request)) or [None]:
            key = (*(getattr(row, k) for k in scope(pairs)), row.client_id, group)
            seen.setdefault(key, []).append(row)
    for key, hits in seen.items():
        client_id, group = key[-2], key[-1]
        errors = Counter(r.error_name for r in hits)
        apis = Counter(r.api_name for r in hits)
        yield Finding(
            "coordinator_moved",
            "warning",
            f"{client_id or 'a client'} was told {len(hits)} times that the broker it asked "
            f"is not the coordinator of group {group} or that none is available ("
            + ", ".join(f"{n} ×{c}" for n, c in errors.items())
            + " on "
            + ", ".join(f"{a} ×{c}" for a, c in apis.items())
            + "): each time it looks the coordinator up again and the group waits — "
            "check for broker restarts and leader changes of __consumer_offsets.",
            _frames(r.response_frame for r in hits),
            client=hits[0].client,
            client_id=client_id if isinstance(client_id, str) else None,
            broker=hits[0].broker,
            time=when(hits[0]),
            extra={
                "group_id": group,
                "count": len(hits),
                "errors": dict(errors),
                "apis": dict(apis),
            },
        )


def _grows(values):
    """Whether a lag series keeps growing: every sample of its last third above every
    sample of its first third, and the last above the first."""
    third = max(1, len(values) // 3)
    return values[-1] > values[0] and min(values[-third:]) > max(values[:third])


def lag_growing(tables):
    """A group's lag on a partition that grows over the capture (the Fetch lag, else the
    committed lag): first and last lag."""
    partitions = tables.partitions
    if not has(partitions, "api_name", "topic", "partition") or not has(tables.pairs, "request"):
        return
    samples = lag(partitions, tables.pairs)
    samples = samples[samples["group_id"].notna() & samples["time"].notna()]
    if samples.empty:
        return
    keys = [*scope(partitions), "group_id", "topic", "partition"]
    for key, rows in samples.groupby(keys, sort=False):
        for source in ("fetch", "commit"):
            series = rows[(rows["source"] == source) & rows["lag"].notna()]
            values = [int(v) for v in series["lag"]]
            if len(values) < LAG_SAMPLES or not _grows(values):
                continue
            first, last = series.iloc[0], series.iloc[-1]
            group, topic, partition = key[-3:]
            span = (last["time"] - first["time"]).total_seconds()
            what = "behind the high watermark" if source == "fetch" else "uncommitted"
            yield Finding(
                "lag_growing",
                "warning",
                f"Group {group} falls behind on {topic}/{partition}: its {source} lag grew "
                f"from {values[0]} to {values[-1]} records {what} over {span:.1f} s "
                f"({len(values)} samples, each of the last third above all of the first): "
                "the consumers process slower than producers write — add consumers or "
                "partitions, or speed up the processing.",
                _frames([first["frame"], last["frame"]]),
                client=first["client"],
                client_id=first["client_id"] if isinstance(first["client_id"], str) else None,
                broker=first["broker"],
                time=first["time"],
                extra={
                    "group_id": group,
                    "topic": topic,
                    "partition": int(partition),
                    "source": source,
                    "first_lag": values[0],
                    "last_lag": values[-1],
                    "samples": len(values),
                },
            )
            break  # the fetch lag tells it; the committed lag would repeat it


CHECKS = (failed_rebalances, rebalance_storms, coordinators_moved, lag_growing)
