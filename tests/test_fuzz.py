"""Hostile bytes: mutated Kafka frames, record sets, whole captures and TCP segments.

Property-based (hypothesis, derandomized so that every run tries the same inputs). What may
escape: `DecodeError` from the message decoders, nothing from `decode_record_set`, a documented
`DissectorError` from `read_pcap`, which must also end in bounded time and memory; nothing from
the core fed mutated TCP segments, whose accounting must add up. The longer fuzzer over the
same targets is `tools/fuzz.py`.
"""

import contextlib
import random
import struct
import time
import tracemalloc
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_encoder import encode_request, encode_response
from synth import ACK, PSH, RST, SYN, Capture, Connection, tcp_packet

from dissector import Dissector
from dissector.errors import DecodeError
from dissector.flow import EVASIONS, ROW_SUMS
from dissector.options import Options
from dissector.protocol import messages
from dissector.protocol.codegen import Context
from dissector.protocol.records import Limits, decode_record_set
from tools import fuzz

FAST = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FULL = Limits(records=True)
# What the dissector applies to the records fields of a message with records="full".
record_decoder = Options(records="full").record_decoder()


FRAMES = fuzz.all_frames()
RECORD_SETS = fuzz.all_record_sets()
CAPTURES = fuzz.SEED_CAPTURES

# ---------------------------------------------------------------- mutations

POSITION = st.integers(0, 1 << 17)
MUTATION = st.one_of(
    st.tuples(st.just("flip"), POSITION, st.integers(1, 255)),
    st.tuples(st.just("truncate"), POSITION),
    st.tuples(st.just("extend"), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("int32"), POSITION, st.sampled_from(fuzz.HOSTILE32)),
    st.tuples(st.just("int16"), POSITION, st.sampled_from(fuzz.HOSTILE16)),
    st.tuples(st.just("varint"), POSITION, st.integers(1, 12)),
    st.tuples(st.just("insert"), POSITION, st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), POSITION, st.integers(1, 32)),
)
MUTATIONS = st.lists(MUTATION, min_size=1, max_size=5)


def mutate(buf, mutations):
    b = bytearray(buf)
    for op, *args in mutations:
        at = args[0] % (len(b) + 1) if args and isinstance(args[0], int) else 0
        if op == "flip" and b:
            b[at % len(b)] ^= args[1]
        elif op == "truncate":
            del b[at:]
        elif op == "extend":
            b += args[0]
        elif op == "int32":
            b[at : at + 4] = struct.pack(">i", args[1])
        elif op == "int16":
            b[at : at + 2] = struct.pack(">h", args[1])
        elif op == "varint":  # an endless varint in place of whatever was there
            b[at : at + args[1]] = b"\xff" * args[1]
        elif op == "insert":
            b[at:at] = args[1]
        elif op == "delete":
            del b[at : at + args[1]]
    return bytes(b)


def decode_frame(kind, api_key, version, body):
    """Header and body as the dissector decodes them; only DecodeError may escape."""
    ctx = Context(records=record_decoder)
    try:
        if kind == fuzz.REQUEST:
            h = messages.decode_request_header(body)
            api_key, version, pos = h.api_key, h.api_version, h.end
        else:
            _corr, pos = messages.decode_response_header(body, api_key, version)
        return messages.decode_body(api_key, fuzz._KIND[kind], version, body, pos, ctx)
    except DecodeError:
        return None


def timed(fn, *args, limit=2.0):
    start = time.perf_counter()
    result = fn(*args)
    assert time.perf_counter() - start < limit
    return result


# ---------------------------------------------------------------- (a) frames and record sets


def test_the_seeds_cover_requests_responses_and_record_sets():
    kinds = {(k, key) for k, key, _v, _b in FRAMES}
    assert len(FRAMES) > 150 and len(RECORD_SETS) > 10
    assert {(0, 0), (1, 0), (0, 1), (1, 1), (0, 3), (1, 3)} <= kinds  # Produce, Fetch, Metadata
    for kind, key, version, body in FRAMES:
        assert decode_frame(kind, key, version, body) is not None, (kind, key, version)
    codecs = {b["compression"] for raw in RECORD_SETS for b in decode_record_set(raw)["batches"]}
    assert {"none", "gzip", "snappy", "lz4", "zstd"} <= codecs


@settings(max_examples=600, **FAST)
@given(st.sampled_from(FRAMES), MUTATIONS)
def test_mutated_frames_raise_only_decode_errors(frame, mutations):
    kind, key, version, body = frame
    timed(decode_frame, kind, key, version, mutate(body, mutations))


