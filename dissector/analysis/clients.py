"""Who talks to the brokers: one row per client id and address."""

import pandas as pd

from ._frames import (
    api_rows,
    body,
    connections,
    frame,
    has,
    named_apis,
    per_capture,
    spark_aware,
)

COLUMNS = [
    "client_id",
    "address",
    "software_name",
    "software_version",
    "api_versions",
    "connections",
    "requests",
    "errors",
    "first_seen",
    "last_seen",
]


def _address(client):
    """The host of an `ip:port` / `[ip]:port` address."""
    if not isinstance(client, str):
        return None
    host = client.rsplit(":", 1)[0]
    return host[1:-1] if host.startswith("[") else host


def _software(pairs):
    """Connection -> (name, version) from ApiVersions v3+ requests."""
    found = {}
    rows = api_rows(pairs, "ApiVersions")
    for conn, request in zip(connections(rows), rows["request"], strict=True):
        req = body(request)
        if req.get("ClientSoftwareName"):
            found[conn] = (req["ClientSoftwareName"], req.get("ClientSoftwareVersion"))
    return found


@spark_aware
@per_capture
def clients(pairs):
    """One row per (client id, client address): the software it announced (ApiVersions v3+
    ClientSoftwareName/Version), the API versions it used (`{"Fetch": [12], ...}`), its
    connections, requests and error responses, and when it was first and last seen.
    Aggregated in Spark for a Spark DataFrame."""
    if not has(pairs, "client", "stream"):
        return frame([], COLUMNS)
    software = _software(pairs)
    rows = named_apis(pairs).assign(
        address=pairs["client"].map(_address),
        client_id=pairs["client_id"].astype(object).where(pairs["client_id"].notna(), None),
        _conn=connections(pairs),
        _seen=pairs["request_start"].fillna(pairs["response_start"]),
        _last=pairs["response_end"].fillna(pairs["request_end"]),
    )
    out = []
    for (client_id, address), group in rows.groupby(["client_id", "address"], dropna=False):
        names = [software[c] for c in group["_conn"].unique() if c in software]
        versions = {}
        for api, version in group[["api_name", "api_version"]].dropna().itertuples(index=False):
            versions.setdefault(api, set()).add(int(version))
        out.append(
            {
                "client_id": client_id,
                "address": address,
                "software_name": names[0][0] if names else None,
                "software_version": names[0][1] if names else None,
                "api_versions": {k: sorted(v) for k, v in sorted(versions.items())},
                "connections": group["_conn"].nunique(),
                "requests": int(group["request_frame"].notna().sum()),
                "errors": int((group["error_code"].fillna(0) != 0).sum()),
                "first_seen": group["_seen"].min(),
                "last_seen": pd.concat([group["_seen"], group["_last"]]).max(),
            }
        )
    return frame(out, COLUMNS).sort_values("first_seen", kind="stable").reset_index(drop=True)
