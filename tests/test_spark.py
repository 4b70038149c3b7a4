"""The tables on a local Spark: equal to read_pcap on every sample capture, for every table,
for any split size, with several captures as one load."""

import os
import shutil
import struct
import subprocess
from pathlib import Path

import damage
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spark_support import local_spark, ranges_never_agree, reference, spark_rows

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted(str(p) for p in (ROOT / "captures").glob("*.pcap"))
TABLES = ("pairs", "partitions", "records", "streams")


@pytest.fixture(scope="session")
def spark():
    session, _owned = local_spark("kafka-dissector-tests", memory="1g")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def sample_set(spark):
    """Every sample capture as one capture set, cut into 16 KiB ranges."""
    from dissector.spark import Dissected

    return Dissected(spark, str(ROOT / "captures" / "*.pcap"), "16k", records="full")


@pytest.mark.parametrize("table", TABLES)
def test_every_table_of_a_capture_set_equals_read_pcap(sample_set, table):
    got = sample_set.table(table).toArrow()
    assert set(got.column("capture").to_pylist()) <= set(CAPTURES)
    for path in CAPTURES:
        options = {"records": "full"}
        assert spark_rows(got, path) == reference(path, table, **options), path


def test_task_arguments_too_large_to_go_with_the_function_are_joined_in(
    spark, tmp_path, monkeypatch
):
    """Tasks' arguments travel with the function while they are small all together, else in
    rows joined in, each task reading its own: the tables are the same either way."""
    from dissector.spark import Dissected, pipeline

    path = CAPTURES[0]
    expected = reference(path, "pairs")
    for inline in (pipeline.INLINE_ARGUMENTS, 0):
        monkeypatch.setattr(pipeline, "INLINE_ARGUMENTS", inline)
        dissected = Dissected(spark, path, "8k")
        assert len(dissected.split[0].bounds) > 3  # several ranges
        assert spark_rows(dissected.table("pairs").toArrow(), path) == expected
        out = tmp_path / f"inline-{inline}"
        assert dissected.write(str(out)) == len(expected)
        assert spark_rows(spark.read.parquet(str(out)).toArrow(), path) == expected


def test_whole_and_split_captures_in_one_set(spark, capsys):
    """Captures below the split size are dissected in the task that reads them, the others by
    byte ranges: every table and the summary equal read_pcap and analyze."""
    from dissector.cli import analyze, build_parser
    from dissector.spark import Dissected

    d = Dissected(spark, CAPTURES, "30k", records="full")
    assert d.whole and d.split
    assert set(d.whole) == {c for c in CAPTURES if os.path.getsize(c) <= 30_000}
    for table in TABLES:
        got = d.table(table).toArrow()
        for path in CAPTURES:
            assert spark_rows(got, path) == reference(path, table, records="full"), path
    texts = [summary.text(title) for _c, title, summary, _notes in d.summaries()]
    analyze(build_parser().parse_args(["analyze", "--records", "full", *CAPTURES]))
    expected = capsys.readouterr().out
    for text in texts:
        assert text in expected


def test_captures_read_whole_are_written_by_one_job(spark, tmp_path):
    """With no capture split into ranges there is nothing to join: writing runs one Spark
    job, that of the tasks writing the files (no empty job of range facts before it)."""
    from dissector.spark import Dissected

    small = [c for c in CAPTURES if os.path.getsize(c) <= 30_000]
    sc = spark.sparkContext
    sc.setJobGroup("whole-captures-only", "one job")
    try:
        d = Dissected(spark, small, "30k")
        written = d.write(str(tmp_path / "out"))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert not d.split
    assert written == sum(len(reference(c, "pairs")) for c in small)
    assert len(sc.statusTracker().getJobIdsForGroup("whole-captures-only")) == 1


def test_the_format_loads_globs_and_lists(spark):
    """spark.read.format("kafka_pcap") with options, a glob and a list of paths."""
    one, two = CAPTURES[0], CAPTURES[1]
    df = (
        spark.read.format("kafka_pcap")
        .option("table", "pairs")
        .option("split_bytes", "16k")
        .load([one, str(Path(two).parent / Path(two).name.replace(".pcap", "*.pcap"))])
    )
    assert sorted(df.columns) == sorted(["capture", *_names("pairs")])
    got = df.toArrow()
    assert spark_rows(got, one) == reference(one, "pairs")
    assert spark_rows(got, two) == reference(two, "pairs")
    # pandas 3 with PySpark 4: the DataFrame converts through Arrow
    pdf = df.toPandas()
    assert len(pdf) == got.num_rows and pdf["request_frame"].notna().any()


