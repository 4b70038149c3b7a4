"""SASL on the wire: who logged in with what is decoded, and no secret ever leaves the decoder.

captures/sasl.pcap holds kafka-python logging in with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512
through SaslAuthenticate, and with PLAIN and SCRAM-SHA-256 through the raw tokens that follow
a SaslHandshake v0, each login followed by a Metadata request. Its manifest names users,
mechanisms and passwords. The secrets looked for are the passwords and the SCRAM client
proofs (p=) and server signatures (v=), which are read from the capture's TCP payloads.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import dissector
from dissector.protocol.sasl import parse_token
from dissector.tables import TABLES

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "captures" / "sasl.pcap"
MANIFEST = ROOT / "captures" / "sasl.expected.json"
SCRAM_TOKENS = 2  # client-first and client-final
PLAIN_TOKENS = 1

pytestmark = pytest.mark.skipif(not CAPTURE.exists(), reason="captures/sasl.pcap not recorded")
LOGINS = json.loads(MANIFEST.read_text())["sasl"]["logins"] if MANIFEST.exists() else []


# --------------------------------------------------------------------------- helpers


def run(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dissector", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def encodings(secret: str) -> list[str]:
    """The forms a secret takes in text: itself, hex, and the part of its base64 that does
    not depend on the bytes around it, for each of the three alignments."""
    raw = secret.encode()
    forms = [secret, raw.hex()]
    for k in range(3):
        enc = base64.b64encode(b"\x00" * k + raw).decode()
        forms.append(enc[-(-8 * k // 6) : 8 * (k + len(raw)) // 6])
    return forms


def texts(value: object) -> Iterator[str]:
    """Every piece of text a cell holds, recursively: keys and values of dicts, items of
    lists, bytes as latin-1 text, and the repr and str of everything else."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from texts(k)
            yield from texts(v)
    elif isinstance(value, (list, tuple, set, frozenset)) or (
        hasattr(value, "tolist") and not isinstance(value, (str, bytes))
    ):
        items = value.tolist() if hasattr(value, "tolist") else value
        if isinstance(items, (list, tuple)):
            for v in items:
                yield from texts(v)
        yield repr(value)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        yield data.decode("latin-1")
        yield repr(data)
    else:
        yield repr(value)
        yield str(value)


def leaks(text: str, secrets: list[str]) -> list[str]:
    return sorted({s for s in secrets for form in encodings(s) if form and form in text})


def frame_leaks(df: pd.DataFrame, secrets: list[str]) -> dict[tuple[int, str], list[str]]:
    """(row, column) -> the secrets found in that cell."""
    found = {}
    for i, row in enumerate(df.itertuples(index=False)):
        for column, cell in zip(df.columns, row, strict=True):
            hit = leaks("\n".join(texts(cell)), secrets)
            if hit:
                found[(i, column)] = hit
    return found


def tcp_payloads(path: Path) -> dict[tuple[int, int], bytes]:
    """Each direction's TCP bytes, in sequence order: (source port, destination port) ->
    bytes."""
    from scapy.layers.inet import TCP
    from scapy.utils import rdpcap

    segments: dict[tuple[int, int], dict[int, bytes]] = {}
    for pkt in rdpcap(str(path)):
        if TCP in pkt and bytes(pkt[TCP].payload):
            tcp = pkt[TCP]
            segments.setdefault((tcp.sport, tcp.dport), {})[tcp.seq] = bytes(tcp.payload)
    return {k: b"".join(v[s] for s in sorted(v)) for k, v in segments.items()}


PROOF = re.compile(rb",p=([A-Za-z0-9+/]{43}=|[A-Za-z0-9+/]{86}==)")
SIGNATURE = re.compile(rb"v=([A-Za-z0-9+/]{43}=|[A-Za-z0-9+/]{86}==)")


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads(MANIFEST.read_text())


@pytest.fixture(scope="module")
def wire(manifest) -> dict[str, list[str]]:
    """The SCRAM proofs and signatures as the capture carries them."""
    payloads = tcp_payloads(CAPTURE)
    port = manifest["broker_port"]
    to_broker = b"".join(v for (_s, d), v in payloads.items() if d == port)
    from_broker = b"".join(v for (s, _d), v in payloads.items() if s == port)
    return {
        "to_broker": [to_broker.decode("latin-1")],
        "proofs": [m.decode() for m in PROOF.findall(to_broker)],
        "signatures": [m.decode() for m in SIGNATURE.findall(from_broker)],
    }


@pytest.fixture(scope="module")
def secrets(manifest, wire) -> list[str]:
    return [login["password"] for login in manifest["sasl"]["logins"]] + [
        *wire["proofs"],
        *wire["signatures"],
    ]


