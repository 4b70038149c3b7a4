"""Capture files in, exchanges out: the file-reading driver of the core."""

import sys
import warnings

from . import heap
from .capture import open_capture
from .errors import CaptureError
from .events import ConnectionEnded
from .flow import Dissector
from .options import Options

PROGRESS_EVERY = 8192  # packets between progress-bar updates
# Packets between takings of the core's ConnectionEnded events (a power of two): rows wait
# there as dicts, and are kept here as tuples, a quarter of the size.
TAKE_ENDED = 1 << 14


class Dissection:
    """An iterable of the exchanges in one capture file, in the order they complete.

    After iteration: `ended` holds the ConnectionEnded events of the core and `streams`
    their accounting rows (the streams table; both empty with streams=False, which keeps no
    memory for ended connections), `stats()` the core's counters, `warnings` what the reader
    noticed, `frame` the last frame read and `offset` the byte offset of its record or block.

    A capture none of whose packets has a link type the dissector reads is a CaptureError
    naming the first of them; one where only some have such link types, a warning.
    """

    def __init__(self, path, options, progress=None, name=None, streams=True):
        self.path = name or path  # `path` may be an open binary file, which `name` names
        self._input = path
        self.dissector = Dissector(options)
        self.keeps_streams = streams  # False: `ended` stays empty, an ended connection costs 0
        self.progress = progress
        self.warnings = []
        self._ended = []  # (id, kafka, rows as tuples of their values) per ended connection
        self._columns = None  # the rows' keys, in their order
        self._reader = None

    @property
    def ended(self):
        """The ConnectionEnded events, in the order the connections ended."""
        columns = self._columns
        return [
            ConnectionEnded(id, [dict(zip(columns, values, strict=True)) for values in rows], kafka)
            for id, kafka, rows in self._ended
        ]

    @property
    def streams(self):
        """The accounting rows of the ended connections, two per connection."""
        return [row for event in self.ended for row in event.rows]

    def _take_ended(self):
        """The core's ended events, kept compactly: an ended connection keeps only its rows."""
        events = self.dissector.ended()
        if not self.keeps_streams:
            return
        for event in events:
            rows = event.rows
            if self._columns is None:
                self._columns = tuple(rows[0])
            self._ended.append((event.id, event.kafka, [tuple(r.values()) for r in rows]))

    def stats(self):
        """The core's counters (Dissector.stats)."""
        return self.dissector.stats()

    @property
    def frame(self):
        """The frame read last: the dissector counts every packet of the file."""
        return self.dissector.packets

    @property
    def offset(self):
        return self._reader.last_offset if self._reader is not None and self.frame else None

    def __iter__(self):
        d = self.dissector
        heap.keep_top()
        with _opened(self._input, self.path) as reader:
            self._reader = reader
            bar = _progress_bar(self.path, reader.total_bytes, self.progress)
            reader.on_secrets = d.add_tls_secrets  # a pcapng's Decryption Secrets Blocks
            if bar is None:
                feed = d.feed
                for packet in reader:
                    out = feed(packet)
                    if out:  # most packets complete no exchange
                        yield from out
                    if not packet.frame & (TAKE_ENDED - 1):
                        self._take_ended()
            else:
                yield from self._with_progress(reader, bar)
            out = d.finish()
            self._take_ended()
            yield from out
            self.warnings = list(reader.warnings)
        unsupported = d.stats()["unsupported"]
        if unsupported:
            self._unsupported_linktypes(reader, unsupported)
        for message in self.warnings:
            warnings.warn(message, stacklevel=2)

    def _unsupported_linktypes(self, reader, unsupported):
        """An error if no packet had a link type the dissector reads, else a warning."""
        self.warnings.append(
            linktype_warning(
                self.path, unsupported, self.dissector.packets, reader.first_of_linktype
            )
        )

    def _with_progress(self, reader, bar):
        """Feeding with a progress bar, updated every PROGRESS_EVERY packets."""
        done = 0
        feed = self.dissector.feed
        for packet in reader:
            yield from feed(packet)
            if packet.frame % PROGRESS_EVERY == 0:
                bar.update(reader.bytes_read - done)
                done = reader.bytes_read
                self._take_ended()
        bar.update(reader.bytes_read - done)
        bar.close()


def linktype_warning(path, unsupported, packets, first_of_linktype):
    """The warning about packets of link types the dissector does not read, or a
    CaptureError when no packet has one it reads. `unsupported`: link type -> [packets, first
    frame] (NetDecoder.unsupported); `first_of_linktype`: link type -> (frame, offset)."""
    kinds = ", ".join(
        f"{lt} ({n} packet{'s' if n != 1 else ''})" for lt, (n, _) in sorted(unsupported.items())
    )
    first = min(unsupported, key=lambda lt: unsupported[lt][1])
    frame, offset = first_of_linktype.get(first, (unsupported[first][1], None))
    skipped = sum(n for n, _ in unsupported.values())
    if skipped == packets:
        raise CaptureError(
            path, f"no packet has a link type the dissector reads: {kinds}", frame, offset
        )
    return (
        f"{path}: frame {frame}, offset {offset}: {skipped} of {packets} packets "
        f"skipped, of link types the dissector does not read: {kinds}"
    )