def _names(table):
    from dissector.tables.schema import SCHEMAS

    return SCHEMAS[table].names


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    case=st.sampled_from(sorted(damage.CASES)),
    split=st.integers(min_value=64, max_value=30_000),
)
def test_damaged_copies_split_anywhere(spark, tmp_path_factory, case, split):
    """Any split size, on damaged copies of a capture with topic ids resolved across
    connections and frames larger than the splits."""
    from dissector.spark import load

    capture = str(ROOT / "captures" / "confluent-kafka.pcap")
    pcap = damage.read_pcap(capture)
    path = tmp_path_factory.mktemp("damaged") / f"{case}.pcap"
    damage.CASES[case][1](pcap.packets).write(path, pcap)
    got = load(spark, str(path), "pairs", split_bytes=split).toArrow()
    assert spark_rows(got) == reference(str(path), "pairs")


@pytest.fixture(scope="module")
def odd_files(tmp_path_factory):
    """A big-endian nanosecond pcap, and a pcapng with two interfaces (Ethernet and Linux
    cooked), gzip-compressed as well."""
    d = tmp_path_factory.mktemp("odd")
    src = Path(CAPTURES[0]).read_bytes()
    header = struct.unpack_from("<IHHiIII", src)
    out = [struct.pack(">IHHiIII", 0xA1B23C4D, *header[1:])]
    pos = 24
    while pos + 16 <= len(src):
        sec, usec, incl, orig = struct.unpack_from("<IIII", src, pos)
        out.append(struct.pack(">IIII", sec, usec * 1000 + 999, incl, orig))
        out.append(src[pos + 16 : pos + 16 + incl])
        pos += 16 + incl
    ns = d / "big-endian-ns.pcap"
    ns.write_bytes(b"".join(out))
    files = [str(ns)]
    if shutil.which("mergecap") and shutil.which("editcap"):
        sll = d / "sll.pcap"
        subprocess.run(["editcap", "-T", "linux-sll", CAPTURES[4], str(sll)], check=True)
        ng = d / "two-interfaces.pcapng"
        subprocess.run(
            ["mergecap", "-F", "pcapng", "-w", str(ng), CAPTURES[2], str(sll)], check=True
        )
        gz = d / "two-interfaces.pcapng.gz"
        subprocess.run(f"gzip -c {ng} > {gz}", shell=True, check=True)
        files += [str(ng), str(gz)]
    return files


def test_nanoseconds_big_endian_pcapng_and_gzip(spark, odd_files):
    from dissector.spark import Dissected, load

    # local_survey_bytes=0: the byte ranges are surveyed by a Spark job, as for big files
    d = Dissected(spark, odd_files, "3k", local_survey_bytes=0)
    for table in ("pairs", "streams"):
        got = d.table(table).toArrow()
        for path in odd_files:
            assert spark_rows(got, path) == reference(path, table), (path, table)
    # the nanoseconds survive in the latencies; Spark's timestamps keep microseconds
    pairs = load(spark, odd_files[0], "pairs", split_bytes="3k").toPandas()
    assert pairs["request_start"].dt.microsecond.notna().all()


def test_local_mode_surveys_in_a_job_past_its_threshold(spark, odd_files, monkeypatch):
    import os

    from dissector.spark import plan

    rows = [(0, odd_files[0], 0, os.path.getsize(odd_files[0]), 1 << 10)]
    tracker, group = spark.sparkContext.statusTracker(), "survey-threshold"
    spark.sparkContext.setJobGroup(group, "surveys")
    try:
        assert plan.surveys_in_spark(spark)(rows) == plan.survey_here(rows)
        assert not tracker.getJobIdsForGroup(group)  # below it: surveyed by the driver
        monkeypatch.setattr(plan, "LOCAL_MODE_SURVEY_BYTES", 1 << 10)
        assert plan.surveys_in_spark(spark)(rows) == plan.survey_here(rows)
        assert tracker.getJobIdsForGroup(group)  # past it: by a Spark job
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


