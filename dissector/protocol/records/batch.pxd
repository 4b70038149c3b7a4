# C types for batch.py when Cython compiles it: a batch header's flags are read as C
# integers, and the module's tables are reached without look-ups.
cimport cython

cdef tuple _CODEC_NAMES
cdef object _unpack_header

cpdef dict decode_batch(bytes raw, object view, Py_ssize_t pos, Py_ssize_t end, object limits, object allowance=*)

@cython.locals(codec=int, attributes=int, batch=dict)
cpdef tuple open_batch(bytes raw, object view, Py_ssize_t pos, Py_ssize_t end, object limits, object allowance=*)
