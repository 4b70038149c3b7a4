"""The two checksums of Kafka's record formats."""

import zlib

_crc32c = None  # the crc32c library, loaded on first use: importing it costs 30 ms at start


def crc32(data):
    """CRC-32 (IEEE), the checksum of magic 0 and 1 messages."""
    return zlib.crc32(data) & 0xFFFFFFFF


def crc32c(data):
    """CRC-32C (Castagnoli), the checksum of magic 2 record batches."""
    global _crc32c
    if _crc32c is None:
        from crc32c import crc32c as _crc32c
    return _crc32c(data)
