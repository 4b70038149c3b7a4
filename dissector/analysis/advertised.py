"""What the brokers of a capture said they serve: the version ranges of their ApiVersions
responses (any connection, any client)."""

import pandas as pd

from ._frames import api_rows, body

COLUMNS = ["broker", "api_key", "min_version", "max_version", "response_frame"]


def advertised(pairs):
    """One row per broker and API key, from the newest ApiVersions response of that broker
    that answered without error: broker, api_key, min_version, max_version and the frame of
    that response (the evidence)."""
    found = {}
    for row in api_rows(pairs, "ApiVersions").itertuples(index=False):
        resp = body(row.response)
        if resp.get("ErrorCode", 0) != 0 or not resp.get("ApiKeys"):
            continue
        for item in resp["ApiKeys"]:
            key = (row.broker, item.get("ApiKey"))
            found[key] = (item.get("MinVersion"), item.get("MaxVersion"), row.response_frame)
    rows = [(b, k, lo, hi, f) for (b, k), (lo, hi, f) in found.items() if k is not None]
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values(["broker", "api_key"], kind="stable", ignore_index=True)
