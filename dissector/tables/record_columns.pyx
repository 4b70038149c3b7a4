# cython: language_level=3
"""The `records` table built from batch bytes straight into Arrow columns.

The rows path (records.py) decodes a body into a dict per record, then a dict per row, which
Arrow converts: several Python objects a record, all of a record set alive at once. Here a
magic 2 batch's records are read in C from the body's bytes (the scan noted where each
record set lies, under which topic and partition) into growing column buffers: offsets,
timestamps and sequences as int64, keys, values and headers as Arrow's offsets and bytes.
What is the same for every record of a batch (the exchange's columns, the topic, partition
and batch header) is kept once a run of rows, and repeated by Arrow's `take` when a batch of
rows is made. Memory is the rows of one Arrow batch (max_rows, or max_bytes of keys and
values: arrow.RECORD_ROWS and RECORD_BYTES) and the one Kafka batch being read,
decompressed. The record sets of topic-partitions a filter leaves out are not read at all.

What it does not read itself goes through the rows path, row by row into the same buffers:
control batches (transaction markers), magic 0 and 1 message sets, 0.7 exchanges, bodies
that were decoded rather than scanned, and APIs other than Produce and Fetch. A batch is
walked twice: once to check it (how many of its records parse, and its status), then to
fill the columns, so that a batch longer than an Arrow batch is split between them with its
final status. tests/test_records_table.py holds both paths equal on every sample capture.

It is C-level code with no Python twin: without a C compiler, the rows path builds the table.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int16_t, int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy
from dissector.tables.wire cimport be, zigzag

import numpy as np
import pyarrow as pa

from ..protocol.apikeys import FETCH, PRODUCE
from ..protocol.records.batch import (
    HEADER_SIZE,
    MIN_RECORD,
    crc_matches,
    open_batch,
    read_records,
    records_bytes,
)
from ..protocol.records.common import CODEC_NAMES, CORRUPT_RECORDS, OK, BatchError
from ..protocol.records.message_set import LOG_OVERHEAD, decode_message
from ..session.modern import scanned
from .columns import column
from .records import (
    EXCHANGE_COLUMNS,
    UNKNOWN,
    assigned_offsets,
    batch_rows,
    exchange_records,
    first_and_last,
    offset_shift,
)
from .schema import RECORDS

# The columns that hold one value a record; every other column holds one value a batch.
RECORD_COLUMNS = ("offset", "timestamp", "key", "value", "headers", "sequence")
BATCH_COLUMNS = tuple(f.name for f in RECORDS if f.name not in RECORD_COLUMNS)
_SHARE_FETCH = 78
_APIS = (PRODUCE, FETCH, _SHARE_FETCH)  # whose record sets lie in the field named Records
_MAGIC_AT = 16
cdef int _CONTROL = 0x20, _LOG_APPEND = 0x08, _TRANSACTIONAL = 0x10  # attribute bits
cdef Py_ssize_t _MAX_BYTES = (1 << 31) - 1  # what int32 offsets reach in one Arrow batch
cdef Py_ssize_t _KEEP = 64 << 20  # bytes a column buffer keeps between Arrow batches
cdef Py_ssize_t _HAND_OVER = 1 << 20  # a buffer this full goes to Arrow as it is
# The columns' memory comes from the C library's allocator, which gives a batch's memory
# back once it is freed; Arrow's default pool keeps it for the process's life.
_POOL = pa.system_memory_pool()


# --- buffers --------------------------------------------------------------------------------


cdef class _Buf:
    """Bytes that grow, in blocks of the C heap. An Arrow batch takes a small buffer's bytes
    as a copy and the buffer starts again in its block; a large one's block itself, and the
    buffer takes a new block of the same size at once (growing one again from nothing had
    the kernel map and zero fresh pages for every batch: a sixth of the time), which the
    heap serves from the blocks Arrow has let go of."""

    cdef char *data
    cdef Py_ssize_t size, cap

    def __dealloc__(self):
        free(self.data)

    cdef int room(self, Py_ssize_t n) except -1:
        cdef Py_ssize_t cap = self.cap if self.cap else 4096
        cdef char *grown
        while cap < self.size + n:
            cap *= 2
        grown = <char *>realloc(self.data, cap)
        if grown == NULL:
            raise MemoryError()
        self.data = grown
        self.cap = cap
        return 0

    cdef inline int put(self, const void *p, Py_ssize_t n) except -1:
        if self.size + n > self.cap:
            self.room(n)
        memcpy(self.data + self.size, p, n)
        self.size += n
        return 0

    cdef inline int put_i64(self, int64_t v) except -1:
        return self.put(&v, 8)

    cdef inline int put_i32(self, int32_t v) except -1:
        return self.put(&v, 4)

    cdef inline int put_u8(self, char v) except -1:
        return self.put(&v, 1)

    cdef object take(self):
        """The bytes so far as an Arrow buffer; this one starts again, empty, and gives back
        what one large batch made it take."""
        if self.size >= _HAND_OVER:
            out = pa.foreign_buffer(<size_t>self.data, self.size, base=_Freed.of(self.data))
            self.data = <char *>malloc(self.cap) if self.cap <= _KEEP else NULL
            self.cap = self.cap if self.data != NULL else 0
            self.size = 0
            return out
        out = pa.allocate_buffer(self.size, memory_pool=_POOL)
        if self.size:
            memcpy(<void *><size_t>out.address, self.data, self.size)
        self.size = 0
        if self.cap > _KEEP:
            free(self.data)
            self.data = NULL
            self.cap = 0
        return out


cdef class _Freed:
    """Frees a block of the C heap when Arrow lets go of the buffer made of it."""

    cdef char *data

    @staticmethod
    cdef _Freed of(char *data):
        cdef _Freed f = _Freed.__new__(_Freed)
        f.data = data
        return f

    def __dealloc__(self):
        free(self.data)


cdef class _Validity:
    """One byte a value (1: present); a bitmap when taken, None when all are present."""

    cdef _Buf bytes
    cdef Py_ssize_t nulls

    def __cinit__(self):
        self.bytes = _Buf()

    cdef inline int add(self, bint present) except -1:
        if not present:
            self.nulls += 1
        return self.bytes.put_u8(present)

    cdef object take(self):
        flags = self.bytes.take()
        if not self.nulls:
            return None
        self.nulls = 0
        return pa.py_buffer(np.packbits(np.frombuffer(flags, dtype=np.bool_), bitorder="little"))


cdef class _Ints:
    """An int64 column (a timestamp column holds int64 counts of its unit)."""

    cdef _Buf values
    cdef _Validity valid

    def __cinit__(self):
        self.values = _Buf()
        self.valid = _Validity()

    cdef inline int add(self, int64_t v) except -1:
        self.valid.add(True)
        return self.values.put_i64(v)

    cdef inline int null(self) except -1:
        self.valid.add(False)
        return self.values.put_i64(0)

    cdef int add_py(self, object v) except -1:
        return self.null() if v is None else self.add(v)

    cdef object take(self, kind, Py_ssize_t n):
        nulls = self.valid.nulls
        validity = self.valid.take()
        return pa.Array.from_buffers(kind, n, [validity, self.values.take()], nulls)


cdef class _Bins:
    """A binary or string column: int32 offsets and the bytes they point into."""

    cdef _Buf data, offsets
    cdef _Validity valid

    def __cinit__(self):
        self.data = _Buf()
        self.offsets = _Buf()
        self.valid = _Validity()
        self.offsets.put_i32(0)

    cdef inline int add(self, const unsigned char *p, Py_ssize_t n) except -1:
        self.data.put(p, n)
        self.valid.add(True)
        return self.offsets.put_i32(<int32_t>self.data.size)

    cdef inline int null(self) except -1:
        self.valid.add(False)
        return self.offsets.put_i32(<int32_t>self.data.size)

    cdef int add_py(self, object v) except -1:
        cdef bytes b
        if v is None:
            return self.null()
        if v.__class__ is str:
            v = v.encode()
        b = v if v.__class__ is bytes else bytes(v)
        return self.add(<const unsigned char *>PyBytes_AS_STRING(b), len(b))

    cdef object take(self, kind, Py_ssize_t n):
        nulls = self.valid.nulls
        validity = self.valid.take()
        buffers = [validity, self.offsets.take(), self.data.take()]
        self.offsets.put_i32(0)
        return pa.Array.from_buffers(kind, n, buffers, nulls)


# --- the walk of a batch's records ----------------------------------------------------------


cdef struct Walk:
    Py_ssize_t p, end  # where the next record starts; where the records end
    int64_t i, count  # the next record's index; how many the batch says it holds
    int64_t good  # records that parse (after the check); count when all do
    int64_t base_offset, base_ts, fixed_ts, seq0, shift
    bint has_fixed_ts, has_seq, has_shift


cdef inline Py_ssize_t _blob(const unsigned char *b, Py_ssize_t p, Py_ssize_t rend,
                             Py_ssize_t end, int64_t *n) noexcept nogil:
    """A varint length (-1: null) and the bytes it counts, within the record; where they end,
    or -1."""
    p = zigzag(b, p, end, n, 5)
    if p < 0 or n[0] < -1 or n[0] > rend - p:
        return -1
    return p + (n[0] if n[0] > 0 else 0)


cdef class RecordColumns:
    """Record batches of the records table, filled exchange by exchange (`add`): each call
    gives the Arrow batches completed by it, usually none; `finish` gives the last."""

    cdef _Ints offsets, timestamps, sequences
    cdef _Bins keys, values, header_keys, header_values
    cdef _Buf header_starts  # int32: where each record's headers start among them all
    cdef int32_t headers
    cdef Py_ssize_t rows, max_rows, max_bytes
    cdef list runs  # a tuple of BATCH_COLUMNS values for each run of rows that share them
    cdef _Buf run_rows  # int64: the rows of each run
    cdef list done  # Arrow batches complete
    cdef object wanted  # (topic, partition) -> whether its records are kept; None: all

    def __cinit__(self, Py_ssize_t max_rows, Py_ssize_t max_bytes, wanted=None):
        self.wanted = wanted
        self.offsets, self.timestamps, self.sequences = _Ints(), _Ints(), _Ints()
        self.keys, self.values = _Bins(), _Bins()
        self.header_keys, self.header_values = _Bins(), _Bins()
        self.header_starts = _Buf()
        self.header_starts.put_i32(0)
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.runs = []
        self.run_rows = _Buf()
        self.done = []

    def add(self, e):
        """The Arrow batches this exchange completes (a list, usually empty)."""
        return self.add_work(work(e, self.wanted))

    def add_work(self, item, decoder=None):
        """The Arrow batches the work of one exchange (`work`) completes; `decoder`: the
        record decoder of the run, for work made in another process (which holds none)."""
        if item is not None and item[0] == ROWS:
            for row in item[1]:
                self._row(row)
        elif item is not None:
            self._sets(item, item[-1] if decoder is None else decoder)
        done, self.done = self.done, []
        return done

    def finish(self):
        """The last Arrow batch, or None."""
        return self._batch() if self.rows else None

    # -- what an exchange holds --------------------------------------------------------------

    cdef int _sets(self, tuple item, decoder) except -1:
        """The records of the record sets of a SETS work item, as its decoder reads them."""
        _, exchange, raw, sets, assigned, _own = item
        view = memoryview(raw)
        limits = decoder.limits
        allowance = decoder.allowance()  # the body's record sets share one
        for topic, partition, start, end in sets:
            given = None if assigned is None else assigned.get((topic, partition), UNKNOWN)
            self._set(raw, view, start, end, exchange + (topic, partition), given, limits,
                      allowance)
        return 0

    cdef int _set(self, bytes raw, view, Py_ssize_t pos, Py_ssize_t n, tuple where, assigned,
                  limits, allowance) except -1:
        """The records of the record set raw[pos:n], as record_set.decode_record_set reads
        its entries: by their length, told apart by their magic byte."""
        cdef const unsigned char *b = <const unsigned char *>PyBytes_AS_STRING(raw)
        cdef int64_t length
        cdef Py_ssize_t end
        cdef int magic
        while n - pos >= LOG_OVERHEAD:
            length = <int32_t>be(b, pos + 8, 4)
            end = pos + LOG_OVERHEAD + length
            if length < 0 or end > n:
                break  # no way on, or the part of a batch a fetch response may end in
            magic = b[pos + _MAGIC_AT] if length > _MAGIC_AT - LOG_OVERHEAD else -1
            if magic == 2 and length >= HEADER_SIZE - LOG_OVERHEAD and not b[pos + 22] & _CONTROL:
                assigned = self._data_batch(
                    raw, view, b, pos, end, where, assigned, limits, allowance
                )
            elif magic == 2:  # a control batch (its markers), or one too short for a header
                batch, data, start, stop = open_batch(raw, view, pos, end, limits, allowance)
                shift, assigned = offset_shift(assigned, *first_and_last(batch))
                if data is not None:
                    read_records(batch, data, start, stop)
                    self._rows(batch_rows(_base(where), batch, shift))
            elif magic in (0, 1):
                batch = decode_message(raw, pos, end, limits, allowance)
                shift, assigned = offset_shift(assigned, *first_and_last(batch))
                self._rows(batch_rows(_base(where), batch, shift))
            else:  # no record in it, but a place among the batches, as the rows path counts
                shift, assigned = offset_shift(assigned, <int64_t>be(b, pos, 8), 0)
            pos = end
        return 0

    cdef object _data_batch(self, bytes raw, view, const unsigned char *b, Py_ssize_t pos,
                            Py_ssize_t end, tuple where, assigned, limits, allowance):
        """The records of the data batch at raw[pos:end], its header read here as
        batch.open_batch reads it (a batch it would give no records gets no rows); returns
        the offset assigned to the next batch (records.offset_shift)."""
        cdef Walk w
        cdef int attributes = <int16_t>be(b, pos + 21, 2)
        cdef int codec = attributes & 0x07
        cdef int64_t lod = <int32_t>be(b, pos + 23, 4)
        cdef Py_ssize_t start, stop
        w.base_offset = <int64_t>be(b, pos, 8)
        w.count = <int32_t>be(b, pos + 57, 4)
        shift, assigned = offset_shift(assigned, w.base_offset, lod)
        if w.count < 0 or w.count > limits.max_records or codec and not limits.decompress:
            return assigned
        try:
            data, start, stop = records_bytes(raw, view, pos, end, codec, limits, allowance)
        except BatchError:
            return assigned
        if w.count > (stop - start) // MIN_RECORD:
            return assigned
        crc_ok = crc_matches(view, pos, end, be(b, pos + 17, 4))
        w.base_ts = <int64_t>be(b, pos + 27, 8)
        w.has_fixed_ts = attributes & _LOG_APPEND != 0
        w.fixed_ts = <int64_t>be(b, pos + 35, 8)
        w.seq0 = <int32_t>be(b, pos + 53, 4)
        w.has_seq = w.seq0 >= 0
        w.has_shift = shift is not None
        w.shift = shift if shift is not None else 0
        self._records(data, start, stop, &w, where + (
            "log_append" if w.has_fixed_ts else "create",
            <int64_t>be(b, pos + 43, 8),
            <int16_t>be(b, pos + 51, 2),
            2,
            CODEC_NAMES[codec],
            attributes & _TRANSACTIONAL != 0,
            None,
            crc_ok,
        ))
        return assigned

    cdef int _records(self, bytes data, Py_ssize_t start, Py_ssize_t stop, Walk *wp,
                      tuple values) except -1:
        """A batch's records, walked once to check them (how many parse, and so its
        status), then again into the columns; `values`: its run's values but the status."""
        cdef const unsigned char *b = <const unsigned char *>PyBytes_AS_STRING(data)
        cdef Walk w = wp[0]
        cdef int64_t room, before
        w.p = start
        w.end = stop
        w.i = 0
        self._walk(b, &w, w.count, False)
        w.good = w.i
        values += (OK if w.i == w.count and w.p == w.end else CORRUPT_RECORDS,)
        w.p = start
        w.i = 0
        while w.i < w.good:
            room = self.max_rows - self.rows
            before = w.i
            self._walk(b, &w, min(w.good, w.i + room), True)
            self._run(values, w.i - before)
            if self.rows >= self.max_rows or self._bytes() >= self.max_bytes:
                self.done.append(self._batch())
        return 0

    cdef int _walk(self, const unsigned char *b, Walk *w, int64_t until, bint keep) except -1:
        """Records w.i up to `until` (or the first that does not parse, or the byte budget of
        an Arrow batch when keeping); kept as rows when `keep`."""
        cdef Py_ssize_t p = w.p, end = w.end, rend, q, kp, vp, hp
        cdef int64_t size, ts_delta, offset_delta, klen, vlen, nh, hk, hv, j
        cdef const unsigned char *s
        cdef Py_ssize_t budget = self.max_bytes - self._bytes() if keep else 0
        while w.i < until:
            w.p = p  # where record w.i starts, to come back to
            p = zigzag(b, p, end, &size, 5)
            if p < 0 or size < 0 or size > end - p:
                break
            rend = p + size
            q = zigzag(b, p + 1, end, &ts_delta, 10)  # after the attributes byte
            if q < 0:
                break
            q = zigzag(b, q, end, &offset_delta, 5)
            if q < 0:
                break
            kp = q
            q = _blob(b, q, rend, end, &klen)
            if q < 0:
                break
            vp = q
            q = _blob(b, q, rend, end, &vlen)
            if q < 0:
                break
            q = zigzag(b, q, end, &nh, 5)
            if q < 0 or nh < 0 or (nh and nh > (rend - q) // 2):
                break
            hp = q
            for j in range(nh):
                q = zigzag(b, q, end, &hk, 5)
                if q < 0 or hk < 0 or hk > rend - q:
                    q = -1
                    break
                q = _blob(b, q + hk, rend, end, &hv)
                if q < 0:
                    break
            if q != rend:  # a header that did not parse, or fields not ending the record
                break
            if keep:
                if self.rows and (budget <= 0 or size > _MAX_BYTES - self._bytes()):
                    return 0  # the Arrow batch holds enough bytes: the rest go to the next
                budget -= size
                self._record(b, w, kp, vp, hp, nh, offset_delta, ts_delta)
            w.i += 1
            p = rend
        w.p = p
        return 0

    cdef int _record(self, const unsigned char *b, Walk *w, Py_ssize_t kp, Py_ssize_t vp,
                     Py_ssize_t hp, int64_t nh, int64_t offset_delta, int64_t ts_delta) \
            except -1:
        """One record's values into the columns, its fields already checked."""
        cdef int64_t n, j, k
        cdef Py_ssize_t q
        if w.has_shift:
            self.offsets.add(w.base_offset + offset_delta + w.shift)
        else:
            self.offsets.null()
        self.timestamps.add(w.fixed_ts if w.has_fixed_ts else w.base_ts + ts_delta)
        if w.has_seq:
            self.sequences.add(w.seq0 + offset_delta)
        else:
            self.sequences.null()
        q = zigzag(b, kp, w.end, &n, 5)
        if n < 0:
            self.keys.null()
        else:
            self.keys.add(b + q, n)
        q = zigzag(b, vp, w.end, &n, 5)
        if n < 0:
            self.values.null()
        else:
            self.values.add(b + q, n)
        q = hp  # the first header, after their count
        for j in range(nh):
            q = zigzag(b, q, w.end, &n, 5)
            if _ascii(b + q, n):
                self.header_keys.add(b + q, n)
            else:  # as the rows path reads a header key: UTF-8, errors replaced
                text = PyBytes_FromStringAndSize(<const char *>b + q, n)
                self.header_keys.add_py(text.decode("utf-8", "replace"))
            q += n
            q = zigzag(b, q, w.end, &n, 5)
            if n < 0:
                self.header_values.null()
            else:
                self.header_values.add(b + q, n)
                q += n
        self.headers += <int32_t>nh
        self.header_starts.put_i32(self.headers)
        self.rows += 1
        return 0

    # -- rows from the rows path ---------------------------------------------------------------

    cdef int _rows(self, rows) except -1:
        for row in rows:
            self._row(row)
        return 0

    cdef int _row(self, dict row) except -1:
        self.offsets.add_py(row.get("offset"))
        self.timestamps.add_py(row.get("timestamp"))
        self.sequences.add_py(row.get("sequence"))
        self.keys.add_py(row.get("key"))
        self.values.add_py(row.get("value"))
        for header in row["headers"]:
            self.header_keys.add_py(header["key"])
            self.header_values.add_py(header["value"])
        self.headers += len(row["headers"])
        self.header_starts.put_i32(self.headers)
        self.rows += 1
        self._run(tuple([row.get(name) for name in BATCH_COLUMNS]), 1)
        if self.rows >= self.max_rows or self._bytes() >= self.max_bytes:
            self.done.append(self._batch())
        return 0

    # -- Arrow batches -------------------------------------------------------------------------

    cdef int _run(self, tuple values, int64_t rows) except -1:
        """`rows` more rows with these values; a run goes on while they are the same."""
        if not rows:
            return 0
        if self.runs and values == self.runs[-1]:
            (<int64_t *>(self.run_rows.data + self.run_rows.size - 8))[0] += rows
        else:
            self.runs.append(values)
            self.run_rows.put_i64(rows)
        return 0

    cdef inline Py_ssize_t _bytes(self):
        return self.keys.data.size + self.values.data.size + self.header_values.data.size

    cdef object _batch(self):
        cdef Py_ssize_t n = self.rows
        counts = np.frombuffer(self.run_rows.take(), dtype=np.int64)
        # The run of each row, as Arrow's buffers (pa.array would load pandas: 150 ms).
        runs = np.repeat(np.arange(len(self.runs), dtype=np.int64), counts)
        which = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(runs)])
        per_batch = dict(zip(BATCH_COLUMNS, zip(*self.runs), strict=True))
        self.runs = []
        header_starts = self.header_starts.take()
        self.header_starts.put_i32(0)
        header = RECORDS.field("headers").type.value_type
        items = pa.StructArray.from_arrays(
            [
                self.header_keys.take(header.field("key").type, self.headers),
                self.header_values.take(header.field("value").type, self.headers),
            ],
            fields=list(header),
        )
        arrays = []
        for f in RECORDS:
            name = f.name
            if name == "offset":
                arrays.append(self.offsets.take(f.type, n))
            elif name == "timestamp":
                arrays.append(self.timestamps.take(f.type, n))
            elif name == "sequence":
                arrays.append(self.sequences.take(f.type, n))
            elif name == "key":
                arrays.append(self.keys.take(f.type, n))
            elif name == "value":
                arrays.append(self.values.take(f.type, n))
            elif name == "headers":
                arrays.append(
                    pa.Array.from_buffers(f.type, n, [None, header_starts], children=[items])
                )
            else:
                arrays.append(column(list(per_batch[name]), f.type).take(which))
        self.rows = 0
        self.headers = 0
        return pa.RecordBatch.from_arrays(arrays, schema=RECORDS)


