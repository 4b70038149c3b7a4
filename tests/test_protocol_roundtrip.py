"""Every message version, request and response, through the test encoder and the decoders.

The encoder (tests/kafka_encoder.py) interprets the schema data on its own, so each roundtrip
checks the decode programs against an independent reading of the same definitions.
"""

import contextlib
import random
import signal
import struct

import kafka_encoder as ke
import pytest

from dissector.errors import DecodeError
from dissector.protocol import messages
from dissector.protocol.codegen import Context

SEEDS = range(8)
MESSAGE_VERSIONS = ke.all_message_versions()
IDS = [f"{name}[{key}]-{kind}-v{version}" for key, name, kind, version in MESSAGE_VERSIONS]

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
CONTROLLED_SHUTDOWN = 7
OFFSET_FETCH = 9
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
SASL_AUTHENTICATE = 36


@contextlib.contextmanager
def deadline(seconds):
    """Fail instead of hanging when a decoder loops on hostile input."""

    def expire(signum, frame):
        raise TimeoutError(f"decoding took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def rng_for(*parts):
    return random.Random("/".join(map(str, parts)))


def random_frame(key, kind, version, rng, unknown_tags=False):
    """A random message as a whole frame.

    Returns (frame, body value, expected decoded body, expected notes, header fields the
    decoder should report, length of the header).
    """
    definition = ke.definition_of(key, kind, version)
    body = ke.random_value(definition, version, rng, unknown_tags=unknown_tags)
    raw, expected, notes = ke.encode_with_notes(definition, version, body)
    correlation_id = rng.randint(-(2**31), 2**31 - 1)
    header_tags = None
    if rng.random() < 0.3:
        header_tags = {rng.randint(0, 9): rng.randbytes(rng.randint(0, 3))}
    if kind == "request":
        client_id = rng.choice([None, "", "client-1", "klient-é-日本-🦀"])
        if ke.request_header_version(key, version) < 2:
            header_tags = None
        frame = ke.encode_request(key, version, correlation_id, client_id, body, header_tags)
        if ke.request_header_version(key, version) == 0:
            client_id = None
        header = (key, version, correlation_id, client_id, header_tags)
    else:
        if ke.response_header_version(key, version) < 1:
            header_tags = None
        frame = ke.encode_response(key, version, correlation_id, body, header_tags)
        header = (correlation_id,)
    return frame, body, expected, notes, header, len(frame) - len(raw)


def decode_frame(key, kind, version, frame, ctx=None):
    """Header and body of a whole frame, as the dissector decodes them."""
    if kind == "request":
        start = messages.decode_request_header(frame).end
    else:
        start = messages.decode_response_header(frame, key, version)[1]
    return messages.decode_body(key, kind, version, frame, start, ctx or Context())


# -- roundtrips ----------------------------------------------------------------------------


def test_every_message_version_is_covered():
    assert len(MESSAGE_VERSIONS) == len(set(MESSAGE_VERSIONS)) > 700
    keys = {key for key, *_ in MESSAGE_VERSIONS}
    assert {PRODUCE, FETCH, METADATA, API_VERSIONS} <= keys
    for key, _, kind, version in MESSAGE_VERSIONS:
        assert messages.body_decoder(key, kind, version) is not None


@pytest.mark.parametrize(("key", "name", "kind", "version"), MESSAGE_VERSIONS, ids=IDS)
def test_roundtrip(key, name, kind, version):
    for seed in SEEDS:
        rng = rng_for(key, kind, version, seed)
        frame, value, expected, notes, header, head = random_frame(
            key, kind, version, rng, unknown_tags=seed % 2 == 1
        )
        assert expected == value, "random values are already in decoded form"
        if kind == "request":
            got = messages.decode_request_header(frame)
            assert (got.api_key, got.api_version, got.correlation_id) == header[:3]
            assert (got.client_id, got.tags) == header[3:]
            start = got.end
        else:
            correlation_id, start = messages.decode_response_header(frame, key, version)
            assert (correlation_id,) == header
        assert start == head, f"seed {seed}: header ends at {start}, not {head}"

        ctx = Context()
        body, end = messages.body_decoder(key, kind, version)(frame, start, ctx)
        assert end == len(frame), f"seed {seed}: {len(frame) - end} bytes not consumed"
        assert body == expected, f"seed {seed}"
        assert ctx.topics == notes.topics, f"seed {seed}"
        assert (ctx.top_error, ctx.first_error) == (notes.top_error, notes.first_error)
        assert ctx.error == notes.error

        assert messages.decode_body(key, kind, version, frame, start, Context()) == expected


def notes_of(ctx):
    return (
        ctx.topics,
        ctx.topic_ids,
        ctx.top_error,
        ctx.first_error,
        ctx.fields,
        list(ctx.record_sets),
    )


@pytest.mark.parametrize(("key", "name", "kind", "version"), MESSAGE_VERSIONS, ids=IDS)
def test_scanner_takes_the_notes_of_the_decoder(key, name, kind, version):
    """The scan program (no dict built) walks exactly what the decoder reads and notes the same
    topics, ids, errors and top-level fields; it finds each record set the decoder reads."""
    for seed in SEEDS:
        rng = rng_for("scan", key, kind, version, seed)
        frame, _, expected, *_, head = random_frame(
            key, kind, version, rng, unknown_tags=seed % 2 == 1
        )
        full = Context()
        messages.decode_body(key, kind, version, frame, head, full)
        scanned = Context()
        end = messages.body_scanner(key, kind, version)(frame, head, scanned)
        assert end == len(frame), f"seed {seed}: scan stops {len(frame) - end} bytes short"
        assert notes_of(scanned)[:5] == notes_of(full)[:5], f"seed {seed}"
        found = [(partition, e - s) for _, partition, s, e in scanned.record_sets]
        assert found == _record_fields(expected), f"seed {seed}"


def _record_fields(value, partition=None):
    """(partition index beside it, size) of each record-set field of a decoded body, in order
    (the default context keeps sizes)."""
    if isinstance(value, dict):
        if set(value) == {"size"}:
            return [(partition, value["size"])]
        for name in ("Index", "PartitionIndex", "Partition"):
            if isinstance(value.get(name), int):
                partition = value[name]
        return [x for v in value.values() for x in _record_fields(v, partition)]
    if isinstance(value, list):
        return [x for v in value for x in _record_fields(v, partition)]
    return []


@pytest.mark.parametrize(("key", "name", "kind", "version"), MESSAGE_VERSIONS, ids=IDS)
def test_scanner_fails_where_the_decoder_fails(key, name, kind, version):
    rng = rng_for("scancut", key, kind, version)
    frame, *_, head = random_frame(key, kind, version, rng)
    cuts = range(head, len(frame))
    if len(frame) > 160:
        cuts = sorted(set(range(head, 80)) | set(range(80, len(frame), len(frame) // 80)))
    with deadline(5):
        for cut in cuts:
            part = frame[:cut]
            with pytest.raises(DecodeError):
                messages.decode_body(key, kind, version, part, head, Context())
            with pytest.raises(DecodeError):
                messages.scan_body(key, kind, version, part, head, Context())


@pytest.mark.parametrize(("key", "name", "kind", "version"), MESSAGE_VERSIONS, ids=IDS)
def test_roundtrip_from_memoryview(key, name, kind, version):
    rng = rng_for("view", key, kind, version)
    frame, _, expected, *_ = random_frame(key, kind, version, rng, unknown_tags=True)
    assert decode_frame(key, kind, version, memoryview(frame)) == expected


PRODUCE_RESPONSES = [v for key, _, kind, v in MESSAGE_VERSIONS if (key, kind) == (0, "response")]


@pytest.mark.parametrize("version", PRODUCE_RESPONSES)
def test_a_produce_responses_assigned_offsets_are_scanned_as_the_decoded_body_gives_them(version):
    """The records table reads the base offsets a Produce response assigned with a scan of
    their own (no body decoded): the partitions with no error and an offset of 0 or more, as
    the decoded body's walk finds them, by topic name, or id from v13."""
    from dissector.session.exchange import Exchange
    from dissector.session.modern import decode_later
    from dissector.tables.records import assigned_offsets

    definition = ke.definition_of(PRODUCE, "response", version)
    for seed in SEEDS:
        rng = rng_for("assigned", version, seed)
        body = ke.random_value(definition, version, rng)
        expected = {}
        for topic in body["Responses"]:
            name = topic["Name"] if "Name" in topic else topic["TopicId"]
            for i, part in enumerate(topic["PartitionResponses"]):
                if i % 2 == 0:  # random values are mostly errors: half the partitions taken
                    part["ErrorCode"], part["BaseOffset"] = 0, rng.randint(0, 2**40)
                if part["ErrorCode"] == 0 and part["BaseOffset"] >= 0:
                    expected[name, part["Index"]] = part["BaseOffset"]
        raw = ke.encode(definition, version, body)
        assert messages.assigned_offsets(version, raw, 0) == expected
        # What the records table makes of it, scanned and decoded: an empty name is none.
        named = {(t or None, p): base for (t, p), base in expected.items()}
        scanned = (decode_later, PRODUCE, "response", version, raw, 0, None)
        decoded = messages.decode_body(PRODUCE, "response", version, raw, 0, Context())
        for response in (scanned, decoded):
            exchange = Exchange.of({"_response": response})
            assert assigned_offsets(exchange) == named, (seed, response is scanned)


def test_header_versions_follow_the_protocol_rules():
    for key, _, kind, version in MESSAGE_VERSIONS:
        if kind == "request":
            assert messages.request_header_version(key, version) == ke.request_header_version(
                key, version
            )
        else:
            assert messages.response_header_version(key, version) == ke.response_header_version(
                key, version
            )


# -- tagged fields -------------------------------------------------------------------------


def test_unknown_tag_is_kept_as_raw_bytes():
    # ApiVersionsRequest v3: two compact strings, then a tag section with unknown tag 5.
    frame = bytes.fromhex("02 78 02 31 01 05 02 0102")
    body = messages.decode_body(API_VERSIONS, "request", 3, frame, 0, Context())
    assert body == {
        "ClientSoftwareName": "x",
        "ClientSoftwareVersion": "1",
        "_unknown_tags": {5: b"\x01\x02"},
    }


def test_unknown_tags_among_known_ones_in_a_nested_struct():
    definition = ke.definition_of(FETCH, "response", 12)
    partition = {
        "PartitionIndex": 0,
        "CurrentLeader": {"LeaderId": 4, "LeaderEpoch": 2},
        "_unknown_tags": {3: b"", 9: b"\xff" * 200},
    }
    value = {"Responses": [{"Topic": "t", "Partitions": [partition]}]}
    frame = ke.encode(definition, 12, value)
    body = messages.decode_body(FETCH, "response", 12, frame, 0, Context())
    got = body["Responses"][0]["Partitions"][0]
    assert got["_unknown_tags"] == {3: b"", 9: b"\xff" * 200}
    assert got["CurrentLeader"] == {"LeaderId": 4, "LeaderEpoch": 2}
    assert "DivergingEpoch" not in got and "SnapshotId" not in got
    assert "_unknown_tags" not in body and "_unknown_tags" not in body["Responses"][0]


def test_unknown_tags_of_a_request_header():
    frame = ke.encode_request(METADATA, 12, 77, "c", {"Topics": None}, header_tags={3: b"abc"})
    header = messages.decode_request_header(frame)
    assert (header.correlation_id, header.client_id, header.tags) == (77, "c", {3: b"abc"})
    assert messages.decode_body(METADATA, "request", 12, frame, header.end, Context())


def test_fetch_response_current_leader_is_decoded():
    # FetchResponse v12, one topic with one partition that carries CurrentLeader (tag 1).
    partition = (
        struct.pack(">ihqqq", 3, 0, 100, 90, 0)  # index, error, high watermark, LSO, log start
        + b"\x00"  # AbortedTransactions: null
        + struct.pack(">i", -1)  # PreferredReadReplica
        + b"\x00"  # Records: null
        + b"\x01\x01\x09"  # tag section: one field, tag 1, 9 bytes
        + struct.pack(">ii", 5, 9)  # LeaderId, LeaderEpoch
        + b"\x00"  # CurrentLeader's own tag section
    )
    topic = b"\x02t" + b"\x02" + partition + b"\x00"  # name, one partition, tag section
    frame = struct.pack(">ihi", 0, 0, 7) + b"\x02" + topic + b"\x00"
    ctx = Context()
    body = messages.decode_body(FETCH, "response", 12, frame, 0, ctx)
    assert body["Responses"][0]["Partitions"] == [
        {
            "PartitionIndex": 3,
            "ErrorCode": 0,
            "HighWatermark": 100,
            "LastStableOffset": 90,
            "LogStartOffset": 0,
            "CurrentLeader": {"LeaderId": 5, "LeaderEpoch": 9},
            "AbortedTransactions": None,
            "PreferredReadReplica": -1,
            "Records": None,
        }
    ]
    assert ctx.topics == ["t"]


@pytest.mark.parametrize(
    "version", range(12, ke.definition_of(FETCH, "response", 12)["validVersions"][1] + 1)
)
def test_fetch_response_tagged_partition_fields(version):
    definition = ke.definition_of(FETCH, "response", version)
    topic = {"TopicId": bytes(range(16))} if version >= 13 else {"Topic": "t"}
    partition = {
        "ErrorCode": 6,
        "DivergingEpoch": {"Epoch": 1, "EndOffset": 2},
        "CurrentLeader": {"LeaderId": -1, "LeaderEpoch": 2**31 - 1},
        "SnapshotId": {"EndOffset": 3, "Epoch": 4},
        "Records": {"size": 33},
    }
    value = {"Responses": [dict(topic, Partitions=[partition])]}
    frame = ke.encode(definition, version, value)
    ctx = Context()
    body = messages.decode_body(FETCH, "response", version, frame, 0, ctx)
    assert body == ke.expected_form(definition, version, value)
    got = body["Responses"][0]["Partitions"][0]
    assert got["CurrentLeader"] == {"LeaderId": -1, "LeaderEpoch": 2**31 - 1}
    assert got["Records"] == {"size": 33}
    assert ctx.error == 6


def test_api_versions_response_supported_features_are_decoded():
    frame = (
        struct.pack(">h", 0)  # ErrorCode
        + b"\x02"  # ApiKeys: one element
        + struct.pack(">hhh", 18, 0, 4)
        + b"\x00"
        + struct.pack(">i", 0)  # ThrottleTimeMs
        + b"\x01\x00\x08"  # one tagged field: tag 0 (SupportedFeatures), 8 bytes
        + b"\x02" + b"\x02x" + struct.pack(">hh", 1, 2) + b"\x00"
    )  # fmt: skip
    body = messages.decode_body(API_VERSIONS, "response", 3, frame, 0, Context())
    assert body == {
        "ErrorCode": 0,
        "ApiKeys": [{"ApiKey": 18, "MinVersion": 0, "MaxVersion": 4}],
        "ThrottleTimeMs": 0,
        "SupportedFeatures": [{"Name": "x", "MinVersion": 1, "MaxVersion": 2}],
    }


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_response_all_tagged_fields(version):
    definition = ke.definition_of(API_VERSIONS, "response", version)
    value = {
        "ApiKeys": [{"ApiKey": 0, "MinVersion": 3, "MaxVersion": 13}],
        "SupportedFeatures": [{"Name": "metadata.version", "MinVersion": 1, "MaxVersion": 27}],
        "FinalizedFeaturesEpoch": 2**63 - 1,
        "FinalizedFeatures": [],
        "ZkMigrationReady": True,
    }
    frame = ke.encode(definition, version, value)
    body = messages.decode_body(API_VERSIONS, "response", version, frame, 0, Context())
    assert body == ke.expected_form(definition, version, value)
    assert body["FinalizedFeaturesEpoch"] == 2**63 - 1
    assert body["ZkMigrationReady"] is True


def test_records_view_is_chosen_by_the_context():
    definition = ke.definition_of(PRODUCE, "request", 9)
    records = bytes(range(50))
    value = {"TopicData": [{"Name": "t", "PartitionData": [{"Index": 0, "Records": records}]}]}
    frame = ke.encode(definition, 9, value)
    seen = []
    ctx = Context(records=lambda raw, context: seen.append((raw, context)) or "mine")
    body = messages.decode_body(PRODUCE, "request", 9, frame, 0, ctx)
    assert body["TopicData"][0]["PartitionData"][0]["Records"] == "mine"
    assert seen == [(records, ctx)]  # with the body's context, for what they share


# -- header versions -----------------------------------------------------------------------


@pytest.mark.parametrize("version", range(5))
def test_api_versions_response_keeps_header_v0(version):
    definition = ke.definition_of(API_VERSIONS, "response", version)
    body = ke.encode(definition, version, {"ErrorCode": 35, "ApiKeys": []})
    frame = struct.pack(">i", 1234) + body  # header v0: the correlation id alone
    assert messages.response_header_version(API_VERSIONS, version) == 0
    assert messages.decode_response_header(frame, API_VERSIONS, version) == (1234, 4)
    decoded = messages.decode_body(API_VERSIONS, "response", version, frame, 4, Context())
    assert decoded["ErrorCode"] == 35


def test_flexible_response_has_header_v1():
    frame = (
        struct.pack(">i", 99)
        + b"\x00"
        + ke.encode(ke.definition_of(METADATA, "response", 9), 9, {})
    )
    assert messages.decode_response_header(frame, METADATA, 9) == (99, 5)
    assert messages.decode_response_header(frame[:4] + frame[5:], METADATA, 8) == (99, 4)


def test_controlled_shutdown_v0_request_header_has_no_client_id():
    frame = struct.pack(">hhi", CONTROLLED_SHUTDOWN, 0, 42) + struct.pack(">i", 0x00020000)
    header = messages.decode_request_header(frame)
    assert header == (CONTROLLED_SHUTDOWN, 0, 42, None, None, 8)
    body = messages.decode_body(CONTROLLED_SHUTDOWN, "request", 0, frame, header.end, Context())
    assert body == {"BrokerId": 0x00020000}


def test_controlled_shutdown_v1_request_header_has_a_client_id():
    frame = struct.pack(">hhih", CONTROLLED_SHUTDOWN, 1, 42, 2) + b"id" + struct.pack(">i", 3)
    header = messages.decode_request_header(frame)
    assert header == (CONTROLLED_SHUTDOWN, 1, 42, "id", None, 12)
    body = messages.decode_body(CONTROLLED_SHUTDOWN, "request", 1, frame, header.end, Context())
    assert body == {"BrokerId": 3}


def test_request_header_v2_client_id_is_not_compact():
    # ApiVersions v3 request: header v2 with an int16-length client id, then a tag section.
    frame = struct.pack(">hhih", API_VERSIONS, 3, 5, 3) + b"abc" + b"\x00" + b"\x00\x01\x00"
    header = messages.decode_request_header(frame)
    assert (header.client_id, header.end) == ("abc", 14)
    body = messages.decode_body(API_VERSIONS, "request", 3, frame, header.end, Context())
    assert body == {"ClientSoftwareName": None, "ClientSoftwareVersion": ""}


# -- hostile and truncated input -----------------------------------------------------------


def assert_decode_error(decode, *args, match=None):
    with deadline(2), pytest.raises(DecodeError, match=match):
        decode(*args)


def body_error(key, kind, version, frame, match=None):
    """Decoding the body must fail with a DecodeError (whose text matches), promptly."""
    decode = messages.decode_body
    assert_decode_error(decode, key, kind, version, frame, 0, Context(), match=match)


@pytest.mark.parametrize(("key", "name", "kind", "version"), MESSAGE_VERSIONS, ids=IDS)
def test_truncated_frames_raise_decode_error(key, name, kind, version):
    frame = random_frame(key, kind, version, rng_for("cut", key, kind, version))[0]
    cuts = range(len(frame))
    if len(frame) > 160:
        cuts = sorted(set(range(0, 80)) | set(range(80, len(frame), len(frame) // 80)))
    with deadline(5):
        for cut in cuts:
            with pytest.raises(DecodeError):
                decode_frame(key, kind, version, frame[:cut])


@pytest.mark.parametrize(("key", "name", "kind", "version"), MESSAGE_VERSIONS, ids=IDS)
def test_corrupted_frames_decode_or_raise_decode_error(key, name, kind, version):
    rng = rng_for("corrupt", key, kind, version)
    frame = random_frame(key, kind, version, rng)[0]
    with deadline(5):
        for _ in range(12):
            bad = bytearray(frame)
            for _ in range(rng.randint(1, 3)):
                at = rng.randrange(len(bad))
                what = rng.random()
                if what < 0.6:
                    bad[at] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)])
                elif what < 0.8:
                    del bad[at]
                else:
                    bad[at:at] = rng.randbytes(rng.randint(1, 4))
            with contextlib.suppress(DecodeError):
                decode_frame(key, kind, version, bytes(bad))


FIT = "cannot fit"
PAST = "runs past the end"
LONG = "longer than 5 bytes"
SHORT = "ends before its fields do"


def test_hostile_int32_array_count():
    body_error(METADATA, "request", 1, struct.pack(">i", 2**31 - 1), FIT)
    body_error(METADATA, "request", 1, struct.pack(">i", 2**31 - 1) + b"\x00" * 64, FIT)
    # ListOffsetsResponse v0 OldStyleOffsets: an int64 array claiming far more than is there
    frame = struct.pack(">i", 1) + b"\x00\x01t" + struct.pack(">iih", 1, 0, 0)
    frame += struct.pack(">i", 2**31 - 1) + b"\x00" * 16
    body_error(LIST_OFFSETS, "response", 0, frame, FIT)


def test_hostile_compact_array_count():
    body_error(METADATA, "request", 9, b"\xff\xff\xff\xff\x0f" + b"\x00" * 8, FIT)
    body_error(METADATA, "request", 9, b"\x81\x01", FIT)  # 128 topics in two bytes


def test_string_longer_than_the_frame():
    body_error(METADATA, "request", 1, struct.pack(">ih", 1, 1000) + b"abc", PAST)
    body_error(METADATA, "request", 1, struct.pack(">ih", 1, 2**15 - 1), PAST)
    body_error(API_VERSIONS, "request", 3, b"\xe8\x07abc", PAST)  # compact length 999


def test_bytes_and_records_longer_than_the_frame():
    body_error(SASL_AUTHENTICATE, "request", 0, struct.pack(">i", 2**31 - 1) + b"xy", PAST)
    definition = ke.definition_of(PRODUCE, "request", 3)
    value = {"TopicData": [{"Name": "t", "PartitionData": [{"Records": b""}]}]}
    frame = ke.encode(definition, 3, value)
    assert frame.endswith(struct.pack(">i", 0))
    frame = frame[:-4] + struct.pack(">i", 2**31 - 1) + b"\x00" * 8
    body_error(PRODUCE, "request", 3, frame, PAST)


def test_overlong_varints():
    body_error(API_VERSIONS, "request", 3, b"\x80" * 6 + b"\x00" * 8, LONG)  # string length
    body_error(API_VERSIONS, "request", 3, b"\xff" * 6 + b"\x00" * 8, LONG)
    body_error(API_VERSIONS, "request", 3, b"\x01\x01" + b"\x80" * 6 + b"\x00", LONG)  # tag count
    body_error(API_VERSIONS, "request", 3, b"\x01\x01\x01" + b"\xff" * 6 + b"\x00", LONG)  # tag
    body_error(API_VERSIONS, "request", 3, b"\x01\x01\x80\x80", PAST)  # varint cut short


def test_hostile_tag_sections():
    body_error(API_VERSIONS, "request", 3, b"\x01\x01\xff\xff\xff\xff\x0f", FIT)  # 2**32-1 tags
    body_error(API_VERSIONS, "request", 3, b"\x01\x01\x01\x05\x7f\x00", PAST)  # 127 bytes
    body_error(API_VERSIONS, "request", 3, b"\x01\x01\x02\x05\x00", PAST)  # 2nd tag missing
    # a known tagged field whose contents claim a huge array
    head = struct.pack(">h", 0) + b"\x01" + struct.pack(">i", 0)
    frame = head + b"\x01\x00\x05\xff\xff\xff\xff\x0f\x00"
    body_error(API_VERSIONS, "response", 3, frame, FIT)
    # a known tagged field (FinalizedFeaturesEpoch, an int64) shorter than its contents
    body_error(API_VERSIONS, "response", 3, head + b"\x01\x01\x02\x00\x00\x00", SHORT)


def test_bad_headers():
    assert_decode_error(messages.decode_request_header, b"")
    assert_decode_error(messages.decode_request_header, struct.pack(">hhh", 3, 1, 0))
    assert_decode_error(messages.decode_request_header, struct.pack(">hhih", 3, 1, 0, 50) + b"ab")
    assert_decode_error(messages.decode_request_header, struct.pack(">hhih", 3, 12, 0, -1))
    assert_decode_error(messages.decode_response_header, b"\x00\x00", METADATA, 1)
    assert_decode_error(messages.decode_response_header, b"\x00\x00\x00\x01", METADATA, 9)
    assert_decode_error(messages.decode_response_header, b"\x00\x00\x00\x01\x01", METADATA, 9)


def test_unknown_versions_and_leftover_bytes():
    body_error(API_VERSIONS, "request", 999, b"")
    body_error(9999, "request", 0, b"")
    # Bytes after the last field are kept, not rejected (brokers ignore them as well).
    assert messages.decode_body(API_VERSIONS, "request", 0, b"\x00", 0, Context()) == {
        "_trailing_bytes": b"\x00"
    }
    body = messages.decode_body(
        CONTROLLED_SHUTDOWN, "request", 0, struct.pack(">ii", 1, 2), 0, Context()
    )
    assert body == {"BrokerId": 1, "_trailing_bytes": b"\x00\x00\x00\x02"}


def test_random_bytes_never_raise_anything_else():
    rng = random.Random(7)
    versions = [m for m in MESSAGE_VERSIONS if m[3] % 3 == 0]
    with deadline(10):
        for key, _, kind, version in versions:
            for _ in range(3):
                junk = rng.randbytes(rng.randint(0, 40))
                with contextlib.suppress(DecodeError):
                    messages.decode_body(key, kind, version, junk, 0, Context())


# -- notes in the context ------------------------------------------------------------------


def offset_fetch_response(version, top, nested, names=("a", "b", "c")):
    definition = ke.definition_of(OFFSET_FETCH, "response", version)
    partitions = [{"PartitionIndex": i, "ErrorCode": e} for i, e in enumerate(nested)]
    value = {
        "Topics": [{"Name": name, "Partitions": partitions} for name in names],
        "ErrorCode": top,
    }
    frame = ke.encode(definition, version, value)
    ctx = Context()
    messages.decode_body(OFFSET_FETCH, "response", version, frame, 0, ctx)
    return ctx


@pytest.mark.parametrize("version", range(2, 8))
def test_ctx_error_is_the_top_level_error_first(version):
    # The top-level ErrorCode comes after Topics on the wire but still wins.
    ctx = offset_fetch_response(version, 16, [0, 3, 5])
    assert (ctx.error, ctx.top_error, ctx.first_error) == (16, 16, 3)
    ctx = offset_fetch_response(version, 0, [0, 3, 5])
    assert (ctx.error, ctx.top_error, ctx.first_error) == (3, 0, 3)
    ctx = offset_fetch_response(version, 0, [0, 0])
    assert ctx.error == 0
    ctx = offset_fetch_response(version, -1, [])
    assert ctx.error == -1


def test_ctx_topics_collects_topic_names_in_order():
    ctx = offset_fetch_response(5, 0, [], names=["orders", "", "payments", "orders"])
    assert ctx.topics == ["orders", "payments", "orders"]

    definition = ke.definition_of(DELETE_TOPICS, "request", 3)
    frame = ke.encode(definition, 3, {"TopicNames": ["x", "", "y"], "TimeoutMs": 1})
    ctx = Context()
    messages.decode_body(DELETE_TOPICS, "request", 3, frame, 0, ctx)
    assert ctx.topics == ["x", "y"]

    definition = ke.definition_of(METADATA, "request", 12)
    frame = ke.encode(definition, 12, {"Topics": [{"Name": None}, {"Name": "z"}]})
    ctx = Context()
    messages.decode_body(METADATA, "request", 12, frame, 0, ctx)
    assert ctx.topics == ["z"]


def test_ctx_notes_tagged_fields_too():
    # CreateTopicsResponse v5+: TopicConfigErrorCode is a tagged field of each topic.
    definition = ke.definition_of(CREATE_TOPICS, "response", 5)
    value = {"Topics": [{"Name": "t", "ErrorCode": 0, "TopicConfigErrorCode": 41}]}
    frame = ke.encode(definition, 5, value)
    ctx = Context()
    body = messages.decode_body(CREATE_TOPICS, "response", 5, frame, 0, ctx)
    assert body["Topics"][0]["TopicConfigErrorCode"] == 41
    assert (ctx.error, ctx.top_error, ctx.first_error, ctx.topics) == (41, 0, 41, ["t"])
