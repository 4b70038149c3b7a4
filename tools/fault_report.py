"""Recovery from damaged captures, the dissector against tshark, as a Markdown table.

Every recorded sample capture is damaged as tests/damage.py describes (drop, reorder,
duplicate, snap length, mid-stream start); the table counts, per capture and damage, the
exchanges of the intact capture, those the damage touched (a byte of the request or the
response missing), those whose frames can all be found (findable: no byte lost, or lost only
in holes of known place and size after the frame's size prefix and header), and those each
tool recovers: the dissector with the same API key,
version, correlation id, client id, status and frames as in the intact capture (broker port
given, and found from the traffic), tshark with the request header at the same frame and the
response at the same frame matched to it.

    python tools/fault_report.py [--cases drop-10%-s1,snap-200,...] [--per-capture]
"""

import argparse
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import damage  # noqa: E402
import tshark_oracle  # noqa: E402
from samples import client_captures  # noqa: E402

CAPTURES = ROOT / "captures"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(damage.TSHARK_CASES))
    parser.add_argument("--per-capture", action="store_true", help="one row per capture too")
    args = parser.parse_args(argv)
    if not tshark_oracle.available():
        parser.error("tshark is not installed")
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in damage.CASES]
    if unknown:
        parser.error(f"unknown cases: {', '.join(unknown)}; known: {', '.join(damage.CASES)}")
    samples = [
        p
        for p in client_captures()  # not the findings-* scenarios: manifests of their own
        if p.with_suffix(".expected.json").exists() and not p.name.startswith("legacy-")
    ]
    with tempfile.TemporaryDirectory() as work:
        table = damage.versus_tshark(samples, cases, Path(work))
    print(
        "| capture | damage | exchanges | touched | findable | dissector --port | dissector "
        "| tshark |\n|---|---|---:|---:|---:|---:|---:|---:|"
    )
    totals = defaultdict(lambda: [0, 0, 0, 0, 0, 0])
    for (capture, case), c in table.items():
        row = (c.exchanges, c.touched, c.findable, c.ours["port"], c.ours["auto"], c.tshark)
        totals[case] = [a + b for a, b in zip(totals[case], row, strict=True)]
        if args.per_capture:
            print(f"| {capture} | {case} | " + " | ".join(map(str, row)) + " |")
    for case in ["intact", *cases]:
        print(f"| all {len(samples)} | **{case}** | " + " | ".join(map(str, totals[case])) + " |")


if __name__ == "__main__":
    main()
