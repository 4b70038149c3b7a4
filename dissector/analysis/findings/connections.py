"""Findings of connections and requests (see __init__.py): what clients and brokers did to
the conversation itself, read from the `pairs` and `streams` tables.

- client_rejected_response: the client left right after a good response it had no reason
  to leave on (an ApiVersions answer that was all the connection carried, or a response to
  a Produce sent with acks=0): it could not use it; repeated, a reconnect loop.
- unsupported_version: a request the broker said (ApiVersions) it does not serve, or of an
  API key no Kafka version has.
- unexpected_response: a response to a Produce sent with acks=0.
- truncated_request: a client that sent part of a request and closed its connection.
- unanswered: requests left without a response, per connection.
- throttled: responses with a throttle time, per client.
- head_of_line_blocking: requests that waited on their connection behind a held Fetch.
"""

import pandas as pd

from .._frames import body, has, may_contain, only, scope, without
from ..advertised import advertised
from . import Finding, client_label, named

#: A client that closes within this of a response closed because of it.
CLOSE_MS = 10.0
#: Waiting this long behind a held Fetch is worth a finding.
BLOCKED_MS = 100.0
#: A request the client itself abandoned within this of its due time (a Fetch's MaxWaitMs,
#: else at once) was given up at shutdown, not after a timeout.
SHUTDOWN_GRACE_MS = 1000.0


# -- shared ---------------------------------------------------------------------------------


def _frames(*values):
    """Frame numbers as sorted ints, missing ones left out."""
    out = set()
    for value in values:
        for v in value if isinstance(value, list | tuple | set | pd.Series) else [value]:
            if pd.notna(v):
                out.add(int(v))
    return sorted(out)


def _key(row, table):
    """A connection's key: its stream, with the capture in a capture set."""
    return tuple(getattr(row, c) for c in (*scope(table), "stream"))


def _address(client):
    """The host of an `ip:port` / `[ip]:port` address."""
    if not isinstance(client, str):
        return None
    host = client.rsplit(":", 1)[0]
    return host[1:-1] if host.startswith("[") else host


def _capture(row):
    """The capture a finding is in, in a capture set (frames only mean something there)."""
    return {"capture": row.capture} if hasattr(row, "capture") else {}


def _int(value):
    return int(value) if pd.notna(value) else None


def _count(value):
    """A byte or frame count, 0 where the table has none."""
    return int(value) if pd.notna(value) else 0


def _acks(request):
    acks = body(request).get("Acks")
    return acks if isinstance(acks, int) else None


def _connections(pairs):
    """Connection key -> its rows, in order of their requests."""
    order = pairs.sort_values("request_start", kind="stable", na_position="last")
    keys = [*scope(pairs), "stream"]
    return {k if isinstance(k, tuple) else (k,): g for k, g in order.groupby(keys, sort=False)}


def _ends(streams):
    """Connection key -> the `request` row of the streams table (how the connection ended)."""
    if not has(streams, "stream", "direction", "end", "ended_by", "end_frame", "end_time"):
        return {}
    rows = streams[streams["direction"] == "request"]
    return {_key(r, streams): r for r in rows.itertuples(index=False)}


def _lossy(streams, pairs):
    """The connections whose client bytes the capture lost beyond what it cut of known
    requests (the snap length: such a request keeps its row): a request may be missing."""
    if not has(streams, "stream", "direction", "gaps", "bytes_skipped"):
        return set()
    cut = {}
    if has(pairs, "stream", "reason"):
        rows = pairs[pairs["reason"].fillna("").str.contains("request cut by the capture")]
        for r in rows.itertuples(index=False):
            cut[_key(r, pairs)] = cut.get(_key(r, pairs), 0) + 1
    out = set()
    for r in streams[streams["direction"] == "request"].itertuples(index=False):
        key = _key(r, streams)
        if _count(r.bytes_skipped) or _count(r.gaps) > cut.get(key, 0):
            out.add(key)
    return out


def _ms(later, earlier):
    if pd.isna(later) or pd.isna(earlier):
        return float("nan")
    return (later - earlier).total_seconds() * 1000


# -- client_rejected_response -----------------------------------------------------------------


