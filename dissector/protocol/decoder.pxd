# C types for decoder.py when Cython compiles it: the decode loop compares opcodes as C
# constants, keeps positions and counts as C integers and fills dicts with C calls.
cimport cython

from dissector.protocol.codegen cimport Context

cdef int RUN, STRING, COMPACT_STRING, BYTES, COMPACT_BYTES, RECORDS, COMPACT_RECORDS, UUID
cdef int STRUCT, NULLABLE, ARRAY, ARRAY_FIXED, ARRAY_VALUES, TAGS

@cython.locals(op=int, _i=Py_ssize_t, ins=tuple, e=dict, items=list)
cpdef Py_ssize_t run(tuple program, bytes buf, Py_ssize_t pos, Context ctx, dict d) except -1
