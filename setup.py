"""The hot path, compiled.

Every module a packet or an exchange passes through is plain Python, and Cython compiles
the same files, unchanged, into extension modules that Python prefers at import. A `.pxd`
beside a module gives Cython C types the `.py` does not spell: state machines as C structs,
byte buffers read through pointers, C integers. The cost of this product is per exchange:
interpreter overhead in the calls and attribute look-ups of many small steps, which
compilation cuts (3.3 to 3.6 times as fast on real traffic, see the README).

Five modules have C-level source of their own, for what Python code cannot spell:
`dissector/tuples.pyx`, the compiled twin of `tuples.py`, builds the NamedTuples every stage
hands on (several a packet) by allocating and filling them; `dissector/tables/body_text.pyx`
writes a body's JSON text from its bytes into a C buffer, where without it the body is
decoded into dicts and those serialized; `dissector/tables/record_columns.pyx` reads record
batches from their bytes into the records table's Arrow columns, where without it a dict is
made of every record and Arrow converts those; `dissector/tables/text_buffers.pyx` fills the
buffers of every table's text columns, where without it each value is encoded and joined;
`dissector/capture/walk.pyx`, the compiled twin of `walk.py`, steps over pcap record headers
without the GIL, so that the surveys of a split capture's ranges run on every core.

Nothing depends on it: with no C compiler, or with KAFKA_DISSECT_PURE=1 at install, a
module that fails to build is skipped with a warning and its Python source runs instead.
"""

import os
import sys

from setuptools import setup

HOT_PATH = [
    "dissector/errors.py",
    "dissector/flow.py",
    "dissector/options.py",
    "dissector/source.py",
    "dissector/tuples.pyx",
    "dissector/capture/packet.py",
    "dissector/capture/pcap.py",
    "dissector/capture/pcapng.py",
    "dissector/capture/walk.pyx",
    "dissector/net/*.py",
    "dissector/tcp/*.py",
    "dissector/tls/*.py",
    "dissector/framing/framer.py",
    "dissector/protocol/apikeys.py",
    "dissector/protocol/embedded.py",
    "dissector/protocol/legacy/*.py",
    "dissector/protocol/primitives.py",
    "dissector/protocol/codegen.py",
    "dissector/protocol/messages.py",
    "dissector/protocol/decoder.py",
    "dissector/protocol/errors.py",
    "dissector/protocol/sasl.py",
    "dissector/protocol/scanner.py",
    "dissector/protocol/schema.py",
    "dissector/protocol/records/*.py",
    "dissector/session/*.py",
    "dissector/tables/arrow.py",
    "dissector/tables/bodies.py",
    "dissector/tables/body_text.pyx",
    "dissector/tables/pairs.py",
    "dissector/tables/partitions.py",
    "dissector/tables/record_columns.pyx",
    "dissector/tables/records.py",
    "dissector/tables/streams.py",
    "dissector/tables/summary.py",
    "dissector/tables/text_buffers.pyx",
]


def extensions():
    if os.environ.get("KAFKA_DISSECT_PURE"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        # pip builds with Cython (pyproject's build requirements); a direct `setup.py` call
        # sees only this environment's packages.
        print("setup.py: Cython is not installed: nothing is compiled", file=sys.stderr)
        return []
    modules = cythonize(
        HOT_PATH,
        exclude=["dissector/*/__init__.py", "dissector/*/*/__init__.py"],
        build_dir="build/cython",
        compiler_directives={"language_level": 3},
        quiet=True,
    )
    for module in modules:
        module.optional = True  # a failed build leaves the Python source in charge
    return modules


setup(ext_modules=extensions(), options={"build_ext": {"parallel": os.cpu_count() or 1}})