def _left_on(rows, end):
    """The row of the response a client left on, when its leaving says it rejected it."""
    if end.ended_by != "client" or end.end not in ("fin", "rst"):
        return None
    last = rows.iloc[-1]
    if last.status != "ok" or not 0 <= _ms(end.end_time, last.response_end) <= CLOSE_MS:
        return None
    only_handshake = (rows["api_name"] == "ApiVersions").all()
    unasked = last.api_name == "Produce" and _acks(last.request) == 0
    return last if only_handshake or unasked else None


def client_rejected_response(t):
    if not has(t.pairs, "stream", "api_name", "status", "response_end", "request"):
        return
    ends, lossy = _ends(t.streams), _lossy(t.streams, t.pairs)
    loops = {}
    for key, rows in _connections(without(t.pairs, "response")).items():
        end = None if key in lossy else ends.get(key)
        last = None if end is None else _left_on(rows, end)
        if last is not None:
            who = (*key[:-1], named(last.client_id), _address(last.client), last.broker)
            loops.setdefault(who, []).append((last, end))
    for (*_, client_id, host, broker), left in loops.items():
        first = left[0][0]
        apis = sorted({r.api_name for r, _ in left})
        count = len(left)
        loop = f"{count} times, a reconnect loop" if count > 1 else "once"
        yield Finding(
            kind="client_rejected_response",
            severity="error" if count > 1 else "warning",
            detail=(
                f"{client_label(client_id, host)} closed its connection right after a good "
                f"{'/'.join(apis)} response from {broker} {loop}: "
                + (
                    "the broker answers Produce requests sent with acks=0, which the client "
                    "takes for a broken stream; use acks=1 with this broker"
                    if apis == ["Produce"]
                    else "the client cannot use what the broker sends; upgrade or "
                    "reconfigure it for this broker"
                )
            ),
            frames=_frames([e.end_frame for _, e in left]),
            client=first.client,
            client_id=client_id,
            broker=broker,
            time=left[0][1].end_time,
            extra={
                **_capture(first),
                "count": count,
                "apis": apis,
                "response_frames": _frames([r.response_frame for r, _ in left]),
            },
        )


# -- unsupported_version --------------------------------------------------------------------


def _served(pairs):
    """(capture, broker) -> api key -> (min, max, frame), from ApiVersions responses decoded
    whole (a response cut by the capture lists only some of the keys)."""
    asked = pairs["api_name"] == "ApiVersions"
    if "protocol" in pairs:
        asked &= pairs["protocol"] != "0.7"  # 0.7 has no versions
    versions = pairs[asked]
    whole = versions[["_stopped_at" not in body(r) for r in versions["response"]]]
    parts = whole.groupby("capture", sort=False) if scope(whole) else [(None, whole)]
    out = {}
    for capture, part in parts:
        for r in advertised(part).itertuples(index=False):
            have = (r.min_version, r.max_version, r.response_frame)
            out.setdefault((capture, r.broker), {})[int(r.api_key)] = have
    return out


def _unserved(row, served):
    """Why the broker cannot serve this request (None when it can), and the ApiVersions
    evidence: (why, (min, max, frame) or None)."""
    name = row.api_name
    if not isinstance(name, str) or name.startswith("Unknown("):
        return f"API key {row.api_key}, which no Kafka version has", None
    if name == "ApiVersions" or pd.isna(row.api_version):
        return None  # a client may ask ApiVersions at any version; the broker answers v0
    ranges = served.get((getattr(row, "capture", None), row.broker))
    if ranges is None:
        if "unknown version" in (named(row.reason) or ""):
            return f"{name} v{row.api_version}, a version no Kafka release defines", None
        return None
    have = ranges.get(int(row.api_key))
    if have is None:
        return f"{name}, which it does not serve at all", None
    if pd.isna(have[0]) or pd.isna(have[1]) or have[0] <= row.api_version <= have[1]:
        return None
    return f"{name} v{row.api_version} (it serves v{have[0]} to v{have[1]})", have


