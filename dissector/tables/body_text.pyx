# cython: language_level=3
"""A lazily decoded body written straight to its JSON text: what a table keeps of a body.

A table holds a body as JSON text (bodies.py), the text orjson makes of the decoded dict.
Building that dict (a key and a value object for every field, 24 fields for every batch
header) and serializing it cost more than the rest of an exchange's row. Here the body's
decode program (protocol/decoder.py) is read again, from the scanned bytes, into that same
text, byte for byte, with nothing built in between: lengths and integers are read and
printed in C, keys are written as they were encoded once per message version.

What this writer does not spell itself, the dict path writes. Record sets of magic 2 batches
are written from their bytes: their headers, and with `records="full"` the records of data
batches, decompressed into the body's allowance, when every record parses. Any other record
set (control batches, batches to decompress for their size only, errors, magic 0 and 1
message sets) is decoded by the session's record decoder and serialized in its place;
strings that need escaping and float64 values go through orjson one at a time. A body with
bytes after its last field, or one the decoder would not read, is left whole to the caller:
`write` returns None, and the caller decodes it and serializes the dict. Lengths and tagged
fields are read by the decoder's own readers (primitives.py). tests/test_body_text.py holds the
two paths equal on every message version and every body of the bundled captures.

It is C-level code with no Python twin: without a C compiler, bodies take the dict path.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from dissector.protocol.messages cimport ByVersion
from dissector.protocol.primitives cimport read_length
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memmove
from dissector.tables.wire cimport be, zigzag

import binascii
import struct

import orjson

from ..errors import DecodeError
from ..protocol.decoder import OPCODES
from ..protocol.messages import decode_program
from ..protocol.primitives import tagged_fields, uuid_text
from ..protocol.records.common import CODEC_NAMES, BatchError
from ..protocol.records.batch import HEADER_SIZE, MIN_RECORD, crc_matches, records_bytes
from ..protocol.records.record_set import RecordSets
from .bodies import body_utf8

# Opcodes: the decode program's sized fields, structs and tags keep theirs; each fixed-width
# field of a run becomes one instruction, FIXED plus the code of its type.
cdef int RUN = OPCODES["RUN"]
cdef int SIZED = OPCODES["SIZED"]
cdef int STRING = OPCODES["STRING"]
cdef int BYTES = OPCODES["BYTES"]
cdef int RECORDS = OPCODES["RECORDS"]
cdef int ARRAY = OPCODES["ARRAY"]
cdef int ARRAY_FIXED = OPCODES["ARRAY_FIXED"]
cdef int ARRAY_VALUES = OPCODES["ARRAY_VALUES"]
cdef int STRUCT = OPCODES["STRUCT"]
cdef int NULLABLE = OPCODES["NULLABLE"]
cdef int TAGS = OPCODES["TAGS"]
cdef int UUID = OPCODES["UUID"]
cdef int FIXED = 64

# Fixed-width types, by their struct format code, and their sizes.
cdef enum:
    INT8, INT16, UINT16, INT32, UINT32, INT64, FLOAT64, BOOL, ID
_TYPES = {
    "b": INT8,
    "h": INT16,
    "H": UINT16,
    "i": INT32,
    "I": UINT32,
    "q": INT64,
    "d": FLOAT64,
    "?": BOOL,
    "16s": ID,
}
cdef int _SIZES[9]
_SIZES[:] = [1, 2, 2, 4, 4, 8, 8, 1, 16]
_DOUBLE = struct.Struct(">d")

_LOG_OVERHEAD = 12  # a batch's offset and length


class _Unwritten(Exception):
    """Something only the dict path writes: the body is left to it."""


# --- programs -------------------------------------------------------------------------------


def _formats(fmt):
    """The type codes of a struct format such as ">iq16sh"."""
    codes, count = [], ""
    for c in fmt.lstrip(">"):
        if c.isdigit():
            count += c
            continue
        codes.append(count + c)
        count = ""
    return codes


def compile_text_program(program, comma=False):
    """The text program of a decode program: (opcode, key, argument) instructions whose key
    is the field's JSON key with its colon, and its leading comma but in first place (in
    every place with comma=True: a tagged field follows the fields before it)."""
    out = []
    for ins in program:
        op, name, arg = ins
        if op == RUN:
            unpack = arg[0]
            for field, code in zip(name, _formats(unpack.__self__.format), strict=True):
                out.append([FIXED + _TYPES[code], field, None])
            continue
        if op >= SIZED:
            kind = op - (op & 3)
            if kind == ARRAY:
                arg = compile_text_program(arg)
            elif kind == ARRAY_FIXED:
                arg = _TYPES[arg[0]]
            elif kind == ARRAY_VALUES:
                arg = arg[0][0][0]  # the opcode of one value
        elif op in (STRUCT, NULLABLE):
            arg = compile_text_program(arg)
        elif op == TAGS:
            arg = {tag: compile_text_program(one, comma=True) for tag, one in arg.items()}
        out.append([op, name, arg])
    for i, ins in enumerate(out):
        if ins[1] is not None:
            ins[1] = (b"," if i or comma else b"") + orjson.dumps(ins[1]) + b":"
    return tuple(tuple(ins) for ins in out)


def _of_kind(kind):
    def compute(api_key, version):
        program = decode_program(api_key, kind, version)
        return None if program is None else compile_text_program(program)

    return ByVersion(compute)


cdef dict _PROGRAMS = {"request": _of_kind("request"), "response": _of_kind("response")}


# --- the text -------------------------------------------------------------------------------


cdef Py_ssize_t _START = 1 << 14  # bytes a buffer starts with, and keeps after a larger body


cdef class _Text:
    """A growing buffer of UTF-8."""

    cdef char *buf
    cdef Py_ssize_t n, cap

    def __cinit__(self):
        self.cap = _START
        self.n = 0
        self.buf = <char *>malloc(self.cap)
        if self.buf == NULL:
            raise MemoryError()

    cdef void reset(self):
        """Empty, and no larger than it started: one large body does not hold memory for good."""
        cdef char *smaller
        self.n = 0
        if self.cap > _START:
            smaller = <char *>realloc(self.buf, _START)
            if smaller != NULL:
                self.buf = smaller
                self.cap = _START

    def __dealloc__(self):
        free(self.buf)

    cdef int room(self, Py_ssize_t k) except -1:
        cdef Py_ssize_t cap = self.cap
        cdef char *grown
        if self.n + k <= cap:
            return 0
        while cap < self.n + k:
            cap *= 2
        grown = <char *>realloc(self.buf, cap)
        if grown == NULL:
            raise MemoryError()
        self.buf = grown
        self.cap = cap
        return 0

    cdef inline int put(self, const char *s, Py_ssize_t k) except -1:
        self.room(k)
        memcpy(self.buf + self.n, s, k)
        self.n += k
        return 0

    cdef inline int put_bytes(self, bytes b) except -1:
        return self.put(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))

    cdef inline int char(self, char c) except -1:
        self.room(1)
        self.buf[self.n] = c
        self.n += 1
        return 0

    cdef int integer(self, int64_t v) except -1:
        cdef char digits[24]
        cdef int i = 24
        cdef uint64_t u = (<uint64_t>0 - <uint64_t>v) if v < 0 else <uint64_t>v
        while True:
            i -= 1
            digits[i] = <char>(48 + u % 10)
            u //= 10
            if u == 0:
                break
        if v < 0:
            i -= 1
            digits[i] = b"-"
        return self.put(digits + i, 24 - i)

    cdef int boolean(self, bint v) except -1:
        if v:
            return self.put_bytes(b"true")
        return self.put_bytes(b"false")

    cdef int null(self) except -1:
        return self.put_bytes(b"null")

    cdef int string(self, const unsigned char *p, Py_ssize_t start, Py_ssize_t stop) except -1:
        """The UTF-8 at p[start:stop] as a JSON string: copied when it is printable ASCII
        with nothing to escape (topic names, client ids), else as orjson writes its text."""
        cdef Py_ssize_t i
        cdef unsigned char c
        for i in range(start, stop):
            c = p[i]
            if c < 0x20 or c > 0x7E or c == 0x22 or c == 0x5C:
                text = PyBytes_FromStringAndSize(<const char *>p + start, stop - start)
                return self.put_bytes(orjson.dumps(text.decode("utf-8", "replace")))
        self.char(b'"')
        self.put(<const char *>p + start, stop - start)
        return self.char(b'"')

    cdef int text(self, str s) except -1:
        """An ASCII str (an id, a codec name) as a JSON string."""
        cdef Py_ssize_t k
        cdef const char *c = PyUnicode_AsUTF8AndSize(s, &k)
        self.char(b'"')
        self.put(c, k)
        return self.char(b'"')


cdef _Text _TEXT = _Text()  # reused: the text of one body at a time, then copied out


# --- reading --------------------------------------------------------------------------------


cdef Py_ssize_t _fixed(_Text out, int kind, bytes raw, const unsigned char *p, Py_ssize_t pos,
                       Py_ssize_t end) except -1:
    """One fixed-width value at p[pos]; the position after it."""
    cdef int size = _SIZES[kind]
    cdef uint64_t v
    if pos + size > end:
        raise _Unwritten()
    if kind == ID:
        out.text(uuid_text(raw[pos : pos + 16]))
    elif kind == FLOAT64:
        out.put_bytes(orjson.dumps(_DOUBLE.unpack_from(raw, pos)[0]))
    elif kind == BOOL:
        out.boolean(p[pos] != 0)
    else:
        v = be(p, pos, size)
        if kind == INT8:
            out.integer(<signed char>v)
        elif kind == INT16:
            out.integer(<short>v)
        elif kind == INT32:
            out.integer(<int>v)
        else:  # int64, and the unsigned ones
            out.integer(<int64_t>v)
    return pos + size


cdef Py_ssize_t _sized(_Text out, int kind, Py_ssize_t n, bytes raw, const unsigned char *p,
                       Py_ssize_t pos, Py_ssize_t end, object records) except -1:
    """n bytes at p[pos] as a string, bytes (base64) or record set; the position after."""
    if n > end - pos:
        raise _Unwritten()
    if kind == STRING:
        out.string(p, pos, pos + n)
    elif kind == BYTES:
        out.char(b'"')
        out.put_bytes(binascii.b2a_base64(raw[pos : pos + n], newline=False))
        out.char(b'"')
    else:
        _record_set(out, raw, p, pos, pos + n, records)
    return pos + n


cdef Py_ssize_t _fields(_Text out, tuple program, bytes raw, const unsigned char *p,
                        Py_ssize_t pos, Py_ssize_t end, object records) except -1:
    """The fields of `program` at p[pos], each key and value; the position after them."""
    cdef tuple ins
    cdef int op, width, kind
    cdef Py_ssize_t n, i
    for ins in program:
        op = ins[0]
        if op == TAGS:
            if pos >= end:
                raise _Unwritten()
            if p[pos] == 0:  # none, nearly always
                pos += 1
            else:
                pos = _tags(out, ins[2], ins is program[0], raw, pos, records)
            continue
        out.put_bytes(ins[1])
        if op >= FIXED:
            pos = _fixed(out, op - FIXED, raw, p, pos, end)
        elif op >= SIZED:
            width = op & 3
            kind = op - width
            n, pos = read_length(raw, pos, end, width)
            if n < 0:
                if kind == RECORDS and not _known(records):
                    raise _Unwritten()  # what a record decoder of its own makes of null
                out.null()
            elif kind <= RECORDS:
                pos = _sized(out, kind, n, raw, p, pos, end, records)
            else:
                if n > end - pos:
                    raise _Unwritten()
                out.char(b"[")
                for i in range(n):
                    if i:
                        out.char(b",")
                    if kind == ARRAY:
                        out.char(b"{")
                        pos = _fields(out, ins[2], raw, p, pos, end, records)
                        out.char(b"}")
                    elif kind == ARRAY_FIXED:
                        pos = _fixed(out, ins[2], raw, p, pos, end)
                    else:
                        pos = _value(out, ins[2], raw, p, pos, end, records)
                out.char(b"]")
        elif op == STRUCT or op == NULLABLE:
            if op == NULLABLE:
                if pos >= end:
                    raise _Unwritten()
                pos += 1
                if p[pos - 1] >= 0x80:
                    out.null()
                    continue
            out.char(b"{")
            pos = _fields(out, ins[2], raw, p, pos, end, records)
            out.char(b"}")
        else:
            raise _Unwritten()
    return pos


cdef Py_ssize_t _tags(_Text out, dict known, bint alone, bytes raw, Py_ssize_t pos,
                      object records) except -1:
    """A tagged-field section at raw[pos], read as decoder._tags reads it: each known field
    after the fields before it, in the order they came, and the unknown ones, base64, under
    "_unknown_tags" (keyed by number) where the first came; the position after it. alone: no
    field came before, so the first written takes no comma."""
    cdef Py_ssize_t mark
    cdef bytes value
    tags, pos = tagged_fields(raw, pos)
    unknown = [tag for tag in tags if tag not in known]
    for tag, value in tags.items():
        program = known.get(tag)
        mark = out.n
        if program is not None:
            _fields(out, program, value, value, 0, len(value), records)
        elif tag == unknown[0]:
            out.put_bytes(b',"_unknown_tags":{')
            for i, other in enumerate(unknown):
                if i:
                    out.char(b",")
                out.put_bytes(b'"%d":"' % other)
                out.put_bytes(binascii.b2a_base64(tags[other], newline=False))
                out.char(b'"')
            out.char(b"}")
        else:
            continue
        if alone:  # the first field of the object: no comma before it
            memmove(out.buf + mark, out.buf + mark + 1, out.n - mark - 1)
            out.n -= 1
            alone = False
    return pos


cdef Py_ssize_t _value(_Text out, int op, bytes raw, const unsigned char *p, Py_ssize_t pos,
                       Py_ssize_t end, object records) except -1:
    """One element of an array of strings, bytes or ids; the position after it."""
    cdef Py_ssize_t n
    cdef int width
    if op == UUID:
        return _fixed(out, ID, raw, p, pos, end)
    width = op & 3
    n, pos = read_length(raw, pos, end, width)
    if n < 0:
        out.null()
        return pos
    return _sized(out, op - width, n, raw, p, pos, end, records)


# --- record sets ----------------------------------------------------------------------------


cdef class _BodyRecords:
    """A body's record decoder as its Context would hand it over: the decoder, and the
    `allowance` the body's record sets share (RecordSets keeps it here)."""

    cdef public object records, allowance

    def __init__(self, records):
        self.records = records
        self.allowance = None


