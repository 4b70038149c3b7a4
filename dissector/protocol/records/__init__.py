"""Decoding of Kafka record sets: the ``records`` bytes of Produce requests, Fetch responses
and anywhere else the protocol carries them.

``decode_record_set(raw, limits)`` returns a plain dict (for tables and JSON)::

    {"size": int, "batches": [...], "truncated": bool, "truncated_bytes": int,
     "error": str | None}

``truncated`` says the set ends in part of a batch (normal at the end of a Fetch response):
the whole batches before it are decoded, the part is counted in ``truncated_bytes``.
``error`` is set when a negative length leaves the rest of the set unreadable.

Every batch has ``magic``, ``records``, ``record_count``, ``status``, ``error``,
``crc``/``crc_ok``, ``attributes``, ``compression``, ``compressed_size`` and
``uncompressed_size``. Magic 2 batches add the record batch header fields; a magic 0/1
entry is one top-level message (``offset``, ``timestamp_type``, ``timestamp``, ``key``,
``value``) whose ``records`` are itself or, when compressed, the messages inside it.

Every record has ``offset``, ``timestamp``, ``attributes``, ``key``, ``value`` and
``headers`` (``[(str, bytes | None)]``); records of control batches add ``control``, and
magic 0/1 records add ``crc_ok`` (each inner message has its own CRC). Offsets and timestamps
are absolute, resolved as Kafka does: every record of a log-append-time batch (or magic 1
wrapper) takes the batch's time, and magic 1 inner offsets count back from the wrapper's.

``status`` is one of ``STATUSES``; anything but ``"ok"`` comes with ``error`` and with the
records decoded before the problem. A bad CRC is not a status: ``crc_ok`` carries it.
"""

from .common import DEFAULT_LIMITS, STATUSES, Limits, codec_name
from .record_set import RecordSets, decode_record_set

__all__ = ["DEFAULT_LIMITS", "STATUSES", "Limits", "RecordSets", "codec_name", "decode_record_set"]