def test_command_line_writes_parquet_and_the_analyze_summary(spark, tmp_path, capsys):
    from dissector.cli import analyze, build_parser
    from dissector.spark import cli

    out = tmp_path / "out"
    captures = [CAPTURES[0], CAPTURES[3]]
    args = build_parser().parse_args(
        ["spark", *captures, "-o", str(out), "--table", "partitions", "--split-bytes", "8k"]
    )
    assert cli.run(args, spark) == 0
    text = capsys.readouterr().out
    parts = sorted(p.name for p in out.iterdir() if p.name.startswith("capture="))
    assert len(parts) == 2
    written = spark.read.parquet(str(out)).toArrow()
    for path in captures:
        assert spark_rows(written, path) == reference(path, "partitions")
    analyze(build_parser().parse_args(["analyze", *captures]))
    expected = capsys.readouterr().out
    assert text.startswith(expected.rstrip("\n"))
    assert os.path.isdir(out)


def test_ranges_dissected_once_say_the_analyze_summary(spark, tmp_path, capsys):
    """`kafka-dissect spark` writes pairs with one pass over each range (guess.py): where a
    range named topics by ids it never learned, the volume by topic is that of `analyze`,
    as are the rows."""
    from dissector.cli import analyze, build_parser
    from dissector.spark import cli

    path = str(ROOT / "captures" / "findings-txn-aborted.pcap")
    out = tmp_path / "out"
    args = ["spark", path, "-o", str(out), "--split-bytes", "3k", "--read-back", "2k"]
    assert cli.run(build_parser().parse_args(args), spark) == 0
    text = capsys.readouterr().out
    assert spark_rows(spark.read.parquet(str(out)).toArrow(), path) == reference(path, "pairs")
    analyze(build_parser().parse_args(["analyze", path]))
    expected = capsys.readouterr().out
    assert "fa-orders" in expected and text.startswith(expected.rstrip("\n"))


def test_ranges_that_never_agree_are_written_whole_in_one_pass_too(
    spark, tmp_path, monkeypatch, capsys
):
    """`kafka-dissect spark` writing pairs in one pass a range: a capture whose ranges never
    agree is dissected whole by one task, with the warning, and its guesses dropped."""
    from dissector.cli import build_parser
    from dissector.spark import cli

    ranges_never_agree(monkeypatch)
    path = CAPTURES[[Path(c).name for c in CAPTURES].index("kafka-python.pcap")]
    out = tmp_path / "out"
    args = build_parser().parse_args(["spark", path, "-o", str(out), "--split-bytes", "8k"])
    assert cli.run(args, spark) == 0
    said = capsys.readouterr().err
    assert f"kafka-dissect: warning: {path}: its byte ranges could not be joined" in said
    assert spark_rows(spark.read.parquet(str(out)).toArrow(), path) == reference(path, "pairs")
    assert len(list(out.glob("capture=*/*.parquet"))) == 1  # one task, the capture whole


def test_guessed_rows_no_task_can_read_are_built_again(spark, tmp_path, monkeypatch, capsys):
    """A range's guessed rows written to a disk the task that fixes them cannot read (an
    output path local to each machine of a cluster): that task builds the range's rows
    again, and the table and summary are the same."""
    from dissector.cli import analyze, build_parser
    from dissector.spark import cli, pipeline

    joined, lost = pipeline.Dissected._join, []

    def join_and_lose_the_files(self, first=None):
        for file in (tmp_path / "out" / "_temporary").glob("*/guess-*.arrow"):
            file.unlink()
            lost.append(file.name)
        return joined(self, first)

    monkeypatch.setattr(pipeline.Dissected, "_join", join_and_lose_the_files)
    path = str(ROOT / "captures" / "confluent-kafka.pcap")
    args = ["spark", path, "-o", str(tmp_path / "out"), "--split-bytes", "12k"]
    assert cli.run(build_parser().parse_args(args), spark) == 0
    assert len(lost) > 1  # ranges of 12 KiB
    text = capsys.readouterr().out
    written = spark.read.parquet(str(tmp_path / "out")).toArrow()
    assert spark_rows(written, path) == reference(path, "pairs")
    analyze(build_parser().parse_args(["analyze", path]))
    assert text.startswith(capsys.readouterr().out.rstrip("\n"))


