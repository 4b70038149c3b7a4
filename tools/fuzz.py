"""Fuzz the dissector: Kafka frame decoders, record sets, whole captures, TCP segments.

    python tools/fuzz.py --target frames --runs 200000
    python tools/fuzz.py --target records --runs 200000
    python tools/fuzz.py --target capture --runs 5000
    python tools/fuzz.py --target capture --seconds 300 --engine random --seed 7
    python tools/fuzz.py --target tcp --runs 20000 --engine random
    python tools/fuzz.py --target ranges --seconds 600 --engine random --seed 7

Targets, and what counts as a finding:

- ``frames``: a Kafka request or response frame (size prefix removed) decoded with
  ``protocol.messages``: the request header, then the body with the API key and version the
  header names (or, for a response, those of its request), record sets decoded in full. Only
  ``DecodeError`` may escape.
- ``records``: a record set (the ``records`` bytes of Produce and Fetch) through
  ``protocol.records.decode_record_set`` with every record decoded. Nothing may escape: every
  problem is a status inside the result.
- ``capture``: a pcap or pcapng file (optionally gzip-compressed) through
  ``dissector.read_pcap``, for the pairs and the records tables. Only ``DissectorError`` may
  escape, a run must end within ``--time-limit`` seconds and its traced memory peak stay under
  ``--memory-limit`` MiB.
- ``tcp``: the TCP segments of a few connections fed to the core (``Dissector``) as Packets,
  twice: with the default bound on out-of-order bytes (32 MiB a direction) and with a small
  one the segments reach. Nothing may escape, each run stays within the time and memory
  limits, no direction holds more than its bound (its bytes plus ``PIECE_COST`` a piece),
  every streams row adds up (``bytes_seen = bytes_delivered + bytes_duplicate +
  bytes_dropped``, ``bytes_conflicting <= bytes_duplicate``, and on Kafka connections
  ``bytes_delivered = bytes_tls + bytes_framed + bytes_skipped``), ``stats()`` equals the
  sums of the rows before ``finish()`` and after (``bytes_conflicting``, ``rsts_ignored`` and
  ``syns_ignored`` included), and every captured payload byte is counted once by TCP.
- ``ranges``: a capture (pcap) cut into byte ranges as Spark cuts a large one, the ranges
  planned, checked and joined in this process (``tests/spark_support.run_in_process``) at
  three split sizes and read-backs drawn from the input: the pairs and streams tables must
  equal ``read_pcap``'s. Inputs ``read_pcap`` refuses are passed over.

Seeds come from the sample captures: every Kafka frame, every record set, every packet and
every TCP connection of ``captures/*.pcap``. Two engines run the same targets:

- ``atheris`` (the default when the ``atheris`` package imports): coverage-guided, libFuzzer's
  mutations over the seed inputs. A frame input is a 5-byte prefix (kind, API key, version)
  then the frame; a record-set input is the raw set; a capture input is the file's bytes; a
  tcp input is a pcap file too, and half of its mutations are the TCP ones below.
- ``random``: a plain loop of random mutations over the seeds, without coverage feedback:
  bytes flipped, cut, inserted and deleted, size fields set to hostile values (2**31-1, -1,
  huge counts), endless varints; for captures also packets cut, duplicated, dropped,
  shuffled, garbage packets inserted, headers damaged, and the file written as pcap, pcapng or
  gzip; for tcp, one to three seed connections whose segments get their sequence numbers
  shifted (overlaps, holes, wrap-around), are split into pieces, copied with other bytes
  before or after the original (behind a hole, where copies are compared), retransmitted,
  reordered (also last first after a hole), dropped, cut by the snap length, and get RSTs
  (in the window or at random sequence numbers), SYNs with a new ISN (answered by a SYN+ACK
  or not) and early FINs. For ranges, mostly such TCP captures, else damaged captures.

A finding is written under ``--out`` (default ``fuzz-findings/``) as the input that caused it
plus a ``.txt`` with the traceback, and the run goes on (``--stop`` ends it at the first).
Replay a finding with ``--replay FILE --target T``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import os
import random
import shutil
import socket
import struct
import sys
import tempfile
import time
import traceback
import tracemalloc
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import dissector  # noqa: E402
from dissector.capture import Packet, open_capture  # noqa: E402
from dissector.errors import DecodeError, DissectorError  # noqa: E402
from dissector.flow import ROW_SUMS, Dissector  # noqa: E402
from dissector.net.decode import NetDecoder  # noqa: E402
from dissector.net.segment import ACK, FIN, RST, SYN, Segment  # noqa: E402
from dissector.options import Options  # noqa: E402
from dissector.protocol import messages  # noqa: E402
from dissector.protocol.codegen import Context  # noqa: E402
from dissector.protocol.records import Limits, decode_record_set  # noqa: E402
from dissector.tcp import StreamData, TcpTracker  # noqa: E402
from dissector.tcp.connection import endpoints_key  # noqa: E402
from dissector.tcp.halfstream import MASK, PIECE_COST  # noqa: E402
from dissector.tcp.tracker import DEFAULT_MAX_BUFFER  # noqa: E402

CAPTURES = ROOT / "captures"
SEED_CAPTURES = ("kafka-python.pcap", "compression.pcap")
REQUEST, RESPONSE = 0, 1
FULL = Limits(records=True)
# What the dissector applies to the records fields of a message with records="full".
RECORD_DECODER = Options(records="full").record_decoder()
HOSTILE32 = (0x7FFFFFFF, -1, -0x80000000, 0x7FFFFFF0, 0x10000000, 0xFFFF, 0)
HOSTILE16 = (0x7FFF, -1, -0x8000, 0x100)
TARGETS = ("frames", "records", "capture", "tcp", "ranges")


class Finding(Exception):
    """What a target reports: an escaped exception, a run too slow or too hungry."""


# ---------------------------------------------------------------- seeds


@cache
def capture_packets(name: str) -> tuple[Packet, ...]:
    with open_capture(CAPTURES / name) as r:
        return tuple(r)


@cache
def kafka_frames(name: str) -> tuple[tuple[int, int, int, bytes], ...]:
    """(kind, api key, version, frame without its size prefix) of every frame of a capture.

    The capture's TCP streams are reassembled and split on the size prefixes; a response takes
    the API key and version of the request with its correlation id on the same connection.
    """
    tracker = TcpTracker()
    net = NetDecoder()
    streams: dict[tuple[int, int], bytearray] = {}
    client: dict[int, int] = {}
    for p in capture_packets(name):
        seg = net.decode(p)
        if seg is None:
            continue
        for ev in tracker.feed(seg):
            if type(ev) is StreamData:
                streams.setdefault((ev.conn.id, ev.side), bytearray()).extend(ev.data)
                client[ev.conn.id] = ev.conn.client_side or 0
    for ev in tracker.finish():
        if type(ev) is StreamData:
            streams.setdefault((ev.conn.id, ev.side), bytearray()).extend(ev.data)
    out = []
    for conn, side in sorted(streams):
        if side != client.get(conn, 0):
            continue
        asked = {}
        for body in _split(streams[conn, side]):
            try:
                h = messages.decode_request_header(body)
            except DecodeError:
                continue
            asked[h.correlation_id] = (h.api_key, h.api_version)
            out.append((REQUEST, h.api_key, h.api_version, body))
        for body in _split(streams.get((conn, 1 - side), b"")):
            if len(body) >= 4:
                key = asked.get(struct.unpack_from(">i", body)[0])
                if key is not None:
                    out.append((RESPONSE, *key, body))
    return tuple(out)


def _split(stream: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 4 <= len(stream):
        (size,) = struct.unpack_from(">i", stream, pos)
        if size < 0 or pos + 4 + size > len(stream):
            break
        out.append(bytes(stream[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    return out


@cache
def record_sets(name: str) -> tuple[bytes, ...]:
    """The raw record sets inside the frames of a capture."""
    found: list[bytes] = []

    def keep(raw, ctx=None):
        if raw:
            found.append(bytes(raw))
        return None

    for kind, key, version, body in kafka_frames(name):
        try:
            if kind == REQUEST:
                pos = messages.decode_request_header(body).end
            else:
                pos = messages.decode_response_header(body, key, version)[1]
            messages.decode_body(key, _KIND[kind], version, body, pos, Context(records=keep))
        except DecodeError:
            pass
    return tuple(dict.fromkeys(found))


_KIND = ("request", "response")


def all_frames() -> list[tuple[int, int, int, bytes]]:
    return [f for name in SEED_CAPTURES for f in kafka_frames(name)]


def all_record_sets() -> list[bytes]:
    return [r for name in SEED_CAPTURES for r in record_sets(name)]


# ---------------------------------------------------------------- targets


def check_frame(kind: int, api_key: int, version: int, body: bytes) -> None:
    """Decode one frame as the dissector would; only DecodeError may escape."""
    ctx = Context(records=RECORD_DECODER)
    try:
        if kind == REQUEST:
            h = messages.decode_request_header(body)
            api_key, version, pos = h.api_key, h.api_version, h.end
        else:
            _corr, pos = messages.decode_response_header(body, api_key, version)
        messages.decode_body(api_key, _KIND[kind], version, body, pos, ctx)
    except DecodeError:
        pass


def check_body(api_key: int, kind: int, version: int, body: bytes, pos: int) -> None:
    """Decode bytes as any body at any position; only DecodeError may escape."""
    ctx = Context(records=RECORD_DECODER)
    with contextlib.suppress(DecodeError):
        messages.decode_body(api_key, _KIND[kind], version, body, pos, ctx)


def check_record_set(raw: bytes) -> dict:
    """Decode a record set in full; nothing may escape, and the result has its fields."""
    result = decode_record_set(raw, FULL)
    if set(result) < {"size", "batches", "truncated", "truncated_bytes", "error"}:
        raise Finding(f"record set result lacks fields: {sorted(result)}")
    return result


def check_capture(path, time_limit: float = 10.0, memory_limit: int = 200 << 20) -> None:
    """read_pcap over a capture for two tables; only DissectorError may escape, within bounds."""
    import warnings

    with bounded(time_limit, memory_limit), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for table in ("pairs", "records"):
            with contextlib.suppress(DissectorError):
                dissector.read_pcap(path, table=table)


RANGE_TABLES = ("pairs", "streams")


def check_ranges(path: Path, data: bytes) -> None:
    """The capture's ranges, planned, checked and joined as Spark's are (in this process, at
    three split sizes and read-backs drawn from the input's hash; the pairs also dissected
    once a range, guess.py), give the tables read_pcap gives."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import warnings

    from spark_support import reference, run_in_process, spark_rows

    rng = random.Random(hashlib.sha1(data).digest())
    path = str(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a cut file, say: both sides warn alike
        for table in RANGE_TABLES:
            try:
                expected = reference(path, table)
            except DissectorError:
                return  # a capture read_pcap refuses: nothing to compare
            for _ in range(3):
                split = rng.choice((1, 50, 200, 1000, 5000, 20000))
                read_back = max(1, int(split * rng.choice((0.1, 0.5, 1.0))))
                # pairs: also dissected once a range, as `kafka-dissect spark` writes them
                for guess in (False, True) if table == "pairs" else (False,):
                    got = run_in_process([path], table, split, read_back=read_back, guess=guess)
                    if spark_rows(got) != expected:
                        how = " dissected once" if guess else ""
                        raise Finding(
                            f"ranges-differ: {table} split {split} read-back {read_back}{how}"
                        )


@contextlib.contextmanager
def bounded(time_limit: float, memory_limit: int):
    """A Finding if the block takes longer than `time_limit` seconds or the memory it
    allocates (traced) peaks above `memory_limit` bytes."""
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before, _ = tracemalloc.get_traced_memory()
    start = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        peak -= before
        if not tracing:
            tracemalloc.stop()
    if elapsed > time_limit:
        raise Finding(f"took {elapsed:.1f} s (limit {time_limit} s)")
    if peak > memory_limit:
        raise Finding(f"traced memory peak {peak >> 20} MiB (limit {memory_limit >> 20} MiB)")


def check_tcp(packets, time_limit: float = 10.0, memory_limit: int = 200 << 20) -> list[dict]:
    """The packets through the Dissector, once with the default bound on out-of-order bytes
    and once with a small one that the pieces reach. Nothing may escape (the core raises no
    error of its own), each run ends within bounds and its accounting adds up: see
    `dissect_checked`. Returns the stats() of each run."""
    captured = captured_payload(packets)
    out = []
    for max_buffer in (DEFAULT_MAX_BUFFER, SMALL_BUFFER):
        with bounded(time_limit, memory_limit):
            out.append(dissect_checked(packets, max_buffer, captured))
    return out


def dissect_checked(packets, max_buffer: int, captured: int) -> dict:
    """Feed the packets to a Dissector as a capture driver does, checking as they go that no
    direction holds more out-of-order data than `max_buffer` allows, and that stats() agrees
    with the streams rows before finish() and after; after, that every row adds up and that
    every `captured` payload byte is counted once. Returns the final stats()."""
    d = Dissector(max_buffer=max_buffer)
    ended = []  # rows of the connections ended so far
    for packet in packets:
        d.feed(packet)
        check_buffers(d, max_buffer)
        ended += rows_ended(d)
    live = [row for conv in d.conversations.values() for row in conv.streams()]
    check_sums(d.stats(), ended + live, "before finish")
    d.finish()
    ended += rows_ended(d)
    stats = d.stats()
    check_sums(stats, ended, "after finish")
    for row in ended:
        check_row(row)
    check_payload_counted(d, captured)
    return stats


def rows_ended(d: Dissector) -> list[dict]:
    """The streams rows of the connections that ended since the last call."""
    return [row for event in d.ended() for row in event.rows]


def check_payload_counted(d: Dissector, captured: int) -> None:
    """Every captured payload byte is in TCP's counters: seen on a connection, also one that
    delivered nothing (a RST's payload, a SYN's nobody answered), or late, after its end."""
    tcp = d.tcp.stats
    if tcp["bytes_seen"] + tcp["late_bytes"] != captured:
        raise Finding(
            f"payload bytes: {captured} captured, {tcp['bytes_seen']} seen + "
            f"{tcp['late_bytes']} late"
        )


def captured_payload(packets) -> int:
    """The TCP payload bytes in the packets, as captured (the snap length's cut left out)."""
    net = NetDecoder()
    return sum(len(seg.payload) for seg in map(net.decode, packets) if seg is not None)


def check_buffers(d: Dissector, max_buffer: int) -> None:
    """Each direction holds at most max_buffer: its out-of-order bytes plus PIECE_COST for
    each piece (and each run of pieces), so that many small pieces cost as much as they
    weigh."""
    for conn in d.tcp.live:
        for half in conn._halves:
            held = half.pbytes + PIECE_COST * (half.pieces + len(half.starts))
            if held > max_buffer:
                raise Finding(f"buffer: {conn} side {half.side} holds {held} > {max_buffer}")


def check_sums(stats: dict, rows: list[dict], when: str) -> None:
    """The stats() counters that sum streams rows (ROW_SUMS) equal the sums of the rows."""
    for key in ROW_SUMS:
        total = sum(row[key] for row in rows)
        if stats[key] != total:
            raise Finding(f"stats: {key} is {stats[key]}, its rows sum to {total} ({when})")


def check_row(row: dict) -> None:
    """One streams row adds up (see tables/streams.py): every byte seen is delivered, a
    duplicate or dropped; a conflicting byte is a duplicate whose copies disagreed; on a
    Kafka connection every byte delivered is TLS, framed or skipped, and framed bytes are
    decoded, malformed or unused."""
    where = f"stream {row['stream']} {row['direction']}"
    _adds_up(row, where, "bytes_seen", "bytes_delivered", "bytes_duplicate", "bytes_dropped")
    if row["bytes_conflicting"] > row["bytes_duplicate"]:
        raise Finding(f"accounting: {where}: bytes_conflicting > bytes_duplicate: {row}")
    if row["kafka"]:
        _adds_up(row, where, "bytes_delivered", "bytes_tls", "bytes_framed", "bytes_skipped")
        if row["bytes_abandoned"] > row["bytes_skipped"]:
            raise Finding(f"accounting: {where}: bytes_abandoned > bytes_skipped: {row}")
        if row["bytes_malformed"] + row["bytes_unused"] > row["bytes_framed"]:
            raise Finding(f"accounting: {where}: bytes_decoded < 0: {row}")


def _adds_up(row: dict, where: str, total: str, *parts: str) -> None:
    if row[total] != sum(row[p] for p in parts):
        raise Finding(f"accounting: {where}: {total} != {' + '.join(parts)}: {row}")


# ---------------------------------------------------------------- writing captures


def pcap_bytes(packets, linktype: int = 1) -> bytes:
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, linktype)]
    for p in packets:
        sec, ns = divmod(p.ts & 0xFFFFFFFFFFFFFFF, 1_000_000_000)
        out.append(struct.pack("<IIII", sec & 0xFFFFFFFF, ns, len(p.data), len(p.data)) + p.data)
    return b"".join(out)


