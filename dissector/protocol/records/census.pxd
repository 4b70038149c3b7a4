# C types for census.py when Cython compiles it: a record set's headers are read through a
# pointer into its bytes, with C integers.
cimport cython

cdef Py_ssize_t _LOG_OVERHEAD, _BATCH_HEADER
cdef tuple _CODEC_NAMES

@cython.locals(p="const unsigned char *", pos=Py_ssize_t, stop=Py_ssize_t, length=Py_ssize_t, magic=int, attributes=int, count=Py_ssize_t, codec=int, size=Py_ssize_t, batches=Py_ssize_t, records=Py_ssize_t, control=Py_ssize_t, known=bint, codecs=dict)
cpdef tuple census(bytes buf, Py_ssize_t start, Py_ssize_t end)

@cython.locals(p="const unsigned char *", pos=Py_ssize_t, stop=Py_ssize_t, length=Py_ssize_t, magic=int, attributes=int, count=Py_ssize_t, codec=int, size=Py_ssize_t, batches=Py_ssize_t, records=Py_ssize_t, control=Py_ssize_t, known=bint, codecs=dict, sizes=list)
cpdef object measure(bytes buf, Py_ssize_t start, Py_ssize_t end, object limits, object allowance)
