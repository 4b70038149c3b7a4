"""Consumer groups: one row per generation (per rebalance round), and every group event in
time order.

Member ids come from JoinGroup responses, each with the client id of the connection that
received it; subscriptions from the leader's JoinGroup response, assignments from the
leader's SyncGroup request (else from each member's SyncGroup response). A body the capture
cut gives the fields it still holds.
"""

import pandas as pd

from ._frames import api_rows, body, frame, has, ints, per_capture, scope, when

GENERATION_COLUMNS = [
    "group_id",
    "generation_id",
    "protocol_type",
    "protocol",
    "leader",
    "leader_client_id",
    "members",
    "member_client_ids",
    "subscriptions",
    "assignment",
    "assignment_by_client",
    "started",
    "joined",
    "synced",
    "rebalance_ms",
    "trigger",
    "outcome",
]
TIMELINE_COLUMNS = [
    "time",
    "end",
    "group_id",
    "client_id",
    "member_id",
    "generation_id",
    "api_name",
    "error_name",
    "detail",
    "latency_ms",
    "rebalance_ms",
    "stream",
    "request_frame",
]
GROUP_APIS = (
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "OffsetCommit",
    "OffsetFetch",
    "TxnOffsetCommit",
    "ConsumerGroupHeartbeat",
)


def partitions_text(assigned):
    """["topic/partition", ...] from a consumer-protocol assignment (or a heartbeat's)."""
    if not isinstance(assigned, dict):
        return None
    items = assigned.get("AssignedPartitions") or assigned.get("TopicPartitions") or []
    out = []
    for item in items:
        topic = item.get("Topic") or item.get("TopicId")
        out += [f"{topic}/{p}" for p in item.get("Partitions") or ()]
    return sorted(out)


def _subscription(metadata):
    return sorted(metadata.get("Topics") or []) if isinstance(metadata, dict) else metadata


def _ms(later, earlier):
    if pd.isna(later) or pd.isna(earlier):
        return float("nan")
    return (later - earlier).total_seconds() * 1000


def group_generations(pairs):
    """One row per rebalance round of a group, in order of start: each generation announced
    by a successful JoinGroup response, and a round of its own when the same generation id
    is announced again after its SyncGroups failed (Tansu reuses the id of a round that
    never synced). The protocol, the leader (member id and client id), the members with
    their client ids and subscriptions, the leader's assignment
    (`{member_id: ["topic/partition", ...]}`), when the round started (first JoinGroup
    request answered with it), when every member had joined and had synced, `rebalance_ms`
    from start to sync, what started it (`trigger`: a new member's JoinGroup `join`, a
    LeaveGroup `leave`, members told REBALANCE_IN_PROGRESS or gone with neither `timeout`,
    else `unknown`) and how it ended (`outcome`: `completed` when a SyncGroup was answered
    without error or an OffsetCommit of its generation accepted, `failed` when a SyncGroup
    was answered with an error or a later round began first, null when the capture ends
    before either or a SyncGroup's answer is lost)."""
    if not has(pairs, "api_name"):
        return frame([], [*scope(pairs), *GENERATION_COLUMNS])
    rows = []
    for gen in generation_rounds(pairs):
        rows.append(
            {
                **{k: gen[k] for k in ("capture", *GENERATION_COLUMNS) if k in gen},
                "members": sorted(round_members(gen)),
                "leader_client_id": gen["member_client_ids"].get(gen["leader"]),
                "rebalance_ms": _ms(gen["synced"], gen["started"]),
                "assignment_by_client": {
                    gen["member_client_ids"].get(m, m): parts
                    for m, parts in sorted(gen["assignment"].items())
                },
            }
        )
    out = frame(rows, [*scope(pairs), *GENERATION_COLUMNS])
    return ints(out, "generation_id").reset_index(drop=True)


