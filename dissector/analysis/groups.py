"""Consumer groups: one row per generation, and every group event in time order.

Member ids come from JoinGroup responses, each with the client id of the connection that
received it; subscriptions from the leader's JoinGroup response, assignments from the
leader's SyncGroup request (else from each member's SyncGroup response).
"""

import pandas as pd

from ._frames import api_rows, body, frame, has, ints, per_capture, scope

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
    """One row per group and generation announced by a successful JoinGroup response:
    the protocol, the leader (member id and client id), the members with their client ids
    and subscriptions, the leader's assignment (`{member_id: ["topic/partition", ...]}`),
    when the round started (first JoinGroup request answered with this generation), when
    every member had joined and had synced, and `rebalance_ms` from start to sync."""
    if not has(pairs, "api_name"):
        return frame([], GENERATION_COLUMNS)
    gens = {}
    for row in api_rows(pairs, "JoinGroup", "SyncGroup").itertuples(index=False):
        req, resp = body(row.request), body(row.response)
        if row.api_name == "JoinGroup":
            if resp.get("ErrorCode") != 0 or resp.get("GenerationId") is None:
                continue
            key = (getattr(row, "capture", None), req.get("GroupId"), resp["GenerationId"])
            gen = gens.setdefault(key, _generation(*key))
            gen["protocol_type"] = resp.get("ProtocolType") or req.get("ProtocolType")
            gen["protocol"] = resp.get("ProtocolName")
            gen["leader"] = resp.get("Leader")
            gen["member_client_ids"][resp.get("MemberId")] = row.client_id
            for member in resp.get("Members") or ():
                gen["subscriptions"][member["MemberId"]] = _subscription(member.get("Metadata"))
            gen["started"] = _min(gen["started"], row.request_start)
            gen["joined"] = _max(gen["joined"], row.response_end)
        else:
            key = (getattr(row, "capture", None), req.get("GroupId"), req.get("GenerationId"))
            if key not in gens or resp.get("ErrorCode") not in (0, None):
                continue
            gen = gens[key]
            for item in req.get("Assignments") or ():
                gen["assignment"][item["MemberId"]] = partitions_text(item.get("Assignment"))
            if not req.get("Assignments") and req.get("MemberId"):
                own = partitions_text(resp.get("Assignment"))
                gen["assignment"].setdefault(req["MemberId"], own)
            gen["synced"] = _max(gen["synced"], row.response_end)
    rows = []
    for gen in gens.values():
        members = sorted(set(gen["subscriptions"]) | set(gen["member_client_ids"]))
        gen["members"] = members
        gen["leader_client_id"] = gen["member_client_ids"].get(gen["leader"])
        gen["rebalance_ms"] = _ms(gen["synced"], gen["started"])
        gen["assignment_by_client"] = {
            gen["member_client_ids"].get(m, m): parts
            for m, parts in sorted(gen["assignment"].items())
        }
        rows.append(gen)
    out = frame(rows, [*scope(pairs), *GENERATION_COLUMNS])
    return ints(
        out.sort_values(["started", "group_id"], kind="stable"), "generation_id"
    ).reset_index(drop=True)


def _generation(capture, group_id, generation_id):
    return {
        "capture": capture,
        "group_id": group_id,
        "generation_id": generation_id,
        "member_client_ids": {},
        "subscriptions": {},
        "assignment": {},
        "started": pd.NaT,
        "joined": pd.NaT,
        "synced": pd.NaT,
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
    return gens[[*scope(pairs), *shown, "rebalance_ms"]]