@pytest.fixture(scope="module")
def pairs() -> pd.DataFrame:
    return dissector.parse_bodies(dissector.read_pcap(CAPTURE))


@pytest.fixture(scope="module")
def shown() -> pd.DataFrame:
    return dissector.parse_bodies(dissector.read_pcap(CAPTURE, show_secrets=True))


def login_streams(pairs: pd.DataFrame, login: dict) -> list[pd.DataFrame]:
    """The connections of one login, each as its rows in order."""
    hs = pairs[(pairs.api_name == "SaslHandshake") & (pairs.client_id == login["client_id"])]
    return [pairs[pairs.stream == s] for s in sorted(hs.stream.unique())]


# --------------------------------------------------------------------------- the capture


def test_the_capture_holds_the_secrets(manifest, wire, secrets):
    """The secrets are really on the wire, so their absence from the output means something."""
    scram = [c for c in manifest["sasl"]["connections"] if c["mechanism"].startswith("SCRAM")]
    assert len(scram) >= 3
    assert sorted(wire["proofs"]) == sorted(manifest["sasl"]["scram_proofs"])
    assert sorted(wire["signatures"]) == sorted(manifest["sasl"]["scram_server_signatures"])
    assert len(wire["proofs"]) == len(wire["signatures"]) == len(scram)
    to_broker = wire["to_broker"][0]
    for login in manifest["sasl"]["logins"]:
        # PLAIN sends the password itself; SCRAM never does.
        assert (login["password"] in to_broker) == (login["mechanism"] == "PLAIN")
    assert all(c["authenticated"] for c in manifest["sasl"]["connections"])
    assert {(x["mechanism"], x["handshake_version"]) for x in manifest["sasl"]["logins"]} >= {
        ("PLAIN", 1),
        ("SCRAM-SHA-256", 1),
        ("PLAIN", 0),
        ("SCRAM-SHA-256", 0),
    }


def test_every_exchange_decodes(pairs, manifest):
    assert len(pairs) > 0
    assert set(pairs.status) == {"ok"}, pairs[pairs.status != "ok"][["api_name", "reason"]]
    observed = manifest["observed"]
    assert pairs.stream.nunique() == observed["connections"]
    kafka_requests = sum(v["count"] for v in observed["requests"].values())
    raw_tokens = sum(
        c.get("raw_sasl_tokens", {}).get("request", 0) for c in observed["per_connection"]
    )
    assert len(pairs) == kafka_requests + raw_tokens


# --------------------------------------------------------------------------- (a) who logged in


@pytest.mark.parametrize("login", LOGINS, ids=[x["client_id"] for x in LOGINS])
def test_mechanism_and_principal(pairs, manifest, login):
    user, mechanism, version = login["user"], login["mechanism"], login["handshake_version"]
    streams = login_streams(pairs, login)
    expected = [c for c in manifest["sasl"]["connections"] if c["client_id"] == login["client_id"]]
    assert len(streams) == len(expected) > 0
    tokens = PLAIN_TOKENS if mechanism == "PLAIN" else SCRAM_TOKENS
    for rows in streams:
        hs = rows[rows.api_name == "SaslHandshake"].iloc[0]
        assert hs.api_version == version
        assert hs.request["Mechanism"] == mechanism
        assert hs.response["ErrorCode"] == 0 and mechanism in hs.response["Mechanisms"]

        auth = rows[rows.api_name == "SaslAuthenticate"]
        assert len(auth) == tokens
        raw = [bool(r.get("raw")) for r in auth.request]
        assert raw == [version == 0] * tokens
        if version == 0:  # bare tokens: no Kafka header
            assert auth.api_version.isna().all() and auth.correlation_id.isna().all()
        else:
            assert (auth.api_version == 2).all()
            assert [r["ErrorCode"] for r in auth.response] == [0] * tokens
        first = auth.iloc[0].request["AuthBytes"]
        assert first["mechanism"] == mechanism
        assert first["principal"] == user
        for r in auth.itertuples():
            assert r.request["AuthBytes"]["mechanism"] == mechanism
            assert r.response["AuthBytes"]["mechanism"] == mechanism

        meta = rows[rows.api_name == "Metadata"]
        assert len(meta) == 1 and meta.index[0] > auth.index[-1]  # after authentication
        asked = meta.iloc[0].request["Topics"]
        names = sorted(t["Name"] for t in meta.iloc[0].response["Topics"])
        everything = sorted(manifest["broker"]["topics"])
        assert names == (everything if asked is None else sorted(t["Name"] for t in asked))
    metadata = pairs[pairs.stream.isin([r.stream.iloc[0] for r in streams])]
    listed = [r["Topics"] for r in metadata[metadata.api_name == "Metadata"].response]
    assert any(sorted(t["Name"] for t in topics) == everything for topics in listed)


