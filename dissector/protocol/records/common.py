"""Limits, statuses and errors shared by the record-set decoders."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What decoding may cost; hostile input past these bounds gets a status."""

    # Bytes the record sets of one body (an Allowance) may decompress to, all together.
    max_output: int = 256 * 1024 * 1024
    # Decompressed/compressed, over those record sets and over the run: past it, a bomb.
    max_ratio: int = 1000
    max_records: int = 10_000_000  # records per batch
    # False: batches without their records: headers, CRCs, sizes (decompressed, to know the
    # uncompressed size) but no record parsing, the costly part.
    records: bool = True
    # False (with records False): compressed batches are not decompressed, so their
    # uncompressed size stays unknown; decompression is most of the cost of a batch.
    decompress: bool = True


DEFAULT_LIMITS = Limits()


class Spent:
    """What the bodies of one run (a Dissector's) have decompressed, and from how many
    compressed bytes: the ratio holds over these too, so that body after body, each under
    RATIO_FLOOR, cannot make a small capture decompress to any size."""

    __slots__ = ("out", "taken")

    def __init__(self):
        self.out = 0
        self.taken = 0


class Allowance:
    """What the record sets of one body may decompress to, all together: `max_output` bytes,
    and `max_ratio` times the compressed bytes they came from (once past RATIO_FLOOR). The
    output of a nested message set counts; its input, itself decompressed, does not. So
    neither batch after batch (each under the floor) nor level upon level of nesting (each
    under the ratio) multiplies what a body may become. With `run` (a Spent), the ratio
    holds over every body of the run as well."""

    __slots__ = ("limit", "left", "out", "taken", "ratio", "run")

    def __init__(self, limits, run=None):
        self.limit = self.left = limits.max_output
        self.out = 0  # bytes decompressed so far
        self.taken = 0  # compressed bytes of the outermost level they came from
        self.ratio = limits.max_ratio
        self.run = run

    def saved(self):
        """What restore() comes back to: this body's figures and its run's."""
        run = self.run
        return self.left, self.out, self.taken, run and run.out, run and run.taken

    def restore(self, saved):
        self.left, self.out, self.taken, out, taken = saved
        if self.run is not None:
            self.run.out, self.run.taken = out, taken

    def spend(self, out, taken):
        """`out` bytes decompressed from `taken` compressed bytes of the outermost level."""
        self.left -= out
        self.out += out
        self.taken += taken
        if self.run is not None:
            self.run.out += out
            self.run.taken += taken


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
