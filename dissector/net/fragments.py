"""IP fragment reassembly: fragments in, whole datagram payloads out.

Fragments are grouped by (source, destination, identification, protocol), the key RFC 791
gives; for IPv6 the protocol is the next header its fragment headers name. Only fragments of
TCP are held (for IPv6, also those whose next header is one that may precede TCP). Each
datagram being rebuilt keeps its pieces as sorted, non-overlapping byte ranges; a fragment that
overlaps bytes already held only adds the bytes not yet held (the first copy of a byte wins). A
datagram is complete when the fragment without "more fragments" has fixed its length and every
byte up to it is held; it is then handed out in the frame of the fragment that completed it.

Everything is bounded, so hostile captures cost little: a datagram may not exceed 65,535 bytes
nor hold more than MAX_PIECES separate pieces, at most MAX_PENDING datagrams (MAX_PENDING_BYTES
in all) wait at once, the oldest going first when a new one needs room, and a datagram whose
first fragment is MAX_AGE_FRAMES packets or MAX_AGE_NS of capture time old is dropped when the
next fragment of any datagram arrives.
"""

from bisect import bisect_right

MAX_DATAGRAM = 65535  # bytes of fragmentable payload a reassembled datagram may reach
MAX_PIECES = 2048  # separate byte ranges one datagram may be held in
MAX_PENDING = 1024  # datagrams waiting for fragments at once
MAX_PENDING_BYTES = 16 * 1024 * 1024  # bytes those datagrams hold in all
MAX_AGE_FRAMES = 65536  # packets after its first fragment that a datagram is waited for
MAX_AGE_NS = 30 * 1_000_000_000  # capture time likewise, Linux's default ipfrag_time


class _Datagram:
    __slots__ = ("starts", "ends", "datas", "held", "length", "frame", "ts", "size")

    def __init__(self, frame: int, ts: int) -> None:
        self.starts: list[int] = []  # sorted; pieces never overlap
        self.ends: list[int] = []
        self.datas: list[bytes] = []  # may be shorter than its range: cut by the snap length
        self.held = 0  # bytes of the datagram covered by pieces
        self.length = -1  # known once the last fragment (MF clear) is seen
        self.frame = frame  # of the first fragment seen, for expiry
        self.ts = ts
        self.size = 0  # bytes stored


class Reassembler:
    """Collects fragments; `add` returns the whole payload once the last missing one arrives.

    Counters: `reassembled` datagrams handed out, `dropped` datagrams given up (expired, evicted,
    inconsistent or oversized) with their fragments.
    """

    def __init__(self) -> None:
        self._pending: dict[tuple, _Datagram] = {}  # in order of first fragment
        self._bytes = 0
        self.reassembled = 0
        self.dropped = 0

    @property
    def pending(self) -> int:
        """Datagrams waiting for fragments."""
        return len(self._pending)

    def add(
        self,
        key: tuple,
        offset: int,
        more: bool,
        data: bytes,
        length: int,
        frame: int,
        ts: int,
    ) -> tuple[bytes, int] | None:
        """Add the fragment of datagram `key` carrying bytes [offset, offset + length).

        `data` is what was captured of them (shorter than `length` when the snap length cut the
        packet). Returns (payload, missing) when this fragment completes the datagram: the bytes
        captured from its start up to the first byte not captured, and how many bytes of the
        datagram follow those. None while incomplete, and for a fragment that is dropped.
        """
        pending = self._pending
        self._expire(frame, ts)
        end = offset + length
        dgram = pending.get(key)
        if end > MAX_DATAGRAM or (dgram is not None and not self._fits(dgram, offset, end, more)):
            if dgram is not None:
                self._drop(key)
            return None
        if dgram is None:
            while len(pending) >= MAX_PENDING:
                self._drop(next(iter(pending)))
            dgram = pending[key] = _Datagram(frame, ts)
        while self._bytes + len(data) > MAX_PENDING_BYTES:
            oldest = next(iter(pending))
            if oldest == key:
                break
            self._drop(oldest)
        if not more:
            dgram.length = end
        before = dgram.size
        if not _insert(dgram, offset, end, data):
            self._drop(key)
            return None
        self._bytes += dgram.size - before
        if dgram.held != dgram.length:
            return None
        del pending[key]
        self._bytes -= dgram.size
        self.reassembled += 1
        return _assemble(dgram)

    @staticmethod
    def _fits(dgram: _Datagram, offset: int, end: int, more: bool) -> bool:
        """Whether a fragment agrees with the length the datagram already has, if any."""
        if dgram.length >= 0:
            return end <= dgram.length and (more or end == dgram.length)
        # No last fragment yet: a last one must not end before bytes already held.
        return more or not dgram.ends or dgram.ends[-1] <= end

    def _expire(self, frame: int, ts: int) -> None:
        pending = self._pending
        while pending:
            key = next(iter(pending))
            dgram = pending[key]
            if frame - dgram.frame < MAX_AGE_FRAMES and ts - dgram.ts < MAX_AGE_NS:
                return
            self._drop(key)

    def _drop(self, key: tuple) -> None:
        dgram = self._pending.pop(key)
        self._bytes -= dgram.size
        self.dropped += 1


def _insert(dgram: _Datagram, start: int, end: int, data: bytes) -> bool:
    """Add the bytes of [start, end) not held yet; False if the datagram has too many pieces."""
    starts, ends = dgram.starts, dgram.ends
    i = bisect_right(starts, start)
    pos = start
    if i and ends[i - 1] > pos:  # the piece before covers our beginning
        pos = ends[i - 1]
    while pos < end:
        if i < len(starts) and starts[i] < end:
            if starts[i] > pos:
                if not _put(dgram, i, pos, starts[i], data[pos - start : starts[i] - start]):
                    return False
                i += 1
            pos = max(pos, ends[i])
            i += 1
        else:
            return _put(dgram, i, pos, end, data[pos - start : end - start])
    return True


def _put(dgram: _Datagram, i: int, start: int, end: int, data: bytes) -> bool:
    if len(dgram.starts) >= MAX_PIECES:
        return False
    dgram.starts.insert(i, start)
    dgram.ends.insert(i, end)
    dgram.datas.insert(i, data)
    dgram.held += end - start
    dgram.size += len(data)
    return True


def _assemble(dgram: _Datagram) -> tuple[bytes, int]:
    """The captured prefix of a complete datagram, and how many bytes follow it uncaptured."""
    parts = []
    for s, e, d in zip(dgram.starts, dgram.ends, dgram.datas, strict=True):
        parts.append(d)
        if len(d) < e - s:
            break
    payload = b"".join(parts)
    return payload, dgram.length - len(payload)
