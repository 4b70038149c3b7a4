# NetDecoder is a C struct when Cython compiles decode.py: its attributes are
# read and written without look-ups, once or more per packet.
cdef class NetDecoder:
    cdef public dict _addrs, _handlers, _pairs
    cdef public object fragments, on_fragment, unsupported
    cdef public object unsupported_linktypes, unsupported_packets

    cpdef decode(self, pkt)
