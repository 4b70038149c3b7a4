# C types for scanner.py when Cython compiles it (see setup.py): the scan loop reads the
# body's bytes through a pointer, keeps positions and counts as C integers, and compares
# opcodes as C constants.
cimport cython

from dissector.protocol.codegen cimport Context
from dissector.protocol.primitives cimport read_length

cdef int SKIP, TAGS, TOP_ERROR, FIRST_ERROR, FIELD, TOPIC_ID, NULLABLE, PARTITION, ASSIGNED
cdef int SIZED, STEP, TOPIC, RECORDS, ARRAY, ARRAY_FIXED, TOPICS

@cython.locals(p="const unsigned char *", end=Py_ssize_t, op=int, width=int, kind=int, n=Py_ssize_t, k=Py_ssize_t, step=Py_ssize_t, size=Py_ssize_t, half=Py_ssize_t, _i=Py_ssize_t, start=Py_ssize_t, ins=tuple)
cpdef Py_ssize_t run(tuple program, bytes buf, Py_ssize_t pos, Context ctx) except -1

cdef Py_ssize_t _rare(tuple ins, bytes buf, Py_ssize_t pos, Context ctx) except -1
cdef Py_ssize_t _tags(bytes buf, Py_ssize_t pos, Context ctx, dict known) except -1
