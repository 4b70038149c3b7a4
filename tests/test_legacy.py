"""The Kafka 0.7 wire format: requests, responses, messages, the shape check, and the
hand-built 0.7 captures decoded into what their manifests say."""

import contextlib
import gzip
import json
import random
import struct
import zlib
from collections import defaultdict
from pathlib import Path

import cramjam
import pytest

from dissector.errors import DecodeError
from dissector.protocol.codegen import Context
from dissector.protocol.legacy import (
    REQUEST_TYPES,
    decode_request,
    decode_response,
    error_name,
    expects_response,
    plausible_request,
)
from dissector.protocol.legacy import messages as legacy_messages
from dissector.protocol.messages import decode_body, decode_request_header, decode_response_header
from dissector.session.plausible import plausible_request as plausible_modern
from tools import make_legacy_captures as mk
from tools.make_legacy_captures import Msg, message_set

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
NAMES = ["legacy-0.7", "legacy-0.7-mixed"]


def crc(b):
    return struct.pack(">I", zlib.crc32(b))


# --- bytes written out by hand, field by field -------------------------------------------------

WOOF = b"\x00\x00\x00\x09" + b"\x00" + crc(b"woof") + b"woof"  # magic 0: length 1+4+4
BARK = b"\x00\x00\x00\x0a" + b"\x01\x00" + crc(b"bark") + b"bark"  # magic 1, no codec


def test_api_surface():
    assert REQUEST_TYPES == {
        0: "Produce",
        1: "Fetch",
        2: "MultiFetch",
        3: "MultiProduce",
        4: "Offsets",
    }
    assert [expects_response(t) for t in range(5)] == [False, True, True, False, True]
    assert [error_name(c) for c in range(-1, 5)] == [
        "UNKNOWN",
        "NONE",
        "OFFSET_OUT_OF_RANGE",
        "INVALID_MESSAGE",
        "WRONG_PARTITION",
        "INVALID_FETCH_SIZE",
    ]
    assert error_name(9) == "UNKNOWN_ERROR_9"


def test_produce_request_by_hand():
    body = WOOF + BARK
    data = b"\x00\x00" + b"\x00\x04dogs" + b"\x00\x00\x00\x02" + struct.pack(">i", len(body)) + body
    req = decode_request(data)
    assert req["request_type"] == 0 and req["api_name"] == "Produce"
    b = req["body"]
    assert (b["Topic"], b["Partition"]) == ("dogs", 2)
    m0, m1 = b["Messages"]
    assert m0 == {
        "offset": None,  # nothing assigned one: 0.7 tells a producer no offset
        "magic": 0,
        "attributes": None,
        "compression": "none",
        "crc": zlib.crc32(b"woof"),
        "crc_ok": True,
        "value": b"woof",
    }
    assert (m1["offset"], m1["magic"], m1["attributes"], m1["value"]) == (None, 1, 0, b"bark")
    assert m1["crc_ok"] and "messages" not in m1


def test_fetch_request_by_hand():
    data = bytes.fromhex("0001 0004 646f6773 00000000 000000000000000d 00000400")
    assert decode_request(data) == {
        "request_type": 1,
        "api_name": "Fetch",
        "body": {"Topic": "dogs", "Partition": 0, "Offset": 13, "MaxSize": 1024},
    }
    assert len(data) == 2 + 2 + len("dogs") + 4 + 8 + 4
    assert plausible_request(data)


def test_offsets_request_and_response_by_hand():
    data = bytes.fromhex("0004 0004 646f6773 00000001 fffffffffffffffe 00000001")
    assert decode_request(data)["body"] == {
        "Topic": "dogs",
        "Partition": 1,
        "Time": -2,
        "MaxNumber": 1,
    }
    resp = bytes.fromhex("0000 00000002 000000000000009e 0000000000000000")
    assert decode_response(4, resp, None) == {
        "ErrorCode": 0,
        "error_name": "NONE",
        "Offsets": [158, 0],
    }


