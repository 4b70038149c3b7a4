# TcpTracker is a C struct when Cython compiles tracker.py: its attributes are
# read and written without look-ups, once or more per packet.
cimport cython

from dissector.tcp.connection cimport Connection
from dissector.tcp.halfstream cimport HalfStream
from dissector.tuples cimport new as _new


cdef class TcpTracker:
    cdef public dict _halves
    cdef public object _closed, _ended, _live, broker_ports, connections
    cdef public object evicted, late_bytes, late_segments, max_buffer, max_closed
    cdef public object max_connections, on_open

    @cython.locals(half=HalfStream, conn=Connection, seq="long long", n=Py_ssize_t, mask="long long", start=Py_ssize_t)
    cpdef list feed(self, seg)
