"""Opening a capture file: sniff its format, read it in large chunks, hand out Packets."""

import gzip
import os
import stat
import sys
import zlib
from collections.abc import Iterator

from dissector.capture import pcap, pcapng
from dissector.capture.packet import TS_MAX, TS_MIN, Packet
from dissector.errors import CaptureError

# Bytes a read of a file asks for: a few dozen packets. Chunks this small come from the heap
# and reuse its memory; chunks of a megabyte were mapped fresh each time (glibc's threshold
# is 128 KB) and the kernel faulted and zeroed their pages, a third of the time spent reading.
CHUNK = 64 * 1024
# A pipe is drained up to this much a read (a read returns what the pipe holds): its writer
# must not wait on a full pipe. A tcpdump stopped while blocked in a write can cut the packet
# it was writing.
STREAM_CHUNK = 1024 * 1024
MAX_READ = 16 * 1024 * 1024  # largest single read, whatever a record claims
GZIP_MAGIC = b"\x1f\x8b"
# A gzip capture may expand to at most this many times the compressed bytes read, once past
# MIN_INFLATED: captures of real traffic compress 4 to 20 times, deflate at most 1032 times,
# so that a megabyte of gzip cannot hold a gigabyte of capture to dissect.
MAX_GZIP_RATIO = 100
MIN_INFLATED = 64 * 1024 * 1024

# Said once per file, at its first such packet (a file read in pieces says it once too).
CLAMPED = "timestamp out of range"


class Source:
    """Chunked reads from the (possibly decompressed) stream, shared by the format parsers.

    Parsers keep their own buffer and call `refill` only when a record does not fit in it. They
    also keep `offset` (stream offset of the record or block of the packet they last yielded;
    the pcap parser keeps it itself) and `first_of_linktype` (link type -> frame and offset of
    its first packet) up to date, and report the end of the stream through `end`.
    """

    def __init__(self, path: str, stream, warnings: list[str], chunk: int = CHUNK):
        self.path = path
        self.chunk = chunk  # bytes a read asks for, at least
        # GzipFile.read() drops what it decompressed when the stream turns out cut short;
        # read1() hands that over first and raises EOFError only on the next call.
        self._read = getattr(stream, "read1", stream.read)
        self.warnings = warnings
        self.eof = False
        self.cut_short = False  # a compressed stream without its end marker
        self._failure: Exception | None = None  # a read error not reported yet
        self.offset = 0
        self.first_of_linktype: dict[int, tuple[int, int]] = {}
        # Called with the key log lines of each pcapng Decryption Secrets Block as it is read,
        # before the packet after it (a driver sets Dissector.add_tls_secrets); None: dropped.
        self.on_secrets = None
        self._clamped = False
        # Where the parsers count frames and offsets from: a byte range of a file read alone
        # (capture/ranges.py) numbers its packets, and names them in warnings and errors, as
        # the whole file does.
        self.frame_base = 0
        self.offset_base = 0

    def refill(self, buf: bytes, pos: int, need: int, frame: int, offset: int) -> bytes:
        """Return buf[pos:] extended to at least `need` bytes, or to the end of the stream.

        Reads at most MAX_READ bytes at a time, so that a corrupt length claiming far more than
        the file holds costs no more memory than the file has.
        """
        parts = [buf[pos:]]
        have = len(parts[0])
        while have < need and not self.eof:
            try:
                chunk = self._read(min(max(self.chunk, need - have), MAX_READ))
            except EOFError:
                # gzip stream without its end marker: what was decompressed is still good
                self.eof = True
                self.cut_short = True
                break
            except Bomb as e:
                raise CaptureError(self.path, str(e), frame, offset) from None
            except (OSError, zlib.error) as e:
                # Corrupt compressed data: the bytes before it are good, so the error is raised
                # once they are used up, naming the first frame that cannot be read.
                self.eof = True
                self._failure = e
                break
            if not chunk:
                self.eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        if self._failure is not None and have < need:
            e = self._failure
            raise CaptureError(self.path, f"cannot read: {e}", frame, offset) from e
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def end(self, frame: int, offset: int, partial: str = "") -> None:
        """The stream ended before `frame` at `offset`; `partial` names the unit it cut, if any.

        A cut file, or a compressed stream without its end marker, is one warning: the packets
        before the cut were all delivered.
        """
        if partial:
            how = "compressed stream ends early" if self.cut_short else "file ends"
            reason = f"{how} inside a {partial}"
        elif self.cut_short:
            reason = "compressed stream ends early, without its end marker"
        else:
            return
        self.warnings.append(
            f"{self.path}: frame {frame}, offset {offset}: truncated capture: {reason}; "
            "decoded up to the cut"
        )

    def clamp_ts(self, ts: int, frame: int, offset: int) -> int:
        """A timestamp beyond what 64-bit nanoseconds hold, brought to the nearest end of it."""
        if not self._clamped:
            self._clamped = True
            self.warnings.append(
                f"{self.path}: frame {frame}, offset {offset}: {CLAMPED} "
                "(before 1677 or after 2262), clamped"
            )
        return TS_MAX if ts > TS_MAX else TS_MIN