def _block(btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    return struct.pack("<II", btype, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


def pcapng_bytes(packets, linktype: int = 1) -> bytes:
    out = [
        _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)),
        _block(1, struct.pack("<HHI", linktype, 0, 0) + struct.pack("<HHB3xHH", 9, 1, 9, 0, 0)),
    ]
    for p in packets:
        ts = p.ts & 0xFFFFFFFFFFFFFFFF
        head = struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(p.data), len(p.data))
        out.append(_block(6, head + p.data))
    return b"".join(out)


# ---------------------------------------------------------------- random mutations


def mutate_bytes(rng: random.Random, buf: bytes, rounds: int | None = None) -> bytes:
    """A few random damages to `buf`: flips, cuts, insertions, hostile sizes, endless varints."""
    b = bytearray(buf)
    for _ in range(rounds or rng.randint(1, 4)):
        op = rng.randrange(9)
        at = rng.randint(0, len(b))
        if op == 0 and b:  # flip bits of a few bytes
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] ^= rng.randint(1, 255)
        elif op == 1:  # truncate
            del b[at:]
        elif op == 2:  # extend
            b += rng.randbytes(rng.randint(1, 64))
        elif op == 3 and len(b) >= at + 4:  # a hostile int32 (sizes, array counts)
            struct.pack_into(">i", b, at, rng.choice(HOSTILE32))
        elif op == 4 and len(b) >= at + 2:  # a hostile int16 (string lengths)
            struct.pack_into(">h", b, at, rng.choice(HOSTILE16))
        elif op == 5:  # an endless varint
            b[at:at] = b"\xff" * rng.randint(1, 12)
        elif op == 6:  # insert random bytes
            b[at:at] = rng.randbytes(rng.randint(1, 16))
        elif op == 7:  # delete a few bytes
            del b[at : at + rng.randint(1, 16)]
        elif op == 8 and len(b) > 8:  # duplicate a slice (repeated records, arrays)
            j = rng.randrange(len(b))
            b[at:at] = b[j : j + rng.randint(1, 64)]
    return bytes(b)


