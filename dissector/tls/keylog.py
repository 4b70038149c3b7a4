"""NSS key log files (SSLKEYLOGFILE): the secrets of TLS sessions, by client random.

Each line is `LABEL <client random, hex> <secret, hex>`; `#` starts a comment. TLS 1.2 logs
CLIENT_RANDOM (the master secret); TLS 1.3 logs the handshake and application traffic secrets
of each side. A key log is itself a secret: nothing here ever prints a secret.
"""

import os

LABELS = frozenset(
    {
        "CLIENT_RANDOM",
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "CLIENT_TRAFFIC_SECRET_0",
        "SERVER_TRAFFIC_SECRET_0",
        "CLIENT_EARLY_TRAFFIC_SECRET",
        "EARLY_EXPORTER_SECRET",
        "EXPORTER_SECRET",
    }
)
MAX_LINE = 4096  # longer lines are not key log lines: dropped, counted


class KeyLog:
    """Secrets by client random. `add(text)` takes key log lines (a file's, or a pcapng
    Decryption Secrets Block's); with `path`, the file is read now and, where `follow` is
    set (the default with a path), read again from where it stopped whenever a client random
    is not known yet (a live capture's clients append a line per handshake)."""

    def __init__(self, path=None, follow=None):
        self.path = None if path is None else os.fspath(path)
        self.follow = self.path is not None if follow is None else follow
        self.secrets = {}  # client random (bytes) -> {label: secret bytes}
        self.lines = 0  # key log lines taken
        self.bad_lines = 0  # lines that are not key log lines
        self._read = 0  # bytes of the file read so far
        self._rest = b""  # a last line not ended yet
        if self.path is not None:
            self.refresh()

    def add(self, text):
        """Take key log lines (bytes or str)."""
        if isinstance(text, str):
            text = text.encode()
        for line in text.splitlines():
            self._line(line)

    def _line(self, line):
        line = line.strip()
        if not line or line.startswith(b"#"):
            return
        parts = line.split()
        label = parts[0].decode("ascii", "replace")
        if len(line) > MAX_LINE or len(parts) != 3 or label not in LABELS:
            self.bad_lines += 1
            return
        try:
            random, secret = bytes.fromhex(parts[1].decode()), bytes.fromhex(parts[2].decode())
        except ValueError:
            self.bad_lines += 1
            return
        if len(random) != 32:
            self.bad_lines += 1
            return
        self.secrets.setdefault(random, {})[label] = secret
        self.lines += 1

    def refresh(self):
        """Read what the file gained since the last read (a file that shrank is read anew)."""
        if self.path is None:
            return
        try:
            size = os.stat(self.path).st_size
            if size < self._read:
                self._read, self._rest = 0, b""
            if size == self._read:
                return
            with open(self.path, "rb") as f:
                f.seek(self._read)
                data = f.read(size - self._read)
        except OSError as e:
            raise OSError(f"{self.path}: cannot read the TLS key log: {e.strerror}") from None
        self._read += len(data)
        data = self._rest + data
        cut = data.rfind(b"\n") + 1
        self._rest = data[cut:]
        self.add(data[:cut])

    def text(self):
        """The secrets held, as key log lines (for a process that cannot read the file)."""
        return "".join(
            f"{label} {random.hex()} {secret.hex()}\n"
            for random, found in self.secrets.items()
            for label, secret in found.items()
        )

    def get(self, client_random):
        """{label: secret} of a session, or None. A key log that follows its file reads what it
        gained first when the session is not known."""
        found = self.secrets.get(client_random)
        if found is None and self.follow:
            self.refresh()
            found = self.secrets.get(client_random)
        return found
