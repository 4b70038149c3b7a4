# C types for batch.py when Cython compiles it: a batch header's flags are read as C
# integers, and the module's tables are reached without look-ups.
cimport cython

cdef tuple _CODEC_NAMES
cdef object _unpack_header

cpdef dict decode_batch(bytes raw, object view, Py_ssize_t pos, Py_ssize_t end, object limits, object allowance=*)

@cython.locals(codec=int, attributes=int, batch=dict)
cpdef tuple open_batch(bytes raw, object view, Py_ssize_t pos, Py_ssize_t end, object limits, object allowance=*)

# The record loop: positions, lengths and bytes as C integers, the buffer read as bytes in C.
@cython.locals(b=int)
cdef tuple _varint(bytes buf, Py_ssize_t p)
@cython.locals(b=int)
cdef tuple _varlong(bytes buf, Py_ssize_t p)
@cython.locals(i=Py_ssize_t, b=int, size=Py_ssize_t, rend=Py_ssize_t, n=Py_ssize_t, attributes=int)
cpdef parse_records(bytes buf, Py_ssize_t p, Py_ssize_t end, Py_ssize_t count, object base_offset, object base_ts, object fixed_ts, bint control, list out)
@cython.locals(n=Py_ssize_t)
cdef tuple _headers(bytes buf, Py_ssize_t p, Py_ssize_t rend, Py_ssize_t count, Py_ssize_t i)
