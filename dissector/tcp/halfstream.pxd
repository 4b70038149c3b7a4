# HalfStream is a C struct when Cython compiles halfstream.py: its attributes are
# read and written without look-ups, once or more per packet.
cdef class HalfStream:
    cdef public object ack, base, conn, dropped, dup, fastseq, fin, gap, isn, items
    cdef public object max_buffer, nxt, pbytes, peer, side, starts, syn
