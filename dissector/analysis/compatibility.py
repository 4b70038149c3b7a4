"""Upgrade planning: the request versions each client of a capture used that a given Apache
Kafka release does not serve, beside what the capture's broker advertised.

The ranges per release are data (dissector/protocol/releases/, from Apache Kafka's message
definitions at each release, by tools/gen_releases.py)."""

import functools
import json
import re
from importlib import resources

import pandas as pd

from ._frames import frame, has, per_capture
from .advertised import advertised

COLUMNS = [
    "client_id",
    "client",
    "api_name",
    "api_version",
    "requests",
    "supported",
    "advertised",
    "first_frame",
]
DATA = "dissector.protocol.releases"
# "4.0" or "4.0.0": a release's data is that of its x.y.0 (patch releases may differ).
RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.0)?")


@functools.cache
def _data():
    """Release -> {api_key: (name, min, max)}, in release order."""
    found = {}
    for item in resources.files(DATA).iterdir():
        if item.name.endswith(".json"):
            doc = json.loads(item.read_text())
            found[doc["release"]] = {
                a["api_key"]: (a["name"], a["min"], a["max"]) for a in doc["apis"]
            }
    return dict(sorted(found.items(), key=lambda kv: tuple(map(int, kv[0].split(".")))))


def releases():
    """The Apache Kafka releases known, oldest first: ["3.0", ..., "4.1"]."""
    return list(_data())


def _release(broker):
    match = RELEASE.fullmatch(str(broker).strip())
    name = f"{match[1]}.{match[2]}" if match else None
    if name not in _data():
        known = ", ".join(releases())
        raise ValueError(f"unknown Apache Kafka release {broker!r} (known: {known})")
    return name


def served(broker="4.0"):
    """What a release's broker serves: one row per API key with api_name, min_version and
    max_version. Raises ValueError for an unknown release."""
    rows = [(k, n, lo, hi) for k, (n, lo, hi) in _data()[_release(broker)].items()]
    return frame(rows, ["api_key", "api_name", "min_version", "max_version"])


def _span(low, high):
    return f"{low}–{high}"


def _host(address):
    """The host of an `ip:port` / `[ip]:port` address: a client is one row however many
    connections (ports) it opened."""
    if not isinstance(address, str):
        return address
    host = address.rsplit(":", 1)[0]
    return host[1:-1] if host.startswith("[") else host


def _advertised(pairs):
    """(broker, api_key) -> "min–max" from the capture's ApiVersions responses."""
    table = advertised(pairs)[["broker", "api_key", "min_version", "max_version"]]
    return {(b, int(k)): _span(lo, hi) for b, k, lo, hi in table.itertuples(index=False)}


def _requests(pairs):
    """The requests a client sent: 0.8+ ones with a version, and 0.7 ones (no version)."""
    sent = pairs[pairs["request_frame"].notna()]
    legacy = sent["protocol"].eq("0.7") if "protocol" in sent else False
    return sent[sent["api_version"].notna() | legacy]


@per_capture
def compatibility(pairs, broker="4.0"):
    """One row per (client id, client host, API, version) the capture used that the Apache
    Kafka release `broker` ("4.0", "4.0.0", "3.9", ...) does not serve: client_id, client,
    api_name, api_version, requests (count), supported (the release's range, "min–max", or
    "none" when it has no such API: 0.7 requests, which carry no version, are served by no
    release), advertised (the range the capture's broker advertised for that API, NaN when
    no ApiVersions response was seen) and first_frame (the first request at that version),
    in the order of first_frame.

    A version below the release's minimum is one the client would have to stop using; one
    above its maximum is usually negotiated down by clients that read ApiVersions.
    Raises ValueError for an unknown release, naming the known ones."""
    ranges = _data()[_release(broker)]
    if not has(pairs, "client_id", "client", "broker", "api_key", "api_version", "request_frame"):
        return frame([], COLUMNS)
    offered = _advertised(pairs)
    sent = _requests(pairs).assign(_host=lambda t: t["client"].map(_host))
    rows = []
    keys = ["client_id", "_host", "api_key", "api_name", "api_version"]
    for (client_id, host, key, name, version), group in sent.groupby(keys, dropna=False):
        # 0.7 requests have no version, and their request types are not today's API keys
        unversioned = pd.isna(version) or pd.isna(key)
        found = None if unversioned else ranges.get(int(key))
        if found and found[1] <= version <= found[2]:
            continue
        seen = set() if unversioned else {offered.get((b, int(key))) for b in group["broker"]}
        seen.discard(None)
        rows.append(
            {
                "client_id": client_id,
                "client": host,
                "api_name": name,
                "api_version": version,
                "requests": len(group),
                "supported": _span(found[1], found[2]) if found else "none",
                "advertised": ", ".join(sorted(seen)) if seen else float("nan"),
                "first_frame": group["request_frame"].min(),
            }
        )
    out = frame(rows, COLUMNS)
    out["api_version"] = out["api_version"].astype("Int16")
    out["first_frame"] = out["first_frame"].astype("Int64")
    out["requests"] = out["requests"].astype("int64")
    return out.sort_values(["first_frame"], kind="stable", ignore_index=True)