cdef inline bint _known(records):
    """Whether records is the record decoder Options makes (or None, sizes only)."""
    return records is None or records.records.__class__ is RecordSets


cdef int _record_set(_Text out, bytes raw, const unsigned char *p, Py_ssize_t start,
                     Py_ssize_t stop, object records) except -1:
    """The record set at p[start:stop] as the session's record decoder makes it."""
    cdef Py_ssize_t mark = out.n
    if records is None:  # codegen.record_set_size
        out.put_bytes(b'{"size":')
        out.integer(stop - start)
        return out.char(b"}")
    decoder = records.records
    if decoder.__class__ is RecordSets:
        limits = decoder.limits
        if _batch_headers(out, raw, p, start, stop, limits, records):
            return 0
    out.n = mark  # the record decoder's own dict, serialized
    text = body_utf8(decoder(raw[start:stop], records))
    return out.null() if text is None else out.put_bytes(text)


cdef bint _batch_headers(_Text out, bytes raw, const unsigned char *p, Py_ssize_t start,
                         Py_ssize_t stop, object limits, _BodyRecords records) except -1:
    """A record set of magic 2 batches (record_set.py), written: without their records, or,
    when the limits want them, data batches with every record parsed; False, partly
    written, where it holds anything else (what the body may still decompress to is then
    as it was: the dict path decodes the set again)."""
    allowance = None
    if limits.records:
        if records.allowance is None:
            records.allowance = records.records.allowance()
        allowance = records.allowance
        before = allowance.saved()
    if not _batches(out, raw, p, start, stop, limits, allowance):
        if allowance is not None:
            allowance.restore(before)
        return False
    return True


