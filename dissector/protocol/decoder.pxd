# C types for decoder.py when Cython compiles it: the decode loop reads lengths and counts
# from the body's bytes through a pointer, compares opcodes as C constants, keeps positions
# and counts as C integers and fills dicts with C calls.
cimport cython

from dissector.protocol.codegen cimport Context
from dissector.protocol.primitives cimport read_length

cdef int RUN, TAGS, STRUCT, NULLABLE, UUID
cdef int SIZED, STRING, BYTES, RECORDS, ARRAY, ARRAY_FIXED, ARRAY_VALUES

@cython.locals(p="const unsigned char *", end=Py_ssize_t, op=int, width=int, kind=int, n=Py_ssize_t, _i=Py_ssize_t, i=Py_ssize_t, start=Py_ssize_t, text=bint, size=Py_ssize_t, ins=tuple, e=dict, items=list, names=tuple, values=tuple)
cpdef Py_ssize_t run(tuple program, bytes buf, Py_ssize_t pos, Context ctx, dict d) except -1

@cython.locals(_i=Py_ssize_t, items=list, value=dict)
cdef Py_ssize_t _values(tuple ins, Py_ssize_t n, bytes buf, Py_ssize_t pos, Context ctx, dict d) except -1

cdef int _note(Context ctx, str note, name, v) except -1
cdef Py_ssize_t _tags(bytes buf, Py_ssize_t pos, Context ctx, dict d, dict known) except -1