def mutate_packets(rng: random.Random, packets) -> list[Packet]:
    """Damage a capture's packets: payloads and headers flipped, cut, garbage, reordering."""
    ps = list(packets)
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(8)
        i = rng.randrange(len(ps)) if ps else 0
        if not ps:
            op = 4
        if op == 0:  # flip bytes in the payload, past the Ethernet/IP/TCP headers
            p = ps[i]
            if len(p.data) > 54:
                ps[i] = p._replace(data=p.data[:54] + mutate_bytes(rng, p.data[54:]))
        elif op == 1:  # flip bytes in the headers
            p = ps[i]
            data = bytearray(p.data)
            for _ in range(rng.randint(1, 3)):
                if data:
                    data[rng.randrange(min(len(data), 66))] ^= rng.randint(1, 255)
            ps[i] = p._replace(data=bytes(data))
        elif op == 2:  # truncate
            p = ps[i]
            ps[i] = p._replace(data=p.data[: rng.randint(0, len(p.data))])
        elif op == 3:  # drop
            del ps[i]
        elif op == 4:  # insert a garbage packet
            garbage = rng.choice(
                [rng.randbytes(rng.randint(0, 200)), _garbage_tcp(rng, ps[i] if ps else None)]
            )
            ps.insert(i, Packet(0, ps[i].ts if ps else 0, 1, garbage, len(garbage)))
        elif op == 5:  # swap two packets
            j = rng.randrange(len(ps))
            ps[i], ps[j] = ps[j], ps[i]
        elif op == 6:  # duplicate
            ps.insert(rng.randrange(len(ps) + 1), ps[i])
        elif op == 7:  # shuffle a window
            j = min(len(ps), i + rng.randint(2, 8))
            window = ps[i:j]
            rng.shuffle(window)
            ps[i:j] = window
    return [p._replace(frame=n) for n, p in enumerate(ps, 1)]


