"""The allocator settings a dissection asks of glibc (dissector/heap.py)."""

import platform
import subprocess
import sys

import pytest

from dissector import heap


def test_keep_top_pads_the_heap_once_unless_the_environment_says(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "_mallopt", lambda param, value: calls.append((param, value)))
    monkeypatch.setattr(heap, "_padded", False)
    monkeypatch.delenv("MALLOC_TOP_PAD_", raising=False)
    heap.keep_top()
    heap.keep_top()
    assert calls == [(heap._M_TOP_PAD, 1 << 20)]
    monkeypatch.setattr(heap, "_padded", False)
    monkeypatch.setenv("MALLOC_TOP_PAD_", "65536")
    heap.keep_top()
    assert calls == [(heap._M_TOP_PAD, 1 << 20)]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_mallopt_reaches_glibc():
    """Run in a child: the setting is process-wide."""
    code = "from dissector import heap; print(heap._mallopt(heap._M_TOP_PAD, 1 << 20))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def _child(code, **env):
    import os

    clean = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=clean | env
    )
    return out.stdout.split()


def test_a_worker_keeps_arrows_buffers_on_the_heap_once_unless_the_environment_says():
    """A Spark worker's first dissection moves Arrow's default pool to the C heap (pyarrow
    loaded before, as in a worker) and keeps frames there; the collector's thresholds come
    back after each; a pool the environment names is left alone."""
    code = """
import gc, pyarrow as pa
from dissector import heap
frames = []
heap.keep_frames = lambda: frames.append(1)
pa.array([1, 2])  # a first buffer, from pyarrow's default pool
before = gc.get_threshold()
for _ in range(2):
    with heap.in_a_worker():
        inside = gc.get_threshold()
print(pa.default_memory_pool().backend_name, len(frames), inside == heap.THRESHOLDS,
      gc.get_threshold() == before)
"""
    assert _child(code) == ["system", "1", "True", "True"]
    assert _child(code, ARROW_DEFAULT_MEMORY_POOL="jemalloc")[0] == "jemalloc"


def test_the_command_line_chooses_the_pool_without_loading_pyarrow():
    code = """
import sys
from dissector import heap
heap.arrow_from_heap()
loaded = "pyarrow" in sys.modules
import pyarrow as pa
pa.array([1, 2])
print(loaded, pa.default_memory_pool().backend_name)
"""
    assert _child(code) == ["False", "system"]