def test_multi_fetch_request_and_response():
    data = mk.multi_request(
        2, [mk.fetch_block("dogs", 0, 13, 4096), mk.fetch_block("cats", 3, 0, 100)]
    )
    req = decode_request(data)
    assert req["api_name"] == "MultiFetch"
    assert req["body"] == {
        "TopicPartitions": [
            {"Topic": "dogs", "Partition": 0, "Offset": 13, "MaxSize": 4096},
            {"Topic": "cats", "Partition": 3, "Offset": 0, "MaxSize": 100},
        ]
    }
    # Top-level error code, then one fetch response per part, each with its own length.
    resp = mk.multi_fetch_response([mk.fetch_response(0, BARK + WOOF), mk.fetch_response(1, b"")])
    out = decode_response(2, resp, req["body"])
    assert out["ErrorCode"] == 0
    dogs, cats = out["TopicPartitions"]
    assert (dogs["Topic"], dogs["Partition"], dogs["ErrorCode"]) == ("dogs", 0, 0)
    assert [(m["offset"], m["value"]) for m in dogs["Messages"]] == [(13, b"bark"), (27, b"woof")]
    assert (cats["Topic"], cats["ErrorCode"], cats["error_name"]) == (
        "cats",
        1,
        "OFFSET_OUT_OF_RANGE",
    )
    assert cats["Messages"] == []
    # Without the request, parts are read to the end and their offsets are unknown.
    blind = decode_response(2, resp, None)["TopicPartitions"]
    assert [m["offset"] for m in blind[0]["Messages"]] == [None, None]
    assert "Topic" not in blind[0]


def test_multi_produce_request():
    data = mk.multi_request(
        3,
        [
            mk.produce_block("cats", 1, message_set([Msg(b"meow"), Msg(b"purr", magic=0)])[0]),
            mk.produce_block("dogs", 0, WOOF),
        ],
    )
    req = decode_request(data)
    assert req["request_type"] == 3 and not expects_response(3)
    cats, dogs = req["body"]["TopicPartitions"]
    assert [(m["magic"], m["value"]) for m in cats["Messages"]] == [(1, b"meow"), (0, b"purr")]
    assert (dogs["Topic"], dogs["Partition"], dogs["Messages"][0]["value"]) == ("dogs", 0, b"woof")
    assert plausible_request(data)


def test_fetch_response_offsets_and_partial_message():
    request = decode_request(mk.fetch_request("dogs", 0, 1000, 30))["body"]
    out = decode_response(1, b"\x00\x00" + WOOF + BARK[:7], request)
    assert out["ErrorCode"] == 0 and out["error_name"] == "NONE"
    # The fetch offset is the first message's offset; a cut-off message is normal in 0.7.
    assert [m["offset"] for m in out["Messages"]] == [1000]
    assert out["PartialMessageBytes"] == 7
    assert "PartialMessageBytes" not in decode_response(1, b"\x00\x00" + WOOF, request)
    # Without the request the offsets are unknown.
    assert decode_response(1, b"\x00\x00" + BARK + WOOF, None)["Messages"][1]["offset"] is None


def test_error_responses():
    assert decode_response(1, b"\x00\x01", None) == {
        "ErrorCode": 1,
        "error_name": "OFFSET_OUT_OF_RANGE",
        "Messages": [],
    }
    assert decode_response(4, b"\x00\x03", None) == {
        "ErrorCode": 3,
        "error_name": "WRONG_PARTITION",
    }
    assert decode_response(2, b"\xff\xff", None)["error_name"] == "UNKNOWN"


def test_no_response_to_produce():
    for kind in (0, 3):
        with pytest.raises(DecodeError):
            decode_response(kind, b"\x00\x00", None)


# --- messages ------------------------------------------------------------------------------------


def decode_set(data, **kw):
    messages, partial = legacy_messages.decode_message_set(data, 0, len(data), **kw)
    assert partial == 0
    return messages


