# C types for rows.py when Cython compiles it: a request's and a response's facts are C
# structs, which the session fills and build() reads without attribute look-ups.
cimport cython

from dissector.tcp.connection cimport Connection

cdef class Side:
    cdef public object frame, body, topics, error, error_name, reason, names, sets
    cdef public bint cut

    cdef _fill(self, frame, body, topics, error, error_name, reason, names, sets)

cdef class Request(Side):
    cdef public object api_key, api_name, api_version, correlation_id, client_id

cdef dict _UNSET, _ENDPOINTS
cdef Py_ssize_t _ENDPOINTS_MAX

cpdef str endpoint(tuple addr)
cpdef Py_ssize_t wire_size(frame)

@cython.locals(row=dict, reasons=list, notes=list)
cpdef build(Connection conn, protocol, Request req, Side resp=*, status=*, correlation_id=*, throttle=*, reason=*, queue_ns=*)

cdef class Malformed:
    cdef public list frames, bytes