def unsupported_version(t):
    pairs = t.pairs
    if not has(pairs, "api_key", "api_name", "api_version", "broker", "request_frame"):
        return
    served = _served(pairs) if has(pairs, "response", "response_frame") else {}
    read = ("api_key", "api_name", "api_version", "request_frame", "request_start", "reason")
    pairs = only(pairs, *read, "client_id", "client", "broker", "protocol")
    if "protocol" in pairs:
        pairs = pairs[pairs["protocol"] != "0.7"]  # 0.7 has no versions
    if "reason" not in pairs:
        pairs = pairs.assign(reason=None)
    found = {}
    for row in pairs.itertuples(index=False):
        if pd.isna(row.api_key) or pd.isna(row.request_frame):
            continue
        why = _unserved(row, served)
        if why is not None:
            key = (*_capture(row).values(), named(row.client_id), row.client, row.broker, why[0])
            found.setdefault(key, (why[1], []))[1].append(row)
    for (*_, client_id, client, broker, what), (have, rows) in found.items():
        evidence = [] if have is None else [have[2]]
        yield Finding(
            kind="unsupported_version",
            severity="error",
            detail=(
                f"{client_label(client_id, client)} sent {broker} {what}: the broker rejects or "
                "drops such requests; pin the client to the versions the broker advertises"
            ),
            frames=_frames([r.request_frame for r in rows], evidence),
            client=client,
            client_id=client_id,
            broker=broker,
            time=rows[0].request_start,
            extra={
                **_capture(rows[0]),
                "count": len(rows),
                "api_key": int(rows[0].api_key),
                "api_version": _int(rows[0].api_version),
                "min_version": None if have is None else _int(have[0]),
                "max_version": None if have is None else _int(have[1]),
                "advertised_frame": None if have is None else _int(have[2]),
            },
        )


# -- unexpected_response --------------------------------------------------------------------


def _by_client(rows):
    """Rows grouped per client (client id and host, as a client reconnects from new ports)
    and broker, in their order."""
    found = {}
    for r in rows:
        key = (*_capture(r).values(), named(r.client_id), _address(r.client), r.broker)
        found.setdefault(key, []).append(r)
    return found.values()


def unexpected_response(t):
    pairs = t.pairs
    if not has(pairs, "api_name", "request", "response_frame", "request_frame"):
        return
    read = ("request", "response_frame", "request_frame", "request_start", "client_id", "client")
    produce = only(pairs, "api_name", "broker", *read)
    answered = (produce["api_name"] == "Produce") & produce["response_frame"].notna()
    answered &= may_contain(produce["request"], '"Acks":0')  # parsed: only those that may say 0
    unasked = [r for r in produce[answered].itertuples(index=False) if _acks(r.request) == 0]
    for rows in _by_client(unasked):
        first = rows[0]
        client_id = named(first.client_id)
        yield Finding(
            kind="unexpected_response",
            severity="warning",
            detail=(
                f"{first.broker} answered {len(rows)} Produce request(s) that "
                f"{client_label(client_id, _address(first.client))} sent with acks=0: a client "
                "expects no answer to those and may drop the connection on one; the broker "
                "departs from the protocol"
            ),
            frames=_frames([r.request_frame for r in rows], [r.response_frame for r in rows]),
            client=first.client,
            client_id=client_id,
            broker=first.broker,
            time=first.request_start,
            extra={
                **_capture(first),
                "count": len(rows),
                "response_frames": _frames([r.response_frame for r in rows]),
            },
        )


# -- truncated_request ----------------------------------------------------------------------


def _kafka_brokers(streams):
    kafka = streams[streams["kafka"].fillna(False).astype(bool)]
    return set(zip(*(kafka[c] for c in (*scope(streams), "broker")), strict=True))


_CUT_SHORT = r"^request cut short by the client: (\d+) of"


def _cut_short(pairs):
    """Connection key -> bytes of the requests its client cut short (rows that say so)."""
    if not has(pairs, "stream", "reason"):
        return {}
    sent = pairs["reason"].astype("string").str.extract(_CUT_SHORT)[0]
    mask = sent.notna().to_numpy()
    out = {}
    for row, n in zip(pairs[mask].itertuples(index=False), sent[mask], strict=True):
        key = _key(row, pairs)
        out[key] = out.get(key, 0) + int(n)
    return out