def _garbage_tcp(rng: random.Random, like: Packet | None) -> bytes:
    """A packet with the headers of `like` (a real connection) and a random payload."""
    if like is None or len(like.data) < 54:
        return rng.randbytes(60)
    head = bytearray(like.data[:54])
    payload = rng.randbytes(rng.randint(0, 300))
    struct.pack_into(">H", head, 16, 40 + len(payload))
    return bytes(head) + payload


def random_capture(rng: random.Random) -> bytes:
    """A damaged copy of a seed capture, as pcap, pcapng or gzip of either."""
    packets = mutate_packets(rng, capture_packets(rng.choice(SEED_CAPTURES)))
    content = (pcap_bytes if rng.random() < 0.5 else pcapng_bytes)(packets)
    if rng.random() < 0.2:  # damage the file itself: record and block headers too
        content = mutate_bytes(rng, content, rounds=1)
    if rng.random() < 0.1:
        content = gzip.compress(content, compresslevel=1)
    return content


# ---------------------------------------------------------------- TCP segments

ETHERNET_IPV4 = b"\0\0\0\0\0\2" + b"\0\0\0\0\0\1" + b"\x08\x00"
FIRST_TS = 1_700_000_000 * 10**9
# A bound on out-of-order bytes that the mutated segments reach, so that the tracker's giving
# up on a hole runs too (the default, 32 MiB, is beyond the seed captures' connections).
SMALL_BUFFER = 16 << 10
# Pieces one segment may be cut into: the worst orders stay well within the time limit.
MAX_PIECES = 1000