class Bomb(Exception):
    """A compressed capture expanding past its bound."""


class Inflated:
    """A gzip stream that expands to at most `ratio` times the compressed bytes read, once
    past `floor` bytes; `compressed()` tells how many were read. Only read1 is used (Source)."""

    def __init__(self, fileobj, compressed, ratio=MAX_GZIP_RATIO, floor=MIN_INFLATED):
        self._gz = gzip.GzipFile(fileobj=fileobj, mode="rb")
        self._compressed = compressed
        self.ratio = ratio
        self.floor = floor
        self.inflated = 0

    def read1(self, n: int = -1) -> bytes:
        data = self._gz.read1(n)
        self.inflated += len(data)
        if self.inflated > self.floor:
            read = self._compressed()
            if self.inflated > self.ratio * read:
                raise Bomb(
                    f"decompression bomb: the gzip stream expands past {self.ratio} times "
                    f"its compressed size ({self.inflated} bytes from {read}); if the capture is "
                    "real, read it decompressed: zcat FILE | kafka-dissect analyze -"
                )
        return data

    read = read1

    def close(self) -> None:
        self._gz.close()


class StreamInput:
    """A pipe or other unseekable binary stream, read as it comes: each read returns what one
    system call delivers, so packets reach the parser as soon as the writer flushes them.
    Bytes given back with `unread` (those read to sniff the format) are served first. `owned`:
    close() closes the stream too (a FIFO opened by path)."""

    def __init__(self, raw, owned=False):
        self._raw = raw
        self._owned = owned
        self._head = b""
        self._read1 = getattr(raw, "read1", raw.read)
        self.bytes_read = 0
        self.closed = False

    def unread(self, data: bytes) -> None:
        self._head = data + self._head

    def read(self, n: int = -1) -> bytes:
        if self._head:
            n = len(self._head) if n is None or n < 0 else n
            head, self._head = self._head[:n], self._head[n:]
            return head
        chunk = self._read1(n if n and n > 0 else CHUNK) or b""
        self.bytes_read += len(chunk)
        return chunk

    read1 = read

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True
        if self._owned:
            self._raw.close()


