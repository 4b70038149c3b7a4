"""Byte-range splitting (no Spark): every split size gives the whole file's packets, and the
whole Spark plan run in one process gives the single-process tables."""

import importlib.util
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import damage
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from spark_support import ranges_never_agree, reference, run_in_process, spark_rows

from dissector.capture import open_capture
from dissector.capture import ranges as ranges_module
from dissector.capture.ranges import pieces, range_packets, read_head, survey

CAPTURE_DIR = Path(__file__).resolve().parent.parent / "captures"
CAPTURES = sorted(CAPTURE_DIR.glob("*.pcap"))
TABLES = ("pairs", "partitions", "records", "streams")


def packets_of(path):
    with open_capture(path) as r:
        return list(r)


def split_packets(path, split):
    found, _ = pieces(str(path), split)
    return [p for piece in found for p in range_packets(piece)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(capture=st.sampled_from(CAPTURES), split=st.integers(min_value=1, max_value=70_000))
def test_any_split_gives_the_files_packets(capture, split):
    assert split_packets(capture, split) == packets_of(capture)


def _rewrite_pcap(src, dst, byteorder, nanoseconds):
    """The same packets in a pcap of the other byte order and/or nanosecond timestamps."""
    raw = Path(src).read_bytes()
    bo = "<" if raw[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    _magic, major, minor, zone, sigfigs, snap, link = struct.unpack_from(bo + "IHHiIII", raw)
    magic = 0xA1B23C4D if nanoseconds else 0xA1B2C3D4
    out = [struct.pack(byteorder + "IHHiIII", magic, major, minor, zone, sigfigs, snap, link)]
    pos = 24
    while pos + 16 <= len(raw):
        sec, usec, incl, orig = struct.unpack_from(bo + "IIII", raw, pos)
        frac = usec * 1000 + 7 if nanoseconds else usec  # odd nanoseconds: truly ns
        out.append(struct.pack(byteorder + "IIII", sec, frac, incl, orig))
        out.append(raw[pos + 16 : pos + 16 + incl])
        pos += 16 + incl
    Path(dst).write_bytes(b"".join(out))


@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize("nanoseconds", [False, True])
def test_byte_orders_and_nanoseconds(tmp_path, byteorder, nanoseconds):
    path = tmp_path / "x.pcap"
    _rewrite_pcap(CAPTURES[0], path, byteorder, nanoseconds)
    whole = packets_of(path)
    assert len(whole) == len(packets_of(CAPTURES[0]))
    for split in (7, 300, 4096):
        assert split_packets(path, split) == whole


@pytest.fixture(scope="module")
def pcapng_multi(tmp_path_factory):
    """A pcapng with two interfaces (Ethernet and Linux cooked) from two sample captures."""
    if shutil.which("mergecap") is None or shutil.which("editcap") is None:
        pytest.skip("mergecap/editcap (wireshark-common) not installed")
    d = tmp_path_factory.mktemp("ng")
    sll = d / "sll.pcap"
    subprocess.run(["editcap", "-T", "linux-sll", str(CAPTURES[1]), str(sll)], check=True)
    out = d / "multi.pcapng"
    subprocess.run(
        ["mergecap", "-F", "pcapng", "-w", str(out), str(CAPTURES[0]), str(sll)], check=True
    )
    return out


def test_pcapng_with_several_interfaces(pcapng_multi):
    whole = packets_of(pcapng_multi)
    assert {p.linktype for p in whole} == {1, 113}
    for split in (4, 100, 1000, 5000, 100_000):
        assert split_packets(pcapng_multi, split) == whole


def _packet_offsets(raw):
    """Where each packet's record (pcap) or block (pcapng) starts, by a plain walk."""
    out = []
    if raw[:4] == b"\x0a\x0d\x0d\x0a":  # pcapng, little-endian as mergecap writes it
        pos = 0
        while pos + 8 <= len(raw):
            btype, blen = struct.unpack_from("<II", raw, pos)
            if btype in (2, 3, 6):
                out.append(pos)
            pos += blen
        return out
    pos = 24
    while pos + 16 <= len(raw):
        out.append(pos)
        pos += 16 + struct.unpack_from("<I", raw, pos + 8)[0]
    return out


def _marks_expected(offsets, start, end, chunk):
    """[(offset, packets of the range before it)] of the first packet at or after each
    multiple of `chunk` past `start` (but the range's first packet)."""
    mine = [o for o in offsets if start <= o < end]
    out, mark = [], start + chunk
    for n, at in enumerate(mine):
        if n and at >= mark:
            out.append((at, n))
            mark = start + ((at - start) // chunk + 1) * chunk
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    capture=st.sampled_from(CAPTURES),
    start=st.integers(0, 40_000),
    length=st.integers(1, 60_000),
    chunk=st.integers(1, 20_000),
)
@example(capture=CAPTURE_DIR / "sasl.pcap", start=13996, length=133, chunk=1)
@example(capture=CAPTURE_DIR / "sasl.pcap", start=13996, length=323, chunk=1)
def test_a_walk_marks_the_first_packet_past_every_chunk(capture, start, length, chunk):
    """A walk of a range notes its packets and marks; one that starts on a chain found inside
    packet data (sasl.pcap at 14128: a header whose length leads to a real record, followed
    by real ones) is walked again from where the range before it stopped, as `stitch` does."""
    raw = capture.read_bytes()
    end = min(start + length, len(raw))
    head = read_head(str(capture))
    found = survey(str(capture), head, start, end, chunk=chunk)
    offsets = _packet_offsets(raw)
    real = next((o for o in offsets if o >= start), len(raw))
    if found.first is not None and found.first != real:
        assert found.first not in offsets  # never a real record taken for a false one
        found = survey(str(capture), head, start, end, known_start=real, chunk=chunk)
    assert found.marks == _marks_expected(offsets, start, end, chunk)
    assert found.packets == sum(start <= o < end for o in offsets)


def _walk_in_python():
    """walk.py, the Python twin of the compiled walk, loaded from its source."""
    source = Path(ranges_module.__file__).with_name("walk.py")
    spec = importlib.util.spec_from_file_location("walk_in_python", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("order", ["<", ">"])
def test_both_walks_step_over_the_same_records(order):
    """Compiled and Python twins step over whole records only: not past `stop` (a mark or
    the range's end), a header past the buffer, or a record past `last` (the file's end)."""
    from dissector.capture import walk

    lengths = [0, 5, 60, 1500, 3, 0, 70_000, 12]
    buf = b"".join(struct.pack(order + "IIII", 1, 2, n, n) + bytes(n) for n in lengths)
    starts = [0]
    for n in lengths:
        starts.append(starts[-1] + 16 + n)
    python = _walk_in_python()
    for k in range(len(lengths)):
        for stop in (starts[k], starts[k] + 1, starts[min(k + 3, 8)], len(buf), 1 << 40):
            for last in (len(buf), starts[-2] + 20, starts[4], 1 << 40):
                for cut in (len(buf), starts[-1] - 8, starts[6] + 10):
                    view = memoryview(bytearray(buf[:cut]))
                    i, n = starts[k], 0
                    while i < stop and i + 16 <= cut and starts[k + n + 1] <= last:
                        i, n = starts[k + n + 1], n + 1
                    args = (view, starts[k], stop, last, order == ">")
                    assert walk.step_pcap(*args) == python.step_pcap(*args) == (i, n)


def test_surveys_are_alike_with_either_walk_or_none(monkeypatch):
    """A survey steps over records in bulk with either twin, or one at a time without."""
    python = _walk_in_python()
    for capture in CAPTURES[:8]:
        head = read_head(str(capture))
        size = capture.stat().st_size
        cuts = [(a, min(a + 5_000, size)) for a in range(0, size, 5_000)]
        found = []
        for step in (ranges_module.step_pcap, python.step_pcap, lambda b, i, *_: (i, 0)):
            monkeypatch.setattr(ranges_module, "step_pcap", step)
            found.append([survey(str(capture), head, a, b, chunk=1_000) for a, b in cuts])
        assert found[0] == found[1] == found[2]
        assert sum(s.packets for s in found[0]) == len(packets_of(capture))


def test_a_pcapng_walk_marks_blocks_by_offset_and_byte_order(pcapng_multi):
    raw = pcapng_multi.read_bytes()
    head = read_head(str(pcapng_multi))
    offsets = _packet_offsets(raw)
    for chunk in (1, 700, 5000):
        found = survey(str(pcapng_multi), head, 0, len(raw), chunk=chunk)
        expected = _marks_expected(offsets, 0, len(raw), chunk)
        assert found.marks == [((at, "<"), n) for at, n in expected]
        assert len(found.marks) > 3


def test_a_cut_file_warns_once_at_the_cut(tmp_path):
    raw = CAPTURES[0].read_bytes()
    path = tmp_path / "cut.pcap"
    path.write_bytes(raw[: len(raw) - 10])
    found, warnings = pieces(str(path), 2000)
    got = [p for piece in found for p in range_packets(piece)]
    with open_capture(path) as r:
        whole = list(r)
        expected = r.warnings
    assert got == whole
    assert warnings == expected and "truncated capture" in warnings[0]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    capture=st.sampled_from(CAPTURES),
    table=st.sampled_from(TABLES),
    split=st.integers(min_value=1, max_value=20_000),
    seed=st.integers(0, 1000),
    balanced=st.booleans(),
)
def test_the_plan_in_one_process_equals_read_pcap(capture, table, split, seed, balanced):
    """Ranges cut by bytes, or to hold as many packets each (the split size "auto")."""
    got = run_in_process([str(capture)], table, split, seed, balanced=balanced)
    assert spark_rows(got) == reference(str(capture), table)


GUESSED_OPTIONS = {"pairs": {}, "records": {"records": "full"}}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    capture=st.sampled_from(CAPTURES),
    table=st.sampled_from(sorted(GUESSED_OPTIONS)),
    split=st.integers(min_value=1, max_value=20_000),
    seed=st.integers(0, 1000),
)
def test_ranges_dissected_once_equal_read_pcap(capture, table, split, seed):
    """Each range's rows built with its facts, guessing stream numbers and topic names, then
    fixed or built again (guess.py), as `kafka-dissect spark` writes pairs and records."""
    got = run_in_process([str(capture)], table, split, seed, guess=True)
    assert spark_rows(got) == reference(str(capture), table, **GUESSED_OPTIONS[table])


def test_guessed_rows_are_fixed_where_the_ranges_agree():
    """Two ranges, the second reading back over the whole first: both agree at once, none is
    built again, and the second's guessed stream numbers become the settled ones; each task,
    given both ranges' facts, would fix its rows itself as the driver does."""
    path = str(CAPTURE_DIR / "confluent-kafka.pcap")
    split = Path(path).stat().st_size // 2 + 1
    counts = {}
    got = run_in_process([path], "pairs", split, read_back=split, guess=True, counts=counts)
    assert spark_rows(got) == reference(path, "pairs")
    assert counts == {"fixed": 2, "here": 2}
    assert len(set(_column(spark_rows(got), "pairs", "stream"))) > 3


def test_topic_ids_a_range_never_learned_are_named_as_settled():
    """Fetch v16 names topics by id: a range whose read-back missed the Metadata response
    naming them answers with the id and a random text; the driver gives the settled name,
    in the rows and the summary's volume, rather than building the range again."""
    path = str(CAPTURE_DIR / "findings-txn-fenced.pcap")
    size = Path(path).stat().st_size
    counts = {}
    for split in range(2_000, size, 1_000):
        got = run_in_process([path], "pairs", split, read_back=2048, guess=True, counts=counts)
        assert spark_rows(got) == reference(path, "pairs"), split
    assert counts.get("renamed", 0) > 0 and counts.get("here", 0) > 0, counts


def test_tasks_meet_once_all_have_left_their_facts(tmp_path):
    """Tasks running at once leave their blobs under the output's `_temporary/` and each reads
    all of them, in task order, once the last has arrived; an empty blob is a task without."""
    from concurrent.futures import ThreadPoolExecutor

    from dissector.spark import parts

    blobs = [b"range 0", b"", b"range 2" * 1000]

    def task(me):
        if me == 2:
            time.sleep(0.2)  # the last to arrive
        return parts.rendezvous(str(tmp_path), "job", "facts-3", 3, me, blobs[me])

    with ThreadPoolExecutor(3) as pool:
        assert list(pool.map(task, range(3))) == [blobs] * 3
    left = sorted(p.name for p in (tmp_path / "_temporary" / "job" / "facts-3").iterdir())
    assert left == ["0", "1", "2"]


def test_renames_map_only_answers_a_range_could_not_know():
    from dissector.spark.crossing import renames

    settled = {"id-a": ([(10, 0, 1)], ["orders"])}  # named at frame 10
    before, after = (5, 0, 1), (20, 0, 1)
    guessed = "id-a#x"
    assert renames({"id-a": [[after, (30, 0, 1), guessed]]}, settled, "#x") == {guessed: "orders"}
    assert renames({"id-a": [[before, before, guessed]]}, settled, "#x") == {guessed: "id-a"}
    assert renames({"id-a": [[after, after, "orders"]]}, settled, "#x") == {}
    assert renames({"id-a": [[after, after, "payments"]]}, settled, "#x") is None  # learned
    assert renames({"id-a": [[before, after, guessed]]}, settled, "#x") is None  # named within
    two = {"id-a": [[before, before, guessed], [after, after, guessed]]}
    assert renames(two, settled, "#x") is None  # one guess, two names


def test_renamed_rows_keep_their_lists_sorted_and_the_others_untouched():
    import pyarrow as pa

    from dissector.spark.guess import _renamed

    topics = [["a", "z#x"], None, ["b"], [], ["m#x", "y#x"], ["c", "q#x"]]
    batch = pa.RecordBatch.from_pydict(
        {"topics": pa.array(topics, pa.list_(pa.string())), "n": list(range(6))}
    )
    names = {"z#x": "a", "y#x": "b", "m#x": "zz", "q#x": "b"}
    got = _renamed(batch, names)
    assert got.column("topics").to_pylist() == [["a"], None, ["b"], [], ["b", "zz"], ["b", "c"]]
    assert got.column("n").to_pylist() == list(range(6))
    assert _renamed(batch, {"w#x": "w"}).column("topics").to_pylist() == topics


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    capture=st.sampled_from(CAPTURES),
    case=st.sampled_from(sorted(damage.CASES)),
    table=st.sampled_from(TABLES),
    split=st.integers(min_value=1, max_value=20_000),
)
# A range whose connection's client side is decided at its end, by the last frame of the
# first side's `answering` framer (the end confirming a frame held at a packet's start).
@example(
    capture=Path(__file__).resolve().parent.parent / "captures" / "compression.pcap",
    case="duplicate-20%-s3",
    table="pairs",
    split=1,
)
def test_damaged_copies_split_anywhere_equal_read_pcap(capture, case, table, split):
    """Two-pass ranges; pairs also dissected once (guess.py)."""
    pcap = damage.read_pcap(capture)
    _kind, harm = damage.CASES[case]
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / f"{case}.pcap")
        harm(pcap.packets).write(path, pcap)
        expected = reference(path, table)
        got = run_in_process([path], table, split, seed=split)
        assert spark_rows(got) == expected
        if table == "pairs":
            got = run_in_process([path], table, split, seed=split, guess=True)
            assert spark_rows(got) == expected


