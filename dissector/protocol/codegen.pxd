# C types for codegen.py when Cython compiles it: a Context is a C struct, so the scan loop
# and the session read and write its notes without attribute look-ups.
cimport cython

cdef class Context:
    cdef public list topics, topic_ids, record_sets
    cdef public int top_error, first_error
    cdef public object records, topic
    cdef public dict fields

@cython.locals(p="const unsigned char *", n=Py_ssize_t)
cpdef (Py_ssize_t, Py_ssize_t) read_length(bytes buf, Py_ssize_t pos, Py_ssize_t end, int width) except *
