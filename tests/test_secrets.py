"""Secrets in hand-built captures: redaction goes by structure, never by how a token looks.

A SaslAuthenticate token is read as the mechanism the broker accepted, by that mechanism's
grammar; what is not understood is redacted whole. Envelope requests (KRaft forwarding) are
opened and redacted like the requests they carry. Captures are built with the tests' own
encoders (kafka_encoder.py, synth.py), so every secret in them is known, and every output
(the pairs table as JSON text and as dicts, the exchanges of dissect(), live JSON lines, the
csv, jsonl and parquet files) is searched for each one raw, in hex and in base64.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kafka_encoder import encode_request, encode_response
from synth import Capture, Connection

import dissector
from dissector.live.output import write_json_lines
from dissector.protocol import envelope
from dissector.protocol.sasl import accepted_mechanism, parse_token, redact_body
from dissector.tables import arrow_batches
from dissector.tables.output import TableWriter

ROOT = Path(__file__).resolve().parent.parent
SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS, METADATA = 17, 36, 18, 3
ALTER_USER_SCRAM_CREDENTIALS, CREATE_DELEGATION_TOKEN, ENVELOPE = 51, 38, 58
UNSUPPORTED_SASL_MECHANISM = 33
ENABLED = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"]
CLIENT_ID = "secrets-test"


# --------------------------------------------------------------------------- building traffic


class Client:
    """One TCP connection: a client and a broker taking turns, with correlation ids."""

    def __init__(self, cap, port=9092, mss=1448, client_port=40000):
        broker = ("10.0.0.1", port)
        self.conn = Connection(cap, client=("10.0.0.2", client_port), broker=broker, mss=mss)
        self.corr = 0
        self.raw = False  # after an accepted SaslHandshake v0: bare tokens

    def exchange(self, key, version, request, response):
        self.corr += 1
        self.conn.request(encode_request(key, version, self.corr, CLIENT_ID, request))
        self.conn.response(encode_response(key, version, self.corr, response))

    def api_versions(self):
        self.exchange(API_VERSIONS, 0, {}, {"ErrorCode": 0, "ApiKeys": []})

    def handshake(self, version, mechanism, accepted=True):
        error = 0 if accepted else UNSUPPORTED_SASL_MECHANISM
        self.exchange(
            SASL_HANDSHAKE,
            version,
            {"Mechanism": mechanism},
            {"ErrorCode": error, "Mechanisms": ENABLED},
        )
        self.raw = accepted and version == 0

    def token(self, client, server, version=2):
        if self.raw:
            self.conn.request(client)
            self.conn.response(server)
            return
        response = {"ErrorCode": 0, "ErrorMessage": None, "AuthBytes": server}
        self.exchange(SASL_AUTHENTICATE, version, {"AuthBytes": client}, response)

    def metadata(self):
        self.raw = False
        self.exchange(METADATA, 1, {"Topics": []}, {"Brokers": [], "Topics": []})


def plain(user, password, authzid=""):
    return [(f"{authzid}\x00{user}\x00{password}".encode(), b"")]


def scram(user, client_nonce, server_nonce, proof, signature):
    nonce = client_nonce + server_nonce
    return [
        (f"n,,n={user},r={client_nonce}".encode(), f"r={nonce},s=c2FsdA==,i=4096".encode()),
        (f"c=biws,r={nonce},p={proof}".encode(), f"v={signature}".encode()),
    ]


def oauthbearer(scheme, token, before="", after=" "):
    auth = f"auth={before}{scheme}{after}{token}"
    return [(f"n,,\x01host=broker\x01port=9092\x01{auth}\x01\x01".encode(), b"")]


def gssapi(client_secret, server_secret):
    # Kerberos tokens open with an ASN.1 application tag (0x60), as here.
    return [(b"\x60\x82" + client_secret + b"\x01\x02", b"\x60\x81" + server_secret + b"\x00")]


def alter_scram(user, salted_password):
    upsert = {"Name": user, "Mechanism": 1, "Iterations": 4096, "Salt": b"salt"}
    body = {"Deletions": [], "Upsertions": [dict(upsert, SaltedPassword=salted_password)]}
    return encode_request(ALTER_USER_SCRAM_CREDENTIALS, 0, 7, "admin", body)


def alter_scram_answer(user):
    results = [{"User": user, "ErrorCode": 0, "ErrorMessage": None}]
    return encode_response(ALTER_USER_SCRAM_CREDENTIALS, 0, 7, {"Results": results})


def forward(client, inner_request, inner_response):
    """An Envelope exchange: a broker forwarding a request to the controller."""
    request = {
        "RequestData": inner_request,
        "RequestPrincipal": b"User:admin",
        "ClientHostAddress": b"\x0a\x00\x00\x07",
    }
    client.exchange(ENVELOPE, 0, request, {"ResponseData": inner_response, "ErrorCode": 0})


# --------------------------------------------------------------------------- searching outputs


def encodings(secret: bytes) -> list[str]:
    """The forms a secret takes in text: itself, hex, and the part of its base64 (standard
    and URL-safe) that does not depend on the bytes around it, at each of three alignments."""
    forms = [secret.decode("latin-1"), secret.hex(), secret.hex().upper()]
    for k in range(3):
        tail = secret[k:]
        tail = tail[: len(tail) // 3 * 3]
        forms += [base64.b64encode(tail).decode(), base64.urlsafe_b64encode(tail).decode()]
    return [f for f in forms if len(f) >= 8]


def texts(value) -> list[str]:
    """Every piece of text a value holds: keys and values of dicts, items of lists and
    tuples, bytes as latin-1, and the repr of everything else."""
    out = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack += list(v.keys()) + list(v.values())
        elif isinstance(v, (list, tuple)):
            stack += list(v)
        elif isinstance(v, (bytes, bytearray, memoryview)):
            out.append(bytes(v).decode("latin-1"))
        elif isinstance(v, str):
            out.append(v)
        else:
            out.append(repr(v))
    return out


def found(text: str, secrets: list[bytes]) -> list[bytes]:
    return [s for s in secrets if any(form in text for form in encodings(s))]


def outputs(path: Path, tmp: Path, **options) -> dict[str, str]:
    """What the dissector makes of a capture, by where it went, as text to search."""
    pairs = dissector.read_pcap(path, **options)
    exchanges = list(dissector.dissect(path, **options))
    shown = {
        "pairs JSON text": "\n".join(
            t for row in pairs.astype(object).itertuples(index=False) for t in texts(list(row))
        ),
        "pairs dicts": "\n".join(
            t
            for column in ("request", "response")
            for t in texts(list(dissector.parse_bodies(pairs)[column]))
        ),
        "dissect()": "\n".join(
            t for e in exchanges for t in texts([e.__dict__, e.request, e.response, repr(e)])
        ),
    }
    live = io.StringIO()
    write_json_lines(list(dissector.dissect(path, **options)), live)
    shown["live JSON lines"] = live.getvalue()
    for suffix in (".csv", ".jsonl", ".parquet"):
        out = tmp / f"pairs{suffix}"
        with TableWriter(out) as writer:
            for batch in arrow_batches(iter(dissector.dissect(path, **options))):
                writer.write(batch)
        if suffix == ".parquet":
            shown[suffix] = "\n".join(texts(pq.read_table(out).to_pylist()))
        else:
            shown[suffix] = out.read_text(encoding="utf-8")
    return shown


def leaks(path: Path, tmp: Path, secrets: list[bytes]) -> dict[str, list[bytes]]:
    """Where each secret shows, by output: empty when none does."""
    hits = {name: found(text, secrets) for name, text in outputs(path, tmp).items()}
    return {name: hit for name, hit in hits.items() if hit}


def auth_rows(path: Path, **options) -> list[dict]:
    pairs = dissector.parse_bodies(dissector.read_pcap(path, **options))
    rows = pairs[pairs.api_name == "SaslAuthenticate"]
    return [{"request": q, "response": r} for q, r in zip(rows.request, rows.response, strict=True)]


def test_the_search_finds_what_it_looks_for():
    secret = b"Zq9-hidden-value-17"
    cells = [
        secret.decode(),
        secret.hex(),
        base64.b64encode(b"x" + secret).decode(),
        base64.b64encode(b"xy" + secret + b"z").decode(),
        json.dumps({"a": [base64.b64encode(secret).decode()]}),
    ]
    for cell in cells:
        assert found(cell, [secret]) == [secret], cell
    assert found("<redacted 19 bytes>", [secret]) == []


# --------------------------------------------------------------------------- the three leaks


@pytest.mark.parametrize(
    "auth",
    ["Bearer x", "bearer  x", " BEARER x", "bEaReR\tx", "Bearer\t x"],
)
def test_bearer_scheme_in_any_casing_and_spacing(tmp_path, auth):
    token = b"Zq9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"
    scheme_and_token = auth.replace("x", token.decode())
    cap = Capture()
    client = Client(cap, port=19092)
    client.api_versions()
    client.handshake(1, "OAUTHBEARER")
    text = f"n,a=alice,\x01host=broker\x01auth={scheme_and_token}\x01\x01".encode()
    client.token(text, b"")
    path = cap.write_pcap(tmp_path / "oauth.pcap")
    assert leaks(path, tmp_path, [token]) == {}
    (row,) = auth_rows(path)
    sent = row["request"]["AuthBytes"]
    assert sent["mechanism"] == "OAUTHBEARER" and sent["principal"] == "alice"
    scheme = auth.strip().split()[0].replace("x", "")
    assert sent["token"] == f"n,a=alice,\x01host=broker\x01auth={scheme} <redacted>\x01\x01"
    assert sent["size"] == len(text)
    assert found(json.dumps(auth_rows(path, show_secrets=True)), [token]) == [token]


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("refused", ["SCRAM-SHA-256", "scram-sha-512", "OAUTHBEARER"])
def test_a_token_after_a_refused_handshake_is_opaque(tmp_path, version, refused):
    """The client asks for a mechanism, the broker refuses it, the client sends a PLAIN token
    anyway: nothing was accepted, so the token is read as nothing and hidden whole."""
    password = b"Zq9-pl4in-password"
    cap = Capture()
    client = Client(cap, port=29092)
    client.api_versions()
    client.handshake(version, refused, accepted=False)
    client.token(b"\x00alice\x00" + password, b"")
    path = cap.write_pcap(tmp_path / "refused.pcap")
    assert leaks(path, tmp_path, [password]) == {}
    (row,) = auth_rows(path)
    assert row["request"]["AuthBytes"] == {
        "mechanism": None,
        "principal": None,
        "size": 7 + len(password),
        "token": f"<redacted {7 + len(password)} bytes>",
    }


def test_the_mechanism_is_the_one_accepted_last(tmp_path):
    """Refused SCRAM, then accepted PLAIN: the PLAIN token is read as PLAIN."""
    password = b"Zq9-second-try"
    cap = Capture()
    client = Client(cap)
    client.handshake(1, "SCRAM-SHA-256", accepted=False)
    client.handshake(1, "PLAIN")
    client.token(b"\x00alice\x00" + password, b"")
    path = cap.write_pcap(tmp_path / "second.pcap")
    assert leaks(path, tmp_path, [password]) == {}
    (row,) = auth_rows(path)
    assert row["request"]["AuthBytes"]["mechanism"] == "PLAIN"
    assert row["request"]["AuthBytes"]["principal"] == "alice"
    assert row["request"]["AuthBytes"]["token"] == "\x00alice\x00<redacted 14 bytes>"


def test_a_token_before_the_handshake_is_answered_is_opaque(tmp_path):
    """A response captured late (or lost): until the broker accepts, nothing is settled."""
    password = b"Zq9-not-yet-accepted"
    cap = Capture()
    client = Client(cap)
    client.corr = 1
    client.conn.request(encode_request(SASL_HANDSHAKE, 1, 1, CLIENT_ID, {"Mechanism": "PLAIN"}))
    client.token(b"\x00alice\x00" + password, b"")
    path = cap.write_pcap(tmp_path / "early.pcap")
    assert leaks(path, tmp_path, [password]) == {}
    (row,) = auth_rows(path)
    assert row["request"]["AuthBytes"]["token"] == f"<redacted {7 + len(password)} bytes>"


def test_salted_password_inside_an_envelope(tmp_path):
    salted = b"Zq9\x00\xffsalted-password-bytes"
    cap = Capture()
    client = Client(cap, port=9093)
    forward(client, alter_scram("alice", salted), alter_scram_answer("alice"))
    path = cap.write_pcap(tmp_path / "envelope.pcap")
    assert leaks(path, tmp_path, [salted]) == {}
    pairs = dissector.parse_bodies(dissector.read_pcap(path))
    (row,) = pairs[pairs.api_name == "Envelope"].itertuples()
    inner = row.request["RequestData"]
    assert {k: inner[k] for k in ("api_key", "api_name", "api_version", "client_id")} == {
        "api_key": ALTER_USER_SCRAM_CREDENTIALS,
        "api_name": "AlterUserScramCredentials",
        "api_version": 0,
        "client_id": "admin",
    }
    (upsert,) = inner["body"]["Upsertions"]
    assert upsert["Name"] == "alice" and upsert["Iterations"] == 4096
    assert upsert["SaltedPassword"] == f"<redacted {len(salted)} bytes>"
    answer = row.response["ResponseData"]
    assert answer["correlation_id"] == 7
    assert answer["body"]["Results"] == [{"User": "alice", "ErrorCode": 0, "ErrorMessage": None}]
    shown = dissector.read_pcap(path, show_secrets=True)
    assert found("\n".join(shown.request), [salted]) == [salted]


def test_delegation_token_and_sasl_inside_an_envelope(tmp_path):
    hmac, token = b"Zq9-hmac-of-the-token", b"Zq9-forwarded-sasl-token"
    cap = Capture()
    client = Client(cap)
    create = encode_request(CREATE_DELEGATION_TOKEN, 2, 3, "admin", {"Renewers": []})
    created = encode_response(
        CREATE_DELEGATION_TOKEN, 2, 3, {"TokenId": "tid-1", "Hmac": hmac, "PrincipalName": "al"}
    )
    forward(client, create, created)
    auth = encode_request(SASL_AUTHENTICATE, 1, 4, "c", {"AuthBytes": b"\x00al\x00" + token})
    forward(client, auth, encode_response(SASL_AUTHENTICATE, 1, 4, {"AuthBytes": b""}))
    path = cap.write_pcap(tmp_path / "forwarded.pcap")
    assert leaks(path, tmp_path, [hmac, token]) == {}
    pairs = dissector.parse_bodies(dissector.read_pcap(path))
    rows = pairs[pairs.api_name == "Envelope"]
    first, second = rows.response
    assert first["ResponseData"]["body"]["TokenId"] == "tid-1"
    assert first["ResponseData"]["body"]["Hmac"] == f"<redacted {len(hmac)} bytes>"
    forwarded = list(rows.request)[1]["RequestData"]["body"]["AuthBytes"]
    assert forwarded["mechanism"] is None  # no handshake inside an Envelope
    assert forwarded["token"] == f"<redacted {4 + len(token)} bytes>"


def test_an_envelope_that_does_not_decode_is_redacted_whole(tmp_path):
    secret = b"Zq9-not-a-request-at-all"
    cap = Capture()
    client = Client(cap)
    garbage = b"\x00\x33\x00\x00" + secret  # AlterUserScramCredentials, cut short
    forward(client, garbage, b"\x00\x00\x00\x07" + secret)
    trailing = alter_scram("bob", b"salted") + secret  # bytes past the last field
    forward(client, trailing, alter_scram_answer("bob"))
    path = cap.write_pcap(tmp_path / "garbage.pcap")
    assert leaks(path, tmp_path, [secret]) == {}
    pairs = dissector.parse_bodies(dissector.read_pcap(path))
    rows = pairs[pairs.api_name == "Envelope"]
    assert [r["RequestData"] for r in rows.request] == [
        f"<redacted {len(garbage)} bytes>",
        f"<redacted {len(trailing)} bytes>",
    ]
    # the answer to a request that could not be read cannot be read either
    assert [r["ResponseData"] for r in rows.response][0] == f"<redacted {4 + len(secret)} bytes>"


HOSTILE_ENVELOPE = textwrap.dedent(
    """
    import resource, struct, sys
    sys.path.insert(0, sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (768 << 20, 768 << 20))
    from kafka_encoder import encode_request
    from synth import Capture, Connection
    import dissector

    # Inner requests claiming 2**31-1 upsertions, a 2 GB SaltedPassword, an endless
    # varint: lengths are checked against the bytes there are, never allocated.
    inner = [
        b"\\x00\\x33\\x00\\x00\\x00\\x00\\x00\\x01\\x00\\x01a\\x00\\x01\\xff\\xff\\xff\\xff\\x0f",
        b"\\x00\\x33\\x00\\x00\\x00\\x00\\x00\\x01\\x00\\x01a\\x00\\x01\\x02\\x02a\\x01"
        + b"\\x00\\x00\\x10\\x00\\x02s\\xff\\xff\\xff\\xff\\x07",
        b"\\x00\\x24\\x00\\x02\\x00\\x00\\x00\\x01\\x00\\x01a\\x00" + b"\\xff" * 64,
    ]
    cap = Capture()
    conn = Connection(cap, broker=("10.0.0.1", 9093))
    for i, data in enumerate(inner):
        body = {"RequestData": data, "RequestPrincipal": None, "ClientHostAddress": b""}
        conn.request(encode_request(58, 0, i + 1, "b", body))
    cap.write_pcap(sys.argv[1])
    rows = list(dissector.dissect(sys.argv[1]))
    print(sorted(r.request["RequestData"] for r in rows))
    """
)


def test_hostile_envelopes_stay_within_memory(tmp_path):
    res = subprocess.run(
        [sys.executable, "-c", HOSTILE_ENVELOPE, str(tmp_path / "h.pcap"), str(ROOT / "tests")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(
        ["<redacted 18 bytes>", "<redacted 28 bytes>", "<redacted 76 bytes>"]
    )


# --------------------------------------------------------------------------- tokens by grammar


def test_parse_token_redacts_what_does_not_parse():
    cases = [
        ("PLAIN", b"alice:pw-Zq9", True),  # no NULs
        ("PLAIN", b"\x00alice\x00pw\x00Zq9", True),  # one NUL too many
        ("PLAIN", b"\x00\x00pw-Zq9", True),  # no user
        ("PLAIN", b"Zq9-an-answer", False),  # the broker answers PLAIN with nothing
        ("PLAIN", b"\x00alice\x00\xffZq9", True),  # not UTF-8
        ("SCRAM-SHA-256", b"\x00alice\x00pw-Zq9", True),  # PLAIN's shape
        ("SCRAM-SHA-256", b"n,,r=nonce,n=alice,x=Zq9", True),  # attributes out of order
        ("SCRAM-SHA-256", b"n,,n=alice,r=nonce,p=Zq9", True),  # a proof in client-first
        ("SCRAM-SHA-256", b"c=biws,r=nonce,pZq9", True),  # no '='
        ("SCRAM-SHA-256", b"c=biws,r=nonce,x=Zq9", True),  # no proof
        ("SCRAM-SHA-512", b"Zq9-server-says", False),
        ("SCRAM-SHA-512", b"v=sig,x=Zq9", False),  # one-letter attribute after v
        ("OAUTHBEARER", b"auth=Bearer Zq9", True),  # no GS2 header
        ("OAUTHBEARER", b"n,,\x01auth=Bearer Zq9\x01", True),  # no closing \x01
        ("OAUTHBEARER", b'{"token": "Zq9"}', False),  # not an RFC 7628 error
        ("GSSAPI", b"\x60Zq9", True),
        ("GSSAPI", b"\x60Zq9", False),
        (None, b"\x00alice\x00Zq9", True),
        ("X-UNKNOWN", b"n,,n=alice,r=Zq9", True),
    ]
    for mechanism, raw, from_client in cases:
        token = parse_token(mechanism, raw, from_client)
        assert token == {
            "mechanism": mechanism,
            "principal": None,
            "size": len(raw),
            "token": f"<redacted {len(raw)} bytes>",
        }, (mechanism, raw)
        shown = parse_token(mechanism, raw, from_client, show_secrets=True)
        assert shown["token"] == raw, (mechanism, raw)


def test_parse_token_keeps_what_is_public():
    first = parse_token("scram-sha-256", b"n,,n=alice,r=abc,tokenauth=true", True)
    assert first["principal"] == "alice" and first["token"] == "n,,n=alice,r=abc,tokenauth=true"
    final = parse_token("Scram-Sha-512", b"c=biws,r=abcdef,p=Zq9proof", True)
    assert final["token"] == "c=biws,r=abcdef,p=<redacted>"
    assert parse_token("SCRAM-SHA-256", b"e=invalid-proof", False)["token"] == "e=invalid-proof"
    oauth = b"n,,\x01host=h\x01port=1\x01auth=Bearer Zq9\x01ext=Zq9ext\x01\x01"
    token = parse_token("oauthbearer", oauth, True)["token"]
    assert (
        token
        == "n,,\x01host=h\x01port=1\x01auth=Bearer <redacted>\x01ext=<redacted 6 bytes>\x01\x01"
    )
    other = parse_token("OAUTHBEARER", b"n,,\x01auth=Basic Zq9\x01\x01", True)["token"]
    assert other == "n,,\x01auth=<redacted 9 bytes>\x01\x01"  # only bearer's scheme is known
    assert parse_token("OAUTHBEARER", b"\x01", True)["token"] == "\x01"
    error = b'{"status": "invalid_token"}'
    assert parse_token("OAUTHBEARER", error, False)["token"] == error.decode()


def test_accepted_mechanism():
    assert accepted_mechanism({"Mechanism": "PLAIN"}, {"ErrorCode": 0}) == "PLAIN"
    assert accepted_mechanism({"Mechanism": "PLAIN"}, {"ErrorCode": 33}) is None
    assert accepted_mechanism({"Mechanism": "PLAIN"}, {}) is None
    assert accepted_mechanism(None, {"ErrorCode": 0}) is None


def test_bytes_the_schema_does_not_name_are_hidden_in_secret_bodies():
    body = {
        "AuthBytes": b"\x00alice\x00pw",
        "_trailing_bytes": b"Zq9-trailing",
        "_unknown_tags": {7: b"Zq9-tag"},
    }
    redact_body(SASL_AUTHENTICATE, body, "PLAIN", True, False)
    assert body["_trailing_bytes"] == "<redacted 12 bytes>"
    assert body["_unknown_tags"] == {7: "<redacted 7 bytes>"}
    upsert = {"Name": "al", "SaltedPassword": b"Zq9", "_unknown_tags": {0: b"Zq9-tag"}}
    body = {"Upsertions": [upsert]}
    redact_body(ALTER_USER_SCRAM_CREDENTIALS, body, None, True, False)
    assert body == {
        "Upsertions": [
            {
                "Name": "al",
                "SaltedPassword": "<redacted 3 bytes>",
                "_unknown_tags": {0: "<redacted 7 bytes>"},
            }
        ]
    }


def test_envelope_show_secrets_keeps_the_bytes_it_cannot_read():
    body = {"RequestData": b"\x00\x33\x00\x00Zq9"}
    envelope.open_request(body, show_secrets=True)
    assert body == {"RequestData": b"\x00\x33\x00\x00Zq9"}
    body = {"RequestData": alter_scram("al", b"Zq9-salted")}
    envelope.open_request(body, show_secrets=True)
    assert body["RequestData"]["body"]["Upsertions"][0]["SaltedPassword"] == b"Zq9-salted"


# --------------------------------------------------------------------------- generated exchanges

# Secrets open with "Zq9": no user name, nonce or host (lowercase letters) can hold one.
LOWER = "abcdefghijklmnopqrstuvwxyz"
names = st.text(LOWER, min_size=1, max_size=8)
secret_text = st.text(LOWER + LOWER.upper() + "0123456789+/-._", min_size=9, max_size=40).map(
    lambda t: "Zq9" + t
)


@st.composite
def casing(draw, name):
    flips = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
    return "".join(c.upper() if f else c.lower() for c, f in zip(name, flips, strict=True))


@st.composite
def login(draw):
    """(mechanism, [(client token, broker token)], secrets) of one mechanism."""
    kind = draw(
        st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"])
    )
    user = draw(names)
    if kind == "PLAIN":
        password = draw(secret_text)
        authzid = draw(st.sampled_from(["", user]))
        return kind, plain(user, password, authzid), [password.encode()]
    if kind.startswith("SCRAM"):
        proof, signature = draw(secret_text), draw(secret_text)
        nonces = draw(names), draw(names)
        return kind, scram(user, *nonces, proof, signature), [proof.encode(), signature.encode()]
    if kind == "OAUTHBEARER":
        token = draw(secret_text)
        scheme = draw(casing("bearer"))
        before = draw(st.sampled_from(["", " ", "\t"]))
        after = draw(st.sampled_from([" ", "  ", "\t", " \t"]))
        return kind, oauthbearer(scheme, token, before, after), [token.encode()]
    mine, theirs = draw(secret_text).encode(), draw(secret_text).encode()
    return kind, gssapi(mine, theirs), [mine, theirs]


@st.composite
def connection(draw):
    """A connection's plan and its secrets: handshakes refused and accepted, tokens, maybe
    Envelopes forwarded on it."""
    steps, secrets = [], []
    version = draw(st.sampled_from([0, 1]))  # SaslHandshake's; SaslAuthenticate's below
    auth = draw(st.integers(0, 2))
    for _ in range(draw(st.integers(0, 2))):  # refused first, and a token sent anyway
        mechanism, tokens, hidden = draw(login())
        stray = version == 1 and draw(st.booleans())
        sent = tokens[:1] if stray else []
        steps.append(("refused", version, draw(casing(mechanism)), sent, auth))
        secrets += [s for s in hidden if any(s in mine + theirs for mine, theirs in sent)]
    if draw(st.booleans()):
        mechanism, tokens, hidden = draw(login())
        steps.append(("accepted", version, draw(casing(mechanism)), tokens, auth))
        secrets += hidden
    if draw(st.booleans()):
        hidden = [draw(secret_text).encode() for _ in range(3)]
        steps.append(("envelope", *hidden))
        secrets += hidden
    return steps, secrets


def play(client, steps):
    client.api_versions()
    for step in steps:
        if step[0] == "envelope":
            _, salted, hmac, token = step
            forward(client, alter_scram("alice", salted), alter_scram_answer("alice"))
            create = encode_request(CREATE_DELEGATION_TOKEN, 3, 9, "a", {"Renewers": []})
            created = encode_response(CREATE_DELEGATION_TOKEN, 3, 9, {"Hmac": hmac})
            forward(client, create, created)
            plain_token = {"AuthBytes": b"\x00alice\x00" + token}
            auth = encode_request(SASL_AUTHENTICATE, 2, 10, "a", plain_token)
            forward(client, auth, encode_response(SASL_AUTHENTICATE, 2, 10, {"AuthBytes": token}))
            event("envelope")
            continue
        state, version, mechanism, tokens, auth = step
        event(f"{state} {mechanism.upper()} v{version}, {len(tokens)} tokens")
        client.handshake(version, mechanism, accepted=state == "accepted")
        for mine, theirs in tokens:
            client.token(mine, theirs, auth)
    client.metadata()
    client.conn.close()


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    plans=st.lists(connection(), min_size=1, max_size=3),
    port=st.sampled_from([9092, 19093, 31337, 443]),
    mss=st.sampled_from([3, 11, 64, 1448]),
)
def test_no_secret_leaves_any_output(tmp_path_factory, plans, port, mss):
    tmp = tmp_path_factory.mktemp("generated")
    cap = Capture()
    for i, (steps, _) in enumerate(plans):
        play(Client(cap, port=port, mss=mss, client_port=40000 + i), steps)
    path = cap.write_pcap(tmp / "generated.pcap")
    secrets = [s for _, hidden in plans for s in hidden]
    assert leaks(path, tmp, secrets) == {}
    # every connection was found and read: the absence of secrets is not an absence of rows
    pairs = dissector.read_pcap(path)
    assert pairs.stream.nunique() == len(plans)
    assert set(pairs.status) <= {"ok", "error"}, pairs[["api_name", "status", "reason"]]
    # and the search is not blind: shown on request, every secret is there
    shown = dissector.read_pcap(path, show_secrets=True)
    text = "\n".join(
        t for row in shown.astype(object).itertuples(index=False) for t in texts(list(row))
    )
    assert set(found(text, secrets)) == set(secrets)


# --------------------------------------------------------------------------- Spark


def leaky_capture(path: Path) -> list[bytes]:
    """The three leaks in one capture, among enough other traffic that byte ranges of a few
    kilobytes start inside its connections. Returns the secrets."""
    token, password, salted = b"Zq9-bearer-token", b"Zq9-plain-password", b"Zq9-salted-bytes"
    cap = Capture()
    clients = [Client(cap, client_port=41000 + i) for i in range(3)]
    oauth, refused, forwarding = clients
    for client in clients:
        client.api_versions()
    oauth.handshake(1, "OAUTHBEARER")
    refused.handshake(1, "SCRAM-SHA-256", accepted=False)
    for _ in range(20):  # time between the handshakes and the tokens: ranges start here
        for client in clients:
            client.metadata()
    oauth.token(oauthbearer("bearer", token.decode())[0][0], b"")
    refused.token(b"\x00alice\x00" + password, b"")
    forward(forwarding, alter_scram("alice", salted), alter_scram_answer("alice"))
    for client in clients:
        client.conn.close()
    cap.write_pcap(path)
    return [token, password, salted]


@pytest.mark.parametrize("split", [1500, 4000])
def test_no_secret_in_byte_ranges(tmp_path, split):
    """Ranges dissected on their own (the Spark plan, run in this process) know no mechanism
    where they start after the handshake: they hide the tokens whole."""
    from spark_support import run_in_process

    path = tmp_path / "leaky.pcap"
    secrets = leaky_capture(path)
    whole = dissector.read_pcap(path)
    for seed in range(3):
        table = run_in_process([str(path)], "pairs", split, seed=seed)
        assert table.num_rows == len(whole)
        assert found("\n".join(texts(table.to_pylist())), secrets) == []


@pytest.mark.spark
def test_no_secret_on_spark(tmp_path):
    pytest.importorskip("pyspark")
    from spark_support import local_spark

    from dissector.spark import Dissected

    path = tmp_path / "leaky.pcap"
    secrets = leaky_capture(path)
    spark, owned = local_spark("kafka-dissector-secrets", memory="1g")
    try:
        got = Dissected(spark, str(path), "2k").table("pairs").toArrow()
    finally:
        if owned:
            spark.stop()
    assert got.num_rows == len(dissector.read_pcap(path))
    assert found("\n".join(texts(got.to_pylist())), secrets) == []