@pytest.mark.parametrize("table", TABLES)
def test_a_set_of_whole_and_split_captures_equals_read_pcap(table):
    """Captures below the split size are dissected whole in one task, the others by byte
    ranges; each equals read_pcap."""
    from dissector.spark.plan import plan_split, survey_here

    paths = [str(c) for c in CAPTURES]
    whole, split, _ = plan_split(paths, 30_000, 10_000, survey_here)
    assert whole and split and set(whole).isdisjoint(c.capture for c in split)
    got = run_in_process(paths, table, 30_000, seed=3)
    assert set(got.column("capture").to_pylist()) <= set(paths)
    for path in paths:
        assert spark_rows(got, path) == reference(path, table), path


def _nanosecond_times(table, df):
    """The capture-time columns of a read_pcap table, as int64 nanoseconds, per column."""
    import pyarrow as pa

    from dissector.tables.schema import SCHEMAS

    times = [f for f in SCHEMAS[table] if pa.types.is_timestamp(f.type)]
    names = [f.name for f in times if f.type.unit == "ns"]
    return {n: sorted(t.value for t in df[n].dropna()) for n in names}


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("split", [300, 1 << 30])
def test_nanosecond_timestamps_are_exact_int64(tmp_path, table, split):
    """timestamps="ns": the capture-time columns are int64 nanoseconds, equal to read_pcap's
    to the nanosecond, whether the capture is split or read whole."""
    import pyarrow as pa

    import dissector

    path = tmp_path / "ns.pcap"
    _rewrite_pcap(CAPTURES[0], path, "<", nanoseconds=True)
    got = run_in_process([str(path)], table, split, timestamps="ns")
    expected = _nanosecond_times(table, dissector.read_pcap(str(path), table=table))
    assert expected or table == "records"
    for name, values in expected.items():
        assert got.schema.field(name).type == pa.int64()
        assert sorted(v for v in got.column(name).to_pylist() if v is not None) == values
        assert any(v % 1000 == 7 for v in values) or not values  # truly nanoseconds
    if table == "records":  # Kafka's millisecond timestamps stay Spark timestamps
        assert pa.types.is_timestamp(got.schema.field("timestamp").type)


