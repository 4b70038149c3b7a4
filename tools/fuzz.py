"""Fuzz the dissector: Kafka frame decoders, record sets, and whole captures.

    python tools/fuzz.py --target frames --runs 200000
    python tools/fuzz.py --target records --runs 200000
    python tools/fuzz.py --target capture --runs 5000
    python tools/fuzz.py --target capture --seconds 300 --engine random --seed 7

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

Seeds come from the sample captures: every Kafka frame, every record set and every packet of
``captures/*.pcap``. Two engines run the same targets:

- ``atheris`` (the default when the ``atheris`` package imports): coverage-guided, libFuzzer's
  mutations over the seed inputs. A frame input is a 5-byte prefix (kind, API key, version)
  then the frame; a record-set input is the raw set; a capture input is the file's bytes.
- ``random``: a plain loop of random mutations over the seeds, without coverage feedback:
  bytes flipped, cut, inserted and deleted, size fields set to hostile values (2**31-1, -1,
  huge counts), endless varints; for captures also packets cut, duplicated, dropped,
  shuffled, garbage packets inserted, headers damaged, and the file written as pcap, pcapng or
  gzip.

A finding is written under ``--out`` (default ``fuzz-findings/``) as the input that caused it
plus a ``.txt`` with the traceback, and the run goes on (``--stop`` ends it at the first).
Replay a finding with ``--replay FILE --target T``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import os
import random
import shutil
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
from dissector.net.decode import NetDecoder  # noqa: E402
from dissector.options import Options  # noqa: E402
from dissector.protocol import messages  # noqa: E402
from dissector.protocol.codegen import Context  # noqa: E402
from dissector.protocol.records import Limits, decode_record_set  # noqa: E402
from dissector.tcp import StreamData, TcpTracker  # noqa: E402

CAPTURES = ROOT / "captures"
SEED_CAPTURES = ("kafka-python.pcap", "compression.pcap")
REQUEST, RESPONSE = 0, 1
FULL = Limits(records=True)
# What the dissector applies to the records fields of a message with records="full".
RECORD_DECODER = Options(records="full").record_decoder()
HOSTILE32 = (0x7FFFFFFF, -1, -0x80000000, 0x7FFFFFF0, 0x10000000, 0xFFFF, 0)
HOSTILE16 = (0x7FFF, -1, -0x8000, 0x100)


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

    def keep(raw):
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

    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for table in ("pairs", "records"):
                with contextlib.suppress(DissectorError):
                    dissector.read_pcap(path, table=table)
    finally:
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        if not tracing:
            tracemalloc.stop()
    if elapsed > time_limit:
        raise Finding(f"took {elapsed:.1f} s (limit {time_limit} s)")
    if peak > memory_limit:
        raise Finding(f"traced memory peak {peak >> 20} MiB (limit {memory_limit >> 20} MiB)")


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
    return [(CAPTURES / name).read_bytes() for name in SEED_CAPTURES]


def random_input(rng: random.Random, target: str, pool: list[bytes]) -> bytes:
    if target == "capture":
        return random_capture(rng)
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
    if runner.target == "capture":
        args.append("-max_len=400000")
        args.append(f"-timeout={int(runner.time_limit) + 5}")
    else:
        args.append("-max_len=70000")
        args.append("-timeout=20")
    atheris.Setup(args + argv, runner.one)
    atheris.Fuzz()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--target", choices=["frames", "records", "capture"], required=True)
    parser.add_argument("--runs", type=int, default=100_000, help="inputs to try")
    parser.add_argument("--seconds", type=float, default=0, help="stop after this long")
    parser.add_argument("--engine", choices=["atheris", "random"], help="default: atheris if any")
    parser.add_argument("--seed", type=int, default=0, help="random engine seed")
    parser.add_argument("--out", type=Path, default=Path("fuzz-findings"))
    parser.add_argument("--stop", action="store_true", help="stop at the first finding")
    parser.add_argument("--time-limit", type=float, default=10.0, help="capture: seconds a run")
    parser.add_argument("--memory-limit", type=int, default=200, help="capture: MiB a run")
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
