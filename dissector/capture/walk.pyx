# cython: language_level=3, boundscheck=False, wraparound=False
"""walk.py compiled from C-level code: the same steps, without the GIL."""

from libc.stdint cimport uint32_t

cdef enum:
    RECORD_HEADER = 16  # pcap: seconds, sub-second, captured length, original length
    CAPTURED_AT = 8  # where the captured length sits in a record header


def step_pcap(
    const unsigned char[:] buf, Py_ssize_t i, Py_ssize_t stop, Py_ssize_t last, bint big
):
    """Step over whole pcap records in `buf` from index `i` while a record starts before
    index `stop`, its header lies in `buf`, and it ends at or before index `last` (the end of
    the file). Returns (the index of the first record not stepped over, records stepped)."""
    cdef Py_ssize_t have = buf.shape[0]
    cdef Py_ssize_t n = 0
    cdef Py_ssize_t nxt
    cdef const unsigned char *p
    cdef uint32_t captured
    with nogil:
        while i < stop and i + RECORD_HEADER <= have:
            p = &buf[i + CAPTURED_AT]
            if big:
                captured = (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (p[2] << 8) | p[3]
            else:
                captured = (<uint32_t>p[3] << 24) | (<uint32_t>p[2] << 16) | (p[1] << 8) | p[0]
            nxt = i + RECORD_HEADER + captured
            if nxt > last:
                break
            i = nxt
            n += 1
    return i, n
