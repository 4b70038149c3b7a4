# NetDecoder is a C struct when Cython compiles decode.py: its attributes are
# read and written without look-ups, once or more per packet.
cimport cython
from dissector.tuples cimport new as _new


cdef class NetDecoder:
    cdef public dict _addrs, _handlers, _pairs
    cdef public object fragments, on_fragment, unsupported
    cdef public object unsupported_linktypes, unsupported_packets
    cdef public bint in_place

    @cython.locals(p="const unsigned char *", n=Py_ssize_t, total=int, off=Py_ssize_t, end=Py_ssize_t, missing=Py_ssize_t, start=Py_ssize_t, seq="long long", ack="long long")
    cpdef decode(self, pkt)
