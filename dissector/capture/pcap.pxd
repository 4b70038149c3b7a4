# C types for pcap.py when Cython compiles it: the record loop keeps positions, counts and
# header fields as C integers.
cimport cython
from dissector.tuples cimport new as _new

cdef class Records:
    cdef public object src
    cdef bytes buf
    cdef Py_ssize_t n, pos
    cdef long long base, frame, first, frac_ns
    cdef public long long offset
    cdef int linktype
    cdef object unpack

    @cython.locals(pos=Py_ssize_t, incl="long long", sec="long long", frac="long long", orig="long long", start=Py_ssize_t, end=Py_ssize_t, ts="long long", short=bint)
    cdef _next(self)
    @cython.locals(pos=Py_ssize_t)
    cdef bint _refill(self, Py_ssize_t need, str unit) except -1