def test_what_a_connection_is_fed_is_its_own_read_back():
    """A range read back further for some connections reads each one's packets over its own
    history only: reading back further for another connection never changes what the run
    says of this one, whose facts a run for it alone checked. (Else a connection's view in
    the rows run differed from the one checked: a finding of the fuzzer's ranges target.)"""
    from dissector.spark.pipeline import _options
    from dissector.spark.plan import plan_split, survey_here
    from dissector.spark.ranges import RangeRun

    path = str(CAPTURE_DIR / "kafka-python.pcap")
    _, (capture,), _ = plan_split([path], 8192, 1024, survey_here)
    opts = _options({})

    def view(i, extra):
        capture.extra[i] = extra
        run = RangeRun(capture.spec(i), opts)
        for _ in run:
            pass
        capture.extra[i] = {}
        return run.view

    compared = 0
    for i in range(1, capture.tasks):
        first = capture.bounds[i] - capture.back[i]
        keys = list(view(i, {}))
        for one in keys:
            alone = view(i, {one: [first - 1]}).get(one)
            for other in keys:
                if other != one:
                    both = {one: [first - 1], other: list(range(first))}
                    assert view(i, both).get(one) == alone, (i, one, other)
                    compared += 1
    assert compared >= 2


def test_a_topic_id_shows_its_name_only_once_learned_earlier():
    """Moments across groups: a lookup before the learning keeps the id, one after gets the
    name, the latest learned before it when the name changed (as one process's Directory
    overwrites); within a group, the sequence orders a learning and a lookup of one
    packet."""
    from dissector.session.exchange import Exchange
    from dissector.spark.crossing import Clock, TopicNames, named, settle

    learner, asker = Clock(), Clock()
    names = TopicNames(learner)
    for frame, name in ((50, "orders"), (55, "orders"), (60, "renamed")):
        learner.at(frame)
        names["id-A"] = name
    assert [(m[0], n) for _, m, n in names.learned] == [(50, "orders"), (60, "renamed")]
    # What the driver settles from the facts runs: one range's learnings with another's.
    later = TopicNames(Clock())
    later.clock.at(70)
    later["id-A"] = "orders"
    settled = settle(names.learned + later.learned)
    asked = TopicNames(asker, settled)
    for frame, expected in ((49, "id-A"), (51, "orders"), (61, "renamed"), (71, "orders")):
        asker.at(frame)
        e = Exchange(topics=["plain", asked["id-A"]])
        e.topic_names = {"id-A": e.topics[1]}
        named(e)
        assert e.topics == ["plain", expected]
        assert e.topic_names == ({} if expected == "id-A" else {"id-A": expected})
    # One group, one packet: learned, then looked up; a facts run (nothing settled) answers
    # with the id, and counts the moment all the same.
    learner.at(80)
    same = TopicNames(learner)
    same["id-B"] = "payments"
    assert same["id-B"] == "id-B" and learner.seq == 2
    assert TopicNames(learner, settle(same.learned))["id-B"] == "payments"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    capture=st.sampled_from(CAPTURES),
    table=st.sampled_from(TABLES),
    split=st.integers(min_value=200, max_value=20_000),
    read_back=st.integers(min_value=1, max_value=5_000),
)
def test_any_read_back_equals_read_pcap(capture, table, split, read_back):
    """A read-back too short to re-find a connection's state is found out and made longer:
    whatever its length, the tables equal read_pcap."""
    got = run_in_process([str(capture)], table, split, seed=read_back, read_back=read_back)
    assert spark_rows(got) == reference(str(capture), table)


