# The declaration callers cimport: new() is a C call from compiled modules (see tuples.pyx).
cpdef object new(cls, fields)