def test_tokens_keep_what_is_not_secret(pairs, manifest):
    for login in manifest["sasl"]["logins"]:
        user = login["user"]
        for rows in login_streams(pairs, login):
            auth = rows[rows.api_name == "SaslAuthenticate"]
            out = [r["AuthBytes"] for r in auth.request]
            back = [r["AuthBytes"] for r in auth.response]
            if login["mechanism"] == "PLAIN":
                # kafka-python names the user as authzid and authcid
                assert out[0]["token"].startswith(f"{user}\x00{user}\x00<redacted")
                assert out[0]["size"] == len(f"{user}\x00{user}\x00{login['password']}")
                continue
            first, final = out
            assert first["token"].startswith(f"n,,n={user},r=")
            nonce = first["token"].split("r=", 1)[1]
            server_first = back[0]["token"]
            assert server_first.startswith(f"r={nonce}") and ",s=" in server_first
            assert ",i=4096" in server_first
            assert final["token"].startswith("c=biws,r=" + nonce)
            assert final["token"].endswith(",p=<redacted>")
            assert back[1]["token"] == "v=<redacted>"


# --------------------------------------------------------------------------- (b) no secret leaks


def test_the_leak_search_finds_what_it_looks_for():
    """The search is not blind: a secret is found as text, as bytes, in base64 at every
    alignment and nested in dicts and lists."""
    secret = "pl4in-S3cret-!"
    cells = [
        {"a": [{"token": f"alice\x00alice\x00{secret}"}]},
        [b"xx" + secret.encode() + b"yy"],
        {"b": base64.b64encode(b"\x00alice\x00" + secret.encode()).decode()},
        {"c": base64.b64encode(b"\x00\x01alice\x00" + secret.encode() + b"\x00").decode()},
        {"d": base64.b64encode(b"0123" + secret.encode()).decode()},
        {secret: 1},
    ]
    df = pd.DataFrame({"cell": cells, "other": [None] * len(cells)})
    assert sorted(frame_leaks(df, [secret])) == [(i, "cell") for i in range(len(cells))]
    assert frame_leaks(df, ["never-there"]) == {}


def test_no_secret_in_the_pairs_table(pairs, secrets):
    assert frame_leaks(pairs, secrets) == {}
    assert leaks(repr(pairs) + pairs.to_string(), secrets) == []


@pytest.mark.parametrize("table", sorted(TABLES))
def test_no_secret_in_any_table(table, secrets):
    df = dissector.read_pcap(CAPTURE, table=table)
    assert frame_leaks(df, secrets) == {}


@pytest.mark.parametrize("table", ["pairs", "partitions"])  # no records in this capture
@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_no_secret_in_written_files_or_summary(tmp_path, secrets, table, suffix):
    out = tmp_path / f"{table}{suffix}"
    res = run("analyze", CAPTURE, "--no-progress", "--table", table, "-o", out)
    assert res.returncode == 0, res.stderr
    assert out.stat().st_size > 0
    assert "SaslAuthenticate" in res.stdout
    assert leaks(res.stdout + res.stderr, secrets) == []
    if suffix == ".parquet":
        df = pd.read_parquet(out)
    elif suffix == ".csv":
        df = pd.read_csv(out)
        assert leaks(out.read_text(encoding="utf-8"), secrets) == []
    else:
        df = pd.read_json(out, lines=True)
        assert leaks(out.read_text(encoding="utf-8"), secrets) == []
    assert len(df) == len(dissector.read_pcap(CAPTURE, table=table)) > 0
    assert frame_leaks(df, secrets) == {}


# --------------------------------------------------------------------------- (c) shown on request


def test_show_secrets_shows_them(shown, manifest, wire):
    plain = [x["password"] for x in manifest["sasl"]["logins"] if x["mechanism"] == "PLAIN"]
    found = frame_leaks(shown, plain)
    assert {s for hit in found.values() for s in hit} == set(plain)
    assert {column for _row, column in found} == {"request"}
    everything = frame_leaks(shown, wire["proofs"] + wire["signatures"])
    assert {s for hit in everything.values() for s in hit} == set(
        wire["proofs"] + wire["signatures"]
    )
    # still decoded the same way
    auth = shown[shown.api_name == "SaslAuthenticate"]
    principals = {r["AuthBytes"]["principal"] for r in auth.request} - {None}
    assert principals == {x["user"] for x in manifest["sasl"]["logins"]}