cdef bint _batches(_Text out, bytes raw, const unsigned char *p, Py_ssize_t start,
                   Py_ssize_t stop, object limits, object allowance) except -1:
    cdef Py_ssize_t pos = start, end, length, left = 0
    cdef bint first = True
    view = memoryview(raw)
    out.put_bytes(b'{"size":')
    out.integer(stop - start)
    out.put_bytes(b',"batches":[')
    while pos < stop:
        if stop - pos < _LOG_OVERHEAD:
            left = stop - pos
            break
        length = <int>be(p, pos + 8, 4)
        if length < 0:
            return False
        end = pos + _LOG_OVERHEAD + length
        if end > stop:  # a fetch response may end in part of a batch
            left = stop - pos
            break
        if length <= 4 or p[pos + 16] != 2:
            return False
        if not first:
            out.char(b",")
        first = False
        if allowance is None:
            if not _batch_header(out, view, p, pos, end, limits):
                return False
        elif not _batch_full(out, raw, view, p, pos, end, limits, allowance):
            return False
        pos = end
    out.put_bytes(b'],"truncated":')
    out.boolean(left != 0)
    out.put_bytes(b',"truncated_bytes":')
    out.integer(left)
    out.put_bytes(b',"error":null}')
    return True


# The integer fields of a batch header that decode_batch gives as they are, in its order:
# the first 3 before the ones it derives from the CRC and the attributes, the rest after.
_KEYS = (
    b'{"magic":2,"base_offset":',
    b',"batch_length":',
    b',"partition_leader_epoch":',
    b',"last_offset_delta":',
    b',"base_timestamp":',
    b',"max_timestamp":',
    b',"producer_id":',
    b',"producer_epoch":',
    b',"base_sequence":',
    b',"record_count":',
)
cdef int _AT[10]
cdef int _SIZE[10]
_AT[:] = [0, 8, 12, 23, 27, 35, 43, 51, 53, 57]
_SIZE[:] = [8, 4, 4, 4, 8, 8, 8, 2, 4, 4]


