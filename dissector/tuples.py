"""NamedTuples built from a tuple of their fields: the units the stages hand on (a Packet, a
Segment, stream data, a Frame, a request header), several a packet.

`tuple.__new__(cls, fields)` skips a NamedTuple's Python-level `__new__`, but still parses its
arguments and copies `fields` through a generic constructor: a third of the cost of a small
object made once a packet. `tuples.pyx` is this module compiled from C-level code that only
allocates the tuple and fills it; this source is what runs without a C compiler.
"""


def new(cls, fields):
    """cls(*fields) for cls a tuple class (a NamedTuple) and fields a tuple of all its fields."""
    return tuple.__new__(cls, fields)
