"""Re-finding frame boundaries stays linear in the bytes whatever waits: a hostile client
sends many requests on one correlation id, then the broker side loses a segment and carries
bytes full of candidate frames for that id. The run is bounded in a subprocess."""

import json
import sys

from bounded import run_bounded
from kafka_encoder import encode_request, encode_response
from synth import Capture, Connection, frame_bytes

REQUESTS = 100_000
CANDIDATES = b"\x00\x00\x00\x08\x00\x00\x00\x07" * 384  # 3 KB: a size 8 and id 7, again and again


def _capture(path):
    cap = Capture()
    c = Connection(cap)
    c.request(
        encode_request(18, 3, 1, "x", {"ClientSoftwareName": "t", "ClientSoftwareVersion": "1"})
    )
    c.response(encode_response(18, 3, 1, {"ErrorCode": 0, "ApiKeys": [], "ThrottleTimeMs": 0}))
    one = frame_bytes(encode_request(3, 1, 7, "x", {"Topics": []}))
    c.send("c", one * REQUESTS, mss=60_000)
    c.seq["b"] += 100  # a broker segment lost: the next boundary is re-found
    c.send("b", CANDIDATES)
    answer = c.response(encode_response(3, 1, 7, {"Brokers": [], "ControllerId": 1, "Topics": []}))
    c.close()
    cap.write_pcap(path)
    return answer[-1]


SCRIPT = """
import collections, json, sys
import dissector
pairs = dissector.read_pcap(sys.argv[1])
streams = dissector.read_pcap(sys.argv[1], table="streams")
ok = pairs[pairs.status == "ok"]
print(json.dumps({
    "status": dict(collections.Counter(pairs.status)),
    "answered": [int(f) for f in ok.response_frame],
    "skipped": int(streams[streams.direction == "response"].bytes_skipped.sum()),
}))
"""


def test_many_requests_on_one_id_and_a_resync_cost_one_check_a_kind(tmp_path):
    path = tmp_path / "resync.pcap"
    answer_frame = _capture(path)
    # 100,000 decodes at each candidate byte took minutes
    done = run_bounded([sys.executable, "-c", SCRIPT, str(path)], 60, 2 << 30, check=True)
    got = json.loads(done.stdout)
    # The junk is no response (8 bytes do not decode as Metadata v1); the real one is found
    # after it and answers the oldest request on id 7; the others stay unanswered.
    assert got["status"] == {"ok": 2, "unanswered": REQUESTS - 1}
    assert answer_frame in got["answered"]
    assert got["skipped"] == len(CANDIDATES)
