"""Stepping over pcap records by their headers alone, to count them and find where the next
starts (capture/ranges.py's surveys). `walk.pyx` is its compiled twin, which lets go of the
GIL while it steps, so that the surveys of several ranges run on as many cores."""

RECORD_HEADER = 16  # pcap: seconds, sub-second, captured length, original length
CAPTURED_AT = 8  # where the captured length sits in a record header


def step_pcap(buf, i, stop, last, big):
    """Step over whole pcap records in `buf` from index `i` while a record starts before
    index `stop`, its header lies in `buf`, and it ends at or before index `last` (the end of
    the file). Returns (the index of the first record not stepped over, records stepped)."""
    order = "big" if big else "little"
    have = len(buf)
    n = 0
    while i < stop and i + RECORD_HEADER <= have:
        at = i + CAPTURED_AT
        nxt = i + RECORD_HEADER + int.from_bytes(buf[at : at + 4], order)
        if nxt > last:
            break
        i = nxt
        n += 1
    return i, n
