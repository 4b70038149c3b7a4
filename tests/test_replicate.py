"""benchmarks/replicate.py: copies of a real recording played at once, each copy's clients on
addresses of their own, make a capture that dissects to the copies' exchanges added up."""

import subprocess
import sys
from collections import Counter
from pathlib import Path

import dissector

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "captures" / "kafka-python.pcap"


def test_copies_dissect_as_the_recording_times_the_copies(tmp_path):
    out = tmp_path / "x3.pcap"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "replicate.py"), str(SAMPLE), "--copies",
         "3", "-o", str(out), "--broker", "127.0.0.1:9092"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    one = dissector.read_pcap(SAMPLE)
    three = dissector.read_pcap(out)
    assert len(three) == 3 * len(one)
    key = ["api_name", "api_version", "status", "correlation_id", "client_id"]
    expected = Counter({k: 3 * n for k, n in Counter(map(tuple, one[key].values)).items()})
    assert Counter(map(tuple, three[key].values)) == expected
    clients = {c.rsplit(":", 1)[0] for c in three["client"]}
    assert len(clients) == 3 and all(c.startswith("127.") for c in clients)
    assert set(three["broker"]) == set(one["broker"])
    assert three["stream"].nunique() == 3 * one["stream"].nunique()
