"""glibc's heap under a dissection: frames of up to megabytes made, read and freed by the thousand.

glibc hands the top of its heap back to the kernel whenever more than its trim threshold is
free there, and takes it back at the next large frame: the kernel then faults in and zeroes
those pages again. On 320 MB of real traffic that was 12,000 page faults, a tenth of the
time a streamed dissection takes. Elsewhere than glibc these do nothing. Arrow's buffers
(batches, their columns, parquet's pages) come from the same heap where the process is the
dissection's: the command line, a Spark worker.
"""

import ctypes
import gc
import os
import sys
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


def arrow_from_heap():
    """Arrow's buffers from the C heap (which keep_frames keeps mapped) rather than from
    mimalloc, pyarrow's default, which hands freed pages back and faults them in afresh at
    the next batch, and holds more: unless the environment names a pool
    (ARROW_DEFAULT_MEMORY_POOL, which pyarrow reads at its first buffer). Does not load
    pyarrow."""
    if os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system") != "system":
        return
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:  # loaded: it may have made its first buffer
        pyarrow.set_memory_pool(pyarrow.system_memory_pool())


_worker = False


@contextmanager
def in_a_worker():
    """While a dissection runs in a process that lives on (a Spark worker): young
    collections rarer, as its loaded libraries make each collection costly (a tenth of a
    range's task), the thresholds it had back after; and from its first dissection on,
    frames and Arrow's buffers kept on the heap as the command line keeps them (a range's
    task 5% faster, its peak 30 MB higher)."""
    global _worker
    if not _worker:
        keep_frames()
        arrow_from_heap()
        _worker = True
    before = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
