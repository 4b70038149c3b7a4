"""Stage 3½: TLS, between TCP reassembly and Kafka framing.

A connection whose client opens with a TLS ClientHello is TLS. Its records are read from each
side's in-order bytes; with the connection's secrets from an NSS key log (`keylog.py`), the
application data is decrypted (`keys.py`, with the `cryptography` library) and its plaintext
goes on to framing like any plaintext stream; without them, the connection is reported with
its TLS facts and a status (`connection.py`).
"""

from .connection import DECRYPTED, STATUSES, TlsConnection, opens_tls
from .keylog import KeyLog

__all__ = ["DECRYPTED", "STATUSES", "KeyLog", "TlsConnection", "opens_tls"]
