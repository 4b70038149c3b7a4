"""Records decoded per second by ``decode_record_set``, uncompressed and with each codec.

Each record set holds 10,000 small records (8-byte key, 40 to 60-byte value, one header in
a record out of four), built with kafka-python's builders: magic 2 batches of 1,000 records,
and magic 1 message sets for the legacy codecs. Codecs whose library is missing are skipped.

    python benchmarks/bench_records.py [--records 10000] [--repeat 5]
"""

import argparse
import random
import sys
import time
from pathlib import Path

from kafka.codec import has_lz4, has_snappy, has_zstd
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout, not an install
from dissector.protocol.records import decode_record_set  # noqa: E402

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
AVAILABLE = {
    "none": True,
    "gzip": True,
    "snappy": has_snappy(),
    "lz4": has_lz4(),
    "zstd": has_zstd(),
}
PER_BATCH = 1000


def _payloads(count, seed=1):
    rng = random.Random(seed)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"epsilon", b"zeta", b"eta", b"theta"]
    for i in range(count):
        value = b" ".join(rng.choice(words) for _ in range(rng.randint(6, 9)))[:60]
        headers = [("trace", b"%08x" % i)] if i % 4 == 0 else []
        yield i, 1_700_000_000_000 + i, b"key-%04d" % (i % 10_000), value, headers


def build_v2(count, codec):
    out = bytearray()
    builder = None
    for i, ts, key, value, headers in _payloads(count):
        if builder is None:
            builder = DefaultRecordBatchBuilder(2, CODECS[codec], False, -1, -1, -1, 1 << 30)
            base = i
        builder.append(i - base, ts, key, value, headers)
        if i - base == PER_BATCH - 1:
            out += _rebase(builder.build(), base)
            builder = None
    if builder is not None:
        out += _rebase(builder.build(), base)
    return bytes(out)


def _rebase(batch, base):
    # The base offset is outside the CRC, so it can be set after building.
    return base.to_bytes(8, "big", signed=True) + bytes(batch[8:])


def build_legacy(count, codec):
    out = bytearray()
    builder = LegacyRecordBatchBuilder(1, CODECS[codec], 1 << 30)
    for i, ts, key, value, _headers in _payloads(count):
        builder.append(i, ts, key, value)
        if codec != "none" and (i + 1) % PER_BATCH == 0:
            out += builder.build()
            builder = LegacyRecordBatchBuilder(1, CODECS[codec], 1 << 30)
    out += builder.build()
    return bytes(out)


def measure(raw, expected, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = decode_record_set(raw)
        best = min(best, time.perf_counter() - t0)
    got = sum(len(b["records"]) for b in result["batches"])
    statuses = {b["status"] for b in result["batches"]}
    if got != expected or statuses != {"ok"}:
        raise SystemExit(f"decoded {got} records (statuses {statuses}), expected {expected}")
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{args.records} records, best of {args.repeat}\n")
    print("| format | codec | set bytes | ms | records/s |")
    print("|---|---|---:|---:|---:|")
    for label, build, codecs in (
        ("magic 2", build_v2, CODECS),
        ("magic 1", build_legacy, ("none", "gzip", "snappy", "lz4")),
    ):
        for codec in codecs:
            if not AVAILABLE[codec]:
                print(f"| {label} | {codec} | - | - | (library missing) |")
                continue
            raw = build(args.records, codec)
            seconds = measure(raw, args.records, args.repeat)
            print(
                f"| {label} | {codec} | {len(raw):,} | {seconds * 1e3:.1f} "
                f"| {args.records / seconds:,.0f} |"
            )


if __name__ == "__main__":
    main()