@pytest.mark.parametrize("codec,name", [(1, "gzip"), (2, "snappy")])
def test_compressed_sets(codec, name):
    wrapper = Msg(codec=codec, inner=[Msg(b"howl"), Msg(b"yip", magic=0)])
    data = WOOF + wrapper.encode()
    first, m = decode_set(data, base_offset=500)
    assert first["offset"] == 500
    assert (m["offset"], m["magic"], m["attributes"], m["compression"]) == (513, 1, codec, name)
    assert m["crc_ok"] and m["value"] == wrapper.payload
    # Inner messages share the wrapper's offset: only it can be fetched.
    assert [(i["offset"], i["magic"], i["value"], i["crc_ok"]) for i in m["messages"]] == [
        (513, 1, b"howl", True),
        (513, 0, b"yip", True),
    ]


def test_snappy_without_stream_framing():
    inner = message_set([Msg(b"a"), Msg(b"b")])[0]
    for payload in (
        bytes(cramjam.snappy.compress_raw(inner)),
        bytes(cramjam.snappy.compress(inner)),
    ):
        raw = b"\x01\x02" + crc(payload) + payload
        (m,) = decode_set(struct.pack(">i", len(raw)) + raw)
        assert [i["value"] for i in m["messages"]] == [b"a", b"b"]


def test_crc_mismatch():
    bad = bytearray(BARK)
    bad[-1] ^= 0xFF
    (m,) = decode_set(bytes(bad))
    assert m["crc_ok"] is False and m["crc"] == zlib.crc32(b"bark")


def test_broken_compressed_payload_is_reported_not_raised():
    for payload in (b"not gzip", gzip.compress(b"\x00\x00\x00\x01")):
        raw = b"\x01\x01" + crc(payload) + payload
        (m,) = decode_set(struct.pack(">i", len(raw)) + raw)
        assert m["messages"] == [] and m["error"]
    raw = b"\x01\x03" + crc(b"x") + b"x"  # codec 3 does not exist in 0.7
    (m,) = decode_set(struct.pack(">i", len(raw)) + raw)
    assert m["compression"] == "codec-3" and "unsupported" in m["error"]


def test_decompression_is_bounded():
    bomb = gzip.compress(b"\x00" * (legacy_messages.MAX_DECOMPRESSED + 1))
    raw = b"\x01\x01" + crc(bomb) + bomb
    (m,) = decode_set(struct.pack(">i", len(raw)) + raw)
    assert "exceeds" in m["error"]
    # A raw snappy block declaring 2**32 - 1 bytes is refused before it is allocated.
    lie = b"\xff\xff\xff\xff\x0f\x00"
    raw = b"\x01\x02" + crc(lie) + lie
    (m,) = decode_set(struct.pack(">i", len(raw)) + raw)
    assert "exceeds" in m["error"]


def test_nesting_is_bounded():
    msg = Msg(b"deep")
    for _ in range(legacy_messages.MAX_DEPTH + 1):
        msg = Msg(codec=1, inner=[msg])
    (m,) = decode_set(msg.encode())
    for _ in range(legacy_messages.MAX_DEPTH):
        (m,) = m["messages"]
    assert "nested" in m["error"]


# --- hostile input -------------------------------------------------------------------------------


HOSTILE = {
    "empty": b"",
    "type only": b"\x00\x01",
    "unknown type": b"\x00\x05\x00\x01a",
    "negative topic length": b"\x00\x01\xff\xff",
    "topic past the end": b"\x00\x01\x7f\xffdogs",
    "fetch cut short": mk.fetch_request("dogs", 0, 0, 1)[:-1],
    "offsets cut short": mk.offsets_request("dogs", 0, -1, 1)[:-3],
    "messages length past the end": mk.produce_request("dogs", 0, WOOF)[:-1],
    "negative messages length": b"\x00\x00\x00\x04dogs\x00\x00\x00\x00\xff\xff\xff\xff",
    "huge multi count": b"\x00\x02\x7f\xff" + mk.fetch_block("dogs", 0, 0, 1),
    "negative multi count": b"\x00\x03\x80\x00",
    "multi count past the blocks": mk.multi_request(2, [mk.fetch_block("dogs", 0, 0, 1)] * 2)[:-18],
    "message length below header": mk.produce_request("dogs", 0, b"\x00\x00\x00\x04\x00abc"),
    "negative message length": mk.produce_request("dogs", 0, b"\xff\xff\xff\xff" + WOOF[4:]),
    "message past its set": mk.produce_request("dogs", 0, b"\x00\x00\x00\x0a" + WOOF[4:]),
    "unknown magic": mk.produce_request("dogs", 0, b"\x00\x00\x00\x05\x07abcd"),
    "magic 1 without room for crc": mk.produce_request("dogs", 0, b"\x00\x00\x00\x05\x01abcd"),
}


