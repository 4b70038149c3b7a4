# C types for scanner.py when Cython compiles it (see setup.py): the scan loop reads the
# body's bytes through a pointer, keeps positions and counts as C integers, and compares
# opcodes as C constants.
cimport cython

from dissector.protocol.codegen cimport Context

cdef int SKIP, SKIP_STRING, SKIP_BYTES, SKIP_COMPACT, TOPIC, TOPIC_COMPACT, TOPICS
cdef int TOPICS_COMPACT, RECORDS, RECORDS_COMPACT, TOP_ERROR, FIRST_ERROR, FIELD, TOPIC_ID
cdef int ARRAY, ARRAY_COMPACT, ARRAY_FIXED, ARRAY_FIXED_COMPACT, NULLABLE, TAGS

@cython.locals(p="const unsigned char *", end=Py_ssize_t, op=int, n=Py_ssize_t, _i=Py_ssize_t, start=Py_ssize_t, ins=tuple)
cpdef Py_ssize_t run(tuple program, bytes buf, Py_ssize_t pos, Context ctx) except -1