@cache
def seed_connections(name: str) -> tuple[tuple[Segment, ...], ...]:
    """The segments of each IPv4 TCP connection of a capture, in capture order."""
    conns: dict[tuple, list[Segment]] = {}
    for seg in segments_of(capture_packets(name)):
        conns.setdefault(endpoints_key((seg.src, seg.sport), (seg.dst, seg.dport)), []).append(seg)
    return tuple(tuple(segs) for segs in conns.values())


def seed_segments(rng: random.Random) -> list[Segment]:
    """The segments of one to three connections of a seed capture, interleaved as captured."""
    conns = seed_connections(rng.choice(SEED_CAPTURES))
    chosen = rng.sample(conns, min(len(conns), rng.randint(1, 3)))
    return sorted((seg for conn in chosen for seg in conn), key=lambda seg: seg.frame)


def segments_of(packets) -> list[Segment]:
    """The IPv4 TCP segments the packets carry."""
    net = NetDecoder()
    segments = (net.decode(p) for p in packets)
    return [seg for seg in segments if seg is not None and ":" not in seg.src]


def tcp_packets(segments) -> list[Packet]:
    """Ethernet frames of the segments, numbered from 1, a microsecond apart."""
    return [segment_packet(seg, n, FIRST_TS + 1000 * n) for n, seg in enumerate(segments, 1)]


def segment_packet(seg: Segment, frame: int, ts: int) -> Packet:
    """Ethernet, IPv4 and TCP headers around seg's payload. The IP length counts the
    seg.missing bytes too: those the capture cut (its snap length)."""
    tcp = struct.pack(
        ">HHIIBBHHH", seg.sport, seg.dport, seg.seq, seg.ack, 5 << 4, seg.flags, 65535, 0, 0
    )
    size = 40 + len(seg.payload) + seg.missing
    src, dst = socket.inet_aton(seg.src), socket.inet_aton(seg.dst)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, size, 0, 0x4000, 64, 6, 0, src, dst)
    data = ETHERNET_IPV4 + ip + tcp + seg.payload
    return Packet(frame, ts, 1, data, len(data) + seg.missing)


def read_packets(data: bytes) -> list[Packet]:
    """The packets of a capture held in memory, as far as it reads."""
    packets: list[Packet] = []
    with contextlib.suppress(DissectorError), open_capture(io.BytesIO(data)) as reader:
        packets.extend(reader)
    return packets


def random_tcp_capture(rng: random.Random) -> bytes:
    """The segments of a few seed connections, mutated, as a pcap file."""
    return pcap_bytes(tcp_packets(mutate_segments(rng, seed_segments(rng))))


def mutate_segments(rng: random.Random, segments) -> list[Segment]:
    """A copy of the segments with a few TCP_MUTATIONS applied."""
    segs = list(segments)
    for _ in range(rng.randint(1, 6)):
        if not segs:
            break
        rng.choice(TCP_MUTATIONS)(rng, segs)
    return segs


# Each mutation changes a list of segments in place; it may assume the list is not empty.


def shift_seq(rng: random.Random, segs: list[Segment]) -> None:
    """A segment's sequence number moved: it overlaps its neighbours or leaves a hole."""
    i = rng.randrange(len(segs))
    delta = rng.choice((rng.randint(-64, 64), rng.randint(-1 << 16, 1 << 16), rng.getrandbits(32)))
    segs[i] = segs[i]._replace(seq=(segs[i].seq + delta) & MASK)


def split(rng: random.Random, segs: list[Segment]) -> None:
    """A segment sent in pieces, in order: one-byte pieces or larger."""
    i = _pick_data(rng, segs)
    if i is not None:
        size = rng.choice((1, rng.randint(1, len(segs[i].payload))))
        segs[i : i + 1] = _pieces(segs[i], size)


def descending(rng: random.Random, segs: list[Segment]) -> None:
    """The worst order for a reassembler: a segment cut into small pieces sent last first,
    each one before the pieces it follows, then the first piece, the hole, at the end."""
    i = _pick_data(rng, segs)
    if i is not None:
        pieces = _pieces(segs[i], rng.randint(1, 8))
        segs[i : i + 1] = pieces[:0:-1] + pieces[:1]


