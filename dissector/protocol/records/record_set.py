"""A record set: the bytes of a ``records`` field, a sequence of batches or messages.

Each entry starts with an int64 offset and an int32 length, and its magic byte sits at byte
16 in every format, so entries are told apart and skipped by length whatever they hold.
"""

import struct

from . import common
from .batch import blank as blank_batch
from .batch import decode_batch
from .common import DEFAULT_LIMITS, Allowance, Spent
from .message_set import LOG_OVERHEAD, decode_message

_OFFSET_LENGTH = struct.Struct(">qi")
_MAGIC_AT = 16


def decode_record_set(raw, limits=DEFAULT_LIMITS, allowance=None):
    """Decode the batches of ``raw`` into plain dicts (see the package docstring); a null
    record set (nullable in Fetch responses and Produce requests) stays None. Decompression
    draws on ``allowance`` (common.Allowance; default: one for this record set alone)."""
    if raw is None:
        return None
    if allowance is None:
        allowance = Allowance(limits)
    raw = bytes(raw)
    view = memoryview(raw)
    n = len(raw)
    batches = []
    result = {
        "size": n,
        "batches": batches,
        "truncated": False,
        "truncated_bytes": 0,
        "error": None,
    }
    pos = 0
    while pos < n:
        if n - pos < LOG_OVERHEAD:
            _truncate(result, n - pos)
            break
        offset, length = _OFFSET_LENGTH.unpack_from(raw, pos)
        if length < 0:
            # Nothing tells where the next entry would start.
            result["error"] = f"negative length {length} at byte {pos}; {n - pos} bytes left"
            break
        end = pos + LOG_OVERHEAD + length
        if end > n:
            # A fetch response may end in part of a batch: normal, and the part is left out.
            _truncate(result, n - pos)
            break
        magic = raw[pos + _MAGIC_AT] if length > _MAGIC_AT - LOG_OVERHEAD else None
        if magic == 2:
            batches.append(decode_batch(raw, view, pos, end, limits, allowance))
        elif magic in (0, 1):
            batches.append(decode_message(raw, pos, end, limits, allowance))
        else:
            batch = blank_batch(magic)
            batch.update(base_offset=offset, batch_length=length, status=common.CORRUPT_RECORDS)
            batch["error"] = (
                f"batch of {length} bytes has no magic byte"
                if magic is None
                else f"unknown magic {magic}"
            )
            batches.append(batch)
        pos = end
    return result


def _truncate(result, left):
    result["truncated"] = True
    result["truncated_bytes"] = left


class RecordSets:
    """The record sets of body after body (Options.record_decoder): called with a body's
    decoding Context, its record sets share one Allowance, so that what a body may
    decompress to is bounded however many record sets it holds; and every body's Allowance
    draws on the decoder's Spent, so that the ratio holds over the run as well. Without a
    Context, a record set is bounded on its own."""

    __slots__ = ("limits", "spent")

    def __init__(self, limits=DEFAULT_LIMITS):
        self.limits = limits
        self.spent = Spent()

    def allowance(self):
        """A new body's Allowance, in this run."""
        return Allowance(self.limits, self.spent)

    def __call__(self, raw, ctx=None):
        if ctx is None:
            return decode_record_set(raw, self.limits)
        if ctx.allowance is None:
            ctx.allowance = self.allowance()
        return decode_record_set(raw, self.limits, ctx.allowance)
