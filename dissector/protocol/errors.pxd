# C types for errors.py when Cython compiles it: the session names the error of every
# response with a C call.
cpdef str error_name(code)
