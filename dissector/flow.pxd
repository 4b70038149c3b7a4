# Dissector is a C struct when Cython compiles flow.py: its attributes are
# read and written without look-ups, once or more per packet.
cimport cython

from dissector.net.decode cimport NetDecoder
from dissector.session.conversation cimport Conversation
from dissector.tcp.connection cimport Connection
from dissector.tcp.tracker cimport TcpTracker


cdef class Dissector:
    cdef public NetDecoder net
    cdef public TcpTracker tcp
    cdef public dict conversations
    cdef public object directory, options, ports
    cdef public long long packets, cut_packets  # counted in C: no Python integer a packet
    cdef public object records
    cdef list _ended
    cdef dict _sums, _not_kafka, _tls

    @cython.locals(conn=Connection, conv=Conversation)
    cpdef list _events(self, events)
