"""Damage of known size and place, from the recorded kafka-python capture rewritten with
damage.py: a segment lost inside a multi-segment Produce request or Fetch response, a capture
that starts after a request was sent, a client that resets the connection while a Fetch
response is arriving.

kafka-python.pcap, connection of client port 38312: Produce v7 corr 3 (frame 115, its
126-byte response 116), Produce v9 corr 4 of 70,146 bytes in segments 117, 118 and 120 (32,768,
32,768 and 4,610 bytes), its response 121. Connection of client port 38324: Fetch v12 corr 6
(frame 174), its 71,426-byte response in segments 175, 177 and 179 (32,768, 32,768 and 5,890
bytes), then the client's FIN at 198.
"""

from pathlib import Path

import damage
import pandas as pd
import pytest

import dissector
from dissector.tables import build_table
from dissector.tables.bodies import parse_body
from dissector.tables.summary import capture_notes

SAMPLE = Path(__file__).resolve().parent.parent / "captures" / "kafka-python.pcap"
PRODUCER = "127.0.0.1:38312"
CONSUMER = "127.0.0.1:38324"


@pytest.fixture(scope="module")
def pcap():
    return damage.read_pcap(SAMPLE)


@pytest.fixture(scope="module")
def intact():
    return dissector.read_pcap(SAMPLE)


def dissect(pcap, damaged, tmp_path, **kw):
    """pairs (frames numbered as in the intact capture), streams and the summary's notes."""
    path = tmp_path / "damaged.pcap"
    damaged.write(path, pcap)
    d = dissector.Dissector(**kw)
    rows = []
    for packet in dissector.capture.open_capture(path):
        rows += d.feed(packet)
    rows += d.finish()
    pairs = build_table(rows, "pairs")
    for column in ("request_frame", "response_frame"):
        pairs[column] = pd.array(
            [None if pd.isna(f) else damaged.origin[int(f) - 1] for f in pairs[column]],
            dtype="Int64",
        )
    return pairs, build_table(d.ended(), "streams"), capture_notes(d.stats())


def keys(pairs):
    cols = ["client", "api_key", "correlation_id", "request_frame", "response_frame", "status"]
    return sorted(
        tuple(None if pd.isna(v) else v for v in r) for r in pairs[cols].itertuples(index=False)
    )


def one(pairs, client, corr):
    rows = pairs[(pairs.client == client) & (pairs.correlation_id == corr)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def direction(streams, client, which):
    return streams[(streams.client == client) & (streams.direction == which)].iloc[0]


def test_a_lost_segment_inside_a_produce_request(pcap, intact, tmp_path):
    pairs, streams, notes = dissect(pcap, damage._remove("drop", pcap.packets, {117}), tmp_path)
    row = one(pairs, PRODUCER, 4)
    assert (row.api_name, row.api_version, row.client_id) == ("Produce", 9, "kp-producer-acksall")
    assert (row.request_frame, row.response_frame, row.status) == (120, 121, "ok")
    assert row.reason == "request lost 32768 of 70146 bytes in a capture gap"
    assert (row.request_bytes, row.response_bytes, row.error_code) == (70146, 60, 0)
    assert row.latency_ms > 0 and list(row.topics) == ["kp-events"]
    request = parse_body(row.request)
    assert request["_stopped_at"] == 56 and request["Acks"] == -1  # at the record set
    # Every other exchange is as in the intact capture, the response included.
    assert keys(pairs) == keys(intact)
    side = direction(streams, PRODUCER, "request")
    assert (side.bytes_missing, side.gaps, side.frames) == (32768, 1, 4)
    assert side.bytes_skipped == 4610  # the segment after the hole: the frame's end is known
    assert side.bytes_abandoned == 0
    assert notes == ["warning: the capture lost data: 32768 bytes missing in 1 gaps, "
                     "4610 bytes skipped re-finding frame boundaries"]  # fmt: skip


def test_a_lost_segment_inside_a_fetch_response(pcap, intact, tmp_path):
    pairs, streams, _ = dissect(pcap, damage._remove("drop", pcap.packets, {176}), tmp_path)
    row = one(pairs, CONSUMER, 6)
    assert (row.api_name, row.api_version) == ("Fetch", 12)
    assert (row.request_frame, row.response_frame, row.status) == (174, 179, "ok")
    assert row.reason == "response lost 32768 of 71426 bytes in a capture gap"
    assert (row.response_bytes, row.error_code) == (71426, 0)
    response = parse_body(row.response)
    assert response["_stopped_at"] == 65 and response["ErrorCode"] == 0  # at the records
    assert keys(pairs) == keys(intact)
    side = direction(streams, CONSUMER, "response")
    assert (side.bytes_missing, side.bytes_skipped, side.frames) == (32768, 5890, 6)


def test_a_lost_segment_that_takes_the_size_prefix_is_found_again(pcap, tmp_path):
    # The Fetch response's first segment holds its size prefix: the response is lost.
    pairs, _, _ = dissect(pcap, damage._remove("drop", pcap.packets, {174}), tmp_path)
    row = one(pairs, CONSUMER, 6)
    assert pd.isna(row.response_frame) and row.status == "unanswered"
    assert row.reason == "response lost in a capture gap"


def test_a_capture_that_starts_after_a_request_was_sent(pcap, intact, tmp_path):
    # The capture starts at frame 116: Produce corr 3's response, its request not captured.
    start = damage._remove("cut", pcap.packets, set(range(115)))
    for ports in ([], [9092]):
        pairs, streams, _ = dissect(pcap, start, tmp_path, ports=ports)
        orphan = one(pairs, PRODUCER, 3)
        assert orphan.status == "orphan_response" and pd.isna(orphan.api_key)
        assert pd.isna(orphan.request_frame) and orphan.response_frame == 116
        assert orphan.response_bytes == 126
        row = one(pairs, PRODUCER, 4)
        assert (row.request_frame, row.response_frame, row.status) == (120, 121, "ok")
        side = direction(streams, PRODUCER, "response")
        assert (side.bytes_skipped, side.frames, side.bytes_framed) == (0, 2, 186)
        # Everything else is as in the intact capture from frame 116 on.
        later = intact[intact.request_frame.fillna(0) >= 116]
        assert keys(pairs[pairs.correlation_id.notna() & pairs.api_key.notna()]) == keys(later)


def test_a_client_reset_during_a_fetch_response_is_no_capture_loss(pcap, tmp_path):
    # The capture rewritten: the client resets the connection after segment 177 of the Fetch
    # response; the broker's segment 179 and the rest of the connection are gone.
    reset = damage.reset_after(pcap.packets, 177, CONSUMER)
    pairs, streams, notes = dissect(pcap, reset, tmp_path)
    row = one(pairs, CONSUMER, 6)
    assert (row.api_name, row.request_frame) == ("Fetch", 174) and pd.isna(row.response_frame)
    assert row.status == "unanswered"
    assert row.reason == "connection ended by the client (RST) at frame 178"
    side = direction(streams, CONSUMER, "response")
    assert (side.end, side.ended_by) == ("rst", "client")
    assert side.bytes_missing == 0 and side.gaps == 0
    assert side.bytes_skipped == side.bytes_abandoned == 65536  # segments 175 and 177
    assert direction(streams, CONSUMER, "request").bytes_abandoned == 0
    assert not any("lost data" in line for line in notes)
    assert (
        "note: 65536 bytes of frames left unfinished when the other side ended the connection "
        "(RST or FIN): abandoned by a peer, not lost by the capture"
    ) in notes
