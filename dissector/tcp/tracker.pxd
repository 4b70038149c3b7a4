# TcpTracker is a C struct when Cython compiles tracker.py: its attributes are
# read and written without look-ups, once or more per packet.
cdef class TcpTracker:
    cdef public object _closed, _ended, _halves, _live, broker_ports, connections
    cdef public object late_bytes, late_segments, max_buffer, max_closed, on_open
