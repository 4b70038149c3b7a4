# Dissector is a C struct when Cython compiles flow.py: its attributes are
# read and written without look-ups, once or more per packet.
from dissector.net.decode cimport NetDecoder
from dissector.tcp.tracker cimport TcpTracker


cdef class Dissector:
    cdef public NetDecoder net
    cdef public TcpTracker tcp
    cdef public dict conversations
    cdef public object cut_packets, directory, options, packets, ports
    cdef public object records, streams
