"""Limits, statuses and errors shared by the record-set decoders."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What decoding one batch may cost; hostile input past these bounds gets a status."""

    max_output: int = 256 * 1024 * 1024  # bytes a single batch may decompress to
    max_ratio: int = 1000  # decompressed/compressed beyond which a batch is a bomb
    max_records: int = 10_000_000  # records per batch
    # False: batches without their records: headers, CRCs, sizes (decompressed, to know the
    # uncompressed size) but no record parsing, the costly part.
    records: bool = True
    # False (with records False): compressed batches are not decompressed, so their
    # uncompressed size stays unknown; decompression is most of the cost of a batch.
    decompress: bool = True


DEFAULT_LIMITS = Limits()

# Below this output size a high ratio is harmless (tiny payloads of zeros compress well).
RATIO_FLOOR = 1024 * 1024

OK = "ok"
DECOMPRESSION_BOMB = "decompression_bomb"
DECOMPRESSION_ERROR = "decompression_error"
UNKNOWN_CODEC = "unknown_codec"
CORRUPT_RECORDS = "corrupt_records"
TOO_MANY_RECORDS = "too_many_records"
STATUSES = (
    OK,
    DECOMPRESSION_BOMB,
    DECOMPRESSION_ERROR,
    UNKNOWN_CODEC,
    CORRUPT_RECORDS,
    TOO_MANY_RECORDS,
)

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
# The name of every codec the 3 codec bits of an attributes field can hold, by their value:
# read once a batch, so named once here.
CODEC_NAMES = tuple(CODECS.get(codec, f"unknown({codec})") for codec in range(8))


def codec_name(codec):
    return CODEC_NAMES[codec] if 0 <= codec < len(CODEC_NAMES) else f"unknown({codec})"


class BatchError(Exception):
    """A batch cannot be (fully) decoded; ``status`` says why."""

    status = CORRUPT_RECORDS


class Corrupt(BatchError):
    status = CORRUPT_RECORDS


class TooManyRecords(BatchError):
    status = TOO_MANY_RECORDS


class DecompressionFailed(BatchError):
    status = DECOMPRESSION_ERROR


class DecompressionBomb(DecompressionFailed):
    status = DECOMPRESSION_BOMB


class UnknownCodec(DecompressionFailed):
    status = UNKNOWN_CODEC
