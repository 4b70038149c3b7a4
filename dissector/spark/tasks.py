"""The functions Spark runs on its executors: surveying byte ranges, reading packets, and
dissecting the packets of a group of connections.

Everything here works on Arrow tables and plain values, so that it runs the same in a local
session, on a cluster and behind Spark Connect.
"""

import json
import pickle
from itertools import groupby
from operator import attrgetter

import pyarrow as pa

from ..capture.packet import Packet
from ..capture.ranges import Piece, range_packets, read_head, survey
from ..flow import Dissector
from ..options import Options
from .connections import ConnectionKeys
from .crossing import END, Clock, TaskDirectory

# What the packet source yields: one row per TCP packet, with its shuffle key.
PACKETS = pa.schema(
    [
        ("capture", pa.string()),
        ("key", pa.int64()),
        ("frame", pa.int64()),
        ("ts", pa.int64()),
        ("linktype", pa.int32()),
        ("data", pa.binary()),
        ("wirelen", pa.int64()),
    ]
)
PACKET_BATCH = 8192

# The key of the one row a piece adds after its packets: its last frame number, counted
# into the capture's packet total (packets that are not TCP are not shuffled), and its notes.
LAST_FRAME_KEY = -1

# What a group task yields: exchanges (pickled, with the moment each completed) and
# accounting rows, and the facts that cross connections (see crossing.py): each connection's
# first frame, each topic id learned, each broker endpoint proven Kafka and each lookup of an
# endpoint not known then, with their moments; and each piece's last frame and notes.
EXCHANGE, STREAM_ROW, OPENED, LEARNED, LAST_FRAME, PROVEN, MISSED, PIECE_NOTES = range(8)
DISSECTED = pa.schema(
    [
        ("capture", pa.string()),
        ("key", pa.int64()),
        ("kind", pa.int8()),
        ("blob", pa.binary()),
        ("frame", pa.int64()),
        ("sub", pa.int64()),
        ("seq", pa.int64()),
        ("topic_id", pa.string()),  # a topic id, or an endpoint as "ip|port"
        ("name", pa.string()),
    ]
)

# What the survey task yields: one row per byte range.
SURVEYED = pa.schema([("index", pa.int64()), ("survey", pa.binary())])


def survey_batches(batches):
    """mapInArrow: (index, path, start, end) rows -> pickled Surveys."""
    heads = {}
    for batch in batches:
        out = []
        for row in batch.to_pylist():
            path = row["path"]
            head = heads.get(path) or heads.setdefault(path, read_head(path))
            out.append(pickle.dumps(survey(path, head, row["start"], row["end"])))
        yield pa.RecordBatch.from_arrays(
            [batch.column("index"), pa.array(out, pa.binary())], schema=SURVEYED
        )


def piece_packets(piece: Piece, capture: str):
    """Record batches of PACKETS for one piece of a capture. The last row (LAST_FRAME_KEY)
    carries the piece's last frame, and as `data` its notes (JSON): packets read, packets of
    link types the core does not read, and the reader's warnings."""
    keys = ConnectionKeys()
    cols = ([], [], [], [], [], [])
    last = piece.frames
    warnings, first_of_linktype = [], {}
    for p in range_packets(piece, warnings, first_of_linktype):
        last = p.frame
        key = keys.key(p)
        if key is None:
            continue
        for col, value in zip(cols, (key, *p), strict=True):
            col.append(value)
        if len(cols[0]) >= PACKET_BATCH:
            yield _packet_batch(capture, cols)
            cols = ([], [], [], [], [], [])
    unsupported = {
        lt: [n, frame, first_of_linktype.get(lt, (frame, None))[1]]
        for lt, (n, frame) in keys.net.unsupported.items()
    }
    notes = {
        "first": piece.frames,
        "packets": last - piece.frames,
        "unsupported": unsupported,
        "warnings": warnings,
    }
    notes = json.dumps(notes).encode()
    for col, value in zip(cols, (LAST_FRAME_KEY, last, 0, 0, notes, 0), strict=True):
        col.append(value)
    yield _packet_batch(capture, cols)


