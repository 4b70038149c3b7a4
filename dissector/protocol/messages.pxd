# C types for messages.py when Cython compiles it: the fixed fields of a request header are
# read through a pointer, as C integers; the session calls the header reader and the scan
# in C.
cimport cython

from dissector.protocol.codegen cimport Context
from dissector.tuples cimport new as _new

cdef dict _DECODE_PROGRAMS, _SCAN_PROGRAMS

cdef class ByVersion:
    cdef object compute
    cdef dict table
    @cython.locals(k="long long")
    cpdef get(self, int api_key, int version)

cdef ByVersion _REQUEST_HV, _RESPONSE_HV

@cython.locals(memo=ByVersion)
cpdef scan_body(api_key, kind, version, buf, Py_ssize_t pos, Context ctx)
cpdef tuple decode_response_header(buf, api_key, version)

@cython.locals(p="const unsigned char *", n="long long")
cpdef long long correlation_id(bytes buf, Py_ssize_t pos=*) except? -1

@cython.locals(p="const unsigned char *", size=Py_ssize_t, api_key=int, version=int, hv=int, corr="long long", n=int, end=Py_ssize_t)
cpdef decode_request_header(buf)