def generation_rounds(pairs):
    """The rounds behind `group_generations`, as dicts with their evidence besides the
    columns: `join_frames` (JoinGroup answers), `sync_frames` (SyncGroup answers),
    `sync_errors` (`(frame, error name, client id)` of SyncGroups answered with an error),
    `trigger_frames`, `left` (member ids that sent a LeaveGroup before the next round),
    `session_timeout_ms` (the longest the members asked for). In order of start."""
    groups = {}
    for row in api_rows(pairs, *_ROUND_APIS).itertuples(index=False):
        req, resp = body(row.request), body(row.response)
        group = req.get("GroupId")
        if not isinstance(group, str):
            continue
        capture = getattr(row, "capture", None)
        state = groups.setdefault((capture, group), {"rounds": [], "open": {}, "events": []})
        if row.api_name == "JoinGroup":
            _joined(state, capture, group, row, req, resp)
        elif row.api_name == "SyncGroup":
            _synced(state, row, req, resp)
        elif row.api_name == "LeaveGroup":
            leaving = [m.get("MemberId") for m in req.get("Members") or () if isinstance(m, dict)]
            leaving += [req["MemberId"]] if req.get("MemberId") else []
            state["events"].append(("leave", when(row), _frame(row, "request"), leaving))
        elif row.api_name == "OffsetCommit" and row.status == "ok":
            # a commit is accepted only from a member of a group that has synced
            generation = req.get("GenerationId", req.get("GenerationIdOrMemberEpoch"))
            state["events"].append(("committed", when(row), None, [generation]))
        if row.api_name != "JoinGroup" and getattr(row, "error_name", None) == _REBALANCING:
            at = row.response_end if pd.notna(row.response_end) else when(row)
            state["events"].append(("rebalancing", at, _frame(row, "response"), []))
    out = []
    for state in groups.values():
        out += _settle(state["rounds"], sorted(state["events"], key=lambda e: _order(e[1])))
    return sorted(out, key=lambda r: (_order(r["started"]), r["group_id"]))


_ROUND_APIS = ("JoinGroup", "SyncGroup", "LeaveGroup", "Heartbeat", "OffsetCommit")
_REBALANCING = "REBALANCE_IN_PROGRESS"


def _frame(row, side):
    value = getattr(row, f"{side}_frame", None)
    return int(value) if pd.notna(value) else None


def _order(time):
    """A sort key of a time, an unknown one last."""
    return time if pd.notna(time) else pd.Timestamp.max.tz_localize("UTC")


def _joined(state, capture, group, row, req, resp):
    if req.get("MemberId") == "":  # a member new to the group
        state["events"].append(("join", when(row), _frame(row, "request"), []))
    generation = resp.get("GenerationId")
    if resp.get("ErrorCode") != 0 or generation is None:
        return
    gen = state["open"].get(generation)
    failed_at = gen["failed_at"] if gen else pd.NaT
    if gen is None or (pd.notna(failed_at) and not row.request_start < failed_at):
        gen = state["open"][generation] = _generation(capture, group, generation)
        state["rounds"].append(gen)
    gen["protocol_type"] = resp.get("ProtocolType") or req.get("ProtocolType")
    gen["protocol"] = resp.get("ProtocolName") or gen.get("protocol")
    gen["leader"] = gen.get("leader") or resp.get("Leader")
    if resp.get("MemberId"):
        gen["member_client_ids"][resp["MemberId"]] = row.client_id
    for member in resp.get("Members") or ():
        if isinstance(member, dict) and member.get("MemberId"):
            gen["subscriptions"][member["MemberId"]] = _subscription(member.get("Metadata"))
    timeout = req.get("SessionTimeoutMs")
    if isinstance(timeout, int):
        gen["session_timeout_ms"] = max(gen["session_timeout_ms"] or 0, timeout)
    gen["started"] = _min(gen["started"], row.request_start)
    gen["joined"] = _max(gen["joined"], row.response_end)
    gen["join_frames"].append(_frame(row, "response"))


