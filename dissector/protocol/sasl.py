"""SASL tokens: who authenticates, with every secret redacted unless asked otherwise.

SaslAuthenticate (and the raw tokens that follow a SaslHandshake v0) carry the mechanism's
own messages. The principal is worth showing; passwords, SCRAM proofs and signatures, and
bearer tokens are not: they are replaced by "<redacted ...>" before anything leaves the
decoder, so no table or file can hold them.

Redaction goes by structure, never by how a token looks: a token is read as the mechanism
the broker accepted (the session says which), each message is parsed by that mechanism's
grammar, and only the parts the grammar names as public are kept. A token of an unknown or
refused mechanism, or one that does not parse, is redacted whole: its length stays, so a
reader still sees that a token went by.
"""

import json
import re

from .apikeys import (
    ALTER_USER_SCRAM_CREDENTIALS,
    CREATE_DELEGATION_TOKEN,
    DESCRIBE_DELEGATION_TOKEN,
    EXPIRE_DELEGATION_TOKEN,
    RENEW_DELEGATION_TOKEN,
    SASL_AUTHENTICATE,
)

# Fields of other APIs that hold secrets (delegation token HMACs, SCRAM credentials).
SECRET_FIELDS = frozenset({"Hmac", "SaltedPassword"})
SECRET_APIS = frozenset(
    {
        CREATE_DELEGATION_TOKEN,
        RENEW_DELEGATION_TOKEN,
        EXPIRE_DELEGATION_TOKEN,
        DESCRIBE_DELEGATION_TOKEN,
        ALTER_USER_SCRAM_CREDENTIALS,
    }
)
# Bytes the schema does not name (unknown tagged fields, bytes after the last field): in a
# message that carries secrets nothing says they are not one.
UNNAMED = frozenset({"_trailing_bytes", "_unknown_tags"})

# RFC 5802 / 7628 GS2 header: channel-binding flag, optional authzid, then the message.
_GS2 = re.compile(r"(n|y|p=[A-Za-z0-9.-]+),(?:a=([^,]*))?,(.*)", re.S)
_ATTR = re.compile(r"([A-Za-z][A-Za-z0-9]*)=(.*)", re.S)
_BEARER = re.compile(r"[ \t]*(bearer)[ \t]+\S.*", re.S | re.I)
_OAUTH_PUBLIC = frozenset({"host", "port"})  # every other key's value may be a credential
_OAUTH_ERROR_KEYS = frozenset({"status", "scope", "openid-configuration"})


def redacted(value):
    n = len(value) if value is not None else 0
    return f"<redacted {n} bytes>"


def accepted_mechanism(request, response):
    """The mechanism a SaslHandshake settled: the one asked for, when the broker answered
    without error; None when it refused, or either side is missing or did not decode."""
    if not isinstance(request, dict) or not isinstance(response, dict):
        return None
    if response.get("ErrorCode", 1) != 0:
        return None
    mechanism = request.get("Mechanism")
    return mechanism if isinstance(mechanism, str) else None


def parse_token(mechanism, raw, from_client, show_secrets=False):
    """A dict describing one SASL token: mechanism, principal where the token names one, and
    the token itself with secrets redacted (or whole, with show_secrets)."""
    if raw is None:
        return None
    raw = bytes(raw)
    out = {"mechanism": mechanism, "principal": None, "size": len(raw)}
    parsed = _parse(_family(mechanism), raw, from_client, show_secrets)
    if parsed is None:  # unknown mechanism, or not its grammar: opaque
        out["token"] = raw if show_secrets else redacted(raw)
    else:
        out["principal"], out["token"] = parsed
    return out


def _family(mechanism):
    mech = (mechanism or "").upper()
    return "SCRAM" if mech.startswith("SCRAM-") else mech


def _parse(family, raw, from_client, show_secrets):
    """(principal, token text) of a token that parses as its mechanism's, else None."""
    parser = _PARSERS.get((family, from_client))
    if parser is None:
        return None
    try:
        text = raw.decode("utf-8")  # every mechanism read here is UTF-8 by its RFC
    except UnicodeDecodeError:
        return None
    return parser(text, show_secrets)


# -- PLAIN (RFC 4616): authzid NUL authcid NUL password --------------------------------------


def _plain_client(text, show_secrets):
    parts = text.split("\x00")
    if len(parts) != 3 or not parts[1]:
        return None
    authzid, authcid, password = parts
    secret = password if show_secrets else redacted(password.encode())
    return authcid, "\x00".join([authzid, authcid, secret])


def _plain_server(text, show_secrets):
    # The broker says nothing on success: anything else is not PLAIN's.
    return (None, text) if text == "" else None


# -- SCRAM (RFC 5802) -------------------------------------------------------------------------


def _unescape(name):
    return name.replace("=2C", ",").replace("=3D", "=")


def _attrs(text):
    """[(key, value)] of a comma-separated SCRAM message, or None when one is not key=value."""
    pairs = []
    for item in text.split(","):
        m = _ATTR.fullmatch(item)
        if m is None:
            return None
        pairs.append((m.group(1), m.group(2)))
    return pairs


