"""The `streams` table: every byte of every connection accounted for, and the sums add up."""

import json
from pathlib import Path

import pytest
from kafka_encoder import encode_request, encode_response
from synth import Capture, Connection, frame_bytes

import dissector
from dissector.tables import build_table
from tools import fuzz

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
ALL = sorted(CAPTURES.glob("*.pcap"))


def assert_adds_up(streams):
    assert (
        streams.bytes_seen
        == streams.bytes_delivered + streams.bytes_duplicate + streams.bytes_dropped
    ).all()
    # A conflicting byte is a duplicate one whose copies disagreed.
    assert (streams.bytes_conflicting <= streams.bytes_duplicate).all()
    kafka = streams[streams.kafka]
    parts = kafka.bytes_tls + kafka.bytes_framed + kafka.bytes_skipped
    assert (kafka.bytes_delivered == parts).all()
    assert (kafka.bytes_decoded >= 0).all()
    # Abandoned bytes are skipped ones that a peer's end, not the capture, left unframed.
    assert (kafka.bytes_abandoned <= kafka.bytes_skipped).all()
    assert (
        kafka.bytes_framed == kafka.bytes_decoded + kafka.bytes_malformed + kafka.bytes_unused
    ).all()


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_every_capture_adds_up_and_frames_match_rows(path):
    dissection = dissector.dissect(path)
    exchanges = list(dissection)
    streams = build_table(dissection.ended, "streams")
    pairs = build_table(exchanges, "pairs")
    assert_adds_up(streams)
    kafka = streams[streams.kafka]
    assert set(kafka.stream) == set(pairs.stream)
    # Every request frame is one row; every response frame is one row's response.
    requests = kafka[kafka.direction == "request"]
    responses = kafka[kafka.direction == "response"]
    assert kafka.bytes_unused.sum() == 0
    assert pairs.request_frame.notna().sum() == requests.frames.sum()
    assert pairs.response_frame.notna().sum() == responses.frames.sum()
    # Recorded captures are clean: nothing missing, skipped or malformed but Tansu's replies,
    # and the requests a scenario cut short on purpose, framed and malformed (the capture
    # lost nothing: their client stopped sending).
    assert kafka.bytes_missing.sum() == 0
    assert kafka.bytes_skipped.sum() == 0
    short = pairs.reason.fillna("").str.startswith("request cut short by the client: ")
    assert pairs[short].request_bytes.sum() == _cut_on_purpose(path)
    # A frame that did not decode names its side in its row's reason (a row may be malformed
    # and unanswered at once: an unknown API key the broker never answered).
    undecoded = pairs.reason.fillna("").str.count(r"(?:request|response) (?:body:|cut short)")
    assert kafka.malformed_frames.sum() == undecoded.sum()
    assert (pairs.status == "malformed").sum() <= (undecoded > 0).sum()


def _cut_on_purpose(path):
    """The bytes of requests the recording scenario sent only in part before closing."""
    manifest = json.loads(path.with_suffix(".expected.json").read_text())
    cut = manifest.get("facts", {}).get("connections", []) if "truncated" in path.stem else []
    return sum(c["bytes_sent"] for c in cut)


def test_gaps_garbage_and_truncation_are_accounted(tmp_path):
    cap = Capture()
    c = Connection(cap)
    req = encode_request(18, 3, 1, "acct", {})
    resp = encode_response(18, 3, 1, {"ErrorCode": 0, "ApiKeys": []})
    c.request(req)
    c.response(resp)
    # A request whose header was not captured: skip 10 bytes of sequence space. Its size
    # prefix keeps framing in step; the frame, with no header to show, is unused.
    second = frame_bytes(encode_request(3, 9, 2, "acct", {"Topics": None}))
    c.send("c", second[:6])
    c.seq["c"] += 10
    c.send("c", second[16:])
    c.request(encode_request(18, 3, 3, "acct", {}))  # in step after the hole
    c.response(encode_response(18, 3, 3, {"ErrorCode": 0, "ApiKeys": []}))
    c.send("b", frame_bytes(b"\x00\x00\x00\x03"))  # a response to no request: orphan
    c.send("c", frame_bytes(req)[:9])  # the capture ends inside a request
    path = cap.write_pcap(tmp_path / "acct.pcap")
    dissection = dissector.dissect(path)
    exchanges = list(dissection)
    streams = build_table(dissection.ended, "streams")
    assert_adds_up(streams)
    request = streams[streams.direction == "request"].iloc[0]
    assert request.bytes_missing == 10 and request.gaps == 1
    # what followed the hole in the cut request, and the cut end
    assert request.bytes_skipped == len(second) - 16 + 9
    assert request.bytes_unused == 6  # the size prefix and 2 bytes of the header
    assert request.bytes_abandoned == 0  # the capture ended, not the broker
    pairs = build_table(exchanges, "pairs")
    assert list(pairs.status) == ["ok", "ok", "orphan_response"]


def _answered_before_asked(path, cut=None):
    """A connection joined mid-stream (no SYN): the broker's first frame, kafka-python's real
    ApiVersions v4 response, captured before the request it answers (only its first `cut`
    bytes: the capture lost the rest), then that request, then the client closes. Which side
    is the client is decided only at the end, by the request. Returns the exchanges, the
    response direction's streams row, and the response frame's size."""
    frames = fuzz.kafka_frames("kafka-python.pcap")
    request = next(body for kind, key, _, body in frames if kind == fuzz.REQUEST and key == 18)
    response = next(body for kind, key, _, body in frames if kind != fuzz.REQUEST and key == 18)
    sent = frame_bytes(response)
    cap = Capture()
    c = Connection(cap, handshake=False)
    c.send("b", sent[:cut])
    c.seq["b"] += len(sent) - len(sent[:cut])  # the bytes the capture lost
    c.request(request)
    c.close()
    dissection = dissector.dissect(cap.write_pcap(path))
    exchanges = list(dissection)
    streams = build_table(dissection.ended, "streams")
    assert_adds_up(streams)
    answers = streams[streams.direction == "response"].iloc[0]
    assert (answers.end, answers.ended_by) == ("fin", "client")
    return exchanges, answers, len(sent)


# Found by tools/fuzz.py (target tcp): until the client side is decided, each side is framed
# both as a client's and as a broker's, and the broker's framing as a client's is dropped
# then. What that dropped framing counted must go with it.


def test_bytes_abandoned_are_counted_by_the_framing_a_side_keeps(tmp_path):
    """Framed as a client's, the broker's bytes end inside a frame when the client closes:
    abandoned, had that framing stayed. Framed as answers they are one whole response."""
    exchanges, answers, size = _answered_before_asked(tmp_path / "late.pcap")
    assert answers.bytes_framed == size and answers.frames == 1
    assert answers.bytes_skipped == answers.bytes_abandoned == 0
    assert [(e.api_name, e.status, e.request_frame, e.response_frame) for e in exchanges] == [
        ("ApiVersions", "ok", 2, 1)
    ]


def test_bytes_unused_are_counted_by_the_framing_a_side_keeps(tmp_path):
    """Framed as a client's, the broker's cut frame is held as a request that never decodes:
    unused, had that framing stayed. Framed as answers, it answers nothing asked yet: its
    bytes are skipped, and the request goes unanswered."""
    exchanges, answers, size = _answered_before_asked(tmp_path / "cut.pcap", cut=83)
    assert answers.bytes_missing == size - 83 and answers.gaps == 1
    assert answers.bytes_skipped == 83 and answers.bytes_framed == answers.bytes_unused == 0
    assert [(e.api_name, e.status) for e in exchanges] == [("ApiVersions", "unanswered")]