def _write_jobs(monkeypatch):
    """The write jobs a command runs: for each, whether its tasks ran together (barrier)."""
    from dissector.spark import pipeline

    calls, write_tasks = [], pipeline.Dissected._write_tasks

    def counted(self, *args, together=False, **kwargs):
        calls.append(together)
        return write_tasks(self, *args, together=together, **kwargs)

    monkeypatch.setattr(pipeline.Dissected, "_write_tasks", counted)
    return calls


@pytest.mark.parametrize(
    "split, jobs, tasks", [("100k", [True], [0, 1]), ("64k", [False, False], [3, 4, 5])]
)
def test_ranges_that_fit_the_cores_fix_their_own_rows(
    spark, tmp_path, monkeypatch, capsys, split, jobs, tasks
):
    """In local mode with no more ranges than cores, the guess tasks run together: each
    meets the others' facts and fixes its own rows, in one job, the files of its tasks moved
    into place. With more ranges than cores, a second job fixes them. Same table, same
    summary."""
    from dissector.cli import analyze, build_parser
    from dissector.spark import cli

    calls = _write_jobs(monkeypatch)
    path = str(ROOT / "captures" / "kafka-python.pcap")
    out = tmp_path / "out"
    args = ["spark", path, "-o", str(out), "--split-bytes", split, "--read-back", split]
    assert cli.run(build_parser().parse_args(args), spark) == 0
    text = capsys.readouterr().out
    assert calls == jobs
    assert sorted(int(p.name.split("-")[1]) for p in out.glob("capture=*/*.parquet")) == tasks
    assert spark_rows(spark.read.parquet(str(out)).toArrow(), path) == reference(path, "pairs")
    analyze(build_parser().parse_args(["analyze", path]))
    assert text.startswith(capsys.readouterr().out.rstrip("\n"))


def test_a_range_its_task_fixed_but_the_driver_judged_otherwise_is_built_again(
    spark, tmp_path, monkeypatch, capsys
):
    """The driver's judgement is the one that counts: a range whose task fixed its rows but
    which the driver has built again (here, told so) leaves its task's file out of the table."""
    from dissector.cli import analyze, build_parser
    from dissector.spark import cli, pipeline

    calls, judged = _write_jobs(monkeypatch), pipeline.judge
    monkeypatch.setattr(
        pipeline, "judge", lambda guess, settled: None if settled.offset else judged(guess, settled)
    )
    path = str(ROOT / "captures" / "kafka-python.pcap")
    out = tmp_path / "out"
    args = ["spark", path, "-o", str(out), "--split-bytes", "100k", "--read-back", "100k"]
    assert cli.run(build_parser().parse_args(args), spark) == 0
    text = capsys.readouterr().out
    assert calls == [True, False]
    tasks = sorted(int(p.name.split("-")[1]) for p in out.glob("capture=*/*.parquet"))
    assert tasks == [0, 2]  # the first range's task, and the second's built again
    assert spark_rows(spark.read.parquet(str(out)).toArrow(), path) == reference(path, "pairs")
    analyze(build_parser().parse_args(["analyze", path]))
    assert text.startswith(capsys.readouterr().out.rstrip("\n"))