cdef int _integers(_Text out, const unsigned char *p, Py_ssize_t pos, int first, int last) \
        except -1:
    """Header fields first to last (of _KEYS): signed big-endian integers, each after its key."""
    cdef int i, shift
    for i in range(first, last):
        shift = 64 - 8 * _SIZE[i]
        out.put_bytes(<bytes>_KEYS[i])
        out.integer(<int64_t>(be(p, pos + _AT[i], _SIZE[i]) << shift) >> shift)
    return 0


cdef bint _batch_header(_Text out, object view, const unsigned char *p, Py_ssize_t pos,
                        Py_ssize_t end, object limits) except -1:
    """A magic 2 batch at p[pos:end] as batch.decode_batch makes it without records, written;
    False where that holds more than its header (an error, decompression)."""
    cdef int attributes, codec, count
    cdef Py_ssize_t size = end - pos - HEADER_SIZE
    if size < 0:
        return False
    attributes = <short>be(p, pos + 21, 2)
    codec = attributes & 0x07
    count = <int>be(p, pos + 57, 4)
    if count < 0 or count > limits.max_records or codec and limits.decompress:
        return False
    _batch_fields(out, view, p, pos, end, attributes)
    out.put_bytes(b',"records":[],"status":"ok","error":null,"compressed_size":')
    out.integer(size)
    out.put_bytes(b',"uncompressed_size":')
    if codec:
        out.null()
    else:
        out.integer(size)
    out.char(b"}")
    return True