def _synced(state, row, req, resp):
    gen = state["open"].get(req.get("GenerationId"))
    if gen is None:
        return
    code = resp.get("ErrorCode")
    if code is None and row.status != "ok":
        gen["sync_unknown"] = True  # its answer lost or undecodable: it may have synced
        return
    if code not in (0, None):
        gen["sync_errors"].append((_frame(row, "response"), row.error_name, row.client_id))
        gen["failed_at"] = _min(gen["failed_at"], row.response_end)
        return
    for item in req.get("Assignments") or ():
        if isinstance(item, dict) and item.get("MemberId"):
            gen["assignment"][item["MemberId"]] = partitions_text(item.get("Assignment"))
    if not req.get("Assignments") and req.get("MemberId"):
        own = partitions_text(resp.get("Assignment"))
        gen["assignment"].setdefault(req["MemberId"], own)
    gen["synced"] = _max(gen["synced"], row.response_end)
    gen["sync_frames"].append(_frame(row, "response"))


def _settle(rounds, events):
    """Each round's trigger, from the events after the previous round had joined (a join
    or leave, the first that came; else a member new to the group; else members told to
    rejoin or gone without leaving),
    its outcome, and the members that left before the next round."""
    rounds = sorted(rounds, key=lambda r: _order(r["started"]))
    for i, gen in enumerate(rounds):
        prev = rounds[i - 1] if i else None
        nxt = rounds[i + 1] if i + 1 < len(rounds) else None
        lo = prev["joined"] if prev else pd.NaT
        hi = gen["joined"] if pd.notna(gen["joined"]) else gen["started"]
        seen = [e for e in events if _between(e[1], lo, hi)]
        moves = [e for e in seen if e[0] in ("join", "leave")]
        told = [e for e in seen if e[0] == "rebalancing"]
        gone = prev and round_members(prev) - round_members(gen)
        new = prev and round_members(gen) - round_members(prev)
        if moves:
            gen["trigger"], gen["trigger_frames"] = moves[0][0], [moves[0][2]]
        elif new:  # a member id the previous round did not have: its first JoinGroup lost
            gen["trigger"] = "join"
        elif told or gone:
            gen["trigger"], gen["trigger_frames"] = "timeout", [e[2] for e in told]
        else:
            gen["trigger"] = "unknown"
        until = nxt["started"] if nxt else pd.NaT
        committed = any(
            e[0] == "committed" and e[3] == [gen["generation_id"]]
            for e in events
            if _between(e[1], gen["joined"], until)
        )
        if pd.notna(gen["synced"]) or committed:
            gen["outcome"] = "completed"
        elif gen["sync_errors"] or (nxt is not None and not gen["sync_unknown"]):
            gen["outcome"] = "failed"
        gen["left"] = [
            (m, e[2])
            for e in events
            if e[0] == "leave" and _between(e[1], gen["started"], until)
            for m in e[3]
        ]
    return rounds


def round_members(gen):
    """The member ids of a round: those answered with it and those its leader was sent."""
    return set(gen["member_client_ids"]) | set(gen["subscriptions"])


def _between(t, lo, hi):
    """lo < t <= hi, an unknown bound open."""
    return pd.notna(t) and (pd.isna(lo) or t > lo) and (pd.isna(hi) or t <= hi)


def _generation(capture, group_id, generation_id):
    return {
        "capture": capture,
        "group_id": group_id,
        "generation_id": generation_id,
        "protocol_type": None,
        "protocol": None,
        "leader": None,
        "member_client_ids": {},
        "subscriptions": {},
        "assignment": {},
        "started": pd.NaT,
        "joined": pd.NaT,
        "synced": pd.NaT,
        "trigger": "unknown",
        "outcome": None,
        "session_timeout_ms": None,
        "failed_at": pd.NaT,
        "sync_unknown": False,
        "join_frames": [],
        "sync_frames": [],
        "sync_errors": [],
        "trigger_frames": [],
        "left": [],
    }


def _min(a, b):
    return b if pd.isna(a) else a if pd.isna(b) else min(a, b)


def _max(a, b):
    return b if pd.isna(a) else a if pd.isna(b) else max(a, b)


def _group_ids(api, req):
    if api == "FindCoordinator":
        if req.get("KeyType", 0) != 0:
            return []
        return list(req.get("CoordinatorKeys") or [req.get("Key")])
    if api == "OffsetFetch" and req.get("Groups"):
        return [g.get("GroupId") for g in req["Groups"]]
    return [req.get("GroupId") or req.get("TransactionalId")]


