"""Python values into Arrow arrays, built from their buffers.

pyarrow's own conversion (`pa.array`) imports pandas the first time it runs: 150 ms, more
than a capture of 40,000 exchanges takes to turn into columns. These builders fill the
buffers Arrow's format defines (a validity bitmap, values or offsets, the bytes of text)
with the standard library and numpy, which pyarrow loads anyway, or in C where it is built
(text_buffers.pyx: text and validity, a tenth of the time). Types they do not know are left
to `pa.array`.
"""

import array
from itertools import accumulate

import numpy as np
import pyarrow as pa

# array.array codes of the fixed-width types (timestamps are int64 counts of their unit).
_CODES = {
    pa.int8(): "b",
    pa.int16(): "h",
    pa.int32(): "i",
    pa.int64(): "q",
    pa.float64(): "d",
}
TEXT = (pa.string(), pa.binary())  # Arrow's text types, with int32 offsets
_OFFSET_MAX = (1 << 31) - 1  # string and binary offsets are int32

try:  # C (text_buffers.pyx)
    from .text_buffers import present_bitmap, text_buffers
except ImportError:  # built without a C compiler: the same buffers, from Python
    present_bitmap = text_buffers = None


def column(values, kind):
    """The values (a list or tuple; None is null) as an Arrow array of type `kind`."""
    n = len(values)
    nulls = values.count(None)
    validity = _validity(values) if nulls else None
    code = "q" if pa.types.is_timestamp(kind) else _CODES.get(kind)
    if code is not None:
        zero = 0.0 if code == "d" else 0
        data = array.array(code, [zero if v is None else v for v in values] if nulls else values)
        return pa.Array.from_buffers(kind, n, [validity, pa.py_buffer(data)], nulls)
    if kind == pa.bool_():
        data = _bitmap(v is True for v in values)
        return pa.Array.from_buffers(kind, n, [validity, data], nulls)
    if kind in TEXT:
        offsets, data = _text(values)
        buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(data)]
        return pa.Array.from_buffers(kind, n, buffers, nulls)
    if pa.types.is_list(kind) and not nulls and kind.value_type in TEXT:
        starts = array.array("i", _offsets(map(len, values)))
        offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(starts)])
        items = column([item for v in values for item in v], kind.value_type)
        return pa.ListArray.from_arrays(offsets, items, type=kind)
    return pa.array(values, type=kind)


def _validity(values):
    """Arrow's validity bitmap: where the values are not None."""
    if present_bitmap is not None:
        return pa.py_buffer(present_bitmap(values))
    return _bitmap(v is not None for v in values)


def _text(values):
    """(offsets, data) of text values: str as UTF-8, bytes-like as they are, None empty."""
    built = None if text_buffers is None else text_buffers(values)
    if built is not None:
        return built
    raw = [b"" if v is None else v.encode() if v.__class__ is str else v for v in values]
    return array.array("i", _offsets(map(len, raw))), b"".join(raw)


def _offsets(lengths):
    """Where each value starts, and the end: 0, then the running total of the lengths."""
    offsets = list(accumulate(lengths, initial=0))
    if offsets[-1] > _OFFSET_MAX:
        raise ValueError(f"{offsets[-1]} bytes of text in one batch: more than int32 offsets hold")
    return offsets


def _bitmap(bits):
    """Arrow's bitmap of booleans: bit i of byte i // 8 is the i-th, least significant first."""
    return pa.py_buffer(np.packbits(np.fromiter(bits, dtype=bool), bitorder="little"))
