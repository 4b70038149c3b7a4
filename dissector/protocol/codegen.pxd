# C types for codegen.py when Cython compiles it: a Context is a C struct, so the scan loop
# and the session read and write its notes without attribute look-ups.
cdef class Context:
    cdef public list topics, topic_ids, record_sets
    cdef public int top_error, first_error
    cdef public object records, topic, partition, allowance
    cdef public dict assigned
    cdef public dict fields
