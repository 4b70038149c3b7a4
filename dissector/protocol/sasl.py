"""SASL tokens: who authenticates, with every secret redacted unless asked otherwise.

SaslAuthenticate (and the raw tokens that follow a SaslHandshake v0) carry the mechanism's
own messages. The principal is worth showing; passwords, SCRAM proofs and signatures, and
bearer tokens are not: they are replaced by "<redacted N bytes>" before anything leaves the
decoder, so no table or file can hold them.
"""

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


def redacted(value):
    n = len(value) if value is not None else 0
    return f"<redacted {n} bytes>"


def _scram_user(text):
    m = re.search(r"(?:^|,)n=([^,]*)", text)
    return m.group(1).replace("=2C", ",").replace("=3D", "=") if m else None


def parse_token(mechanism, raw, from_client, show_secrets=False):
    """A dict describing one SASL token: mechanism, principal where the token names one, and
    the token itself with secrets redacted (or whole, with show_secrets)."""
    if raw is None:
        return None
    mech = (mechanism or "").upper()
    out = {"mechanism": mechanism, "principal": None, "size": len(raw)}
    text = bytes(raw).decode("utf-8", "replace")
    if mech == "PLAIN" and from_client:
        parts = text.split("\x00")
        if len(parts) == 3:
            out["principal"] = parts[1] or parts[0]
            secret = parts[2] if show_secrets else redacted(parts[2].encode())
            out["token"] = "\x00".join([parts[0], parts[1], secret])
            return out
    elif mech == "PLAIN":  # the server's reply: empty on success, an error text otherwise
        out["token"] = text
        return out
    elif mech.startswith("SCRAM-"):
        if from_client and text.startswith(("n,", "y,", "p=")):
            out["principal"] = _scram_user(text)
            out["token"] = text  # client-first: user name and nonce only
            return out
        # client-final (proof p=) and server-final (signature v=) carry secrets
        token = text if show_secrets else re.sub(r"(^|,)([pv])=[^,]*", r"\1\2=<redacted>", text)
        out["token"] = token
        return out
    elif mech == "OAUTHBEARER" and from_client:
        token = text
        if not show_secrets:
            token = re.sub(r"auth=Bearer [^\x01]*", "auth=Bearer <redacted>", text)
        out["token"] = token
        return out
    # Anything else (GSSAPI, unknown mechanisms, server challenges we cannot read): opaque.
    out["token"] = raw if show_secrets else redacted(raw)
    return out


def redact_body(api_key, body, mechanism, from_client, show_secrets):
    """Parse/redact the secrets of a decoded request or response body in place."""
    if body is None:
        return
    if api_key == SASL_AUTHENTICATE and "AuthBytes" in body:
        body["AuthBytes"] = parse_token(mechanism, body["AuthBytes"], from_client, show_secrets)
    if not show_secrets and api_key in SECRET_APIS:
        _redact_fields(body)


def _redact_fields(value):
    if isinstance(value, dict):
        for k, v in value.items():
            if k in SECRET_FIELDS and isinstance(v, (bytes, bytearray)):
                value[k] = redacted(v)
            else:
                _redact_fields(v)
    elif isinstance(value, list):
        for v in value:
            _redact_fields(v)