def _unfinished(row, brokers, scoped, cut):
    """The bytes a client sent of a request it never finished, else 0. Only where the
    capture has the whole stream (its SYN, no gap, nothing missing) and the client closed
    it: then a request row cut short by the client, or bytes the framer could not place
    (tables from before such rows), are a request cut by its sender."""
    if row.client_side_from != "syn" or row.end not in ("fin", "rst"):
        return 0
    if row.ended_by != "client" or _count(row.gaps) or _count(row.bytes_missing):
        return 0
    if pd.notna(row.kafka) and bool(row.kafka):
        return _count(row.bytes_skipped) + cut
    # not taken as Kafka, as its only request is cut: a broker other connections proved
    known = (*(getattr(row, c) for c in scoped), row.broker) in brokers
    return _count(row.bytes_delivered) if known and not _count(row.frames) else 0


def truncated_request(t):
    columns = ("stream", "direction", "kafka", "client_side_from", "end", "ended_by", "gaps")
    columns += ("bytes_missing", "bytes_skipped", "bytes_delivered", "frames", "end_frame")
    if not has(t.streams, *columns):
        return
    streams = t.streams
    brokers = _kafka_brokers(streams)
    light = without(t.pairs, "request", "response")
    conns = _connections(light) if has(light, "stream", "request_start") else {}
    cut = _cut_short(t.pairs)
    for row in streams[streams["direction"] == "request"].itertuples(index=False):
        key = _key(row, streams)
        sent = _unfinished(row, brokers, scope(streams), cut.get(key, 0))
        if sent <= 0:
            continue
        rows = conns.get(key)
        if rows is not None and has(rows, "reason"):
            rows = rows[~rows["reason"].astype("string").str.match(_CUT_SHORT).fillna(False)]
        ids = [] if rows is None else [c for c in rows["client_id"] if named(c)]
        client_id = ids[-1] if ids else None
        after = f" after {len(rows)} complete request(s)" if rows is not None and len(rows) else ""
        yield Finding(
            kind="truncated_request",
            severity="warning",
            detail=(
                f"{client_label(client_id, row.client)} sent {sent} bytes of a request to "
                f"{row.broker}{after} and closed the connection (frame {int(row.end_frame)}) "
                "without finishing it: the client gave up mid-request (a crash, a timeout or "
                "a framing bug), the capture lost nothing"
            ),
            frames=_frames(row.end_frame),
            client=row.client,
            client_id=client_id,
            broker=row.broker,
            time=row.end_time,
            extra={
                **_capture(row),
                "bytes": sent,
                "kafka": bool(row.kafka) if pd.notna(row.kafka) else False,
            },
        )


# -- unanswered -----------------------------------------------------------------------------


def _given_up(row, end):
    """Whether the client itself ended the connection while this request was still due (a
    Fetch held for its MaxWaitMs) or just sent: a shutdown, not a broker that failed it."""
    if end is None or end.ended_by != "client":
        return False
    wait = body(row.request).get("MaxWaitMs") if row.api_name == "Fetch" else 0
    wait = wait if isinstance(wait, int) and wait > 0 else 0
    return _ms(end.end_time, row.request_end) <= wait + SHUTDOWN_GRACE_MS


#: Reasons that blame the capture, not the broker, for a missing response.
CAPTURE_LOSS = ("lost in a capture gap",)


def _excuse(row, end):
    """Why a request's missing response is no fault of the broker's, else None."""
    if _given_up(row, end):
        return "the client closed while waiting, as at shutdown"
    reason = named(row.reason) or ""
    if any(words in reason for words in CAPTURE_LOSS):
        return "the capture lost it, not the broker"
    return None


