"""One TLS connection, both directions: in-order bytes in, the plaintext of its application
data out, each piece with the packet that completed its record.

Each side's bytes are read as records (a 5-byte header: content type, version, length).
Until a side's keys take effect its records are plaintext: the ClientHello (client random,
SNI, ALPN) and the ServerHello (server random, version, cipher suite). TLS 1.2 encrypts a
side's records after its ChangeCipherSpec; TLS 1.3 encrypts every application_data record
after the ServerHello, first with the handshake secrets, and after the side's Finished with
the traffic secrets (a KeyUpdate moves them on). TLS 1.3's compatibility ChangeCipherSpec
records are passed over.

Nothing here raises on hostile bytes: what cannot be read ends the side (`lost`) with a
status and a line naming the packet and the stream offset; every byte fed is counted either
as plaintext handed on or as TLS (`bytes_tls`).
"""

from . import handshake as hs
from .keys import DecryptError, RecordKey, tls12_keys
from .suites import SUITES, suite_name

CCS, ALERT, HANDSHAKE, APPLICATION_DATA, HEARTBEAT = 20, 21, 22, 23, 24
MAX_RECORD = (1 << 14) + 2048  # TLS 1.2's largest ciphertext; 1.3's is smaller
MAX_MESSAGE = 1 << 20  # bytes of one handshake message held (certificate chains are KBs)
# Bytes of encrypted records a side holds while its session's secrets are not in a key log that
# is still growing: a live capture may read the server's first encrypted records before the
# client has written the line of the session (it writes it as it reads the ServerHello).
MAX_WAITING = 16 << 10

DECRYPTED, NO_KEY, UNSUPPORTED, FAILED, INCOMPLETE = (
    "decrypted",
    "no_key",
    "unsupported_cipher",
    "decrypt_failed",
    "incomplete",
)
STATUSES = (DECRYPTED, NO_KEY, UNSUPPORTED, FAILED, INCOMPLETE)


def opens_tls(data, start=0):
    """Whether a client's first bytes open TLS: a handshake record holding a ClientHello."""
    return (
        len(data) - start >= 6
        and data[start] == HANDSHAKE
        and data[start + 1] == 3
        and data[start + 2] <= 4
        and data[start + 5] == hs.CLIENT_HELLO
    )


class _Side:
    __slots__ = ("buf", "offset", "fed", "plain", "key", "encrypted", "handshake", "lost",
                 "trial", "updates", "waiting")  # fmt: skip

    def __init__(self):
        self.buf = bytearray()  # a record not whole yet
        self.offset = 0  # offset in the side's bytes of the first not read as a record
        self.fed = 0
        self.plain = 0  # bytes handed on as plaintext
        self.key = None  # RecordKey in effect
        self.encrypted = False  # records are encrypted from here on
        self.handshake = bytearray()  # handshake bytes not yet a whole message
        self.lost = False  # nothing more is read from this side
        self.trial = None  # TLS 1.3 without handshake secrets: the traffic key, tried
        self.updates = 0  # KeyUpdates
        self.waiting = False  # holding its records for secrets a growing key log may gain


