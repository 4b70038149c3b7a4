# Dissector is a C struct when Cython compiles flow.py: its attributes are
# read and written without look-ups, once or more per packet.
cdef class Dissector:
    cdef public object conversations, cut_packets, directory, net, options, packets, ports
    cdef public object records, streams, tcp