def _opened(path, name=None):
    """open_capture, with the errors of opening a file said in one line, naming it."""
    try:
        return open_capture(path, name)
    except FileNotFoundError:
        raise CaptureError(path, "no such file") from None
    except IsADirectoryError:
        raise CaptureError(path, "is a directory") from None
    except PermissionError:
        raise CaptureError(path, "permission denied") from None


def _progress_bar(path, total, wanted):
    """A byte-based progress bar on stderr; by default only when stderr is a terminal."""
    if wanted is None:
        wanted = sys.stderr.isatty()
    if not wanted:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc=str(path), file=sys.stderr)


def dissect(path, ports=(), *, progress=None, streams=True, **options):
    """The exchanges of a pcap/pcapng file (optionally gzip-compressed), streamed.

    ports: broker ports to dissect (default: detect Kafka on any port). streams: keep the
    streams table's rows (Dissection.streams). Other keywords are Options fields: protocol
    ("0.7"/"0.8+"), max_frame, show_secrets, records, max_connections, tls_keylog (a key
    log file), tls_secrets (key log lines).
    """
    return Dissection(path, Options(ports=ports, **options), progress=progress, streams=streams)


def read_pcap(path, ports=(), table="pairs", *, progress=None, **options):
    """A pandas DataFrame of one capture file; for a list of tables, {table: DataFrame},
    all built from one reading of the file (read_tables).

    table: "pairs" (one row per exchange), "partitions" (one per exchange, topic and
    partition), "records" (one per record; record sets are then decoded in full) or
    "streams" (one per connection and direction: the byte accounting). topics=[...] and
    partitions=[...] keep only those in the records and partitions tables; the records of
    others are passed over without being decompressed. bodies=False: the pairs table's
    `request` and `response` columns are left empty (None), for work that needs no body
    (latency, throughput): their JSON text is much of the table's time and memory.
    """
    if isinstance(table, (list, tuple)):
        return read_tables(path, table, ports, progress, **options)
    return read_tables(path, (table,), ports, progress, **options)[table]


def read_tables(path, tables, ports=(), progress=None, check=iter, **options):
    """{table: DataFrame} for each of `tables`, from one dissection: every table is built as
    the exchanges complete, all in step, so the file is read once and what is held is the
    tables and a batch's worth of exchanges, never the capture's. Beside a records table,
    the pairs table's bodies hold their record sets as batches, without the records (which
    the records table holds once): every record's value written again as JSON took most of
    the memory and time. `check` wraps the stream of exchanges (the command line's error
    reporting)."""
    import dataclasses
    from functools import partial

    from .tables import arrow_batches, build_table, known, whole_table
    from .tables.arrow import BATCH_ROWS

    for table in tables:
        known(table)
    if "records" in tables:
        options.setdefault("records", "full")  # a record is only known once its batch is parsed
    dissection = dissect(path, ports, progress=progress, streams="streams" in tables, **options)
    settled = dissection.dissector.options
    lean = {}  # table -> the record decoder of its bodies, where not the dissection's
    if "records" in tables and settled.records == "full":
        lean["pairs"] = dataclasses.replace(settled, records="batches").record_decoder()
    built = list(dict.fromkeys(t for t in tables if t != "streams"))
    kept = settled.for_tables()
    makers = [
        partial(arrow_batches, table=t, body_records=lean.get(t), idle=BATCH_ROWS, **kept)
        for t in built
    ]
    made = dict(zip(built, in_step(check(dissection), makers), strict=True))
    out = {t: whole_table(_drained(made.pop(t)), t) for t in built}  # a table's batches at once
    if "streams" in tables:
        if not built:
            for _ in check(dissection):
                pass
        out["streams"] = build_table(dissection.ended, "streams")
    return {t: out[t] for t in tables}


def in_step(items, makers):
    """What each of `makers` (a function from an iterable to a generator) makes of the same
    `items`, as lists: the one that has taken the fewest items goes next, so the items taken
    by one and not yet by all (all that is held of them) are at most what one takes between
    two outputs. A maker may yield None (nothing made yet) to let the others move on."""
    import itertools

    if len(makers) == 1:  # nothing to keep in step
        return [[out for out in makers[0](items) if out is not None]]
    taken = [0] * len(makers)

    def counted(k, copy):
        for item in copy:
            taken[k] += 1
            yield item

    copies = itertools.tee(items, len(makers))
    made = [make(counted(k, c)) for k, (make, c) in enumerate(zip(makers, copies, strict=True))]
    outs = [[] for _ in makers]
    going = set(range(len(makers)))
    while going:
        k = min(going, key=taken.__getitem__)
        try:
            out = next(made[k])
        except StopIteration:
            going.discard(k)
            continue
        if out is not None:
            outs[k].append(out)
    return outs


def _drained(items):
    """The items of a list, each let go by the list as it is taken."""
    items.reverse()
    while items:
        yield items.pop()
