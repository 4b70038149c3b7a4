# Framer is a C struct when Cython compiles framer.py: its attributes are
# read and written without look-ups, once or more per packet; whole frames are cut from
# a packet's bytes, read through a pointer.
cimport cython
from dissector.tuples cimport new as _new

cdef int _SYNC, _HEAD, _BODY, _SKIP, _SEARCH, _BLIND

cdef class Framer:
    cdef public object _cand, _chunks, _cut, _fframe, _fstart, _fts, _hparts, _kframe, _kn
    cdef public object _koff, _kreason, _kts, _lframe, _lts, _sbuf, _sfr
    cdef public object _soff, _sreason, _sscan, bytes_missing, bytes_skipped
    cdef public object is_frame_start, lookahead, max_frame, max_search, min_frame, refuses
    cdef public object orphans, _orph, _pst
    # What every packet moves, as C integers: no Python integer made to count.
    cdef public int _mode
    cdef public long long _need, _off, _size, bytes_framed, frames

    @cython.locals(n=Py_ssize_t, base="long long", mode=int, need="long long", pos=Py_ssize_t, end=Py_ssize_t)
    cpdef list feed(self, data, frame, ts, Py_ssize_t start=*)
    @cython.locals(p="const unsigned char *", n=Py_ssize_t, rem=Py_ssize_t, size=Py_ssize_t, end=Py_ssize_t, nf=Py_ssize_t, nb=Py_ssize_t, mx=Py_ssize_t)
    cdef Py_ssize_t _sync(self, bytes data, Py_ssize_t pos, long long base, frame, ts, list out) except -1
