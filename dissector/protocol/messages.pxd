# C types for messages.py when Cython compiles it: the fixed fields of a request header are
# read through a pointer, as C integers.
cimport cython

@cython.locals(p="const unsigned char *", size=Py_ssize_t, api_key=int, version=int, hv=int, correlation_id="long long", n=int, end=Py_ssize_t)
cpdef decode_request_header(buf)
