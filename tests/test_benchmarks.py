"""The benchmark's recorder still records what its manifest says (no benchmark runs here)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import dissector
from tools.broker import tansu_binary

ROOT = Path(__file__).resolve().parent.parent
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    if tansu_binary() is None:
        pytest.skip("no Tansu binary")
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump not installed")
    out = tmp_path_factory.mktemp("bench") / "real.pcap"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "record_real.py"), "--size-mb", "2"]
        + ["--out", str(out), "--max-seconds", "40"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads(out.with_name("real.expected.json").read_text())
    return out, manifest


def test_capture_is_complete(recording):
    out, manifest = recording
    assert sorted(p.name for p in out.parent.iterdir()) == ["real.expected.json", "real.pcap"]
    # The producers stop once the file reaches the size asked for; the consumers' drain adds
    # the rest.
    assert out.stat().st_size == manifest["size_bytes"] >= 2_000_000
    assert manifest["tcpdump"]["packets_dropped"] == 0
    assert manifest["failures"] == [] and manifest["notes"] == []


def test_capture_decodes_to_what_the_clients_did(recording):
    out, manifest = recording
    exchanges, records, codecs, statuses = Counter(), Counter(), {}, Counter()
    for ex in dissector.dissect(out, progress=False):
        exchanges[ex.client_id, ex.api_name] += 1
        statuses[ex.status] += 1
        if ex.api_name == "Produce":
            for topic in ex.request["TopicData"]:
                for part in topic["PartitionData"]:
                    for batch in part["Records"]["batches"]:
                        records[ex.client_id] += batch["record_count"]
                        codecs.setdefault(ex.client_id, set()).add(batch["compression"])
    assert set(statuses) <= {"ok", "error"}  # JoinGroup's MEMBER_ID_REQUIRED is an error
    clients = manifest["clients"]
    for cid, client in clients.items():
        requests = client["requests"] or {}
        if client["role"] == "producer":
            # librdkafka counted every Produce request it sent; each client's delivered
            # records are the records of its Produce requests (acks=1, no retries).
            assert client["records"] > 0 and client["errors"] == 0, cid
            assert records[cid] == client["records"], cid
            if "Produce" in requests:
                assert exchanges[cid, "Produce"] == requests["Produce"], cid
        else:
            assert client["records"] > 0 and exchanges[cid, "Fetch"] > 0, cid
            if "Fetch" in requests:
                assert exchanges[cid, "Fetch"] == requests["Fetch"], cid
    # librdkafka sends a batch uncompressed when the codec does not make it smaller.
    for codec in CODECS:
        seen = codecs[f"bench-producer-{codec}"]
        assert codec in seen and seen <= {codec, "none"}, (codec, seen)
    assert codecs["bench-kp-producer"] == {"none"}
    produced = manifest["produced_records"]
    group = [clients[c]["records"] for c in manifest["groups"]["bench-group"]]
    assert sum(group) == produced == clients["bench-kp-consumer"]["records"]
