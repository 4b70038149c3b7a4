"""From paths to pieces: globs expanded, files cut into byte ranges, ranges surveyed (in
Spark when a file has several), and pieces packed into tasks."""

import dataclasses
import fnmatch
import glob
import os
import pickle
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from ..capture.ranges import plan, read_head, stitch, survey, whole_file
from ..errors import CaptureError


def expand(paths):
    """Paths and globs (local, or URIs pyarrow's filesystems reach) -> files, in order."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for path in map(str, paths):
        if "://" in path:
            found = _remote_glob(path) if glob.has_magic(path) else [path]
        else:
            found = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
            found = [p for p in found if os.path.isfile(p)] if glob.has_magic(path) else found
        if not found:
            raise CaptureError(path, "no capture file matches")
        out += [p for p in found if p not in out]
    return out


def _remote_glob(pattern):
    from pyarrow import fs

    filesystem, inner = fs.FileSystem.from_uri(pattern.split("*")[0].rsplit("/", 1)[0] + "/")
    scheme = pattern.split("://", 1)[0]
    base = inner
    infos = filesystem.get_file_info(fs.FileSelector(base, recursive=True))
    rest = pattern.split("://", 1)[1]
    return sorted(
        f"{scheme}://{i.path}"
        for i in infos
        if i.type == fs.FileType.File
        and fnmatch.fnmatch(i.path, rest.lstrip("/"))
        or fnmatch.fnmatch("/" + i.path, rest)
    )


def _as_dict(capture, piece):
    d = dataclasses.asdict(piece)
    d["prefix"] = d["prefix"].hex()
    return [capture, d]


def plan_pieces(files, split_bytes, run_surveys, chunk=0):
    """[(capture, piece dict)] for every file; `run_surveys(rows)` surveys the byte ranges of
    the files that have several (rows of index, path, start, end, chunk) and returns their
    Surveys in order; with `chunk`, each range is cut into pieces of about that many bytes
    by the same walk. Returns (pieces, warnings)."""
    heads = {path: read_head(path) for path in files}
    ranges = {path: plan(head.size, split_bytes, head) for path, head in heads.items()}
    split = [(path, a, b) for path in files if len(ranges[path]) > 1 for a, b in ranges[path]]
    rows = [(i, *r, chunk) for i, r in enumerate(split)]
    surveys = run_surveys(rows) if rows else []
    by_file = {}
    for (_, path, *_range), s in zip(rows, surveys, strict=True):
        by_file.setdefault(path, []).append(s)
    pieces, warnings = [], []
    for path in files:
        if path not in by_file:
            pieces.append(_as_dict(path, whole_file(path)))
            continue
        found, warned = stitch(path, heads[path], by_file[path], chunk)
        pieces += [_as_dict(path, p) for p in found]
        warnings += warned
    return pieces, warnings


def plan_split(files, split_bytes, read_back, run_surveys, balanced=False):
    """Captures read whole (gzip, or no larger than `split_bytes`), in order; SplitCaptures of
    the others, cut into chunks of min(split_bytes, read_back) bytes; and the warnings of
    surveying them. A task owns the chunks of `split_bytes`, or with `balanced` as many
    tasks a capture, each fed about as many packets."""
    from .split import SplitCapture

    chunk = max(1, min(split_bytes, read_back))
    heads = {path: read_head(path) for path in files}
    large = [p for p in files if heads[p].format != "gzip" and heads[p].size > split_bytes]
    pieces, warnings = ([], [])
    if large:  # a walk a task's bytes, noting where each chunk's first record starts
        pieces, warnings = plan_pieces(large, split_bytes, run_surveys, chunk)
    chunks = {}
    for capture, piece in pieces:
        chunks.setdefault(capture, []).append(piece)
    cut = _balanced if balanced else _tasks
    split = [SplitCapture(c, chunks[c], cut(chunks[c], split_bytes)) for c in large if c in chunks]
    whole = [p for p in files if p not in chunks]
    return whole, split, warnings


def _tasks(chunks, split_bytes):
    """Task bounds over a capture's chunks: a task owns the chunks of one planned range of
    `split_bytes` (those starting in it)."""
    bounds = [0]
    for i, c in enumerate(chunks):
        if i and c["start"] // split_bytes != chunks[i - 1]["start"] // split_bytes:
            bounds.append(i)
    return bounds + [len(chunks)]


def _balanced(chunks, split_bytes):
    """Task bounds over a capture's chunks: as many tasks as ranges of `split_bytes`, each
    fed about as many packets, its read-back included (the chunk before its own). The last
    chunk, which no survey counts to its end, holds as many packets a byte as the others."""
    tasks = len(_tasks(chunks, split_bytes)) - 1
    frames = [c["frames"] for c in chunks]  # the packets before each chunk
    last = chunks[-1]
    walked = last["start"] - chunks[0]["start"]
    tail = (last["stop"] - last["start"]) * frames[-1] / walked if walked else 1
    frames.append(frames[-1] + tail)
    share = (frames[-1] + (tasks - 1) * frames[-1] / len(chunks)) / tasks
    bounds = [0]
    for _ in range(1, tasks):
        start = bounds[-1]
        fed = frames[start] - frames[start - 1] if start else 0  # its read-back
        ends = range(start + 1, len(chunks))
        if not ends:
            break
        bounds.append(min(ends, key=lambda e: abs(fed + frames[e] - frames[start] - share)))
    return bounds + [len(chunks)]


# Below these, the driver walks the record headers itself, a thread a range on its cores
# (2.4 GiB of pcap in 0.12 to 0.15 s on 2 cores; 0.37 to 0.40 s on one thread), rather than
# in a Spark job (half a second or so more than its share of the work: 0.61 to 0.72 s for
# the same bytes): on a cluster, whose tasks read the files where they are; in local mode,
# the same disk and cores, up to sizes where that half second is small.
LOCAL_SURVEY_BYTES = 256 << 20
LOCAL_MODE_SURVEY_BYTES = 4 << 30


def survey_here(rows):
    """The Surveys of (index, path, start, end, chunk) rows, in order, walked here: on a
    thread a core (the compiled walk and the reads let go of the GIL)."""
    heads = {path: read_head(path) for _, path, *_ in rows}

    def one(row):
        _, path, a, b, chunk = row
        return survey(path, heads[path], a, b, chunk=chunk)

    with ThreadPoolExecutor(min(len(rows), os.cpu_count() or 1) or 1) as pool:
        return list(pool.map(one, rows))


SURVEYED = pa.schema([("index", pa.int64()), ("survey", pa.binary())])


def survey_batches(batches):
    """mapInArrow: (index, path, start, end, chunk) rows -> pickled Surveys."""
    heads = {}
    for batch in batches:
        out = []
        for row in batch.to_pylist():
            path = row["path"]
            head = heads.get(path) or heads.setdefault(path, read_head(path))
            found = survey(path, head, row["start"], row["end"], chunk=row["chunk"])
            out.append(pickle.dumps(found))
        yield pa.RecordBatch.from_arrays(
            [batch.column("index"), pa.array(out, pa.binary())], schema=SURVEYED
        )


def surveys_in_spark(spark, local_bytes=None):
    """A `run_surveys` that surveys the ranges as one Spark job (up to 64 tasks), or here
    when they add up to less than `local_bytes` (default: LOCAL_MODE_SURVEY_BYTES when Spark
    runs in local mode, else LOCAL_SURVEY_BYTES)."""
    from .types import spark_schema

    if local_bytes is None:
        local_bytes = LOCAL_MODE_SURVEY_BYTES if _local(spark) else LOCAL_SURVEY_BYTES

    def run(rows):
        if sum(b - a for _, _, a, b, _ in rows) < local_bytes:
            return survey_here(rows)
        df = spark.createDataFrame(
            list(rows), "index long, path string, start long, end long, chunk long"
        ).repartition(min(len(rows), 64))
        got = df.mapInArrow(survey_batches, spark_schema(SURVEYED)).collect()
        by_index = {r["index"]: pickle.loads(r["survey"]) for r in got}
        return [by_index[i] for i, *_ in rows]

    return run


def _local(spark):
    """Whether a session runs Spark in local mode in this process (not Spark Connect)."""
    try:
        return spark.sparkContext.master.startswith("local")
    except Exception:  # Spark Connect has no SparkContext here
        return False


def pack_whole(captures, budget):
    """Whole captures into tasks, largest first (the short tasks run last): one capture per
    task, those smaller than `budget` packed together up to it."""
    groups, small, size = [], [], 0
    for n, capture in sorted(((_size(c), c) for c in captures), key=lambda x: -x[0]):
        if n >= budget:
            groups.append([capture])
            continue
        if small and size + n > budget:
            groups.append(small)
            small, size = [], 0
        small.append(capture)
        size += n
    return groups + [small] if small else groups


def _size(path):
    from ..capture.ranges import file_size

    return file_size(path)