def test_show_secrets_on_the_command_line(tmp_path, manifest):
    out = tmp_path / "pairs.jsonl"
    res = run("analyze", CAPTURE, "--no-progress", "--show-secrets", "-o", out)
    assert res.returncode == 0, res.stderr
    df = pd.read_json(out, lines=True)
    password = manifest["sasl"]["logins"][0]["password"]
    assert manifest["sasl"]["logins"][0]["mechanism"] == "PLAIN"
    assert leaks(out.read_text(encoding="utf-8"), [password]) == [password]
    assert frame_leaks(df, [password])


# --------------------------------------------------------------------------- parse_token


def test_parse_token_plain():
    token = parse_token("PLAIN", b"\x00alice\x00pl4in-S3cret-!", from_client=True)
    assert token == {
        "mechanism": "PLAIN",
        "principal": "alice",
        "size": 21,
        "token": "\x00alice\x00<redacted 14 bytes>",
    }
    # authzid and authcid: the principal is the one authenticated (authcid)
    token = parse_token("PLAIN", b"admin\x00alice\x00pw", from_client=True)
    assert token["principal"] == "alice" and "pw" not in token["token"].split("\x00")[2]
    shown = parse_token("PLAIN", b"\x00alice\x00pl4in-S3cret-!", True, show_secrets=True)
    assert shown["token"] == "\x00alice\x00pl4in-S3cret-!"
    assert parse_token("plain", b"\x00alice\x00pw", True)["principal"] == "alice"
    # the broker's (empty) answer is opaque
    reply = parse_token("PLAIN", b"", from_client=False)
    assert reply["principal"] is None and reply["size"] == 0


def test_parse_token_scram_client_first():
    token = parse_token("SCRAM-SHA-256", b"n,,n=bob,r=fyko+d2lbbFgONRv9qkxdawL", True)
    assert token == {
        "mechanism": "SCRAM-SHA-256",
        "principal": "bob",
        "size": 35,
        "token": "n,,n=bob,r=fyko+d2lbbFgONRv9qkxdawL",
    }
    escaped = parse_token("SCRAM-SHA-512", b"n,a=x,n=b=2Co=3Db,r=abc", True)
    assert escaped["principal"] == "b,o=b"
    bound = parse_token("SCRAM-SHA-256", b"p=tls-unique,,n=bob,r=abc", True)
    assert bound["principal"] == "bob"


def test_parse_token_scram_server_first():
    text = b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
    token = parse_token("SCRAM-SHA-256", text, from_client=False)
    assert token["principal"] is None
    assert token["token"] == text.decode()  # nonce, salt and iterations are not secret


def test_parse_token_scram_client_final():
    proof = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    text = f"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p={proof}".encode()
    token = parse_token("SCRAM-SHA-256", text, from_client=True)
    assert token["token"] == "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=<redacted>"
    assert proof not in repr(token) and token["size"] == len(text)
    assert parse_token("SCRAM-SHA-256", text, True, show_secrets=True)["token"] == text.decode()


def test_parse_token_scram_server_final():
    signature = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    token = parse_token("SCRAM-SHA-256", f"v={signature}".encode(), from_client=False)
    assert token["token"] == "v=<redacted>" and signature not in repr(token)
    shown = parse_token("SCRAM-SHA-256", f"v={signature}".encode(), False, show_secrets=True)
    assert shown["token"] == f"v={signature}"
    error = parse_token("SCRAM-SHA-512", b"e=invalid-proof", from_client=False)
    assert error["token"] == "e=invalid-proof"


def test_parse_token_oauthbearer():
    jwt = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"
    text = f"n,,\x01host=localhost\x01port=9092\x01auth=Bearer {jwt}\x01\x01".encode()
    token = parse_token("OAUTHBEARER", text, from_client=True)
    assert token["mechanism"] == "OAUTHBEARER" and token["size"] == len(text)
    assert "auth=Bearer <redacted>" in token["token"]
    assert "host=localhost" in token["token"]
    assert jwt not in repr(token) and "c2lnbmF0dXJl" not in repr(token)
    shown = parse_token("OAUTHBEARER", text, True, show_secrets=True)
    assert jwt in shown["token"]


def test_parse_token_gssapi_is_opaque():
    blob = bytes(range(256)) + b"kerberos-ticket"
    for from_client in (True, False):
        token = parse_token("GSSAPI", blob, from_client)
        assert token == {
            "mechanism": "GSSAPI",
            "principal": None,
            "size": len(blob),
            "token": f"<redacted {len(blob)} bytes>",
        }
        assert parse_token("GSSAPI", blob, from_client, show_secrets=True)["token"] == blob
    # no handshake seen: unknown mechanism, opaque as well
    assert parse_token(None, b"\x00alice\x00pw", True)["token"] == "<redacted 9 bytes>"
    assert parse_token("PLAIN", None, True) is None
