"""glibc's heap under a dissection: frames of up to megabytes made, read and freed by the thousand.

glibc hands the top of its heap back to the kernel whenever more than its trim threshold is
free there, and takes it back at the next large frame: the kernel then faults in and zeroes
those pages again. On 320 MB of real traffic that was 12,000 page faults, a tenth of the
time a streamed dissection takes. Elsewhere than glibc these do nothing.
"""

import ctypes
import gc
import os
from contextlib import contextmanager

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3

TOP_PAD = 1 << 20  # glibc's default is 128 KB
_padded = False


def _mallopt(param, value):
    try:
        return bool(ctypes.CDLL(None).mallopt(param, value))
    except (OSError, AttributeError):  # not glibc: its allocator's own defaults
        return False


def keep_top():
    """Keep TOP_PAD bytes at the top of the heap when it shrinks, once per process: at most
    that much freed memory more stays mapped. A pad the environment sets
    (MALLOC_TOP_PAD_) is left as it is."""
    global _padded
    if not _padded and "MALLOC_TOP_PAD_" not in os.environ:
        _mallopt(_M_TOP_PAD, TOP_PAD)
    _padded = True


def keep_frames():
    """For a process that reads captures to their end and exits (the command line): frames
    up to 64 MB come from the heap, glibc would map and unmap each one otherwise, and the
    heap is trimmed only past 128 MB free."""
    _mallopt(_M_MMAP_THRESHOLD, 64 << 20)
    _mallopt(_M_TRIM_THRESHOLD, 128 << 20)


# Young collections after this many new objects (Python's default: 700): a dissection's
# garbage is short-lived exchanges, which make no reference cycles.
THRESHOLDS = (100_000, 50, 100)


def fewer_collections():
    """For a process that dissects and exits (the command line): what is loaded so far is put
    out of the collector's sight, and young collections are rarer."""
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


@contextmanager
def rarer_collections():
    """Young collections rarer while a dissection runs in a process that lives on (a Spark
    worker), whose loaded libraries make each collection costly: a tenth of a range's task.
    The thresholds it had come back after."""
    before = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
