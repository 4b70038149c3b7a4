# Framer is a C struct when Cython compiles framer.py: its attributes are
# read and written without look-ups, once or more per packet; whole frames are cut from
# a packet's bytes, read through a pointer.
cimport cython

cdef class Framer:
    cdef public object _cand, _chunks, _cut, _fframe, _fstart, _fts, _hparts, _kframe, _kn
    cdef public object _koff, _kreason, _kts, _mode, _need, _off, _sbuf, _sfr, _size
    cdef public object _soff, _sreason, _sscan, bytes_framed, bytes_missing, bytes_skipped
    cdef public object frames, is_frame_start, lookahead, max_frame, max_search

    cpdef list feed(self, data, frame, ts)
    @cython.locals(p="const unsigned char *", n=Py_ssize_t, rem=Py_ssize_t, size=Py_ssize_t, end=Py_ssize_t, nf=Py_ssize_t, nb=Py_ssize_t, mx=Py_ssize_t)
    cdef Py_ssize_t _sync(self, bytes data, Py_ssize_t pos, base, frame, ts, list out) except -1
