# Conversation is a C struct when Cython compiles conversation.py: its attributes are
# read and written without look-ups, once or more per packet.
cdef class Conversation:
    cdef public object conn, directory, forced, framers, gaps, held, options, records
    cdef public object session, sniffed, unused
