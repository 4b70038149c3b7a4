# HalfStream is a C struct when Cython compiles halfstream.py: its attributes are
# read and written without look-ups, once or more per packet.
from dissector.tcp.connection cimport Connection


cdef class HalfStream:
    cdef public Connection conn
    cdef public HalfStream peer
    cdef public object ack, base, dropped, dup, fin, gap, isn, items
    cdef public object max_buffer, pbytes, side, starts, syn
    cdef public object conflicting, pending, pieces, rsts_ignored, syns_ignored
    cdef public long long waiting
    cdef public long long fastseq, nxt  # C integers: the tracker's fast path moves them
