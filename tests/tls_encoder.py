"""TLS sessions built byte by byte for tests: the records a client and a broker would send
(RFC 8446 for TLS 1.3, RFC 5246 and 5288 for TLS 1.2 with AES-GCM), encrypted with secrets
chosen here, and the key log lines that name them. Written from the RFCs, apart from the
dissector's own code, so that each checks the other; `cryptography` does the AEAD.
"""

import hashlib
import hmac
import os
import struct

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

HANDSHAKE, CCS, APPLICATION_DATA = 22, 20, 23


def record(kind, body, version=0x0303):
    return struct.pack(">BHH", kind, version, len(body)) + body


def message(kind, body):
    return bytes([kind]) + len(body).to_bytes(3, "big") + body


def _vec(data, width):
    return len(data).to_bytes(width, "big") + data


def _ext(kind, data):
    return struct.pack(">H", kind) + _vec(data, 2)


def client_hello(random, suites, sni=None, alpn=()):
    ext = _ext(43, _vec(b"\x03\x04\x03\x03", 1))  # supported_versions
    if sni:
        ext += _ext(0, _vec(b"\x00" + _vec(sni.encode(), 2), 2))
    if alpn:
        ext += _ext(16, _vec(b"".join(_vec(p.encode(), 1) for p in alpn), 2))
    suites = b"".join(struct.pack(">H", s) for s in suites)
    body = b"\x03\x03" + random + _vec(os.urandom(32), 1) + _vec(suites, 2) + b"\x01\x00"
    return message(1, body + _vec(ext, 2))


def server_hello(random, suite, tls13):
    ext = _ext(43, b"\x03\x04") if tls13 else b""
    body = b"\x03\x03" + random + _vec(b"", 1) + struct.pack(">HB", suite, 0) + _vec(ext, 2)
    return message(2, body)


def hkdf_label(secret, label, length):
    full = b"tls13 " + label
    info = struct.pack(">H", length) + _vec(full, 1) + b"\x00"
    return HKDFExpand(hashes.SHA256(), length, info).derive(secret)


class Tls13Writer:
    """One direction of TLS_AES_128_GCM_SHA256: records encrypted under a traffic secret."""

    def __init__(self, secret):
        self.rekey(secret)

    def rekey(self, secret):
        self.secret = secret
        self.aead = AESGCM(hkdf_label(secret, b"key", 16))
        self.iv = hkdf_label(secret, b"iv", 12)
        self.seq = 0

    def seal(self, kind, plain, pad=0):
        inner = plain + bytes([kind]) + bytes(pad)
        header = struct.pack(">BHH", APPLICATION_DATA, 0x0303, len(inner) + 16)
        nonce = (int.from_bytes(self.iv, "big") ^ self.seq).to_bytes(12, "big")
        self.seq += 1
        return header + self.aead.encrypt(nonce, inner, header)

    def key_update(self):
        """A KeyUpdate record; what follows is under the next secret."""
        out = self.seal(HANDSHAKE, message(24, b"\x00"))
        self.rekey(hkdf_label(self.secret, b"traffic upd", 32))
        return out


class Tls13Session:
    """A TLS 1.3 session's secrets and the records of its handshake."""

    def __init__(self, sni="broker.example", alpn=("kafka",)):
        self.client_random, self.server_random = os.urandom(32), os.urandom(32)
        self.secrets = {
            name: os.urandom(32)
            for name in (
                "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
                "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                "CLIENT_TRAFFIC_SECRET_0",
                "SERVER_TRAFFIC_SECRET_0",
            )
        }
        self.client = Tls13Writer(self.secrets["CLIENT_TRAFFIC_SECRET_0"])
        self.server = Tls13Writer(self.secrets["SERVER_TRAFFIC_SECRET_0"])
        self.hello = record(
            HANDSHAKE, client_hello(self.client_random, [0x1301], sni, alpn), 0x0301
        )
        self.sni = sni

    def keylog(self, names=None):
        return "".join(
            f"{name} {self.client_random.hex()} {secret.hex()}\n"
            for name, secret in self.secrets.items()
            if names is None or name in names
        )

    def server_flight(self):
        """ServerHello, a compatibility ChangeCipherSpec, and the encrypted handshake."""
        writer = Tls13Writer(self.secrets["SERVER_HANDSHAKE_TRAFFIC_SECRET"])
        flight = message(8, b"\x00\x00") + message(11, bytes(200)) + message(20, os.urandom(32))
        return (
            record(HANDSHAKE, server_hello(self.server_random, 0x1301, True))
            + record(CCS, b"\x01")
            + writer.seal(HANDSHAKE, flight[:150])
            + writer.seal(HANDSHAKE, flight[150:])
        )

    def client_finished(self):
        writer = Tls13Writer(self.secrets["CLIENT_HANDSHAKE_TRAFFIC_SECRET"])
        return record(CCS, b"\x01") + writer.seal(HANDSHAKE, message(20, os.urandom(32)))


def prf(secret, label, seed, length):
    seed = label + seed
    out, a = b"", seed
    while len(out) < length:
        a = hmac.new(secret, a, hashlib.sha256).digest()
        out += hmac.new(secret, a + seed, hashlib.sha256).digest()
    return out[:length]


class Tls12Writer:
    """One direction of TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256."""

    def __init__(self, key, salt):
        self.aead, self.salt, self.seq = AESGCM(key), salt, 0

    def seal(self, kind, plain):
        explicit = self.seq.to_bytes(8, "big")
        aad = struct.pack(">QBHH", self.seq, kind, 0x0303, len(plain))
        self.seq += 1
        return record(kind, explicit + self.aead.encrypt(self.salt + explicit, plain, aad))


class Tls12Session:
    """A TLS 1.2 session (master secret logged as CLIENT_RANDOM) and its writers."""

    def __init__(self):
        self.client_random, self.server_random = os.urandom(32), os.urandom(32)
        self.master = os.urandom(48)
        block = prf(self.master, b"key expansion", self.server_random + self.client_random, 40)
        self.client = Tls12Writer(block[0:16], block[32:36])
        self.server = Tls12Writer(block[16:32], block[36:40])
        self.hello = record(HANDSHAKE, client_hello(self.client_random, [0xC02F]), 0x0301)
        self.server_hello = record(HANDSHAKE, server_hello(self.server_random, 0xC02F, False))

    def keylog(self):
        return f"CLIENT_RANDOM {self.client_random.hex()} {self.master.hex()}\n"

    def change_cipher(self, writer):
        """ChangeCipherSpec, then Finished under the new keys."""
        return record(CCS, b"\x01") + writer.seal(HANDSHAKE, message(20, os.urandom(12)))