def _keys_are(pairs, first, last=()):
    """Whether the keys begin with `first`, end with `last`, and the rest are extensions
    (longer names: every one-letter attribute has a meaning of its own in the RFC)."""
    keys = [k for k, _ in pairs]
    if len(keys) < len(first) + len(last):
        return False
    middle = keys[len(first) : len(keys) - len(last)]
    return (
        tuple(keys[: len(first)]) == first
        and tuple(keys[len(keys) - len(last) :]) == last
        and all(len(k) > 1 for k in middle)
    )


def _joined(pairs, secret_key, show_secrets):
    return ",".join(
        f"{k}={v if show_secrets or k != secret_key else '<redacted>'}" for k, v in pairs
    )


def _scram_client(text, show_secrets):
    gs2 = _GS2.fullmatch(text)
    if gs2 is not None:  # client-first: user name and nonce only
        pairs = _attrs(gs2.group(3))
        if pairs is None or not _keys_are(pairs, ("n", "r")):
            return None
        return _unescape(pairs[0][1]), text
    pairs = _attrs(text)  # client-final: the proof is the secret
    if pairs is None or not _keys_are(pairs, ("c", "r"), ("p",)):
        return None
    return None, _joined(pairs, "p", show_secrets)


def _scram_server(text, show_secrets):
    pairs = _attrs(text)
    if pairs is None:
        return None
    if _keys_are(pairs, ("r", "s", "i")):  # server-first: nonce, salt, iterations
        return None, text
    if _keys_are(pairs, ("e",)):  # server-final, an error
        return None, text
    if _keys_are(pairs, ("v",)):  # server-final: the signature proves the password
        return None, _joined(pairs, "v", show_secrets)
    return None


# -- OAUTHBEARER (RFC 7628) -------------------------------------------------------------------


def _oauth_client(text, show_secrets):
    if text == "\x01":  # the client's answer to an error: nothing more
        return None, text
    gs2 = _GS2.fullmatch(text)
    if gs2 is None:
        return None
    rest = gs2.group(3)
    # \x01, then key=value\x01 pairs, then \x01
    if len(rest) < 2 or rest[0] != "\x01" or rest[-1] != "\x01":
        return None
    body = rest[1:-1]
    if body and body[-1] != "\x01":
        return None
    pairs = []
    for item in body.split("\x01")[:-1] if body else []:
        m = _ATTR.fullmatch(item)
        if m is None:
            return None
        pairs.append(_oauth_pair(m.group(1), m.group(2), show_secrets))
    head = text[: len(text) - len(rest)]
    principal = _unescape(gs2.group(2)) if gs2.group(2) else None
    return principal, head + "\x01" + "".join(f"{p}\x01" for p in pairs) + "\x01"


def _oauth_pair(key, value, show_secrets):
    if show_secrets or key in _OAUTH_PUBLIC:
        return f"{key}={value}"
    if key == "auth":
        bearer = _BEARER.fullmatch(value)
        if bearer is not None:  # the scheme is public, the credential is not
            return f"auth={bearer.group(1)} <redacted>"
    return f"{key}={redacted(value.encode())}"


def _oauth_server(text, show_secrets):
    # Empty on success; on failure a JSON object of RFC 7628's error keys.
    if text == "":
        return None, text
    try:
        error = json.loads(text)
    except ValueError:
        return None
    if not isinstance(error, dict) or not set(error) <= _OAUTH_ERROR_KEYS:
        return None
    return None, text


_PARSERS = {
    ("PLAIN", True): _plain_client,
    ("PLAIN", False): _plain_server,
    ("SCRAM", True): _scram_client,
    ("SCRAM", False): _scram_server,
    ("OAUTHBEARER", True): _oauth_client,
    ("OAUTHBEARER", False): _oauth_server,
}


# -- bodies -----------------------------------------------------------------------------------


def redact_body(api_key, body, mechanism, from_client, show_secrets):
    """Parse/redact the secrets of a decoded request or response body in place."""
    if body is None:
        return
    if api_key == SASL_AUTHENTICATE:
        if "AuthBytes" in body:
            body["AuthBytes"] = parse_token(mechanism, body["AuthBytes"], from_client, show_secrets)
        if not show_secrets:
            _redact_unnamed(body)
    if not show_secrets and api_key in SECRET_APIS:
        _redact_fields(body)


def _redact_unnamed(body):
    for key in UNNAMED & body.keys():
        body[key] = _redacted_value(body[key])


def _redacted_value(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        return redacted(value)
    if isinstance(value, dict):
        return {k: _redacted_value(v) for k, v in value.items()}
    return value


def _redact_fields(value):
    if isinstance(value, dict):
        for k, v in value.items():
            if k in UNNAMED or (k in SECRET_FIELDS and isinstance(v, (bytes, bytearray))):
                value[k] = _redacted_value(v)
            else:
                _redact_fields(v)
    elif isinstance(value, list):
        for v in value:
            _redact_fields(v)
