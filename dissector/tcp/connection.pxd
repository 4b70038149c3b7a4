# Connection is a C struct when Cython compiles connection.py: its attributes are
# read and written without look-ups, once or more per packet.
cdef class Connection:
    cdef public object _halves, _ignored, client_side, end_frame, end_reason, end_ts
    cdef public object ended_by, endpoints, first_frame, first_ts, how, id, last_frame
    cdef public object last_ts, syns
