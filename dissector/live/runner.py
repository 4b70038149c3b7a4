"""A bounded live run: packets from a capture in, exchanges out, as they complete.

A reader thread takes packets from the capture as fast as they come and queues them; the
caller's thread feeds them to the core and, on a clock of its own, expires what has waited too
long, asks the capture for its drop counters and ends the run after its duration. The queue is
bounded: when the dissector falls behind, the reader stops reading, the pipe and then the
kernel's ring fill, and the kernel counts what it drops.
"""

import threading
import time
from collections import deque

from ..flow import Dissector
from ..session.timeouts import DEFAULT_ALLOWANCE_NS, EXPIRED

TICK = 0.25  # seconds between housekeeping rounds (expiry, counters, views, stop requests)
MAX_QUEUED = 200_000  # packets waiting for the dissector before the reader pauses
TAKE = 2048  # packets fed between checks of the clock
# Once stopped and drained, seconds the capture has to end after its last packet before the
# run ends without it (tcpdump, outside immediate mode, flushes BLOCK_TIMEOUT after a stop).
STOP_GRACE = 5.0


class LiveRun:
    """Iterate for exchanges as they complete; `stats()` at any time; `stop()` from anywhere.

    capture: a TcpdumpCapture or StreamCapture. duration: seconds, None for no end.
    idle: seconds without a packet after which a connection is ended ("idle").
    unanswered: base seconds a request waits for its response (plus its own timeout).
    on_streams: called with the ConnectionEnded events of the connections that ended (each
    with its accounting rows; else dropped, the core keeps their figures in its counters).
    ring: a PcapRing that keeps the raw packets.
    """

    def __init__(
        self,
        capture,
        options,
        duration=None,
        idle=600.0,
        unanswered=DEFAULT_ALLOWANCE_NS / 1e9,
        max_buffer=None,
        on_streams=None,
        ring=None,
    ):
        self.capture = capture
        self.dissector = Dissector(options, max_buffer=max_buffer)
        # A pcapng stream's secrets, taken in the reader's thread before the packets after them
        # are queued.
        capture.on_secrets = self.dissector.add_tls_secrets
        self.duration = duration
        self.idle_ns = int(idle * 1e9)
        self.allowance_ns = int(unanswered * 1e9)
        self.on_streams = on_streams
        self.ring = ring
        self.bytes = 0
        self.expired = 0  # requests reported unanswered by their deadline
        self.exchanges = 0
        self.started = None
        self.warnings = []
        self.error = None  # an exception of the reader thread, raised in the caller's
        self._queue = deque()
        self._wake = threading.Event()
        self._waiting = False
        self._done = threading.Event()  # the reader saw the end of the capture
        # Plain flags, so that stop() and abandon() may be called from a signal handler: the
        # run loop acts on them within a TICK.
        self._stop_asked = False
        self._abandon_asked = False
        self._stopped_at = None  # when the run loop stopped the capture
        self._reader_left = False  # the run ended without its reader (STOP_GRACE)
        self._thread = None
        self._first_ts = None
        self._last_ts = None  # capture time of the newest packet, and when it was fed
        self._last_mono = 0.0
        self._closed = False

    # -- control -----------------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self):
        if self._thread is None:
            self.started = time.monotonic()
            self._thread = threading.Thread(target=self._read, name="capture", daemon=True)
            self._thread.start()
        return self

    def stop(self):
        """End the run: the capture stops, what it still holds is dissected, then finish.

        Safe from any thread and from a signal handler: it only sets a flag (a handler that
        took a lock could wait forever for the one the code it interrupted holds)."""
        self._stop_asked = True

    def abandon(self):
        """stop(), leaving undissected what is still queued: the run ends within a TICK, its
        rows and summary complete up to there. Safe from a signal handler, as stop()."""
        self._abandon_asked = self._stop_asked = True

    @property
    def stopping(self):
        return self._stop_asked

    def close(self):
        if self._closed:
            return
        self._closed = True
        self.stop()
        self.capture.close()
        if self._thread is not None:
            self._thread.join(0 if self._reader_left else 5)
        if self.ring is not None:
            self.ring.close()

    # -- the reader thread -------------------------------------------------------------------

    def _read(self):
        queue = self._queue
        try:
            for packet in self.capture.packets():
                queue.append(packet)
                if self._waiting:
                    self._wake.set()
                while len(queue) > MAX_QUEUED and not self._stop_asked:
                    time.sleep(0.001)  # let the dissector catch up; the kernel ring holds on
        except BaseException as e:  # handed to the caller's thread, which reports it
            self.error = e
        finally:
            self._done.set()
            self._wake.set()

    # -- the caller's thread -----------------------------------------------------------------

    def __iter__(self):
        for batch in self.batches():
            yield from batch

    def batches(self):
        """Lists of exchanges, one at least every TICK seconds (possibly empty), so a caller
        can refresh a view on time; the last comes once the capture has ended or the run was
        stopped and drained."""
        self.start()
        next_tick = time.monotonic() + TICK
        end = None if self.duration is None else self.started + self.duration
        while True:
            out = self._feed()
            now = time.monotonic()
            if end is not None and now >= end:
                self.stop()
            self._heed_stop(now)
            ticked = now >= next_tick
            if ticked:
                next_tick = now + TICK
                out += self._housekeeping()
            if self._ended(now):
                yield self._finish(out)
                return
            if out or ticked:
                self.exchanges += len(out)
                yield out
            if not self._queue:
                self._wait(self._until(next_tick, end))

    def _feed(self):
        """Up to TAKE queued packets through the core: the exchanges they complete."""
        queue = self._queue
        feed = self.dissector.feed
        out = []
        n = 0
        if queue and self._first_ts is None:
            self._first_ts = queue[0].ts
        while queue and n < TAKE:
            packet = queue.popleft()
            self.bytes += len(packet.data)
            if self.ring is not None:
                self.ring.write(packet)
            out += feed(packet)
            n += 1
        if n:
            self._last_ts = packet.ts
            self._last_mono = time.monotonic()
        return out

    def _heed_stop(self, now):
        """Stop the capture from this thread, the one that asks it for counters: tcpdump
        asked for them (SIGUSR1) after its SIGINT reports a closed descriptor instead."""
        if self._stop_asked and self._stopped_at is None:
            self._stopped_at = now
            self.capture.stop()

    def _ended(self, now):
        """The capture has ended and its packets are dissected; or the run was abandoned; or
        stopped, drained, and the capture delivered nothing for STOP_GRACE (a reader that
        cannot be interrupted is not waited for)."""
        if self._abandon_asked:
            return True
        if self._queue:
            return False
        if self._done.is_set():
            return True
        stopped = self._stopped_at
        return stopped is not None and now - max(stopped, self._last_mono) >= STOP_GRACE

    def _finish(self, out):
        """The last batch: what the core still holds, flushed."""
        if self.error is not None:
            raise self.error
        if self._abandon_asked:
            if self._queue:
                left = len(self._queue)
                self.warnings.append(f"stopped at once: {left} queued packets left undissected")
        elif not self._done.is_set():
            self._reader_left = True
            self.warnings.append(
                f"the capture did not end within {STOP_GRACE:g} s of the stop: "
                "what it still held is not dissected"
            )
        out += self.dissector.finish()
        self._drain_ended()
        self.warnings += self.capture.warnings
        self.exchanges += len(out)
        return out

    def _until(self, next_tick, end):
        """Seconds the loop may sleep: to the next tick or the duration's end; none while a
        stop waits to be heeded; once stopped, the end is past and no longer counts (else
        the loop would spin)."""
        if self._stopped_at is None:
            if self._stop_asked:
                return 0.0
            if end is not None:
                next_tick = min(next_tick, end)
        return max(0.0, next_tick - time.monotonic())

    def _wait(self, timeout):
        self._waiting = True
        self._wake.clear()
        if not self._queue and not self._done.is_set():
            self._wake.wait(timeout)
        self._waiting = False

    def _housekeeping(self):
        if self._stopped_at is None:  # stopped, the capture reports its counters as it ends
            self.capture.refresh()
        out = []
        now = self.capture_now()
        if now is not None:
            out = self.dissector.expire(now, self.idle_ns, self.allowance_ns)
            self.expired += sum(1 for e in out if e.reason == EXPIRED)
        self._drain_ended()
        return out

    def capture_now(self):
        """Capture time now: the newest packet's timestamp plus the time since it came (the
        capture's clock, which for a piped remote capture is not this machine's)."""
        if self._last_ts is None:
            return None
        return self._last_ts + int((time.monotonic() - self._last_mono) * 1e9)

    def _drain_ended(self):
        """Connection-ended events leave the dissector: a long run keeps only its counters."""
        events = self.dissector.ended()
        if events and self.on_streams is not None:
            self.on_streams(events)

    # -- figures -----------------------------------------------------------------------------

    def stats(self):
        """What the run saw and what it lost, so far."""
        core = self.dissector.stats()
        counters = self.capture.counters
        return {
            "seconds": 0.0 if self.started is None else time.monotonic() - self.started,
            "packets": core["packets"],
            # From the first packet to the newest, in capture time: what rates are taken over.
            "capture_seconds": 0.0
            if self._first_ts is None
            else (self._last_ts - self._first_ts) / 1e9,
            # Capture time from the start of the capture to now: what a window of the last
            # seconds actually covers early in a run.
            "capture_elapsed": self._capture_elapsed(),
            "bytes": self.bytes,
            "captured": counters.get("captured"),
            # Packets, each counted once (the kernel counts loopback packets twice).
            "kernel_drops": counters.get("packets_dropped"),
            "interface_drops": counters.get("interface_drops"),
            "queued": len(self._queue),
            "lag": self._lag(),
            # As `analyze` counts them: connections that carried payload, ended or not.
            "connections": core["connections"],
            "kafka_connections": core["kafka_connections"],
            "open_connections": core["open_connections"],
            "exchanges": self.exchanges,
            "gaps": core["gaps"],
            "bytes_missing": core["bytes_missing"],
            # Times a direction had to re-find frame boundaries: joined mid-stream, or a gap.
            "resyncs": 2 * core["midstream"] + core["gaps"],
            "bytes_skipped": core["bytes_skipped"],
            # Of those, frames left unfinished when a peer ended the connection: not capture loss.
            "bytes_abandoned": core["bytes_abandoned"],
            "expired_requests": self.expired,
            # Connections ended to stay within --max-connections, the longest idle first.
            "evicted": core["evicted"],
            "tls": core["tls"],  # TLS status -> connections that opened TLS
        }

    def _lag(self):
        """Seconds the dissector is behind the capture: how long ago the oldest packet still
        queued was captured; 0 with nothing queued (a quiet network is not lag).

        Taken from capture timestamps, not from when the reader queued packets: while the
        reader pauses, packets wait in the pipe and the kernel's ring too, and only the capture
        time counts that wait. tcpdump stamps them with this machine's clock, so now is the
        clock; a stream's clock may be another machine's or a file's past, so there the newest
        packet read stands for now (a lower bound: what waits before the reader is not seen).
        """
        queue = self._queue
        try:
            oldest = queue[0].ts
            newest = queue[-1].ts
        except IndexError:  # nothing queued, or emptied meanwhile by the dissecting thread
            return 0.0
        now = newest if self._capture_start_ns() is None else time.time_ns()
        return max(0.0, (now - oldest) / 1e9)

    def _capture_start_ns(self):
        """When a live capture began, in the clock that stamps its packets; None for a
        stream, whose own start is not known."""
        return getattr(self.capture, "started_ns", None)

    def _capture_elapsed(self):
        now = self.capture_now()
        if now is None:
            return 0.0
        start = self._capture_start_ns()
        start = self._first_ts if start is None else min(start, self._first_ts)
        return (now - start) / 1e9

    def waiting(self, limit=5):
        """The oldest requests still waiting for their response: (request, connection)."""
        return self.dissector.waiting(limit)