@pytest.mark.parametrize("table", TABLES)
def test_tasks_write_the_files_of_the_table(spark, tmp_path, capsys, table):
    """`kafka-dissect spark` has each task write its rows (but the partitions of split
    captures, whose lag Spark takes over the whole capture): Spark's layout, capture names
    escaped and read back, what was in the directory replaced, nothing left half-written."""
    from dissector.cli import build_parser
    from dissector.spark import cli

    odd = []
    for i, name in enumerate(("a b=c%d.pcap", "plain.pcap")):
        odd.append(str(tmp_path / name))
        shutil.copy(CAPTURES[i], odd[-1])
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.parquet").write_bytes(b"not a table")
    args = build_parser().parse_args(
        ["spark", *odd, "-o", str(out), "--table", table, "--split-bytes", "8k"]
        + (["--records", "full"] if table == "records" else [])
    )
    assert cli.run(args, spark) == 0
    said = capsys.readouterr().out.splitlines()[-1]
    names = sorted(p.name for p in out.iterdir())
    assert "stale.parquet" not in names and "_temporary" not in names and "_SUCCESS" in names
    written = spark.read.parquet(str(out)).toArrow()
    assert said == f"wrote {written.num_rows} rows of {table} to {out}, partitioned by capture"
    options = {"records": "full"} if table == "records" else {}
    expected = {path: reference(path, table, **options) for path in odd}
    assert set(written.column("capture").to_pylist()) == {p for p in odd if expected[p]}
    assert "a b=c%d.pcap" in str(written.column("capture").to_pylist())
    for path in odd:
        assert spark_rows(written, path) == expected[path], path
    by_arrow = pq.read_table(out, partitioning="hive")  # pyarrow reads the names back too
    assert sorted(by_arrow.column("capture").to_pylist()) == sorted(
        written.column("capture").to_pylist()
    )
    files = sorted(p.name for p in out.glob("capture=*/*.parquet"))
    assert all(f.startswith("part-") for f in files)
    if table == "partitions":  # written by Spark
        assert all(f.endswith(".snappy.parquet") for f in files)
    else:  # a file a range (8 KiB ranges: several a capture)
        assert all(".snappy." not in f for f in files) and len(files) > 2


def test_auto_split_gives_whole_rounds_of_ranges_within_bounds(tmp_path):
    from dissector.spark.pipeline import AUTO_SPLIT, auto_split

    big = tmp_path / "big.pcap"
    with open(big, "wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GiB
    low, high = AUTO_SPLIT
    assert auto_split([str(big)], 2) == 1536 << 20  # one range a core
    assert auto_split([str(big)], 4) == 768 << 20
    assert auto_split([str(big)], 5) == 615 << 20  # 614.4 MiB rounded up
    assert auto_split([str(big)], 64) == low  # 48 MiB each: at least the floor
    assert auto_split([str(big)], None) == low  # parallelism unknown: the most ranges
    huge = tmp_path / "huge.pcap"
    with open(huge, "wb") as f:
        f.truncate(9 << 30)  # 2.25 ranges of 4 GiB: 4 on 2 cores, not 3
    assert auto_split([str(huge)], 2) == high * 9 // 16
    assert auto_split([str(huge)], 8) == -(-(9 << 30) // (8 << 20)) << 20  # one a core


def test_auto_ranges_hold_as_many_packets_each():
    """The split size "auto" cuts a capture into as many ranges as `split_bytes` makes, each
    fed about as many packets (its read-back, the chunk before its own, included) rather
    than bytes: a range's cost follows its packets."""
    from dissector.spark.plan import _balanced, _tasks

    packets = [30] * 6 + [10] * 6  # twelve chunks of 10 bytes: busy, then quiet
    chunks = [
        {"start": 10 * i, "stop": 10 * i + 10, "frames": sum(packets[:i])}
        for i in range(len(packets))
    ]
    assert _tasks(chunks, 60) == [0, 6, 12]  # 180 packets, then 60
    # The last chunk is taken to hold 10 * 230 / 110 packets: 251 in all.
    assert _balanced(chunks, 60) == [0, 5, 12]  # 150, then 90 and 30 read back
    assert _balanced(chunks, 40) == [0, 3, 5, 12]  # 90; 60 + 30; 90 + 30
    assert _balanced(chunks[:1], 60) == [0, 1]  # one chunk: one task


def test_bad_input_is_one_line(spark, tmp_path, capsys):
    from dissector.cli import build_parser
    from dissector.errors import DissectorError
    from dissector.spark import cli

    bogus = tmp_path / "notes.pcap"
    bogus.write_bytes(b"GET / HTTP/1.1\r\n" * 100)
    args = build_parser().parse_args(["spark", str(bogus), "-o", str(tmp_path / "o")])
    with pytest.raises(DissectorError, match=r"notes.pcap: frame 1, offset 0: not a capture"):
        cli.run(args, spark)
    cut = tmp_path / "cut.pcap"  # a record claiming more than the file holds, mid-file
    raw = bytearray(Path(CAPTURES[0]).read_bytes())
    struct.pack_into("<I", raw, 24 + 8, 1 << 30)
    cut.write_bytes(bytes(raw))
    args = build_parser().parse_args(["spark", str(cut), "-o", str(tmp_path / "o")])
    with pytest.raises(DissectorError, match=r"cut.pcap: frame 1, offset 24: record claims"):
        cli.run(args, spark)


def _analyze(path, capsys):
    """What `kafka-dissect analyze` says on stderr about one file: warning and error lines."""
    from dissector.cli import main

    capsys.readouterr()
    main(["analyze", path])
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("kafka-")]


def _spark_says(spark, path, split, tmp_path, capsys):
    """The same lines from `kafka-dissect spark` (local session) at a split size."""
    from dissector.cli import build_parser
    from dissector.errors import DissectorError
    from dissector.spark import cli

    capsys.readouterr()
    out = tmp_path / f"out-{split}"
    args = build_parser().parse_args(["spark", path, "-o", str(out), "--split-bytes", split])
    try:
        cli.run(args, spark)
    except DissectorError as e:
        print(f"kafka-dissect: error: {e}", file=__import__("sys").stderr)
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("kafka-")]