def test_ranges_cut_through_frames_and_long_connections():
    """kafka-python.pcap in ranges of 1 KB (packets of up to 64 KB: a range is a packet or a
    few): its connections live across many ranges, some with no packet in a range, frames cut
    by range boundaries; a read-back of one chunk is too short for some ranges, which are
    redone reading back further, over the packets of the connections they missed, and for
    those connections alone where the rest of what they said stands."""
    from dissector.spark.pipeline import _options
    from dissector.spark.plan import plan_split, survey_here
    from dissector.spark.split import run_facts_task, split_tasks

    path = str(CAPTURES[[c.name for c in CAPTURES].index("kafka-python.pcap")])
    _, split, _ = plan_split([path], 1024, 256, survey_here)
    (capture,) = split
    assert capture.tasks >= 20
    opts = _options({})
    rounds = []

    def facts(items):
        rounds.append([sorted(spec.get("only") or ()) for spec, _ in items])
        return [run_facts_task(spec, opts, seeds) for spec, seeds in items]

    outcomes, _seeds, facts_of = split_tasks(split, opts, facts)
    assert len(rounds[0]) == capture.tasks and len(rounds) > 1  # some ranges were redone
    assert any(capture.extra)  # reading back further for the connections it missed
    # Ranges redone for some connections alone, their facts parted (ranges.partial).
    assert any(keys for redone in rounds[1:] for keys in redone)
    crossing = [c for f in facts_of[path] for c in f["crossing"] if c["carried"]]
    spans = {}
    for c in crossing:
        spans[c["key"]] = spans.get(c["key"], 0) + 1
    assert max(spans.values()) >= 5  # a connection carried into five ranges and more
    keys = {c["key"] for c in crossing}
    touched = [{key for key, _, _ in f["checked"]} for f in facts_of[path]]
    assert any(keys - t for t in touched)  # ranges where an open connection has no packet
    got = run_in_process([path], "pairs", 1024, read_back=256)
    assert spark_rows(got) == reference(path, "pairs")
    assert outcomes[path].packets == len(packets_of(path))


