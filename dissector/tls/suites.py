"""The cipher suites decrypted here (IANA code -> Suite), all AEAD: TLS 1.3's three, and
TLS 1.2's AES-GCM and ChaCha20-Poly1305 suites, whatever their key exchange."""

from typing import NamedTuple

GCM, CHACHA = "AES-GCM", "CHACHA20-POLY1305"


class Suite(NamedTuple):
    name: str  # IANA's
    tls13: bool
    aead: str
    key_len: int
    hash: str  # of the PRF (1.2) or HKDF (1.3)


def _suite(name, aead, key_len, hash_name):
    return Suite(name, name.count("_WITH_") == 0, aead, key_len, hash_name)


SUITES = {
    0x1301: _suite("TLS_AES_128_GCM_SHA256", GCM, 16, "sha256"),
    0x1302: _suite("TLS_AES_256_GCM_SHA384", GCM, 32, "sha384"),
    0x1303: _suite("TLS_CHACHA20_POLY1305_SHA256", CHACHA, 32, "sha256"),
    0x009C: _suite("TLS_RSA_WITH_AES_128_GCM_SHA256", GCM, 16, "sha256"),
    0x009D: _suite("TLS_RSA_WITH_AES_256_GCM_SHA384", GCM, 32, "sha384"),
    0x009E: _suite("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", GCM, 16, "sha256"),
    0x009F: _suite("TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", GCM, 32, "sha384"),
    0xC02B: _suite("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", GCM, 16, "sha256"),
    0xC02C: _suite("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", GCM, 32, "sha384"),
    0xC02F: _suite("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", GCM, 16, "sha256"),
    0xC030: _suite("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", GCM, 32, "sha384"),
    0xCCA8: _suite("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", CHACHA, 32, "sha256"),
    0xCCA9: _suite("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", CHACHA, 32, "sha256"),
    0xCCAA: _suite("TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", CHACHA, 32, "sha256"),
}


def suite_name(code):
    """A suite's IANA name, or its code in hex for one not decrypted here."""
    found = SUITES.get(code)
    return found.name if found is not None else f"0x{code:04X}"
