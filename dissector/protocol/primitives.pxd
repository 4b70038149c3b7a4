# C types for primitives.py when Cython compiles it: the reader of lengths and counts, which
# the scan and decode loops call for every string, bytes, records and array, reads through
# a pointer with C integers.
cimport cython

@cython.locals(p="const unsigned char *", n=Py_ssize_t)
cpdef (Py_ssize_t, Py_ssize_t) read_length(bytes buf, Py_ssize_t pos, Py_ssize_t end, int width) except *