@settings(max_examples=400, **FAST)
@given(
    st.integers(-2, 99),
    st.integers(-1, 20),
    st.sampled_from([0, 1]),
    st.one_of(
        st.builds(lambda f, m: mutate(f[3], m), st.sampled_from(FRAMES), MUTATIONS),
        st.binary(max_size=300),
    ),
    st.integers(0, 24),
)
def test_any_key_version_and_position_raise_only_decode_errors(key, version, kind, body, pos):
    ctx = Context(records=record_decoder)
    with contextlib.suppress(DecodeError):
        timed(messages.decode_body, key, fuzz._KIND[kind], version, body, pos, ctx)


@settings(max_examples=400, **FAST)
@given(st.binary(max_size=64))
def test_request_headers_of_random_bytes(buf):
    try:
        h = messages.decode_request_header(buf)
    except DecodeError:
        return
    assert 8 <= h.end <= len(buf)


def hostile_sweep(buf):
    """`buf` with each hostile size at every position: 2**31-1, -1, huge counts, endless varints."""
    for at in range(len(buf)):
        for value in (0x7FFFFFFF, -1, 0x10000000):
            yield buf[:at] + struct.pack(">i", value) + buf[at + 4 :]
        yield buf[:at] + struct.pack(">h", 0x7FFF) + buf[at + 2 :]
        yield buf[:at] + b"\xff" * 6 + buf[at + 6 :]


def test_hostile_sizes_at_every_position_of_one_frame_of_each_kind():
    seen = set()
    start = time.perf_counter()
    for kind, key, version, body in FRAMES:
        if (kind, key, version) in seen or len(body) > 400:
            continue
        seen.add((kind, key, version))
        for bad in hostile_sweep(body):
            decode_frame(kind, key, version, bad)
    assert len(seen) > 30
    assert time.perf_counter() - start < 30


@settings(max_examples=400, **FAST)
@given(st.sampled_from(RECORD_SETS), MUTATIONS, st.sampled_from([FULL, Limits()]))
def test_mutated_record_sets_raise_nothing(raw, mutations, limits):
    result = timed(decode_record_set, mutate(raw, mutations), limits)
    assert {"size", "batches", "truncated", "truncated_bytes", "error"} <= set(result)
    for batch in result["batches"]:
        assert batch["status"] in ("ok", *fuzz_statuses())


def fuzz_statuses():
    from dissector.protocol.records import STATUSES

    return STATUSES


def test_hostile_sizes_at_every_position_of_record_set_headers():
    for raw in RECORD_SETS:
        head = raw[:160]  # batch header and the first records
        for bad in hostile_sweep(head):
            decode_record_set(bad + raw[160:], FULL)


def test_null_records_in_a_fetch_response():
    """Records is nullable in Fetch responses (and Produce requests): None, not a crash."""
    cap = Capture()
    c = Connection(cap)
    c.request(
        encode_request(
            1,
            4,
            5,
            "c",
            {
                "ReplicaId": -1,
                "MaxWaitMs": 10,
                "MinBytes": 1,
                "MaxBytes": 100,
                "IsolationLevel": 0,
                "Topics": [],
            },
        )
    )
    partition = {
        "PartitionIndex": 0,
        "ErrorCode": 0,
        "HighWatermark": 0,
        "LastStableOffset": 0,
        "AbortedTransactions": None,
        "Records": None,
    }
    c.response(
        encode_response(
            1, 4, 5, {"ThrottleTimeMs": 0, "Responses": [{"Topic": "t", "Partitions": [partition]}]}
        )
    )
    c.close()
    d = Dissector(records="batches")
    out = []
    for p in cap.packets:
        out += d.feed(p)
    out += d.finish()
    (e,) = out
    assert e.status == "ok"
    assert e.response["Responses"][0]["Partitions"][0]["Records"] is None


# ---------------------------------------------------------------- (b) whole captures


@settings(max_examples=40, **FAST)
@given(st.sampled_from(CAPTURES), st.randoms(use_true_random=False), st.sampled_from(range(4)))
def test_mutated_captures_end_in_time_with_documented_errors_only(
    tmp_path_factory, name, rng, form
):
    packets = fuzz.mutate_packets(rng, fuzz.capture_packets(name))
    content = (fuzz.pcap_bytes if form % 2 == 0 else fuzz.pcapng_bytes)(packets)
    if form >= 2:  # damage the file too: record and block headers
        content = fuzz.mutate_bytes(rng, content, rounds=1)
    path = tmp_path_factory.mktemp("fuzz") / "mutated.pcap"
    path.write_bytes(content)
    fuzz.check_capture(path, time_limit=10.0, memory_limit=200 << 20)