def _packet_batch(capture, cols):
    n = len(cols[0])
    arrays = [pa.array([capture] * n, pa.string())]
    arrays += [pa.array(c, f.type) for c, f in zip(cols, list(PACKETS)[1:], strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=PACKETS)


class TaskDissector:
    """The core, fed one group's packets, keeping what crosses connections apart: the first
    frame of each connection it opens, and the moment (see crossing.py) of each exchange it
    returns and of each fact it learns or looks up. `seeds`: endpoint -> moment it was proven
    Kafka by other groups."""

    def __init__(self, options, seeds=None):
        self.clock = Clock()
        self.first_frames = []  # by the core's connection id
        self.directory = TaskDirectory(self.clock, seeds or {})
        self.core = Dissector(options, directory=self.directory, on_open=self._opened)
        self.moments = []  # completion moment of each exchange returned, in order

    def _opened(self, conn):
        self.first_frames.append(conn.first_frame)

    def _stamped(self, exchanges):
        now = self.clock.now
        self.moments += [now() for _ in exchanges]
        return exchanges

    def feed(self, packet):
        self.clock.frame, self.clock.sub = packet.frame, 0
        return self._stamped(self.core.feed(packet))

    def finish(self):
        """As the core's, flushing connection by connection (in stream order, as the core
        does), each at its own moment."""
        out = []
        for conn, events in groupby(self.core.tcp.finish(), key=attrgetter("conn")):
            self.clock.frame, self.clock.sub = END, conn.first_frame
            out += self._stamped(self.core.events(list(events)))
        return out


def endpoint_text(ep):
    return f"{ep[0]}|{ep[1]}"


def endpoint_of(text):
    ip, port = text.rsplit("|", 1)
    return (ip, int(port))


def dissect_group(options, seeds=None):
    """applyInArrow function: the packets of one (capture, key) group -> DISSECTED rows.
    `seeds`: capture -> {endpoint text: moment} proven Kafka elsewhere (a second round)."""
    opts = Options(**options)
    seeds = seeds or {}

    def run(table):
        capture = table.column("capture")[0].as_py()
        key = table.column("key")[0].as_py()
        rows = {name: [] for name in DISSECTED.names}

        def add(kind, blob=None, moment=(None, None, None), topic_id=None, name=None):
            values = (capture, key, kind, blob, *moment, topic_id, name)
            for column, value in zip(DISSECTED.names, values, strict=True):
                rows[column].append(value)

        if key == LAST_FRAME_KEY:
            add(LAST_FRAME, moment=(max(table.column("frame").to_pylist()), None, None))
            for notes in table.column("data").to_pylist():
                add(PIECE_NOTES, notes)
            return pa.Table.from_pydict(rows, schema=DISSECTED)
        table = table.sort_by("frame")
        mine = {endpoint_of(t): tuple(m) for t, m in seeds.get(capture, {}).items()}
        d = TaskDissector(opts, mine)
        exchanges = []
        new = tuple.__new__
        cols = [table.column(n).to_pylist() for n in ("frame", "ts", "linktype", "data", "wirelen")]
        for fields in zip(*cols, strict=True):
            exchanges += d.feed(new(Packet, fields))
        exchanges += d.finish()
        first = d.first_frames
        for e, moment in zip(exchanges, d.moments, strict=True):
            e.stream = first[e.stream]
            add(EXCHANGE, pickle.dumps(e, pickle.HIGHEST_PROTOCOL), moment)
        for row in d.core.streams:
            row = dict(row, stream=first[row["stream"]])
            add(STREAM_ROW, pickle.dumps(row, pickle.HIGHEST_PROTOCOL))
        for frame in first:
            add(OPENED, moment=(frame, None, None))
        directory = d.directory
        for topic_id, (moment, name) in directory.topic_names.learned.items():
            add(LEARNED, moment=moment, topic_id=topic_id, name=name)
        for ep, moment in directory.kafka_endpoints.proven.items():
            add(PROVEN, moment=moment, topic_id=endpoint_text(ep))
        for ep, moment in directory.kafka_endpoints.missed:
            add(MISSED, moment=moment, topic_id=endpoint_text(ep))
        return pa.Table.from_pydict(rows, schema=DISSECTED)

    return run