@pytest.mark.parametrize("data", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_requests(data):
    with pytest.raises(DecodeError) as e:
        decode_request(data)
    assert 0 <= e.value.offset <= len(data)
    assert not plausible_request(data)


HOSTILE_RESPONSES = {
    "no error code": (1, b"\x00"),
    "offsets count past the end": (4, b"\x00\x00\x7f\xff\xff\xff" + b"\x00" * 8),
    "negative offsets count": (4, b"\x00\x00\xff\xff\xff\xff"),
    "offsets count cut short": (4, b"\x00\x00\x00\x00"),
    "multi-fetch part past the end": (2, b"\x00\x00\x7f\xff\xff\xff\x00\x00"),
    "multi-fetch part below header": (2, b"\x00\x00\x00\x00\x00\x01\x00"),
    "multi-fetch part length cut short": (2, b"\x00\x00\x00\x00"),
    "fetch message length below header": (1, b"\x00\x00\x00\x00\x00\x02\x00\x00"),
    "fetch unknown magic": (1, b"\x00\x00\x00\x00\x00\x05\x02abcd"),
    "unknown request type": (9, b"\x00\x00"),
}


@pytest.mark.parametrize("kind,data", HOSTILE_RESPONSES.values(), ids=HOSTILE_RESPONSES.keys())
def test_hostile_responses(kind, data):
    with pytest.raises(DecodeError):
        decode_response(kind, data, None)


def test_multi_fetch_response_with_fewer_parts_than_requested():
    req = decode_request(mk.multi_request(2, [mk.fetch_block("dogs", 0, 0, 9)] * 3))["body"]
    resp = mk.multi_fetch_response([mk.fetch_response(0, WOOF)] * 2)
    with pytest.raises(DecodeError, match="2 of 3"):
        decode_response(2, resp, req)


def test_trailing_bytes_are_kept():
    req = decode_request(mk.fetch_request("dogs", 0, 0, 1) + b"xy")
    assert req["body"]["_trailing_bytes"] == b"xy"
    assert decode_response(4, mk.offsets_response(0, [5]) + b"z", None)["_trailing_bytes"] == b"z"


# --- the shape check -----------------------------------------------------------------------------


def modern(api_key, version, correlation_id, client_id, body=b""):
    return mk.modern_request(api_key, version, correlation_id, client_id, body)


LEGACY_SAMPLES = {
    "produce magic 0": mk.produce_request("dogs", 0, WOOF),
    "produce magic 1 gzip": mk.produce_request("dogs", 0, Msg(codec=1, inner=[Msg(b"x")]).encode()),
    "produce random partition": mk.produce_request("dogs", -1, BARK),
    "fetch": mk.fetch_request("dogs", 0, 13, 1 << 20),
    "fetch long topic": mk.fetch_request("events-stream", 3, 0, 1 << 20),
    "multi-fetch": mk.multi_request(
        2, [mk.fetch_block("a", 0, 0, 1), mk.fetch_block("b", 1, 2, 3)]
    ),
    "multi-produce": mk.multi_request(3, [mk.produce_block("a", 0, WOOF)] * 2),
    "offsets latest": mk.offsets_request("dogs", 0, -1, 1),
    "offsets by time": mk.offsets_request("dogs.2012", 7, 1_326_196_800_000, 10),
}


@pytest.mark.parametrize("data", LEGACY_SAMPLES.values(), ids=LEGACY_SAMPLES.keys())
def test_plausible_legacy(data):
    assert plausible_request(data)
    decode_request(data)
    # Any byte more or less breaks the exact length the layout fixes.
    assert not plausible_request(data + b"\x00")
    assert not plausible_request(data[:-1])


def test_plausible_rejects_bad_shapes():
    assert not plausible_request(mk.fetch_request("", 0, 0, 1))  # topics are never empty
    assert not plausible_request(mk.fetch_request("do gs", 0, 0, 1))  # nor hold spaces
    assert not plausible_request(mk.fetch_request("dogs", -2, 0, 1))
    assert not plausible_request(mk.fetch_request("dogs", 0, -1, 1))  # offsets are positions
    assert not plausible_request(mk.offsets_request("dogs", 0, -3, 1))
    assert not plausible_request(mk.multi_request(2, []))
    assert not plausible_request(mk.produce_request("dogs", 0, b""))


MODERN_SAMPLES = {
    "ApiVersions v0": modern(18, 0, 1, "mixed-client"),
    "ApiVersions v3": modern(18, 3, 1, "rdkafka", b"\x00\x08librdkafka\x06\x32.0.2\x00"),
    "Metadata v0": modern(3, 0, 2, "mixed-client", b"\x00\x00\x00\x01\x00\x04dogs"),
    "Metadata v1 all": modern(3, 1, 7, "kafka-python", b"\xff\xff\xff\xff"),
    "Produce v0": modern(0, 0, 3, "p", b"\x00\x01\x00\x00\x03\xe8\x00\x00\x00\x00"),
    "Fetch v4": modern(1, 4, 0x01020304, "c", b"\xff" * 8 + b"\x00" * 20),
    "ListOffsets v1": modern(2, 1, 9, "c", b"\xff\xff\xff\xff\x00\x00\x00\x00"),
}


@pytest.mark.parametrize("data", MODERN_SAMPLES.values(), ids=MODERN_SAMPLES.keys())
def test_modern_requests_do_not_look_legacy(data):
    assert plausible_modern(data)
    assert not plausible_request(data)


def test_modern_headers_with_legacy_type_numbers_are_rejected():
    # API keys 0-4 share their numbers with 0.7 request types; the version then sits where
    # TOPIC_LENGTH does and the correlation id where the topic does. Small correlation ids
    # start with zero bytes, which no topic holds, and exact lengths rarely match by chance.
    for api_key in range(5):
        for version in range(16):
            for correlation_id in (0, 1, 2, 255, 4096, 70000):
                for body in (b"", b"\x00\x00\x00\x00", b"\xff\xff\xff\xff" + b"\x00" * 16):
                    data = modern(api_key, version, correlation_id, "kafka-python", body)
                    assert not plausible_request(data), (api_key, version, correlation_id)


def test_which_legacy_requests_the_modern_check_also_accepts():
    # The other direction is genuinely ambiguous. A 0.7 type 0-4 reads as API key 0-4 and
    # TOPIC_LENGTH as its version, so a short topic gives a plausible key and version; the
    # client-id length the 0.8 check then reads lands on topic or partition bytes, which are
    # often 0 for small partitions. Such a frame may pass both checks alone. The session layer
    # resolves it per connection: it votes over the connection's frames, fully decoding them
    # with both formats, and responses settle it too (a 0.8 response opens with a correlation
    # id echoing the request's, a 0.7 one with a 2-byte error code right after its length).
    ambiguous = mk.offsets_request("dogs", 0, -1, 1)  # LeaderAndIsr v4, client id length 0
    assert plausible_modern(ambiguous) and plausible_request(ambiguous)
    # A longer topic puts printable bytes where the client-id length is read: too long to fit.
    assert not plausible_modern(mk.fetch_request("events-stream", 0, 0, 1 << 20))
    # A topic longer than any API version of that key is out of the modern check's range.
    assert not plausible_modern(mk.fetch_request("x" * 40, 0, 0, 1 << 20))


# --- the hand-built captures ---------------------------------------------------------------------


def frames_of(path):
    """Per connection (client "ip:port"): [(side, frame body, last packet number)] in order.

    Each direction is a byte stream of int32-length-prefixed frames; a frame belongs to the
    packet that completes it.
    """
    from scapy.layers.inet import IP, TCP
    from scapy.utils import rdpcap

    buffers = defaultdict(bytes)
    out = defaultdict(list)
    for number, pkt in enumerate(rdpcap(str(path)), start=1):
        ip, tcp = pkt[IP], pkt[TCP]
        payload = bytes(tcp.payload)
        if not payload:
            continue
        to_broker = tcp.dport == mk.BROKER_PORT
        client = f"{ip.src}:{tcp.sport}" if to_broker else f"{ip.dst}:{tcp.dport}"
        key = (client, to_broker)
        buf = buffers[key] + payload
        while len(buf) >= 4 and len(buf) - 4 >= struct.unpack_from(">i", buf)[0]:
            size = struct.unpack_from(">i", buf)[0]
            out[client].append(("c" if to_broker else "b", buf[4 : 4 + size], number))
            buf = buf[4 + size :]
        buffers[key] = buf
    assert not any(buffers.values()), "bytes left over after the last frame"
    return out


def summary(messages):
    out = []
    for m in messages:
        assert m["crc_ok"]
        d = {"offset": m["offset"], "magic": m["magic"], "compression": m["compression"]}
        if "messages" in m:
            assert "error" not in m
            d["messages"] = summary(m["messages"])
        else:
            d["value"] = m["value"].decode()
        out.append(d)
    return out


def request_summary(req):
    body = req["body"]
    assert "_trailing_bytes" not in body
    parts = body.get("TopicPartitions", [body])
    rename = {"Offset": "offset", "MaxSize": "max_size", "Time": "time", "MaxNumber": "max_number"}
    tps = []
    for p in parts:
        tp = {"topic": p["Topic"], "partition": p["Partition"]}
        if "Messages" in p:
            tp["messages"] = summary(p["Messages"])
        tp.update({new: p[old] for old, new in rename.items() if old in p})
        tps.append(tp)
    return {
        "request_type": req["request_type"],
        "api_name": req["api_name"],
        "topic_partitions": tps,
        "expects_response": expects_response(req["request_type"]),
    }


def fetched(part):
    return {
        "error_code": part["ErrorCode"],
        "error_name": part["error_name"],
        "messages": summary(part["Messages"]),
        "partial_message_bytes": part.get("PartialMessageBytes", 0),
    }


def response_summary(kind, resp):
    assert "_trailing_bytes" not in resp
    if kind == 1:
        return fetched(resp)
    out = {"error_code": resp["ErrorCode"], "error_name": resp["error_name"]}
    if kind == 4:
        out["offsets"] = resp["Offsets"]
    else:
        out["topic_partitions"] = [
            {"topic": p["Topic"], "partition": p["Partition"], **fetched(p)}
            for p in resp["TopicPartitions"]
        ]
    return out


def legacy_connection(frames):
    """Requests in order with their responses, answered oldest first (no correlation ids)."""
    requests, waiting = [], []
    for side, body, number in frames:
        if side == "c":
            assert plausible_request(body)
            req = decode_request(body)
            entry = request_summary(req) | {"request_last_frame": number, "response": None}
            if expects_response(req["request_type"]):
                waiting.append((req, entry))
            requests.append(entry)
        else:
            req, entry = waiting.pop(0)
            resp = decode_response(req["request_type"], body, req["body"])
            entry["response"] = {"last_frame": number} | response_summary(req["request_type"], resp)
    assert not waiting
    return requests


def modern_connection(frames):
    requests, pending = [], {}
    for side, body, number in frames:
        if side == "c":
            assert plausible_modern(body) and not plausible_request(body)
            h = decode_request_header(body)
            assert decode_body(h.api_key, "request", h.api_version, body, h.end, Context()) == (
                {} if h.api_key == 18 else {"Topics": [{"Name": "dogs"}]}
            )
            entry = {
                "api_key": h.api_key,
                "api_version": h.api_version,
                "correlation_id": h.correlation_id,
                "client_id": h.client_id,
                "request_last_frame": number,
            }
            pending[h.correlation_id] = (h, entry)
            requests.append(entry)
        else:
            correlation_id = struct.unpack_from(">i", body)[0]
            h, entry = pending.pop(correlation_id)
            cid, end = decode_response_header(body, h.api_key, h.api_version)
            resp = decode_body(h.api_key, "response", h.api_version, body, end, Context())
            entry["response"] = {"last_frame": number, "body": resp}
    return requests


def check_capture(pcap, manifest):
    conns = frames_of(pcap)
    assert list(conns) == [c["client"] for c in manifest["connections"]]
    for conn in manifest["connections"]:
        frames = conns[conn["client"]]
        if conn["protocol"] == "0.7":
            assert legacy_connection(frames) == conn["requests"]
            continue
        got = modern_connection(frames)
        assert len(got) == len(conn["requests"])
        for g, want in zip(got, conn["requests"], strict=True):
            for key in ("api_key", "api_version", "correlation_id", "client_id"):
                assert g[key] == want[key]
            assert g["request_last_frame"] == want["request_last_frame"]
            assert g["response"]["last_frame"] == want["response"]["last_frame"]
            body = g["response"]["body"]
            if want["api_name"] == "ApiVersions":
                assert body["ErrorCode"] == want["response"]["error_code"]
                got_keys = [
                    [k["ApiKey"], k["MinVersion"], k["MaxVersion"]] for k in body["ApiKeys"]
                ]
                assert got_keys == want["response"]["api_keys"]
            else:
                assert [[b["NodeId"], b["Host"], b["Port"]] for b in body["Brokers"]] == want[
                    "response"
                ]["brokers"]
                assert [t["Name"] for t in body["Topics"]] == want["topics"]


@pytest.mark.parametrize("name", NAMES)
def test_bundled_captures_decode_as_their_manifests_say(name):
    pcap = CAPTURES / f"{name}.pcap"
    manifest = json.loads((CAPTURES / f"{name}.expected.json").read_text())
    assert manifest["capture"] == pcap.name and manifest["broker_port"] == 9092
    check_capture(pcap, manifest)


def test_capture_builder_output_decodes_as_its_manifest_says(tmp_path):
    for pcap, manifest in mk.build(tmp_path):
        check_capture(pcap, json.loads(manifest.read_text()))


def test_legacy_capture_covers_every_request_type():
    manifest = json.loads((CAPTURES / "legacy-0.7.expected.json").read_text())
    requests = [r for c in manifest["connections"] for r in c["requests"]]
    assert {r["request_type"] for r in requests} == set(REQUEST_TYPES)
    assert all((r["response"] is None) == (r["request_type"] in (0, 3)) for r in requests)

    def compressions(ms):
        return {m["compression"] for m in ms} | {
            c for m in ms if "messages" in m for c in compressions(m["messages"])
        }

    produced = [
        m
        for r in requests
        if r["request_type"] in (0, 3)
        for p in r["topic_partitions"]
        for m in p["messages"]
    ]
    assert compressions(produced) == {"none", "gzip", "snappy"}
    assert {m["magic"] for m in produced} == {0, 1}
    assert any(r["response"] and r["response"].get("error_code") == 1 for r in requests)


def test_mutated_frames_raise_only_decode_errors():
    rng = random.Random(7)
    requests = [*LEGACY_SAMPLES.values(), mk.produce_request("d", 0, WOOF + BARK)]
    fetch_body = decode_request(mk.fetch_request("dogs", 0, 0, 99))["body"]
    multi_body = decode_request(mk.multi_request(2, [mk.fetch_block("a", 0, 0, 1)] * 2))["body"]
    responses = [
        (1, fetch_body, b"\x00\x00" + WOOF + Msg(codec=2, inner=[Msg(b"s")]).encode()),
        (2, multi_body, mk.multi_fetch_response([mk.fetch_response(0, BARK)] * 2)),
        (4, None, mk.offsets_response(0, [1, 2, 3])),
    ]
    for _ in range(3000):
        data = bytearray(rng.choice(requests))
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        cut = memoryview(bytes(data))[: rng.randint(0, len(data))]
        plausible_request(cut)
        with contextlib.suppress(DecodeError):
            decode_request(cut)
        kind, body, resp = rng.choice(responses)
        data = bytearray(resp)
        data[rng.randrange(len(data))] = rng.randrange(256)
        with contextlib.suppress(DecodeError):
            decode_response(kind, bytes(data)[: rng.randint(0, len(data))], body)
