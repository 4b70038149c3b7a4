"""The sample captures of `captures/` and their manifests, read once per test session."""

import json
from functools import cache
from pathlib import Path

import dissector

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


@cache
def table(name, which="pairs", **options):
    return dissector.read_pcap(CAPTURES / f"{name}.pcap", table=which, **options)


@cache
def manifest(name):
    return json.loads((CAPTURES / f"{name}.expected.json").read_text())


def client_captures():
    """The captures of the client scenarios (tools/record_captures.py, with manifests of what
    was sent and received) and the 0.7 ones, in name order. The finding scenarios
    (`findings-*`, one misbehaviour each) have manifests of their own shape and tests of
    their own."""
    return sorted(p for p in CAPTURES.glob("*.pcap") if not p.name.startswith("findings-"))
