"""What reading a split capture noticed, brought from its pieces' tasks to the driver and said
as `analyze` says it for the same file: the reader's warnings, and packets of link types the
core does not read (a warning, or an error when no packet has a link type it reads)."""

from collections import defaultdict

from ..capture.reader import CLAMPED
from ..source import linktype_warning


def piece_warnings(facts, files):
    """The `facts` of every range (ranges.RangeRun.facts: its first frame, packets, link
    types not read and the reader's warnings) -> warning lines, in the order of `files`.
    Raises CaptureError for a capture none of whose packets has a link type the core reads."""
    by_capture = defaultdict(list)
    for f in facts:
        by_capture[f["capture"]].append(f)
    out = []
    for capture in files:
        pieces = sorted(by_capture.get(capture, ()), key=lambda n: n["first_frame"])
        clamped = False
        for n in pieces:
            for message in n["warnings"]:
                if CLAMPED in message:
                    if clamped:
                        continue
                    clamped = True
                out.append(message)
        unsupported, first = {}, {}
        for n in pieces:
            for lt, (count, frame, offset) in n["unsupported"].items():
                if lt not in unsupported:
                    unsupported[lt] = [0, frame]
                    first[lt] = (frame, offset)
                unsupported[lt][0] += count
        if unsupported:
            packets = sum(n["packets"] for n in pieces)
            out.append(linktype_warning(capture, unsupported, packets, first))
    return out