def overlap(rng: random.Random, segs: list[Segment]) -> None:
    """A copy of part of a segment with other bytes, sent before it (the segment's bytes,
    later, win) or after it (the copy's win). The segment before them in their direction
    comes after both, mostly: both wait behind a hole, where the copies are compared."""
    i = _pick_data(rng, segs)
    if i is None:
        return
    seg = segs[i]
    a, b = _span(rng, len(seg.payload))
    changed = _other_bytes(rng, seg.payload[a:b])
    copy = seg._replace(seq=(seg.seq + a) & MASK, payload=changed, missing=0, flags=ACK)
    segs[i : i + 1] = [copy, seg] if rng.random() < 0.5 else [seg, copy]
    before = _previous_data(segs, i)
    if before is not None and rng.random() < 0.8:
        segs.insert(i + 1, segs.pop(before))  # the pair moved back by one


def retransmit(rng: random.Random, segs: list[Segment]) -> None:
    """A segment sent again, later."""
    i = rng.randrange(len(segs))
    segs.insert(rng.randint(i + 1, len(segs)), segs[i])


def reorder(rng: random.Random, segs: list[Segment]) -> None:
    """A few consecutive segments shuffled."""
    i = rng.randrange(len(segs))
    j = min(len(segs), i + rng.randint(2, 8))
    window = segs[i:j]
    rng.shuffle(window)
    segs[i:j] = window


def drop(rng: random.Random, segs: list[Segment]) -> None:
    """A segment the capture missed: a hole nothing fills."""
    del segs[rng.randrange(len(segs))]


def inject_rst(rng: random.Random, segs: list[Segment]) -> None:
    """A RST after a segment, from either side: in the receiver's window (it ends the
    connection) or, half the time, at a random sequence number (a receiver ignores it)."""
    i = rng.randrange(len(segs))
    seg = segs[i]
    if rng.random() < 0.5:  # from the segment's sender, within or at the end of its bytes
        rst = seg._replace(seq=(seg.seq + rng.randint(0, len(seg.payload))) & MASK)
    else:  # from its receiver, where the segment's ACK says the receiver stands
        rst = _reverse(seg, seq=seg.ack, ack=(seg.seq + len(seg.payload)) & MASK)
    if rng.random() < 0.5:
        rst = rst._replace(seq=rng.getrandbits(32))
    flags = rng.choice((RST, RST | ACK))
    segs.insert(i + 1, rst._replace(flags=flags, payload=_some_bytes(rng), missing=0))


def inject_syn(rng: random.Random, segs: list[Segment]) -> None:
    """A SYN with a new ISN on the connection of a segment, maybe sent twice (the same or
    another ISN): unanswered, a receiver goes on with the connection; answered by the
    peer's SYN+ACK, right away or a few segments later, the port was reused."""
    i = rng.randrange(len(segs))
    syn = segs[i]._replace(
        seq=rng.getrandbits(32), ack=0, flags=SYN, payload=_some_bytes(rng), missing=0
    )
    added = [syn]
    if rng.random() < 0.3:
        added.append(rng.choice((syn, syn._replace(seq=rng.getrandbits(32)))))
    segs[i + 1 : i + 1] = added
    if rng.random() < 0.5:
        answer = _reverse(syn, seq=rng.getrandbits(32), ack=(added[-1].seq + 1) & MASK)
        after = i + 1 + len(added)
        segs.insert(rng.randint(after, min(len(segs), after + 3)), answer._replace(flags=SYN | ACK))


def early_fin(rng: random.Random, segs: list[Segment]) -> None:
    """A FIN before the end: on a data segment, or alone before a segment, at a sequence
    number within its bytes (those after the FIN are dropped)."""
    i = rng.randrange(len(segs))
    seg = segs[i]
    if seg.payload and rng.random() < 0.5:
        segs[i] = seg._replace(flags=seg.flags | FIN)
    else:
        seq = (seg.seq + rng.randint(0, len(seg.payload))) & MASK
        segs.insert(i, seg._replace(seq=seq, flags=FIN | ACK, payload=b"", missing=0))


def snap_cut(rng: random.Random, segs: list[Segment]) -> None:
    """A payload cut by the snap length: the bytes cut are known missing, not lost."""
    i = _pick_data(rng, segs)
    if i is not None:
        seg = segs[i]
        keep = rng.randrange(len(seg.payload))
        cut = len(seg.payload) - keep
        segs[i] = seg._replace(payload=seg.payload[:keep], missing=seg.missing + cut)


def wrap(rng: random.Random, segs: list[Segment]) -> None:
    """One direction's sequence numbers moved to just below 2**32, so that they wrap
    mid-stream; the other direction's ACKs follow them."""
    seg = segs[rng.randrange(len(segs))]
    sender, receiver = _direction(seg), _direction(_reverse(seg))
    delta = (-rng.randint(0, 1 << 17) - seg.seq) & MASK
    for j, s in enumerate(segs):
        if _direction(s) == sender:
            segs[j] = s._replace(seq=(s.seq + delta) & MASK)
        elif _direction(s) == receiver and s.flags & ACK:
            segs[j] = s._replace(ack=(s.ack + delta) & MASK)


TCP_MUTATIONS = (
    shift_seq,
    split,
    descending,
    overlap,
    retransmit,
    reorder,
    drop,
    inject_rst,
    inject_syn,
    early_fin,
    snap_cut,
    wrap,
)


def _pick_data(rng: random.Random, segs: list[Segment]) -> int | None:
    """A segment with payload and no SYN (whose sequence number is not its first byte's)."""
    found = [i for i, s in enumerate(segs) if s.payload and not s.flags & SYN]
    return rng.choice(found) if found else None


