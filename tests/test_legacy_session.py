"""0.7 traffic through the whole pipeline: in-order matching, no responses to produce, and
per-connection detection beside 0.8+ traffic on the same port.

No broker exists to record 0.7 traffic from: the captures used here are built byte by byte
from the 0.7 wire-format documents by tools/make_legacy_captures.py.
"""

import json
from base64 import b64decode
from pathlib import Path

import pandas as pd
import pytest

import dissector

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def expected_rows(manifest):
    rows = []
    for conn in manifest["connections"]:
        for r in conn["requests"]:
            resp = r.get("response")
            rows.append(
                (
                    conn["client"],
                    conn["protocol"],
                    r["api_name"],
                    r["request_last_frame"],
                    resp["last_frame"] if resp else None,
                    resp.get("error_name", "NONE") if resp else None,
                    ("ok" if not resp.get("error_code") else "error")
                    if resp
                    else "no_response_expected",
                )
            )
    return sorted(rows, key=lambda r: (r[3], r[0], r[4] or 0))


@pytest.mark.parametrize("name", ["legacy-0.7", "legacy-0.7-mixed"])
def test_rows_match_what_was_built(name):
    manifest = json.loads((CAPTURES / f"{name}.expected.json").read_text())
    pairs = dissector.read_pcap(CAPTURES / f"{name}.pcap")
    got = sorted(
        (
            (
                r.client,
                r.protocol,
                r.api_name,
                r.request_frame,
                None if r.response_frame is pd.NA else int(r.response_frame),
                r.error_name if isinstance(r.error_name, str) else None,
                r.status,
            )
            for r in pairs.itertuples()
        ),
        key=lambda r: (r[3], r[0], r[4] or 0),
    )
    assert got == expected_rows(manifest)


def test_07_rows_have_no_version_or_correlation_id_and_decoded_bodies():
    pairs = dissector.parse_bodies(dissector.read_pcap(CAPTURES / "legacy-0.7.pcap"))
    assert set(pairs.protocol) == {"0.7"}
    assert pairs.api_version.isna().all() and pairs.correlation_id.isna().all()
    fetch = pairs[(pairs.api_name == "Fetch") & (pairs.status == "ok")].iloc[0]
    # Bodies in tables are JSON text: bytes in them are base64.
    values = [b64decode(m.get("value")) for m in fetch.response["Messages"][:3]]
    assert values == [b"woof", b"arf", b"bark"]
    gz = fetch.response["Messages"][3]
    assert gz["compression"] == "gzip" and [b64decode(m["value"]) for m in gz["messages"]] == [
        b"howl",
        b"yip",
    ]
    oor = pairs[pairs.error_name == "OFFSET_OUT_OF_RANGE"]
    assert len(oor) == 1 and oor.iloc[0].status == "error"
    offsets = pairs[pairs.api_name == "Offsets"]
    assert [r["Offsets"] for r in offsets.response] == [[0], [158]]


def test_protocol_can_be_forced():
    # Forced to 0.8+, the 0.7 connection's frames are read as 0.8+ ones and do not decode.
    pairs = dissector.read_pcap(CAPTURES / "legacy-0.7-mixed.pcap", protocol="0.8+")
    assert "0.7" not in set(pairs.protocol)
    forced = dissector.read_pcap(CAPTURES / "legacy-0.7-mixed.pcap", protocol="0.7")
    assert set(forced.protocol) == {"0.7"}