def unanswered(t):
    pairs = t.pairs
    if not has(pairs, "stream", "status", "request_frame", "request_start"):
        return
    pairs = pairs.assign(**{c: None for c in ("request", "reason") if c not in pairs})
    ends = _ends(t.streams)
    for key, rows in _connections(pairs[pairs["status"] == "unanswered"]).items():
        excuses = {_excuse(r, ends.get(key)) for r in rows.itertuples(index=False)}
        excused = None not in excuses
        first = rows.iloc[0]
        apis = list(dict.fromkeys(rows["api_name"].dropna()))
        reason = named(first.reason) or "no response"
        yield Finding(
            kind="unanswered",
            severity="info" if excused else "warning",
            detail=(
                f"{len(rows)} request(s) of {client_label(first.client_id, first.client)} to "
                f"{first.broker} ({', '.join(apis)}) got no response: {reason}"
                + ("; " + "; ".join(sorted(excuses)) if excused else "")
            ),
            frames=_frames(rows["request_frame"]),
            client=first.client,
            client_id=named(first.client_id),
            broker=first.broker,
            time=first.request_start,
            extra={**_capture(first), "count": len(rows), "apis": apis},
        )


# -- throttled ------------------------------------------------------------------------------


def throttled(t):
    pairs = t.pairs
    if not has(pairs, "throttle_ms", "response_frame", "client_id", "client", "broker"):
        return
    rows = pairs[pd.to_numeric(pairs["throttle_ms"], errors="coerce").fillna(0) > 0]
    for group in _by_client(rows.itertuples(index=False)):
        first = group[0]
        client_id = named(first.client_id)
        worst = int(max(r.throttle_ms for r in group))
        yield Finding(
            kind="throttled",
            severity="warning",
            detail=(
                f"{first.broker} throttled {client_label(client_id, _address(first.client))} in "
                f"{len(group)} response(s), up to {worst} ms: the client exceeds a broker "
                "quota; raise the quota or spread the client's load"
            ),
            frames=_frames([r.response_frame for r in group]),
            client=first.client,
            client_id=client_id,
            broker=first.broker,
            time=getattr(first, "response_start", None),
            extra={**_capture(first), "count": len(group), "max_throttle_ms": worst},
        )


# -- head_of_line_blocking ------------------------------------------------------------------


def _blocked(rows):
    """(held Fetch, request behind it) pairs of one connection: a request that waited
    BLOCKED_MS or more, most of its latency, for the response before it, a Fetch the broker
    held."""
    answered = rows[rows["response_end"].notna()].sort_values("response_end", kind="stable")
    out = []
    for before, row in zip(answered.itertuples(), answered.iloc[1:].itertuples(), strict=False):
        if not (row.queue_ms >= BLOCKED_MS and row.queue_ms >= row.latency_ms / 2):
            continue  # (NaN compares false)
        if before.api_name == "Fetch" and before.server_ms >= BLOCKED_MS:
            out.append((before, row))
    return out


def head_of_line_blocking(t):
    columns = ("stream", "api_name", "queue_ms", "latency_ms", "server_ms", "response_end")
    if not has(t.pairs, *columns, "request_frame", "request_start"):
        return
    named_by = ("request_frame", "request_start", "client_id", "client", "broker")
    for rows in _connections(only(t.pairs, *columns, *named_by)).values():
        blocked = _blocked(rows)
        if not blocked:
            continue
        first = blocked[0][1]
        worst = max(float(r.queue_ms) for _, r in blocked)
        apis = list(dict.fromkeys(r.api_name for _, r in blocked))
        yield Finding(
            kind="head_of_line_blocking",
            severity="warning",
            detail=(
                f"{len(blocked)} request(s) ({', '.join(apis)}) of "
                f"{client_label(first.client_id, first.client)} waited up to {worst:.0f} ms "
                f"behind a long-polling Fetch on the same connection to {first.broker}: send "
                "them on "
                "another connection or lower the Fetch's MaxWaitMs"
            ),
            frames=_frames(
                [f.request_frame for f, _ in blocked], [r.request_frame for _, r in blocked]
            ),
            client=first.client,
            client_id=named(first.client_id),
            broker=first.broker,
            time=first.request_start,
            extra={
                **_capture(first),
                "count": len(blocked),
                "worst_queue_ms": worst,
                "fetch_frames": _frames([f.request_frame for f, _ in blocked]),
            },
        )


CHECKS = (
    client_rejected_response,
    unsupported_version,
    unexpected_response,
    truncated_request,
    unanswered,
    throttled,
    head_of_line_blocking,
)