def _previous_data(segs: list[Segment], i: int) -> int | None:
    """The last segment with payload before segs[i] in the same direction."""
    sender = _direction(segs[i])
    for j in range(i - 1, -1, -1):
        if _direction(segs[j]) == sender and segs[j].payload:
            return j
    return None


def _direction(seg: Segment) -> tuple:
    return (seg.src, seg.sport, seg.dst, seg.dport)


def _pieces(seg: Segment, size: int) -> list[Segment]:
    """seg cut into pieces of `size` payload bytes (larger when there would be more than
    MAX_PIECES), in order; a FIN stays on the last one, with the bytes the capture cut."""
    data = seg.payload
    size = max(size, -(-len(data) // MAX_PIECES))
    middle = seg.flags & ~FIN
    pieces = [
        seg._replace(seq=(seg.seq + k) & MASK, payload=data[k : k + size], flags=middle, missing=0)
        for k in range(0, len(data), size)
    ]
    pieces[-1] = pieces[-1]._replace(flags=seg.flags, missing=seg.missing)
    return pieces


def _reverse(seg: Segment, **changes) -> Segment:
    """A segment without payload in the other direction of seg's connection."""
    other = dict(src=seg.dst, sport=seg.dport, dst=seg.src, dport=seg.sport)
    return seg._replace(**{**other, "payload": b"", "missing": 0, **changes})


def _span(rng: random.Random, n: int) -> tuple[int, int]:
    """A random non-empty [a, b) within n bytes."""
    a = rng.randrange(n)
    return a, rng.randint(a + 1, n)


def _other_bytes(rng: random.Random, data: bytes) -> bytes:
    """data with a random stretch of it changed, every byte of that stretch."""
    a, b = _span(rng, len(data))
    x = rng.randint(1, 255)
    return data[:a] + bytes(c ^ x for c in data[a:b]) + data[b:]


def _some_bytes(rng: random.Random) -> bytes:
    """Mostly nothing: the payload of a RST or SYN, which a receiver does not deliver."""
    return rng.randbytes(rng.randint(1, 8)) if rng.random() < 0.2 else b""


def tcp_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    """atheris: half the time the TCP mutations over the segments of the input capture,
    libFuzzer's byte mutations otherwise (and for inputs with no segment to mutate)."""
    import atheris

    rng = random.Random(seed)
    segs = segments_of(read_packets(data))
    if segs and rng.random() < 0.5:
        out = pcap_bytes(tcp_packets(mutate_segments(rng, segs)))
        if len(out) <= max_size:
            return out
    return atheris.Mutate(data, max_size)


# ---------------------------------------------------------------- engines


class Runner:
    def __init__(self, target: str, out: Path, stop: bool, time_limit: float, memory_limit: int):
        self.target = target
        self.out = out
        self.stop = stop
        self.time_limit = time_limit
        self.memory_limit = memory_limit
        self.runs = 0
        self.findings: dict[str, Path] = {}
        # Under atheris, which ends the process itself: when to stop, and what to say first.
        self.max_runs = 0
        self.deadline = 0.0
        self.on_limit = None
        self._tmp = Path(tempfile.mkdtemp(prefix="dissector-fuzz-"))

    def one(self, data: bytes) -> None:
        """Run the target on one input (in the atheris input format)."""
        self.runs += 1
        if self.on_limit is not None and (
            self.runs > self.max_runs or (self.deadline and time.monotonic() > self.deadline)
        ):
            self.runs -= 1
            self.on_limit()
        try:
            self.run_target(data)
        except Exception as e:  # every escape is a finding
            self.report(data, e)

    def run_target(self, data: bytes) -> None:
        if self.target == "frames":
            if len(data) < 5:
                return
            kind, key, version = data[0] & 1, *struct.unpack_from(">hh", data, 1)
            body = data[5:]
            if data[0] & 2:  # any key and version, at any position
                check_body(key % 100, kind, version % 20, body, data[0] >> 2)
            else:
                check_frame(kind, key, version, body)
        elif self.target == "records":
            check_record_set(data)
        elif self.target == "tcp":
            check_tcp(read_packets(data), self.time_limit, self.memory_limit)
        elif self.target == "ranges":
            path = self._tmp / "input.pcap"
            path.write_bytes(data)
            check_ranges(path, data)
        else:
            path = self._tmp / "input.pcap"
            path.write_bytes(data)
            check_capture(path, self.time_limit, self.memory_limit)

    def report(self, data: bytes, e: BaseException) -> None:
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        signature = f"{type(e).__name__}@{where.filename}:{where.lineno}" if where else repr(e)
        if isinstance(e, Finding):
            signature = f"Finding:{str(e).split(' ')[0]}"
        new = signature not in self.findings
        if new:
            self.out.mkdir(parents=True, exist_ok=True)
            name = f"{self.target}-{hashlib.sha1(data).hexdigest()[:12]}"
            path = self.out / f"{name}.bin"
            path.write_bytes(data)
            detail = "".join(traceback.format_exception(e))
            (self.out / f"{name}.txt").write_text(f"{signature}\n\n{detail}")
            self.findings[signature] = path
            print(f"finding: {signature}: {type(e).__name__}: {e} -> {path}", file=sys.stderr)
        if self.stop:
            raise SystemExit(1)


def seeds(target: str) -> list[bytes]:
    """Inputs in the atheris format, from the sample captures."""
    if target == "frames":
        return [
            bytes([kind]) + struct.pack(">hh", key, version) + body
            for kind, key, version, body in all_frames()
        ]
    if target == "records":
        return all_record_sets()
    if target in ("tcp", "ranges"):  # every seed connection as captured, mutated copies
        whole = [pcap_bytes(tcp_packets(c)) for n in SEED_CAPTURES for c in seed_connections(n)]
        return whole + [random_tcp_capture(random.Random(i)) for i in range(32)]
    return [(CAPTURES / name).read_bytes() for name in SEED_CAPTURES]


def random_input(rng: random.Random, target: str, pool: list[bytes]) -> bytes:
    if target == "capture":
        return random_capture(rng)
    if target == "tcp":
        return random_tcp_capture(rng)
    if target == "ranges":
        return random_tcp_capture(rng) if rng.random() < 0.7 else random_capture(rng)
    seed = rng.choice(pool)
    if target == "frames":
        if rng.random() < 0.2:  # decode as another key, version or position
            head = bytes([rng.randint(0, 255) | 2]) + struct.pack(
                ">hh", rng.randint(0, 99), rng.randint(-1, 19)
            )
            return head + mutate_bytes(rng, seed[5:])
        return seed[:5] + mutate_bytes(rng, seed[5:])
    return mutate_bytes(rng, seed)


def run_random(runner: Runner, runs: int, seconds: float, seed: int) -> None:
    rng = random.Random(seed)
    pool = seeds(runner.target)
    deadline = time.monotonic() + seconds if seconds else None
    while runner.runs < runs and (deadline is None or time.monotonic() < deadline):
        runner.one(random_input(rng, runner.target, pool))


def _instrument(atheris) -> int:
    """Coverage instrumentation of every function of the dissector's modules."""
    import gc
    import types

    # Modules imported lazily by the targets, loaded now so that they are covered too.
    import dissector.tables  # noqa: F401
    import dissector.tables.records  # noqa: F401

    count = 0
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and (obj.__module__ or "").startswith("dissector"):
            with contextlib.suppress(Exception):
                atheris.instrument_func(obj)
                count += 1
    return count


def run_atheris(runner: Runner, argv: list[str]) -> None:
    import atheris

    print(f"instrumented {_instrument(atheris)} functions", file=sys.stderr)
    corpus = runner._tmp / "corpus"
    corpus.mkdir()
    for i, data in enumerate(seeds(runner.target)):
        (corpus / f"seed-{i}").write_bytes(data)
    args = [sys.argv[0], str(corpus), "-rss_limit_mb=4096"]
    if runner.target in ("capture", "tcp", "ranges"):
        args.append("-max_len=400000")
        args.append(f"-timeout={2 * int(runner.time_limit) + 5}")  # tcp: two runs, each bounded
    else:
        args.append("-max_len=70000")
        args.append("-timeout=20")
    mutator = {"custom_mutator": tcp_mutator} if runner.target == "tcp" else {}
    atheris.Setup(args + argv, runner.one, **mutator)
    atheris.Fuzz()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--target", choices=TARGETS, required=True)
    parser.add_argument("--runs", type=int, default=100_000, help="inputs to try")
    parser.add_argument("--seconds", type=float, default=0, help="stop after this long")
    parser.add_argument("--engine", choices=["atheris", "random"], help="default: atheris if any")
    parser.add_argument("--seed", type=int, default=0, help="random engine seed")
    parser.add_argument("--out", type=Path, default=Path("fuzz-findings"))
    parser.add_argument("--stop", action="store_true", help="stop at the first finding")
    parser.add_argument("--time-limit", type=float, default=10.0, help="capture/tcp: seconds a run")
    parser.add_argument("--memory-limit", type=int, default=200, help="capture/tcp: MiB a run")
    parser.add_argument("--replay", type=Path, nargs="*", help="run these inputs and report")
    args, rest = parser.parse_known_args(argv)
    runner = Runner(args.target, args.out, args.stop, args.time_limit, args.memory_limit << 20)
    if args.replay:
        failed = 0
        for path in args.replay:
            try:
                runner.run_target(path.read_bytes())
                print(f"{path}: ok")
            except Exception:
                failed += 1
                print(f"{path}:", file=sys.stderr)
                traceback.print_exc()
        shutil.rmtree(runner._tmp, ignore_errors=True)
        return 1 if failed else 0
    if args.target in ("capture", "tcp"):
        # Traced from here to the end: started and stopped around each input instead,
        # tracemalloc leaves the process some 15 KB larger every time.
        tracemalloc.start()
    engine = args.engine
    if engine is None:
        try:
            import atheris  # noqa: F401

            engine = "atheris"
        except ImportError:
            engine = "random"
    start = time.monotonic()

    def summary() -> None:
        elapsed = time.monotonic() - start
        print(
            f"{args.target}: {runner.runs} runs in {elapsed:.0f} s ({engine}), "
            f"{len(runner.findings)} distinct findings",
            file=sys.stderr,
        )
        for signature, path in runner.findings.items():
            print(f"  {signature}: {path}", file=sys.stderr)
        shutil.rmtree(runner._tmp, ignore_errors=True)

    if engine == "atheris":

        def stop() -> None:
            summary()
            sys.stderr.flush()
            os._exit(1 if runner.findings else 0)  # libFuzzer would end the process anyway

        runner.max_runs = args.runs
        runner.deadline = start + args.seconds if args.seconds else 0.0
        runner.on_limit = stop
        run_atheris(runner, rest)
        return 0
    run_random(runner, args.runs, args.seconds, args.seed)
    summary()
    return 1 if runner.findings else 0


if __name__ == "__main__":
    sys.exit(main())