def _with_linktype(src, dst, linktype):
    raw = bytearray(Path(src).read_bytes())
    struct.pack_into("<I", raw, 20, linktype)
    Path(dst).write_bytes(bytes(raw))


def test_a_cut_file_read_whole_warns_as_analyze(spark, tmp_path, capsys):
    """A file cut mid-record: the reader's warning comes back from the task that read it
    whole (and from planning when split), said as `analyze` says it."""
    from dissector.spark import Dissected

    raw = Path(CAPTURES[0]).read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(raw[: len(raw) - 10])
    expected = _analyze(str(cut), capsys)
    assert len(expected) == 1 and "truncated capture: file ends inside a record" in expected[0]
    for split in ("128m", "4k"):
        assert _spark_says(spark, str(cut), split, tmp_path, capsys) == expected, split
    d = Dissected(spark, str(cut), "128m")  # API users: in `warnings` once summaries ran
    assert d.whole == [str(cut)] and d.warnings == []
    d.summaries()
    assert d.warnings == [expected[0].removeprefix("kafka-dissect: warning: ")]


def test_no_readable_link_type_is_the_error_analyze_gives(spark, tmp_path, capsys):
    """A pcap of a link type the core does not read: the one-line error `analyze` gives,
    whether the file is read whole by a task or split into ranges."""
    path = tmp_path / "user0.pcap"
    _with_linktype(CAPTURES[0], path, 147)
    expected = _analyze(str(path), capsys)
    assert expected == [
        f"kafka-dissect: error: {path}: frame 1, offset 24: no packet has a link type the "
        f"dissector reads: 147 ({_packets(path)} packets)"
    ]
    for split in ("128m", "4k"):
        assert _spark_says(spark, str(path), split, tmp_path, capsys) == expected, split


def _packets(path):
    from dissector.capture import open_capture

    with open_capture(path) as r:
        return sum(1 for _ in r)


@pytest.mark.skipif(not shutil.which("mergecap"), reason="mergecap (wireshark-common) missing")
def test_some_packets_of_an_unread_link_type_warn_as_analyze(spark, tmp_path, capsys):
    """A pcapng whose second interface has a link type the core does not read: the warning
    `analyze` gives (frame and offset of the first such packet), whole and split; the rest
    is dissected as read_pcap dissects it."""
    from dissector.spark import load

    user0 = tmp_path / "user0.pcap"
    _with_linktype(CAPTURES[3], user0, 147)
    ng = tmp_path / "mixed.pcapng"
    subprocess.run(["mergecap", "-F", "pcapng", "-w", str(ng), CAPTURES[0], str(user0)], check=True)
    expected = _analyze(str(ng), capsys)
    assert len(expected) == 1 and "packets skipped, of link types" in expected[0]
    for split in ("128m", "4k"):
        assert _spark_says(spark, str(ng), split, tmp_path, capsys) == expected, split
        got = load(spark, str(ng), "pairs", split_bytes=split).toArrow()
        assert spark_rows(got) == reference(str(ng), "pairs") and got.num_rows


