# Conversation is a C struct when Cython compiles conversation.py: its attributes are
# read and written without look-ups, once or more per packet.
cimport cython

from dissector.framing.framer cimport Framer
from dissector.tcp.connection cimport Connection


cdef class Conversation:
    cdef public Connection conn
    cdef public tuple framers
    cdef public object abandoned, directory, forced, gaps, held, options, records
    cdef public object session, sniffed, unused, unused_undecided, tls, opened
    cdef public object asked, first_asked, answering, replies

    @cython.locals(framer=Framer)
    cpdef list data(self, side, data, frame, ts, Py_ssize_t start=*)
    @cython.locals(framer=Framer)
    cpdef list _plain(self, side, data, frame, ts, Py_ssize_t start)
    cpdef list _framed(self, side, items, source=*)
    cpdef list frame(self, side, frame)
