"""The two checksums of Kafka's record formats."""

import zlib

from crc32c import crc32c as _crc32c


def crc32(data):
    """CRC-32 (IEEE), the checksum of magic 0 and 1 messages."""
    return zlib.crc32(data) & 0xFFFFFFFF


def crc32c(data):
    """CRC-32C (Castagnoli), the checksum of magic 2 record batches."""
    return _crc32c(data)