class TlsConnection:
    """feed(side, data, frame, ts, start) -> [(plaintext, frame, ts)]. `client_side`: the
    side that sent the ClientHello. `keylog`: a KeyLog."""

    def __init__(self, keylog, client_side):
        self.keylog = keylog
        self.client_side = client_side
        self.sides = (_Side(), _Side())
        self.client_random = None
        self.server_random = None
        self.version = None  # "TLSv1.2", "TLSv1.3", ...
        self.suite = None  # its code
        self.sni = None
        self.alpn = None  # the protocols the client offered, comma-separated
        self.error = None  # what stopped decryption, with frame and offset
        self._status = None  # set when decryption cannot go on (else from the handshake)
        self.decrypted = 0  # records decrypted
        self._tls13 = False
        self._secrets = None

    # -- figures -----------------------------------------------------------------------------

    @property
    def status(self):
        if self._status is not None:
            return self._status
        if self.sides[0].waiting or self.sides[1].waiting:
            return NO_KEY
        if self.suite is None:
            return INCOMPLETE
        return DECRYPTED

    @property
    def cipher(self):
        return None if self.suite is None else suite_name(self.suite)

    def facts(self):
        """(status, version, cipher suite, SNI, ALPN, error): the streams table's TLS columns."""
        return self.status, self.version, self.cipher, self.sni, self.alpn, self.error

    def state(self):
        """Where decryption stands, as plain values (Conversation.state)."""
        sides = tuple(
            (s.offset, len(s.buf), s.lost, s.encrypted, s.updates, s.key and s.key.seq)
            for s in self.sides
        )
        return self.facts(), self.decrypted, sides

    def bytes_tls(self, side):
        """Bytes of a side that were TLS (headers, handshake, tags, records not decrypted)."""
        s = self.sides[side]
        return s.fed - s.plain

    @property
    def done(self):
        """Both sides are lost: no plaintext will come."""
        return self.sides[0].lost and self.sides[1].lost

    # -- bytes in ----------------------------------------------------------------------------

    def feed(self, side, data, frame, ts, start=0):
        s = self.sides[side]
        s.fed += len(data) - start
        if s.lost:
            return []
        if s.buf:  # a record begun in earlier bytes goes on here
            s.buf += memoryview(data)[start:]
            data, start = bytes(s.buf), 0
            s.buf.clear()
        view = memoryview(data)  # records are read where they lie, not copied
        size, pos, out = len(data), start, []
        while size - pos >= 5 and not s.lost:
            kind, major, length = data[pos], data[pos + 1], (data[pos + 3] << 8) | data[pos + 4]
            offset = s.offset + pos - start  # in the side's bytes
            if not CCS <= kind <= HEARTBEAT or major != 3 or length > MAX_RECORD:
                self._fail(side, frame, offset, "bytes that are not a TLS record", FAILED)
                break
            end = pos + 5 + length
            if end > size:
                break
            self._record(side, s, kind, data[pos : pos + 5], view[pos + 5 : end], frame, ts,
                         offset, out)  # fmt: skip
            if s.waiting:
                if size - pos > MAX_WAITING:
                    self._fail(side, frame, offset, "no secrets for this session", NO_KEY)
                break
            pos = end
        s.offset += pos - start
        if not s.lost:
            s.buf += view[pos:]
        return out

    def lose(self, side, frame):
        """Bytes of a side are missing from the capture: its records cannot be followed."""
        s = self.sides[side]
        if not s.lost:
            s.lost = True
            s.buf.clear()
            if self.error is None:
                self.error = (
                    f"frame {frame}: bytes of the {self._who(side)} missing from the capture: "
                    "its later records are not decrypted"
                )

    # -- records -----------------------------------------------------------------------------

    def _record(self, side, s, kind, header, body, frame, ts, offset, out):
        if kind == CCS:
            if not self._tls13:  # TLS 1.2: this side's next records are encrypted
                s.encrypted = True
            return
        if not s.encrypted and not (self._tls13 and kind == APPLICATION_DATA):
            if kind == HANDSHAKE:
                self._handshake(side, s, body, frame, offset)
            return
        if s.key is None and s.trial is None and not self._keys(side, s, frame, offset):
            return
        try:
            kind, plain = self._decrypt(s, header, body)
        except DecryptError as e:
            why = f"a record of the {self._who(side)} does not decrypt ({e})"
            self._fail(side, frame, offset, why, FAILED)
            return
        if kind is None:  # TLS 1.3, a handshake record tried with the traffic key
            return
        self.decrypted += 1
        if kind == APPLICATION_DATA:
            if plain:
                s.plain += len(plain)
                out.append((plain, frame, ts))
        elif kind == HANDSHAKE:
            self._handshake(side, s, plain, frame, offset)

    def _decrypt(self, s, header, body):
        if s.trial is None:
            return s.key.decrypt(header, body)
        try:  # the first record that opens with the traffic key is the first one under it
            found = s.trial.decrypt(header, body)
        except DecryptError:
            return None, b""
        s.key, s.trial = s.trial, None
        return found

    def _handshake(self, side, s, data, frame, offset):
        """Handshake messages, whole ones, as they complete across records."""
        s.handshake += data
        found, used = hs.messages(s.handshake)
        del s.handshake[:used]
        if hs.pending_size(s.handshake) > MAX_MESSAGE:
            self._fail(side, frame, offset, "a handshake message too large", FAILED)
            return
        for kind, body in found:
            try:
                self._message(side, s, kind, body)
            except ValueError as e:
                self._fail(side, frame, offset, f"a handshake message that lies: {e}", FAILED)
                return

    def _message(self, side, s, kind, body):
        if kind == hs.CLIENT_HELLO and side == self.client_side and not s.encrypted:
            self.client_random, self.sni, protocols = hs.client_hello(body)
            self.alpn = ",".join(protocols) or None
        elif kind == hs.SERVER_HELLO and side != self.client_side and not s.encrypted:
            random, version, suite, _ = hs.server_hello(body)
            if random == hs.RETRY_RANDOM:  # HelloRetryRequest: the ServerHello comes later
                return
            self.server_random, self.suite = random, suite
            self.version = hs.VERSIONS.get(version, f"0x{version:04X}")
            self._tls13 = version == hs.TLS13
        elif kind == hs.FINISHED and self._tls13 and s.key is not None:
            # The side's handshake ends: its records go on under the traffic secret.
            if s.key.secret == self._secret(side, "HANDSHAKE_TRAFFIC_SECRET"):
                s.key = self._traffic_key(side)
        elif kind == hs.KEY_UPDATE and self._tls13 and s.key is not None:
            s.key = s.key.updated()
            s.updates += 1

    # -- keys --------------------------------------------------------------------------------

    def _keys(self, side, s, frame, offset):
        """The side's first encrypted record: its key from the key log. False when there is
        none (the side is lost, with the status)."""
        suite = SUITES.get(self.suite)
        if self.suite is None or self.client_random is None:
            self._fail(side, frame, offset, "encrypted records before the handshake", INCOMPLETE)
            return False
        if suite is None:
            self._fail(side, frame, offset, f"cipher suite {self.cipher}", UNSUPPORTED)
            return False
        secrets = self.keylog.get(self.client_random)
        s.waiting = not secrets and self.keylog.follow
        if s.waiting:
            return False
        if not secrets:
            self._fail(side, frame, offset, "no secrets for this session", NO_KEY)
            return False
        self._secrets = secrets
        if not suite.tls13:
            master = secrets.get("CLIENT_RANDOM")
            if master is None or self.server_random is None:
                self._fail(side, frame, offset, "no master secret for this session", NO_KEY)
                return False
            keys = tls12_keys(suite, master, self.client_random, self.server_random)
            s.key = keys[0 if side == self.client_side else 1]
            return True
        handshake = self._secret(side, "HANDSHAKE_TRAFFIC_SECRET")
        if handshake is not None:
            s.key = RecordKey.tls13(suite, handshake)
            return True
        trial = self._traffic_key(side)
        if trial is None:
            self._fail(side, frame, offset, "no traffic secret for this side", NO_KEY)
            return False
        s.trial = trial
        return True

    def _secret(self, side, name):
        prefix = "CLIENT_" if side == self.client_side else "SERVER_"
        return (self._secrets or {}).get(prefix + name)

    def _traffic_key(self, side):
        secret = self._secret(side, "TRAFFIC_SECRET_0")
        return None if secret is None else RecordKey.tls13(SUITES[self.suite], secret)

    def _fail(self, side, frame, offset, why, status):
        s = self.sides[side]
        s.lost = True
        s.waiting = False
        if self._status is None or self._status == INCOMPLETE:
            self._status = status
        if self.error is None:
            self.error = f"frame {frame}, offset {offset} of the {self._who(side)}'s bytes: {why}"

    def _who(self, side):
        return "client" if side == self.client_side else "broker"