def test_a_connection_idle_across_many_ranges_is_read_back_over_its_own_history(tmp_path):
    """kafka-python.pcap cut in two, confluent-kafka.pcap's traffic put between the halves:
    the first half's connections are idle across every range of that traffic. A range where
    one of them wakes up reads it back over its own history (the ranges with a packet of
    it), never over the traffic it was idle through, so what a task reads stays bounded
    however long a connection is quiet; and the tables equal read_pcap."""
    from dissector.spark.pipeline import _options
    from dissector.spark.plan import plan_split, survey_here
    from dissector.spark.split import run_facts_task, split_tasks

    def packets(name):
        return damage.read_pcap(CAPTURES[[c.name for c in CAPTURES].index(name)])

    base, filler = packets("kafka-python.pcap"), packets("confluent-kafka.pcap").packets
    cut = len(base.packets) // 2
    before, after = base.packets[:cut], base.packets[cut:]
    shift = before[-1].sec + 1 - filler[0].sec
    filler = [p._replace(sec=p.sec + shift) for p in filler]
    later = filler[-1].sec + 2 - after[0].sec
    after = [p._replace(sec=p.sec + later) for p in after]
    path = str(tmp_path / "idle.pcap")
    damage.write_pcap(path, base, before + filler + after)
    head = 24 + sum(16 + len(p.data) for p in before)  # where the quiet stretch starts
    tail = head + sum(16 + len(p.data) for p in filler)  # and ends

    split_bytes, read_back = 2048, 512
    _, split, _ = plan_split([path], split_bytes, read_back, survey_here)
    (capture,) = split
    opts = _options({})
    split_tasks(split, opts, lambda items: [run_facts_task(s, opts, x) for s, x in items])
    quiet = [c for c in capture.chunks if head <= c["start"] and c["stop"] <= tail]
    assert len(quiet) > 40
    woken = 0
    for i in range(capture.tasks):
        spec = capture.spec(i)
        if capture.chunks[capture.bounds[i]]["start"] < tail or not spec["filtered"]:
            continue
        woken += 1  # read back over some connections' own packets
        read = spec["chunks"][: spec["full"]]
        assert sum(1 for c in read if head <= c["start"] and c["stop"] <= tail) < 8
    assert woken
    for table in ("pairs", "streams"):
        got = run_in_process([path], table, split_bytes, read_back=read_back)
        assert spark_rows(got) == reference(path, table)