cdef int _batch_fields(_Text out, object view, const unsigned char *p, Py_ssize_t pos,
                       Py_ssize_t end, int attributes) except -1:
    """A batch header's fields, from magic to record_count, as decode_batch gives them."""
    cdef uint64_t crc = be(p, pos + 17, 4)
    _integers(out, p, pos, 0, 3)
    out.put_bytes(b',"crc":')
    out.integer(crc)
    out.put_bytes(b',"crc_ok":')
    out.boolean(crc_matches(view, pos, end, crc))
    out.put_bytes(b',"attributes":')
    out.integer(attributes)
    out.put_bytes(b',"compression":')
    out.text(CODEC_NAMES[attributes & 0x07])
    if attributes & 0x08:
        out.put_bytes(b',"timestamp_type":"log_append"')
    else:
        out.put_bytes(b',"timestamp_type":"create"')
    out.put_bytes(b',"transactional":')
    out.boolean(attributes & 0x10)
    out.put_bytes(b',"control":')
    out.boolean(attributes & 0x20)
    out.put_bytes(b',"has_delete_horizon":')
    out.boolean(attributes & 0x40)
    return _integers(out, p, pos, 3, 10)


cdef bint _batch_full(_Text out, bytes raw, object view, const unsigned char *p,
                      Py_ssize_t pos, Py_ssize_t end, object limits, object allowance) except -1:
    """A magic 2 data batch with its records, as decode_batch makes it when every record
    parses; False where it does not, or where the batch is a control batch, or holds
    anything decode_batch would report (the dict path then writes the set)."""
    cdef int attributes, codec
    cdef int64_t count, i
    cdef Py_ssize_t size = end - pos - HEADER_SIZE, start, stop, q
    cdef const unsigned char *d
    if size < 0:
        return False
    attributes = <short>be(p, pos + 21, 2)
    codec = attributes & 0x07
    count = <int>be(p, pos + 57, 4)
    if attributes & 0x20 or count < 0 or count > limits.max_records:
        return False
    if codec and not limits.decompress:
        return False  # the dict path gives the batch without its records
    try:
        data, start, stop = records_bytes(raw, view, pos, end, codec, limits, allowance)
    except BatchError:
        return False
    if count > (stop - start) // MIN_RECORD:
        return False
    _batch_fields(out, view, p, pos, end, attributes)
    out.put_bytes(b',"records":[')
    d = <const unsigned char *>PyBytes_AS_STRING(data)
    q = start
    base_offset = <int64_t>be(p, pos, 8)
    base_ts = <int64_t>be(p, pos + 27, 8)
    fixed = attributes & 0x08 != 0
    max_ts = <int64_t>be(p, pos + 35, 8)
    for i in range(count):
        if i:
            out.char(b",")
        q = _record(out, data, d, q, stop, base_offset, max_ts if fixed else base_ts, fixed)
        if q < 0:
            return False
    if q != stop:
        return False
    out.put_bytes(b'],"status":"ok","error":null,"compressed_size":')
    out.integer(size)
    out.put_bytes(b',"uncompressed_size":')
    out.integer(stop - start)
    out.char(b"}")
    return True


