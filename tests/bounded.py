"""Hostile input is read in a child process bounded in address space and in time: a test of
it fails, rather than taking the machine down, when a bound does not hold."""

import resource
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_bounded(args, timeout, memory, **kwargs):
    """`args` run from the repository in a child limited to `memory` bytes of address space;
    TimeoutExpired (a failure) past `timeout` seconds. Output is captured as text."""

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, preexec_fn=limit, cwd=ROOT, **kwargs
    )