def test_ports_reused_across_range_boundaries(tmp_path):
    """A connection (SYN, an exchange) whose ports a second connection takes again (SYN,
    answered) and keeps open to the capture's end, cut at every packet boundary and more.
    The range that ends the first one, carried in, also ends the second for the capture's
    end, both under one 4-tuple: each keeps its own first frame. A range that first read the
    reusing SYN in its read-back as a connection of its own, and is redone for that 4-tuple
    alone, counts the connection it opened once: stream numbers stay those of read_pcap.
    (Findings of an in-process fuzz of ranges against read_pcap.)"""
    from kafka_encoder import encode_request, encode_response
    from synth import Capture, Connection

    cap = Capture()
    for correlation_id in (1, 2):  # the same ports, new sequence numbers: a reuse
        c = Connection(cap, isn=(1000 * correlation_id, 5000 * correlation_id))
        c.request(encode_request(18, 3, correlation_id, "reuse", {}))
        c.response(encode_response(18, 3, correlation_id, {"ErrorCode": 0, "ApiKeys": []}))
    path = str(cap.write_pcap(tmp_path / "reuse.pcap"))
    split_everywhere_equals_read_pcap(path)


def test_ranges_that_never_agree_leave_their_capture_to_be_read_whole(monkeypatch):
    """Mangled TCP can leave a connection in a state no read-back reproduces: a capture
    whose ranges still disagree after every round is dissected whole, which is exact."""
    from dissector.spark.pipeline import _options
    from dissector.spark.plan import plan_split, survey_here
    from dissector.spark.split import MAX_ROUNDS, run_facts_task, split_tasks, unjoined

    ranges_never_agree(monkeypatch)
    path = str(CAPTURES[[c.name for c in CAPTURES].index("kafka-python.pcap")])
    _, split, _ = plan_split([path], 4096, 1024, survey_here)
    opts = _options({})
    rounds = []

    def facts(items):
        rounds.append(len(items))
        return [run_facts_task(spec, opts, seeds) for spec, seeds in items]

    outcomes, _seeds, _facts = split_tasks(split, opts, facts)
    assert len(rounds) == MAX_ROUNDS
    assert unjoined(split, outcomes) == {path: "range 1: held apart by this test"}
    for table in TABLES:
        got = run_in_process([path], table, 4096, read_back=1024)
        assert spark_rows(got) == reference(path, table)


def test_a_packet_after_an_rst_only_a_read_back_believed(tmp_path):
    """The client closes (FIN), then an RST with a sequence number far out of the window
    comes, which one process ignores, then the broker's FIN. A read-back that starts near
    the RST cannot tell it is out of the window and ends the connection there, and its range
    then takes the broker's FIN for a late packet of an ended connection: the connections
    its read-back ended are checked too, and the range is redone until it agrees. Cut at
    every packet boundary and more, every table equals read_pcap. (A finding of an
    in-process fuzz of ranges against read_pcap.)"""
    from kafka_encoder import encode_request, encode_response
    from synth import ACK, FIN, RST, Capture, Connection

    from dissector.tables.schema import SCHEMAS

    cap = Capture()
    c = Connection(cap)
    c.request(encode_request(18, 3, 1, "rst", {}))
    c.response(encode_response(18, 3, 1, {"ErrorCode": 0, "ApiKeys": []}))
    c._send("c", FIN | ACK, b"")
    c.seq["c"] += 1
    c._send("c", RST | ACK, b"", seq=c.seq["c"] + (1 << 30))
    c._send("b", FIN | ACK, b"")
    c.seq["b"] += 1
    c._send("c", ACK, b"")
    later = Connection(cap, client=("10.0.0.3", 41000))
    later.request(encode_request(18, 3, 1, "later", {}))
    later.response(encode_response(18, 3, 1, {"ErrorCode": 0, "ApiKeys": []}))
    path = str(cap.write_pcap(tmp_path / "rst.pcap"))
    streams = reference(path, "streams")
    end, ignored = (SCHEMAS["streams"].names.index(n) for n in ("end", "rsts_ignored"))
    assert [(r[end], r[ignored]) for r in streams[:2]] == [("fin", 1), ("fin", 0)]
    split_everywhere_equals_read_pcap(path)


def split_everywhere_equals_read_pcap(path, tables=("pairs", "streams"), read_backs=(None,)):
    """Cut at every packet boundary and more (every 10 bytes), with each read-back (None:
    one drawn from the split), `tables` equal read_pcap."""
    for table in tables:
        expected = reference(path, table)
        for split in range(40, Path(path).stat().st_size, 10):
            for read_back in read_backs:
                got = run_in_process([path], table, split, seed=split, read_back=read_back)
                assert spark_rows(got) == expected, (table, split, read_back)


