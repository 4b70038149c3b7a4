# Framer is a C struct when Cython compiles framer.py: its attributes are
# read and written without look-ups, once or more per packet.
cdef class Framer:
    cdef public object _cand, _chunks, _cut, _fframe, _fstart, _fts, _hparts, _kframe, _kn
    cdef public object _koff, _kreason, _kts, _mode, _need, _off, _sbuf, _sfr, _size
    cdef public object _soff, _sreason, _sscan, bytes_framed, bytes_missing, bytes_skipped
    cdef public object frames, is_frame_start, lookahead, max_frame, max_search

    cpdef list feed(self, data, frame, ts)
