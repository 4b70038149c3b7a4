# cython: language_level=3, boundscheck=False, wraparound=False
"""The buffers of Arrow's text and validity, filled in C: what `columns.py` otherwise builds
with a list comprehension, `str.encode`, `bytes.join` and numpy, at about 100 ns a value
against some 15 here. Every table has text columns (addresses, API names, statuses, bodies),
and the records table makes one a batch of records for each of its per-batch columns.

Without a C compiler, `columns.py` builds the same buffers itself.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int32_t
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