def _column(rows, table, name):
    from dissector.tables.schema import SCHEMAS

    index = SCHEMAS[table].names.index(name)
    return [r[index] for r in rows]


def test_a_reuse_known_only_from_the_answer_to_a_later_syn(tmp_path):
    """A closed connection's ports take a SYN (a new connection), then a second SYN with
    another sequence number (on that open connection: held until answered), and another
    client connects before the broker answers the second SYN. One process opens the
    connection of the second SYN when the answer comes, after the other client's: stream
    numbers follow the order connections are opened, not their first packets. A range that
    reads the second SYN in its read-back and its answer in its own packets ends the first
    of them there ("reused"), and says so, though its last packet came before the range.
    (Findings of an in-process fuzz of ranges against read_pcap.)"""
    from kafka_encoder import encode_request, encode_response
    from synth import ACK, SYN, Capture, Connection

    def exchange(c, correlation_id):
        c.request(encode_request(18, 3, correlation_id, "reuse", {}))
        c.response(encode_response(18, 3, correlation_id, {"ErrorCode": 0, "ApiKeys": []}))

    cap = Capture()
    first = Connection(cap)
    exchange(first, 1)
    first.close()
    first._send("c", ACK, b"")
    opened = Connection(cap, isn=(7000, 9000), handshake=False)  # the same ports
    opened._send("c", SYN, b"")
    second = Connection(cap, isn=(20000, 30000), handshake=False)
    second._send("c", SYN, b"")
    other = Connection(cap, client=("10.0.0.3", 41000))
    second.seq["c"] += 1
    second._send("b", SYN | ACK, b"")
    second.seq["b"] += 1
    second._send("c", ACK, b"")
    exchange(second, 2)
    exchange(other, 3)
    second.close()
    other.close()
    path = str(cap.write_pcap(tmp_path / "reuse.pcap"))
    pairs = reference(path, "pairs")
    # The second SYN's connection (stream 1 is the first SYN's), first seen before the other
    # client's, is numbered after it.
    ids, streams = (_column(pairs, "pairs", name) for name in ("correlation_id", "stream"))
    assert dict(zip(ids, streams, strict=True)) == {1: 0, 2: 3, 3: 2}
    split_everywhere_equals_read_pcap(path)


def test_a_reuse_answered_in_the_range_after_its_syn(tmp_path):
    """A new SYN on an open connection, the last packet of that connection, and the
    broker's answer in the next range: that range ends the old connection ("reused") though
    none of its packets is there, and the new one closes in it. It reports the old one as
    ended; else the driver would end it again for the capture's end. (A finding of an
    in-process fuzz of ranges against read_pcap.)"""
    from kafka_encoder import encode_request, encode_response
    from synth import ACK, SYN, Capture, Connection

    cap = Capture()
    old = Connection(cap)
    old.request(encode_request(18, 3, 1, "reuse", {}))
    old.response(encode_response(18, 3, 1, {"ErrorCode": 0, "ApiKeys": []}))
    new = Connection(cap, isn=(20000, 30000), handshake=False)  # the same ports
    new._send("c", SYN, b"")
    new.seq["c"] += 1
    new._send("b", SYN | ACK, b"")
    new.seq["b"] += 1
    new._send("c", ACK, b"")
    new.close()
    other = Connection(cap, client=("10.0.0.3", 41000))
    other.request(encode_request(18, 3, 2, "other", {}))
    other.response(encode_response(18, 3, 2, {"ErrorCode": 0, "ApiKeys": []}))
    path = str(cap.write_pcap(tmp_path / "reuse.pcap"))
    streams = reference(path, "streams")
    assert _column(streams, "streams", "end") == ["reused", "reused", "eof", "eof"]
    split_everywhere_equals_read_pcap(path, read_backs=(None, 20, 80))


def test_a_retransmitted_syn_on_an_open_connection(tmp_path):
    """The client's SYN sent again in the middle of its connection: one process knows it
    for the connection's own SYN and ignores it; a read-back that began after the handshake
    takes it for a new SYN and holds it, and the next packet then drops it and counts it
    ignored. Every packet of a connection looks at a held SYN, so where one is held, in the
    view or the truth, the range is checked for it. (A finding of an in-process fuzz of
    ranges against read_pcap.)"""
    from kafka_encoder import encode_request, encode_response
    from synth import SYN, Capture, Connection

    cap = Capture()
    c = Connection(cap)
    for correlation_id in range(10, 20):  # a history longer than a read-back over its own
        c.request(encode_request(18, 3, correlation_id, "syn", {}))
        c.response(encode_response(18, 3, correlation_id, {"ErrorCode": 0, "ApiKeys": []}))
    c.request(encode_request(18, 3, 1, "syn", {}))
    c._send("c", SYN, b"", seq=1000)  # the handshake's sequence number: sent again
    c.response(encode_response(18, 3, 1, {"ErrorCode": 0, "ApiKeys": []}))
    c.request(encode_request(18, 3, 2, "syn", {}))
    c.response(encode_response(18, 3, 2, {"ErrorCode": 0, "ApiKeys": []}))
    c.close()
    path = str(cap.write_pcap(tmp_path / "syn.pcap"))
    assert _column(reference(path, "streams"), "streams", "syns_ignored") == [0, 0]
    split_everywhere_equals_read_pcap(path, read_backs=(None, 20, 80))