@settings(max_examples=15, **FAST)
@given(st.randoms(use_true_random=False))
def test_random_captures_from_the_fuzzer(tmp_path_factory, rng):
    path = tmp_path_factory.mktemp("fuzz") / "random.pcap"
    path.write_bytes(fuzz.random_capture(rng))
    fuzz.check_capture(path, time_limit=10.0, memory_limit=200 << 20)


# ---------------------------------------------------------------- (c) TCP segments


def mutated_tcp(rng):
    """A few seed connections, their segments mutated as the fuzzer's tcp target does."""
    return fuzz.tcp_packets(fuzz.mutate_segments(rng, fuzz.seed_segments(rng)))


@settings(max_examples=300, **FAST)
@given(st.randoms(use_true_random=False))
def test_mutated_tcp_segments_end_in_time_and_add_up(rng):
    """Segments shifted, split, copied with other bytes, reordered (last first after a hole
    too), cut, dropped, with RSTs, SYNs and FINs added: the core raises nothing, stays within
    bounds, and every row, stats() and the TCP buffer's bound add up (fuzz.check_tcp)."""
    fuzz.check_tcp(mutated_tcp(rng), time_limit=10.0, memory_limit=200 << 20)


def test_the_tcp_mutations_reach_what_a_receiver_decides():
    """The mutations make each decision of a receiving stack happen, so that the checks run
    on them: RSTs out of the window, unanswered SYNs, overlaps that disagree, and holes given
    up on when the buffer's bound is reached."""
    seen = Counter()
    for seed in range(200):
        default, small = fuzz.check_tcp(mutated_tcp(random.Random(seed)))
        seen.update({key: default[key] for key in EVASIONS})
        seen["holes given up on"] += small["gaps"] > default["gaps"]
    assert all(seen[key] for key in (*EVASIONS, "holes given up on")), seen


ROW = {
    "stream": 0,
    "direction": "request",
    "kafka": True,
    "bytes_seen": 10,
    "bytes_delivered": 7,
    "bytes_duplicate": 2,
    "bytes_dropped": 1,
    "bytes_conflicting": 1,
    "bytes_tls": 0,
    "bytes_framed": 6,
    "bytes_skipped": 1,
    "bytes_abandoned": 1,
    "bytes_malformed": 2,
    "bytes_unused": 1,
    "bytes_missing": 3,
    "gaps": 1,
    "rsts_ignored": 1,
    "syns_ignored": 0,
}


@pytest.mark.parametrize(
    "change",
    [
        {"bytes_seen": 11},  # a byte seen that went nowhere
        {"bytes_conflicting": 3},  # more conflicting bytes than duplicate ones
        {"bytes_skipped": 2},  # delivered != tls + framed + skipped
        {"bytes_abandoned": 2},  # more abandoned bytes than skipped ones
        {"bytes_unused": 5},  # framed bytes decoded below zero
    ],
)
def test_the_tcp_checks_catch_a_row_that_does_not_add_up(change):
    fuzz.check_row(ROW)
    with pytest.raises(fuzz.Finding, match="accounting"):
        fuzz.check_row({**ROW, **change})


@pytest.mark.parametrize("key", ROW_SUMS)
def test_the_tcp_checks_catch_stats_that_differ_from_the_rows(key):
    stats = {k: 2 * ROW[k] for k in ROW_SUMS}
    fuzz.check_sums(stats, [ROW, ROW], "test")
    with pytest.raises(fuzz.Finding, match=key):
        fuzz.check_sums({**stats, key: stats[key] + 1}, [ROW, ROW], "test")


@pytest.mark.parametrize("seed", range(6))
def test_mangled_tcp_captures_cut_into_ranges_equal_read_pcap(tmp_path, seed):
    """The ranges target: captures with TCP mangled as above, planned, checked and joined
    as Spark's ranges are, give read_pcap's pairs and streams (fixed seeds: the target's
    findings so far are tests in test_spark_ranges.py)."""
    data = fuzz.random_tcp_capture(random.Random(seed))
    path = tmp_path / "mangled.pcap"
    path.write_bytes(data)
    fuzz.check_ranges(path, data)


def test_the_ranges_check_catches_a_table_that_differs(tmp_path, monkeypatch):
    from dissector.spark import split

    data = (fuzz.CAPTURES / "kafka-python.pcap").read_bytes()
    path = tmp_path / "kafka-python.pcap"
    path.write_bytes(data)
    fuzz.check_ranges(path, data)
    monkeypatch.setattr(split, "streams_rows", lambda run, settled: [])  # rows lost
    with pytest.raises(fuzz.Finding, match="ranges-differ: streams"):
        fuzz.check_ranges(path, data)


