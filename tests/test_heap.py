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
