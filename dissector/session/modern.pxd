# C types for modern.py when Cython compiles it: the session's state is a C struct, read and
# written without attribute look-ups on every request and response.
from dissector.tcp.connection cimport Connection
from dissector.session.rows cimport Malformed, Request, Side

cdef class ModernSession:
    cdef public Connection conn
    cdef public object directory, records, mechanism, client_id, last_response_end
    cdef public bint show_secrets, raw_sasl, lost
    cdef public dict pending
    cdef public object sent, early, silent, raw_pending
    cdef public Malformed bad