# ---------------------------------------------------------------- (d) hostile frames


def api_versions(corr):
    body = {"ClientSoftwareName": "t", "ClientSoftwareVersion": "1"}
    return encode_request(18, 3, corr, "hostile", body)


def api_versions_response(corr):
    return encode_response(18, 3, corr, {"ErrorCode": 0, "ApiKeys": [], "ThrottleTimeMs": 0})


def hostile_capture(prefix, after=1 << 20):
    """Three connections: the second sends `prefix` then `after` bytes inside a valid exchange."""
    cap = Capture()
    rng = random.Random(1)
    for n, client in enumerate([("10.0.0.2", 40000), ("10.0.0.3", 40001), ("10.0.0.4", 40002)]):
        c = Connection(cap, client=client)
        c.request(api_versions(10 * n + 1))
        c.response(api_versions_response(10 * n + 1))
        if n == 1:
            c.send("c", prefix + rng.randbytes(after))
            c.request(api_versions(10 * n + 2))
            c.response(api_versions_response(10 * n + 2))
        c.close()
    return cap


@pytest.mark.parametrize(
    "prefix, max_frame",
    [
        (b"\x7f\xff\xff\xff", None),  # 2 GiB, beyond --max-frame
        (b"\x80\x00\x00\x00", None),  # negative
        (b"\xff\xff\xff\xff", None),  # -1
        (b"\x7f\xff\xff\xff", 0x7FFFFFFF),  # 2 GiB, within a raised --max-frame
        (b"\x40\x00\x00\x00", 0x7FFFFFFF),  # 1 GiB
    ],
)
def test_hostile_frame_sizes_allocate_nothing_and_later_connections_decode(prefix, max_frame):
    cap = hostile_capture(prefix)
    options = {} if max_frame is None else {"max_frame": max_frame}
    d = Dissector(**options)
    tracemalloc.start()
    try:
        out = []
        for p in cap.packets:
            out += d.feed(p)
        out += d.finish()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20  # the 1 MiB that follows, a few times over; never the size claimed
    by_corr = {e.correlation_id: e for e in out}
    for corr in (1, 11, 21):  # before the hostile frame, on its connection, and after it
        assert by_corr[corr].status == "ok", out
    assert [e.stream for e in out if e.correlation_id == 21] == [2]


def test_exchange_after_a_hostile_frame_on_the_same_connection_is_paired():
    """The garbage after the bad size ends just before a short request: the search for a frame
    start must not hold that request back until its response has gone by as an orphan."""
    cap = hostile_capture(b"\x7f\xff\xff\xff", after=4096)
    d = Dissector()
    out = []
    for p in cap.packets:
        out += d.feed(p)
    out += d.finish()
    assert [(e.correlation_id, e.status) for e in out if e.stream == 1] == [(11, "ok"), (12, "ok")]


@pytest.mark.parametrize("flags", [[SYN], [SYN, RST], [PSH | ACK]])
def test_a_packet_from_an_address_and_port_to_themselves(flags):
    cap = hostile_capture(b"\xff\xff\xff\xff", after=0)
    for f in flags:
        payload = b"\0\0\0\0" if f & PSH else b""
        cap.add(tcp_packet("10.0.0.9", "10.0.0.9", 9092, 9092, 1, 1, f, payload))
    d = Dissector()
    out = []
    for p in cap.packets:
        out += d.feed(p)
    out += d.finish()
    assert {e.correlation_id for e in out} >= {1, 11, 21}


def test_record_timestamps_beyond_the_datetime_range(tmp_path):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    import dissector

    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    builder.append(0, 1 << 62, b"key", b"far future", [])
    builder.append(1, -(1 << 62), b"key", b"far past", [])
    produce = {
        "Acks": 1,
        "TimeoutMs": 1000,
        "TopicData": [
            {"Name": "t", "PartitionData": [{"Index": 0, "Records": bytes(builder.build())}]}
        ],
    }
    cap = Capture()
    c = Connection(cap)
    c.request(encode_request(0, 7, 1, "p", produce))
    c.response(encode_response(0, 7, 1, {"Responses": [], "ThrottleTimeMs": 0}))
    c.close()
    records = dissector.read_pcap(cap.write_pcap(tmp_path / "t.pcap"), table="records")
    assert records.value.tolist() == [b"far future", b"far past"]
    assert records.timestamp.isna().all()
