"""The parts of TLS handshake messages that say how a connection is protected: the randoms
that name its secrets in a key log, the version and cipher suite the server chose, and the
server name (SNI) and protocols (ALPN) the client asked for.

Every length is checked against the bytes at hand: a message that lies raises ValueError.
"""

import struct

CLIENT_HELLO, SERVER_HELLO, NEW_SESSION_TICKET, FINISHED, KEY_UPDATE = 1, 2, 4, 20, 24
SERVER_NAME, ALPN, SUPPORTED_VERSIONS = 0, 16, 43
TLS12, TLS13 = 0x0303, 0x0304
VERSIONS = {0x0301: "TLSv1.0", 0x0302: "TLSv1.1", TLS12: "TLSv1.2", TLS13: "TLSv1.3"}
# A ServerHello with this random is a HelloRetryRequest (RFC 8446 4.1.3).
RETRY_RANDOM = bytes.fromhex("CF21AD74E59A6111BE1D8C021E65B891C2A211167ABB8C5E079E09E2C8A8339C")
_U16 = struct.Struct(">H").unpack_from


def messages(buf):
    """(type, body) of each whole handshake message at the start of buf, and the bytes they
    took; a message not whole yet is left."""
    out, pos = [], 0
    while len(buf) - pos >= 4:
        size = int.from_bytes(buf[pos + 1 : pos + 4], "big")
        if len(buf) - pos - 4 < size:
            break
        out.append((buf[pos], bytes(buf[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    return out, pos


def pending_size(buf):
    """The size the first incomplete message at the start of buf claims (0 if none)."""
    return int.from_bytes(buf[1:4], "big") if len(buf) >= 4 else 0


def _vector(body, pos, width):
    if pos + width > len(body):
        raise ValueError("cut short")
    size = int.from_bytes(body[pos : pos + width], "big")
    end = pos + width + size
    if end > len(body):
        raise ValueError("a length past the message's end")
    return body[pos + width : end], end


def _extensions(body, pos):
    """{type: data} of the extensions from pos (none if the message ends there)."""
    if pos == len(body):
        return {}
    block, _ = _vector(body, pos, 2)
    out, p = {}, 0
    while p + 4 <= len(block):
        kind = _U16(block, p)[0]
        data, p = _vector(block, p + 2, 2)
        out.setdefault(kind, data)
    return out


def client_hello(body):
    """(random, server name or None, [ALPN protocols])."""
    if len(body) < 34:
        raise ValueError("a ClientHello shorter than its random")
    random = body[2:34]
    _, pos = _vector(body, 34, 1)  # session id
    _, pos = _vector(body, pos, 2)  # cipher suites
    _, pos = _vector(body, pos, 1)  # compression methods
    ext = _extensions(body, pos)
    name = None
    if SERVER_NAME in ext:
        names, _ = _vector(ext[SERVER_NAME], 0, 2)
        if len(names) >= 3 and names[0] == 0:
            host, _ = _vector(names, 1, 2)
            name = host.decode("ascii", "replace")
    protocols = []
    if ALPN in ext:
        block, _ = _vector(ext[ALPN], 0, 2)
        p = 0
        while p < len(block):
            proto, p = _vector(block, p, 1)
            protocols.append(proto.decode("ascii", "replace"))
    return random, name, protocols


def server_hello(body):
    """(random, version, cipher suite code, selected ALPN protocol or None)."""
    if len(body) < 34:
        raise ValueError("a ServerHello shorter than its random")
    version, random = _U16(body, 0)[0], body[2:34]
    _, pos = _vector(body, 34, 1)  # session id
    if pos + 3 > len(body):
        raise ValueError("cut short")
    suite = _U16(body, pos)[0]
    ext = _extensions(body, pos + 3)
    if len(ext.get(SUPPORTED_VERSIONS, b"")) == 2:
        version = _U16(ext[SUPPORTED_VERSIONS], 0)[0]
    protocol = None
    if ALPN in ext:
        block, _ = _vector(ext[ALPN], 0, 2)
        if block:
            protocol = _vector(block, 0, 1)[0].decode("ascii", "replace")
    return random, version, suite, protocol
