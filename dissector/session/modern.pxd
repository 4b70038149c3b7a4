# C types for modern.py when Cython compiles it: the session's state is a C struct, read and
# written without attribute look-ups on every request and response.
cimport cython

from dissector.protocol.codegen cimport Context
from dissector.protocol.errors cimport error_name
from dissector.protocol.messages cimport (
    correlation_id, decode_request_header, decode_response_header, scan_body,
)
from dissector.tcp.connection cimport Connection
from dissector.session.rows cimport Malformed, Request, Side, build

cdef class ModernSession:
    cdef public Connection conn
    cdef public object directory, records, mechanism, client_id, last_response_end
    cdef public bint show_secrets, raw_sasl, lost, indexed
    cdef public dict api_names, pending
    cdef public object sent, early, silent, raw_pending
    cdef public Malformed bad

    @cython.locals(req=Request, ctx=Context)
    cpdef list request(self, frame)
    cpdef list _queue(self, Request req, Context ctx, reason)
    @cython.locals(ctx=Context)
    cpdef tuple _scan(self, key, kind, version, frame, pos)
    cpdef tuple _topics(self, Context ctx)
    @cython.locals(req=Request)
    cpdef list response(self, frame)
    @cython.locals(ctx=Context, resp=Side)
    cpdef _answer(self, Request req, frame)