class PacketReader:
    """An iterable of Packet over one capture file (pcap or pcapng, optionally gzip-compressed).

    `bytes_read` and `total_bytes` measure the file on disk (compressed bytes for gzip), for
    progress reporting. Byte offsets in errors and warnings are offsets in the capture stream,
    which for gzip means the decompressed data. `last_offset` is the offset of the record (pcap)
    or block (pcapng) of the packet last yielded, and `first_of_linktype` maps each link type
    seen to the frame number and offset of its first packet, for messages about packets the
    later stages cannot use. `warnings` holds what the reader noticed (a truncated capture, a
    timestamp out of range), one line each, naming the file, frame and offset. Iterate once;
    use as a context manager.

    `path` may also be "-" (standard input), a path that is no regular file (a FIFO,
    /dev/stdin, a shell's `<(...)`) or a binary file object such as a pipe: the stream is read
    as it comes, never seeked; `total_bytes` is then None. A file object passed in is not
    closed by close(); `name` names it in messages. A gzip capture expands to at most
    `max_ratio` times its compressed size (past 64 MiB): beyond, a CaptureError.
    """

    def __init__(self, path, name: str | None = None, max_ratio: int = MAX_GZIP_RATIO):
        self.warnings: list[str] = []
        self.format = ""  # "pcap" or "pcapng"
        self.compressed = False
        self.max_ratio = max_ratio
        self._seekable = False  # a regular file, read in chunks and seeked back after sniffing
        self._src: Source | None = None
        self.total_bytes: int | None = None
        if hasattr(path, "read"):
            self.path = name or str(getattr(path, "name", "<stream>"))
            self._raw = StreamInput(path)
        elif os.fspath(path) == "-":
            self.path = name or "<stdin>"
            self._raw = StreamInput(sys.stdin.buffer)
        else:
            self.path = os.fspath(path)
            self._raw = _opened_file(self.path)
            self._seekable = not isinstance(self._raw, StreamInput)
        self._stream = self._raw
        try:
            if self._seekable:
                self.total_bytes = os.fstat(self._raw.fileno()).st_size
            self._packets = self._open()
        except BaseException:
            self.close()
            raise

    def _head(self) -> bytes:
        """The first bytes, enough to tell the format: a pipe may deliver fewer at a time."""
        head = self._raw.read(CHUNK)
        if self._seekable:
            return head
        while head and len(head) < pcap.FILE_HEADER_LEN:
            more = self._raw.read(CHUNK)
            if not more:
                break
            head += more
        return head

    def _open(self) -> Iterator[Packet]:
        head = self._head()
        if not head:
            raise CaptureError(self.path, "empty file, not a capture", frame=1, offset=0)
        if head[:2] == GZIP_MAGIC:
            if self._seekable:
                self._raw.seek(0)
            else:
                self._raw.unread(head)  # decompressed from the start, as a file seeked back
            self._stream = Inflated(self._raw, self._compressed_read, self.max_ratio)
            self.compressed = True
        chunk = CHUNK if self._seekable else STREAM_CHUNK
        src = self._src = Source(self.path, self._stream, self.warnings, chunk)
        if self.compressed:
            head = src.refill(b"", 0, pcap.FILE_HEADER_LEN, 1, 0)
            if not head:
                raise CaptureError(self.path, "empty compressed file", frame=1, offset=0)
        self.format, packets = parse(src, head)
        return packets

    def __iter__(self) -> Iterator[Packet]:
        return self._packets

    @property
    def last_offset(self) -> int:
        # The pcap iterator keeps it in a field of its own, written once a packet; the pcapng
        # parser, on the source.
        return getattr(self._packets, "offset", self._src.offset)

    @property
    def on_secrets(self):
        """What the key log lines of each Decryption Secrets Block are handed to (Source)."""
        return self._src.on_secrets

    @on_secrets.setter
    def on_secrets(self, call):
        self._src.on_secrets = call

    @property
    def first_of_linktype(self) -> dict[int, tuple[int, int]]:
        return self._src.first_of_linktype

    @property
    def bytes_read(self) -> int:
        if not self._seekable:
            return self._raw.bytes_read
        if self._raw.closed:
            return self.total_bytes
        return self._raw.tell()

    def _compressed_read(self) -> int:
        return self.bytes_read

    def close(self) -> None:
        if self._stream is not self._raw:
            self._stream.close()
        self._raw.close()

    def __enter__(self) -> "PacketReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def parse(src: Source, head: bytes) -> tuple[str, Iterator[Packet]]:
    """The format of a stream that starts with `head` ("pcap" or "pcapng") and its packets;
    CaptureError if it is neither."""
    magic = bytes(head[:4])
    if magic in pcap.MAGICS:
        return "pcap", pcap.iter_pcap(src, head)
    if magic == pcapng.SHB_MAGIC:
        return "pcapng", pcapng.iter_pcapng(src, head)
    reason = f"not a capture file (unknown magic {magic.hex()})"
    raise CaptureError(src.path, reason, frame=1, offset=0)


def _opened_file(path: str):
    """A file opened by path: a regular file as it is, anything else (a FIFO, a terminal, a
    process substitution's pipe) as a stream that is never seeked."""
    f = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by PacketReader.close()
    try:
        regular = stat.S_ISREG(os.fstat(f.fileno()).st_mode)
    except BaseException:
        f.close()
        raise
    return f if regular else StreamInput(f, owned=True)


def open_capture(path, name: str | None = None, max_ratio: int = MAX_GZIP_RATIO) -> PacketReader:
    """Open a pcap or pcapng capture, plain or gzip-compressed; CaptureError if it is neither.

    `path` is a file path, "-" for standard input, or a readable binary stream (a pipe),
    which is read as it comes; `name` names a stream in messages. `max_ratio`: how many times
    its compressed size a gzip capture may expand (see PacketReader).
    """
    return PacketReader(path, name, max_ratio)
