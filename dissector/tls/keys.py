"""Record keys from a session's secrets, and records decrypted with them.

TLS 1.2 (RFC 5246, 5288, 7905): the key block is the PRF of the master secret over "key
expansion" and both randoms; AES-GCM records carry 8 bytes of explicit nonce after the
4-byte implicit salt, ChaCha20-Poly1305 records XOR the sequence number into a 12-byte IV.
TLS 1.3 (RFC 8446): each traffic secret gives a key and an IV by HKDF-Expand-Label; the
nonce is the IV XOR the sequence number; the additional data is the record header, and the
real content type is the last non-zero byte of the plaintext.

The AEAD ciphers and hashes are the `cryptography` library's.
"""

import struct

from .suites import GCM

# `cryptography`, and OpenSSL's hashes behind hmac, load on first use: 40 ms at start, for
# every capture with nothing to decrypt.
AESGCM = ChaCha20Poly1305 = HKDFExpand = InvalidTag = hmac = None
HASHES = {}


def _load():
    global AESGCM, ChaCha20Poly1305, HKDFExpand, InvalidTag, hmac
    import hmac

    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    HASHES.update(sha256=hashes.SHA256, sha384=hashes.SHA384)


TAG = 16  # both AEADs' tag
EXPLICIT_NONCE = 8  # TLS 1.2 AES-GCM
_SEQ = struct.Struct(">Q")


class DecryptError(Exception):
    """A record that does not decrypt: wrong key, or corrupt bytes."""


def hkdf_expand_label(hash_name, secret, label, length):
    """RFC 8446 7.1, with an empty context."""
    if hmac is None:
        _load()
    full = b"tls13 " + label
    info = struct.pack(">HB", length, len(full)) + full + b"\x00"
    return HKDFExpand(HASHES[hash_name](), length, info).derive(secret)


def next_secret(suite, secret):
    """The traffic secret after a KeyUpdate (of a RecordKey: the libraries are loaded)."""
    return hkdf_expand_label(suite.hash, secret, b"traffic upd", HASHES[suite.hash].digest_size)


def prf12(hash_name, secret, label, seed, length):
    """TLS 1.2's PRF: P_hash(secret, label + seed)."""
    if hmac is None:
        _load()
    seed = label + seed
    out, a = b"", seed
    while len(out) < length:
        a = hmac.new(secret, a, hash_name).digest()
        out += hmac.new(secret, a + seed, hash_name).digest()
    return out[:length]


def _aead(suite, key):
    """The AEAD of a RecordKey, made once its key is derived (the libraries are loaded)."""
    return AESGCM(key) if suite.aead == GCM else ChaCha20Poly1305(key)


class RecordKey:
    """One direction's key in one epoch: decrypt(header, body) -> (content type, plaintext),
    counting sequence numbers from 0."""

    def __init__(self, suite, key, iv, secret=None):
        self.suite = suite
        self.aead = _aead(suite, key)
        self.iv = iv
        self._iv = int.from_bytes(iv, "big")
        self.secret = secret  # TLS 1.3: the traffic secret, for a KeyUpdate
        self.seq = 0

    @classmethod
    def tls13(cls, suite, secret):
        key = hkdf_expand_label(suite.hash, secret, b"key", suite.key_len)
        return cls(suite, key, hkdf_expand_label(suite.hash, secret, b"iv", 12), secret)

    def updated(self):
        return RecordKey.tls13(self.suite, next_secret(self.suite, self.secret))

    def _nonce(self):
        return (self._iv ^ self.seq).to_bytes(len(self.iv), "big")

    def decrypt(self, header, body):
        """The record's content type and plaintext; DecryptError if it does not open."""
        suite = self.suite
        try:
            if suite.tls13:
                plain = self.aead.decrypt(self._nonce(), body, header)
                end = len(plain.rstrip(b"\x00"))
                if end == 0:
                    raise DecryptError("no content type")
                kind, plain = plain[end - 1], plain[: end - 1]
            else:
                kind = header[0]
                if suite.aead == GCM:
                    nonce, body = self.iv + body[:EXPLICIT_NONCE], body[EXPLICIT_NONCE:]
                else:
                    nonce = self._nonce()
                size = len(body) - TAG
                if size < 0:
                    raise DecryptError("shorter than its tag")
                aad = _SEQ.pack(self.seq) + header[:3] + size.to_bytes(2, "big")
                plain = self.aead.decrypt(nonce, body, aad)
        except InvalidTag:
            raise DecryptError("authentication failed: wrong key, or corrupt bytes") from None
        self.seq += 1
        return kind, plain


def tls12_keys(suite, master, client_random, server_random):
    """(client's RecordKey, server's RecordKey) of a TLS 1.2 session."""
    iv_len = 4 if suite.aead == GCM else 12
    size = 2 * (suite.key_len + iv_len)
    block = prf12(suite.hash, master, b"key expansion", server_random + client_random, size)
    k = suite.key_len
    client_key, server_key = block[:k], block[k : 2 * k]
    client_iv, server_iv = block[2 * k : 2 * k + iv_len], block[2 * k + iv_len :]
    return RecordKey(suite, client_key, client_iv), RecordKey(suite, server_key, server_iv)
