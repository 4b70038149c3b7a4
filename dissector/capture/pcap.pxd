# C types for pcap.py when Cython compiles it: the record loop keeps positions, counts and
# header fields as C integers and reads each record header through a pointer.
cimport cython

cdef class Records:
    cdef public object src
    cdef bytes buf
    cdef Py_ssize_t n, pos
    cdef long long base, frame, frac_ns
    cdef public long long offset
    cdef int linktype
    cdef bint big

    @cython.locals(p="const unsigned char *", pos=Py_ssize_t, incl="long long", sec="long long", frac="long long", orig="long long", start=Py_ssize_t, end=Py_ssize_t, ts="long long", short=bint)
    cdef _next(self)
    @cython.locals(pos=Py_ssize_t)
    cdef bint _refill(self, Py_ssize_t need, str unit) except -1

@cython.locals(n="unsigned int")
cdef unsigned int _u32(const unsigned char *p, Py_ssize_t pos, bint big)
