# cython: language_level=3, boundscheck=False, wraparound=False
"""The buffers of Arrow's text and validity, filled in C: what `columns.py` otherwise builds
with a list comprehension, `str.encode`, `bytes.join` and numpy, at about 100 ns a value
against some 15 here. Every table has text columns (addresses, API names, statuses, bodies),
and the records table makes one a batch of records for each of its per-batch columns.

`gather_text` takes rows of text columns out of several Arrow arrays into one, as a whole
table is put in capture order (arrow.in_capture_order).

Without a C compiler, `columns.py` builds the same buffers itself, and Arrow's `take` puts
rows in order.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy, memset

cdef Py_ssize_t _OFFSET_MAX = (1 << 31) - 1  # string and binary offsets are int32


def text_buffers(values):
    """(offsets, data) of text values (str as UTF-8, bytes as they are, None as empty): the
    int32 offsets where each value starts, and the end, and the bytes they point into. None
    when a value is of another type (the caller then builds them itself)."""
    cdef Py_ssize_t n = len(values), i, k, total = 0
    cdef const char *p
    cdef object v
    for i in range(n):
        v = values[i]
        if v is None:
            continue
        if type(v) is str:
            PyUnicode_AsUTF8AndSize(v, &k)  # the text's UTF-8, kept by the str
        elif type(v) is bytes:
            k = PyBytes_GET_SIZE(v)
        else:
            return None
        total += k
    if total > _OFFSET_MAX:
        raise ValueError(f"{total} bytes of text in one batch: more than int32 offsets hold")
    offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * sizeof(int32_t))
    data = PyBytes_FromStringAndSize(NULL, total)
    cdef int32_t *starts = <int32_t *> PyBytes_AS_STRING(offsets)
    cdef char *out = PyBytes_AS_STRING(data)
    cdef Py_ssize_t at = 0
    for i in range(n):
        starts[i] = <int32_t> at
        v = values[i]
        if v is None:
            continue
        if type(v) is str:
            p = PyUnicode_AsUTF8AndSize(v, &k)
        else:
            p = PyBytes_AS_STRING(v)
            k = PyBytes_GET_SIZE(v)
        memcpy(out + at, p, k)
        at += k
    starts[n] = <int32_t> at
    return offsets, data


def present_bitmap(values):
    """Arrow's validity bitmap of the values: bit i (of byte i // 8, least significant first)
    set where the i-th is not None."""
    cdef Py_ssize_t n = len(values), i
    bitmap = PyBytes_FromStringAndSize(NULL, (n + 7) // 8)
    cdef unsigned char *bits = <unsigned char *> PyBytes_AS_STRING(bitmap)
    memset(bits, 0, (n + 7) // 8)
    for i in range(n):
        if values[i] is not None:
            bits[i >> 3] |= 1 << (i & 7)
    return bitmap


cdef struct _Chunk:
    const unsigned char *valid  # NULL: every value present
    const int32_t *starts  # the offsets, from the array's first value
    const char *data
    Py_ssize_t base  # the array's offset, where its validity bits start


cdef inline bint _present(const _Chunk *c, Py_ssize_t r) noexcept nogil:
    cdef Py_ssize_t at = c.base + r
    return c.valid == NULL or c.valid[at >> 3] >> (at & 7) & 1


def gather_text(chunks, const int64_t[::1] chunk_of, const int64_t[::1] row_of):
    """(validity or None, nulls, offsets, data): Arrow's buffers of the text (string or
    binary, int32 offsets) made of row row_of[i] of chunks[chunk_of[i]], for each i (indices
    the caller made: they are not checked). Arrow's `take` over several arrays first joins
    them into one: three to four times the bytes of its result were written, in fresh memory
    the kernel had to map and zero; here, once."""
    cdef Py_ssize_t n = chunk_of.shape[0], k = len(chunks), i, r, at, total = 0, nulls = 0
    cdef Py_ssize_t first, length
    cdef const _Chunk *c
    cdef int32_t *out_starts
    cdef char *out
    cdef unsigned char *bits = NULL
    cdef _Chunk *of = <_Chunk *> PyMem_Malloc(k * sizeof(_Chunk) + 1)
    if of == NULL:
        raise MemoryError()
    try:
        for i in range(k):  # their buffers stay alive with `chunks`
            bitmap, offsets, text = chunks[i].buffers()
            of[i].base = chunks[i].offset
            of[i].valid = NULL if bitmap is None else <const unsigned char *> <size_t> (
                bitmap.address)
            of[i].starts = (<const int32_t *> <size_t> offsets.address) + of[i].base
            of[i].data = NULL if text is None else <const char *> <size_t> text.address
        for i in range(n):
            c, r = &of[chunk_of[i]], row_of[i]
            if _present(c, r):
                total += c.starts[r + 1] - c.starts[r]
            else:
                nulls += 1
        if total > _OFFSET_MAX:
            raise ValueError(f"{total} bytes of text in one batch: more than int32 offsets hold")
        offsets_out = PyBytes_FromStringAndSize(NULL, (n + 1) * sizeof(int32_t))
        data_out = PyBytes_FromStringAndSize(NULL, total)
        bitmap_out = PyBytes_FromStringAndSize(NULL, (n + 7) // 8) if nulls else None
        out_starts = <int32_t *> PyBytes_AS_STRING(offsets_out)
        out = PyBytes_AS_STRING(data_out)
        if nulls:
            bits = <unsigned char *> PyBytes_AS_STRING(bitmap_out)
            memset(bits, 0, (n + 7) // 8)
        at = 0
        for i in range(n):
            out_starts[i] = <int32_t> at
            c, r = &of[chunk_of[i]], row_of[i]
            if not _present(c, r):
                continue
            if bits != NULL:
                bits[i >> 3] |= 1 << (i & 7)
            first = c.starts[r]
            length = c.starts[r + 1] - first
            if length:
                memcpy(out + at, c.data + first, length)
                at += length
        out_starts[n] = <int32_t> at
    finally:
        PyMem_Free(of)
    return bitmap_out, nulls, offsets_out, data_out