def test_nanosecond_timestamps_option(spark, odd_files):
    """.option("timestamps", "ns"): the capture-time columns as int64 nanoseconds, exact,
    split or read whole; the default stays Spark timestamps."""
    import dissector

    path = odd_files[0]  # nanosecond pcap: every time ends in 999 ns
    expected = sorted(t.value for t in dissector.read_pcap(path)["request_start"].dropna())
    assert expected and all(v % 1000 == 999 for v in expected)
    for split in ("3k", "128m"):
        df = (
            spark.read.format("kafka_pcap")
            .option("timestamps", "ns")
            .option("split_bytes", split)
            .load(path)
        )
        assert dict(df.dtypes)["request_start"] == "bigint"
        got = [r[0] for r in df.select("request_start").collect() if r[0] is not None]
        assert sorted(got) == expected, split
    default = spark.read.format("kafka_pcap").load(path)
    assert dict(default.dtypes)["request_start"] == "timestamp"


@pytest.mark.parametrize("table", ("pairs", "streams"))
def test_tls_capture_split_into_ranges_equals_one_process(spark, table):
    """A TLS capture with its key log, cut into ranges smaller than a connection: the tasks
    get the key log's lines, and a range's read-back must reach each connection's handshake
    (where its decryption starts) before its view agrees with the range before."""
    from dissector.spark import load

    tls = ROOT / "captures" / "tls-samples"
    path, keylog = tls / "tls-13-aes128gcm.pcap", tls / "tls-13-aes128gcm.keylog"
    got = load(spark, str(path), table, split_bytes="8k", read_back="8k", tls_keylog=str(keylog))
    want = reference(path, table, tls_keylog=keylog)
    assert spark_rows(got.toArrow()) == want
    assert len(want) == (27 if table == "pairs" else 14)  # 7 connections


def test_topic_and_partition_filters_in_spark(spark):
    """The format's topics and partitions options keep those records, split or whole, as
    read_pcap's keywords do."""
    from dissector.tables.schema import RECORDS

    path = str(ROOT / "captures" / "compression.pcap")
    expected = reference(path, "records", topics=["comp-gzip", "comp-lz4"])
    topic = RECORDS.names.index("topic")
    assert {r[topic] for r in expected} == {"comp-gzip", "comp-lz4"}
    for split in ("8k", "1g"):
        got = (
            spark.read.format("kafka_pcap")
            .option("table", "records")
            .option("split_bytes", split)
            .option("topics", "comp-gzip,comp-lz4")
            .load(path)
            .toArrow()
        )
        assert spark_rows(got, path) == expected, split
    none = spark.read.format("kafka_pcap").option("table", "records").option("partitions", "7")
    assert none.load(path).count() == 0


def test_pairs_without_bodies_in_spark(spark, tmp_path):
    """The format's bodies option, split or whole, and `spark --no-bodies` (whose guess tasks
    write the rows) leave the pairs' bodies empty and every other column as
    read_pcap(bodies=False) gives it."""
    from dissector.cli import build_parser
    from dissector.spark import cli

    path = str(ROOT / "captures" / "confluent-kafka.pcap")
    expected = reference(path, "pairs", bodies=False)
    assert expected and all(row[-2:] == (None, None) for row in expected)  # the bodies
    assert len(expected) == len(reference(path, "pairs"))
    for split in ("8k", "1g"):
        load = spark.read.format("kafka_pcap").option("split_bytes", split)
        got = load.option("bodies", "false").load(path).toArrow()
        assert spark_rows(got, path) == expected, split
    out = tmp_path / "out"
    args = ["spark", path, "-o", str(out), "--split-bytes", "12k", "--no-bodies"]
    assert cli.run(build_parser().parse_args(args), spark) == 0
    assert spark_rows(spark.read.parquet(str(out)).toArrow(), path) == expected


def test_a_capture_whose_ranges_never_agree_is_read_whole_with_a_warning(spark, monkeypatch):
    from dissector.spark import Dissected
    from dissector.spark.split import MAX_ROUNDS

    ranges_never_agree(monkeypatch)
    path = CAPTURES[[Path(c).name for c in CAPTURES].index("kafka-python.pcap")]
    with pytest.warns(UserWarning, match="could not be joined") as caught:
        d = Dissected(spark, path, "8k")
    assert d.whole == [path] and d.split == []
    expected = (
        f"{path}: its byte ranges could not be joined after {MAX_ROUNDS} rounds "
        "(range 1: held apart by this test): dissected whole, by one task"
    )
    assert d.warnings == [expected] and expected in [str(w.message) for w in caught]
    assert spark_rows(d.table("pairs").toArrow(), path) == reference(path, "pairs")
