# Integers of Kafka's wire format read in C, for the two writers that walk bodies and record
# batches from their bytes (record_columns.pyx, body_text.pyx): big-endian fixed widths, and
# the zig-zag varints of records as protocol/records/batch.py reads them.
from libc.stdint cimport int64_t, uint64_t


cdef inline uint64_t be(const unsigned char *p, Py_ssize_t at, int n) noexcept nogil:
    """An unsigned big-endian integer of n bytes at p[at]."""
    cdef uint64_t v = 0
    cdef int i
    for i in range(n):
        v = v << 8 | p[at + i]
    return v


cdef inline Py_ssize_t zigzag(const unsigned char *b, Py_ssize_t p, Py_ssize_t end,
                              int64_t *out, int most) noexcept nogil:
    """A zig-zag varint of at most `most` bytes at b[p], ending before `end`; where it ends,
    or -1 (cut short, or longer than `most` bytes: batch.py's Corrupt)."""
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef unsigned char c
    while True:
        if p >= end:
            return -1
        c = b[p]
        p += 1
        if shift < 64:
            v |= (<uint64_t>(c & 0x7F)) << shift
        if not c & 0x80:
            break
        shift += 7
        if shift >= 7 * most:
            return -1
    out[0] = <int64_t>((v >> 1) ^ (<uint64_t>0 - (v & 1)))
    return p