# What `work` makes of an exchange: its record rows already made, or its record sets to read.
ROWS = "rows"
SETS = "sets"


def work(e, wanted=None):
    """What the records table needs of one exchange, holding nothing of the exchange itself
    (another process may build the table from it: records_behind.py). None: no rows. (ROWS,
    rows): rows the rows path made (0.7, APIs other than Produce and Fetch, bodies a reader
    decoded rather than scanned). (SETS, the exchange's columns with frame and direction, the
    body's bytes, the record sets `wanted` keeps as (topic, partition, start, end), the
    offsets its Produce response assigned, the body's record decoder): to be read here. The
    LazyBody carries the session's record decoder, whose limits say whether and how far
    records are read (None: sizes only, as the rows path would find them)."""
    sets = e.record_sets
    if e.protocol != "0.7" and sets is not None and e.api_key in _APIS:
        side, data, found = sets
        body = e._request if side == "request" else e._response
        if scanned(body):
            decoder = body[-1]
            if decoder is None or not decoder.limits.records:
                return None
            names = e.topic_names
            kept = []
            for topic, partition, start, end in found:
                topic = names.get(topic, topic) or None
                if wanted is None or wanted(topic, partition):  # others: unread, undecompressed
                    kept.append((topic, partition, start, end))
            if not kept:
                return None
            produced = side == "request" and e.api_key == PRODUCE
            frame = e.request_frame if side == "request" else e.response_frame
            exchange = tuple([getattr(e, name) for name in EXCHANGE_COLUMNS]) + (frame, side)
            raw = data if data.__class__ is bytes else bytes(data)
            return (SETS, exchange, raw, kept, assigned_offsets(e) if produced else None,
                    decoder)
    rows = [r for r in exchange_records(e) if wanted is None or wanted(r["topic"], r["partition"])]
    return (ROWS, rows) if rows else None


cdef inline bint _ascii(const unsigned char *p, int64_t n) noexcept nogil:
    cdef int64_t i
    for i in range(n):
        if p[i] & 0x80:
            return False
    return True


def _base(where):
    """The columns a rows-path row starts from, for a record set at `where`."""
    return dict(zip(EXCHANGE_COLUMNS + ("frame", "direction", "topic", "partition"), where))