def test_a_frame_left_open_at_the_end_after_bytes_skipped_long_before(tmp_path):
    """A request cut short by the client's FIN is the client's doing only on a stream framed
    in step from its start; after bytes skipped (24 that are no frame, long before) one
    process counts it truncated, with no row. A range that reads back from a frame boundary
    after the skip sees a clean stream: where a range's end of a connection hangs on that, its
    view must agree with the truth. (A finding of an in-process fuzz of ranges against
    read_pcap.)"""
    from kafka_encoder import encode_request, encode_response
    from synth import Capture, Connection, frame_bytes

    cap = Capture()
    c = Connection(cap)
    c.request(encode_request(18, 3, 1, "cut", {}))
    c.response(encode_response(18, 3, 1, {"ErrorCode": 0, "ApiKeys": []}))
    c.send("c", b"\xff" * 24)
    for correlation_id in range(2, 8):
        c.request(encode_request(18, 3, correlation_id, "cut", {}))
        c.response(encode_response(18, 3, correlation_id, {"ErrorCode": 0, "ApiKeys": []}))
    c.send("c", frame_bytes(encode_request(18, 3, 9, "cut", {}))[:20])
    c.close()
    path = str(cap.write_pcap(tmp_path / "cut.pcap"))
    assert _column(reference(path, "pairs"), "pairs", "status") == ["ok"] * 7
    assert _column(reference(path, "streams"), "streams", "bytes_skipped") == [24 + 20, 0]
    split_everywhere_equals_read_pcap(path, read_backs=(None, 20, 80))


def test_a_topic_renamed_by_a_later_metadata_response(tmp_path):
    """Two Metadata responses give one topic id two names (mangled bytes do): one process
    names the id by the latest before each lookup, and so do ranges, whichever range each
    learning came from. (A finding of an in-process fuzz of ranges against read_pcap.)"""
    from kafka_encoder import encode_request, encode_response
    from synth import Capture, Connection

    topic_id = "AQIDBAUGBwgJCgsMDQ4PEA"
    cap = Capture()
    c = Connection(cap)
    for correlation_id, name in ((1, "orders"), (3, "renamed")):
        c.request(encode_request(3, 12, correlation_id, "c", {"Topics": None}))
        topic = {"ErrorCode": 0, "Name": name, "TopicId": topic_id, "Partitions": []}
        c.response(encode_response(3, 12, correlation_id, {"Topics": [topic]}))
        fetch = {"Topics": [{"TopicId": topic_id, "Partitions": [{"Partition": 0}]}]}
        c.request(encode_request(1, 13, correlation_id + 1, "c", fetch))
    c.close()
    path = str(cap.write_pcap(tmp_path / "renamed.pcap"))
    pairs = reference(path, "pairs")
    topics = [list(t) for t in _column(pairs, "pairs", "topics")]
    named = dict(zip(_column(pairs, "pairs", "correlation_id"), topics, strict=True))
    assert named == {1: ["orders"], 2: ["orders"], 3: ["renamed"], 4: ["renamed"]}
    split_everywhere_equals_read_pcap(path, ("pairs", "partitions"))


def test_a_topic_named_by_a_response_the_capture_end_completes(tmp_path):
    """A Metadata response behind a hole (the response before it never captured) completes
    only when the capture's end gives up on the hole, and names the topic its own exchange
    shows. The range that ends the connection for the capture's end learns it there; its
    facts run ends its connections as well, and the driver keeps what the range that ends
    each one learned. (A finding of the fuzzer's ranges target.)"""
    from kafka_encoder import encode_request, encode_response
    from synth import Capture, Connection, frame_bytes

    cap = Capture()
    c = Connection(cap)
    c.request(encode_request(18, 3, 1, "c", {}))
    c.request(encode_request(3, 12, 2, "c", {"Topics": None}))
    lost = frame_bytes(encode_response(18, 3, 1, {"ErrorCode": 0, "ApiKeys": []}))
    c.seq["b"] += len(lost)  # never captured
    topic = {"ErrorCode": 0, "Name": "orders", "TopicId": "AQIDBAUGBwgJCgsMDQ4PEA"}
    c.response(encode_response(3, 12, 2, {"Topics": [{**topic, "Partitions": []}]}))
    path = str(cap.write_pcap(tmp_path / "hole.pcap"))
    pairs = reference(path, "pairs")
    assert _column(pairs, "pairs", "status") == ["unanswered", "ok"]
    assert [list(t) for t in _column(pairs, "pairs", "topics")] == [[], ["orders"]]
    split_everywhere_equals_read_pcap(path, ("pairs",), read_backs=(None, 20, 80))
