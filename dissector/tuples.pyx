# cython: language_level=3
"""tuples.py compiled from C-level code: the tuple is allocated from its class and filled,
as CPython's own constructor does for a subclass of tuple, without parsing arguments."""

cdef extern from *:
    """
    static PyObject *dissector_new_tuple(PyObject *cls, PyObject *fields) {
        if (!PyType_Check(cls)
            || !PyType_FastSubclass((PyTypeObject *)cls, Py_TPFLAGS_TUPLE_SUBCLASS)
            || !PyTuple_Check(fields)) {
            PyErr_SetString(PyExc_TypeError, "new() takes a tuple class and a tuple");
            return NULL;
        }
        PyTypeObject *tp = (PyTypeObject *)cls;
        Py_ssize_t n = PyTuple_GET_SIZE(fields);
        PyObject *t = tp->tp_alloc(tp, n);
        if (t == NULL) {
            return NULL;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = PyTuple_GET_ITEM(fields, i);
            Py_INCREF(v);
            PyTuple_SET_ITEM(t, i, v);
        }
        return t;
    }
    """
    object dissector_new_tuple(object cls, object fields)


cpdef object new(cls, fields):
    return dissector_new_tuple(cls, fields)