def _event(api, req, resp):
    """(member id, generation id, detail) of one group exchange."""
    member = req.get("MemberId") or resp.get("MemberId")
    generation = req.get("GenerationId", req.get("GenerationIdOrMemberEpoch"))
    detail = ""
    if api == "JoinGroup":
        generation = resp.get("GenerationId", generation)
        if resp.get("ErrorCode") == 0:
            leader = resp.get("Leader") == resp.get("MemberId")
            detail = f"joined generation {generation}" + (" as leader" if leader else "")
        member = resp.get("MemberId") or member
    elif api == "SyncGroup":
        assigned = partitions_text(resp.get("Assignment"))
        detail = "assigned " + ", ".join(assigned) if assigned is not None else ""
    elif api == "LeaveGroup":
        leaving = [m.get("MemberId") for m in req.get("Members") or ()]
        member = member or (leaving[0] if leaving else None)
        detail = "left"
    elif api in ("OffsetCommit", "TxnOffsetCommit"):
        detail = ", ".join(
            f"{t.get('Name')}/{p.get('PartitionIndex')}@{p.get('CommittedOffset')}"
            for t in req.get("Topics") or ()
            for p in t.get("Partitions") or ()
        )
    elif api == "ConsumerGroupHeartbeat":
        generation = resp.get("MemberEpoch", req.get("MemberEpoch"))
        assigned = partitions_text(resp.get("Assignment"))
        detail = f"epoch {generation}" + (f", assigned {', '.join(assigned)}" if assigned else "")
    return member, generation, detail


@per_capture
def group_timeline(pairs):
    """Every consumer-group exchange in time order: FindCoordinator (group keys), JoinGroup
    rounds (MEMBER_ID_REQUIRED included), SyncGroup with the partitions assigned, Heartbeat
    (REBALANCE_IN_PROGRESS and other errors), LeaveGroup, OffsetCommit, OffsetFetch,
    TxnOffsetCommit, ConsumerGroupHeartbeat. `rebalance_ms`, on a successful SyncGroup (or
    a ConsumerGroupHeartbeat that brings an assignment): from that member's first JoinGroup
    request of the round to the end of this response."""
    if not has(pairs, "api_name"):
        return frame([], TIMELINE_COLUMNS)
    rows = []
    round_start = {}  # (group, client connection) -> first JoinGroup request of the round
    for row in api_rows(pairs, *GROUP_APIS).itertuples(index=False):
        req, resp = body(row.request), body(row.response)
        member, generation, detail = _event(row.api_name, req, resp)
        ok = row.status == "ok"
        for group in _group_ids(row.api_name, req):
            who = (group, row.client_id, getattr(row, "capture", None), row.stream)
            rebalance = float("nan")
            if row.api_name in ("JoinGroup", "ConsumerGroupHeartbeat"):
                round_start.setdefault(who, row.request_start)
            if ok and (row.api_name == "SyncGroup" or "assigned" in detail) and who in round_start:
                rebalance = _ms(row.response_end, round_start.pop(who))
            rows.append(
                {
                    "time": row.request_start,
                    "end": row.response_end,
                    "group_id": group,
                    "client_id": row.client_id,
                    "member_id": member or None,
                    "generation_id": generation,
                    "api_name": row.api_name,
                    "error_name": row.error_name if not ok else "NONE",
                    "detail": detail or (row.reason if isinstance(row.reason, str) else ""),
                    "latency_ms": row.latency_ms,
                    "rebalance_ms": rebalance,
                    "stream": row.stream,
                    "request_frame": row.request_frame,
                }
            )
    return ints(frame(rows, TIMELINE_COLUMNS), "generation_id", "stream", "request_frame")


def rebalances(pairs):
    """The generations with how long each rebalance took and who was in it: a short form of
    `group_generations` for reading."""
    gens = group_generations(pairs)
    gens = gens.assign(
        members=gens["members"].map(len),
        clients=gens["member_client_ids"].map(
            lambda m: ", ".join(sorted(filter(None, m.values())))
        ),
    )
    shown = ["group_id", "generation_id", "leader_client_id", "members", "clients"]
    return gens[[*scope(pairs), *shown, "rebalance_ms", "trigger", "outcome"]]