cdef Py_ssize_t _record(_Text out, bytes data, const unsigned char *d, Py_ssize_t q,
                        Py_ssize_t end, int64_t base_offset, int64_t ts, bint fixed) except -2:
    """One record (batch.parse_records) as its dict's JSON text; where it ends, or -1 where
    it does not parse (what is written then is dropped)."""
    cdef int64_t size, ts_delta, offset_delta, n, count, j
    cdef Py_ssize_t rend
    cdef int attributes
    q = zigzag(d, q, end, &size, 5)
    if q < 0 or size < 0 or size > end - q:
        return -1
    rend = q + size
    if q >= end:
        return -1
    attributes = d[q]
    q = zigzag(d, q + 1, end, &ts_delta, 10)
    if q < 0:
        return -1
    q = zigzag(d, q, end, &offset_delta, 5)
    if q < 0:
        return -1
    out.put_bytes(b'{"offset":')
    out.integer(base_offset + offset_delta)
    out.put_bytes(b',"timestamp":')
    out.integer(ts if fixed else ts + ts_delta)
    out.put_bytes(b',"attributes":')
    out.integer(attributes - 256 if attributes > 127 else attributes)
    out.put_bytes(b',"key":')
    q = _blob(out, data, d, q, rend, end)
    if q < 0:
        return -1
    out.put_bytes(b',"value":')
    q = _blob(out, data, d, q, rend, end)
    if q < 0:
        return -1
    q = zigzag(d, q, end, &count, 5)
    if q < 0 or count < 0 or (count and count > (rend - q) // 2):
        return -1
    out.put_bytes(b',"headers":[')
    for j in range(count):
        if j:
            out.char(b",")
        q = zigzag(d, q, end, &n, 5)
        if q < 0 or n < 0 or n > rend - q:
            return -1
        out.char(b"[")
        out.string(d, q, q + n)
        q += n
        out.char(b",")
        q = _blob(out, data, d, q, rend, end)
        if q < 0:
            return -1
        out.char(b"]")
    if q != rend:
        return -1
    out.put_bytes(b"]}")
    return q


cdef Py_ssize_t _blob(_Text out, bytes data, const unsigned char *d, Py_ssize_t q,
                      Py_ssize_t rend, Py_ssize_t end) except -2:
    """A varint length and the bytes it counts (null for -1), as base64; where they end."""
    cdef int64_t n
    q = zigzag(d, q, end, &n, 5)
    if q < 0 or n < -1 or n > rend - q:
        return -1
    if n < 0:
        out.null()
        return q
    out.char(b'"')
    out.put_bytes(binascii.b2a_base64(data[q : q + n], newline=False))
    out.char(b'"')
    return q + n


# --- the entry ------------------------------------------------------------------------------


cpdef bytes write(int api_key, str kind, int version, data, Py_ssize_t pos, records):
    """The JSON text (UTF-8) of the body messages.decode_body would decode from data[pos:]
    with a Context of `records`, serialized as bodies.body_utf8 does; None where the dict
    path must write it (see the module's docstring)."""
    cdef ByVersion memo = _PROGRAMS[kind]
    cdef _Text out = _TEXT
    program = memo.get(api_key, version)
    if program is None:
        return None
    raw = data if data.__class__ is bytes else bytes(data)
    cdef const unsigned char *p = raw
    cdef Py_ssize_t end = len(raw)
    if out.n:  # in use: entered again (another thread, or a record decoder writing a body)
        out = _Text()
    if records is not None:  # the body's record sets share one decompression allowance
        records = _BodyRecords(records)
    try:
        out.char(b"{")
        if _fields(out, program, raw, p, pos, end, records) != end:
            return None  # bytes after the last field: the dict path keeps them
        out.char(b"}")
        return PyBytes_FromStringAndSize(out.buf, out.n)
    except (_Unwritten, DecodeError, IndexError):  # IndexError: a length cut short
        return None
    finally:
        out.reset()
