"""The TLS sample captures (captures/tls-samples/, tools/record_tls.py) against their manifests,
read by tshark: with the clients' key log it decrypts them and decodes the Kafka requests
and records that were sent; without it, or with another capture's key log, it sees no Kafka.
The pcapng with the key log embedded decrypts with no key log option."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

CAPTURES = Path(__file__).resolve().parent.parent / "captures" / "tls-samples"
MANIFESTS = {p.name.split(".")[0]: p for p in sorted(CAPTURES.glob("tls-*.manifest.json"))}
TSHARK = shutil.which("tshark")

pytestmark = [
    pytest.mark.skipif(TSHARK is None, reason="tshark not installed"),
    pytest.mark.skipif(not MANIFESTS, reason="no TLS captures (tools/record_tls.py)"),
]

#: The IANA code of each suite the recorder asks for.
SUITES = {
    "TLS_AES_128_GCM_SHA256": 0x1301,
    "TLS_AES_256_GCM_SHA384": 0x1302,
    "TLS_CHACHA20_POLY1305_SHA256": 0x1303,
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": 0xC02F,
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": 0xC030,
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCA8,
}
VERSIONS = {"TLSv1.2": 0x0303, "TLSv1.3": 0x0304}
GROUP_KEYS = {10, 11, 14, 9, 8, 13}  # FindCoordinator, JoinGroup, SyncGroup, OffsetFetch,
# OffsetCommit, LeaveGroup


def manifest(name: str) -> dict:
    return json.loads(MANIFESTS[name].read_text())


def tshark(capture: Path, port: int, keylog: Path | str | None, *args: str) -> list[str]:
    """tshark's output lines, reading `port` as TLS carrying Kafka (no key log: None)."""
    cmd = [TSHARK, "-n", "-r", str(capture), "-d", f"tcp.port=={port},tls"]
    cmd += ["-d", f"tls.port=={port},kafka", "-o", f"tls.keylog_file:{keylog or ''}"]
    out = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def requests(capture: Path, port: int, keylog: Path | str | None) -> list[tuple[int, str]]:
    """(api key, topic names) of each Kafka request tshark decodes."""
    lines = tshark(
        capture, port, keylog, "-Y", "kafka.request_key", "-T", "fields",
        "-e", "kafka.api_key", "-e", "kafka.topic_name",
    )  # fmt: skip
    return [(int(key), topics) for key, topics in (line.split("\t") for line in lines)]


def decrypted(capture: Path, port: int, keylog: Path) -> bytes:
    """The decrypted bytes of every TLS stream, both directions."""
    streams = set(tshark(capture, port, keylog, "-T", "fields", "-e", "tcp.stream"))
    follow = [a for s in sorted(streams) for a in ("-z", f"follow,tls,raw,{s}")]
    lines = tshark(capture, port, keylog, "-q", *follow)
    hex_lines = [ln.strip() for ln in lines if ln.strip() and ln.strip()[0] in "0123456789abcdef"]
    return b"".join(bytes.fromhex(h) for h in hex_lines if _is_hex(h))


def _is_hex(text: str) -> bool:
    return len(text) % 2 == 0 and all(c in "0123456789abcdef" for c in text)


def paths(name: str) -> tuple[Path, int, Path]:
    m = manifest(name)
    return CAPTURES / m["capture"], m["proxy_port"], CAPTURES / m["keylog"]


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_key_log_decrypts_the_kafka_requests(name):
    m = manifest(name)
    got = requests(*paths(name))
    keys = {key for key, _ in got}
    # The SASL_SSL scenario logs in and asks for Metadata; the others produce and consume.
    assert keys >= ({18, 3, 17, 36} if m.get("sasl") else {18, 3, 0} | GROUP_KEYS)
    assert sum(key == 0 for key, _ in got) == len(m["produced"])  # one Produce a record
    # tshark 4.0 decodes no topic names in Produce v9 (kafka-python): check those it names
    named = {t for key, topics in got if key == 0 for t in topics.split(",") if t}
    assert named <= {m["topic"]}


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_produced_records_are_in_the_decrypted_streams(name):
    m = manifest(name)
    data = decrypted(*paths(name))
    assert m["topic"].encode() in data
    for record in m["produced"]:
        assert (
            record["key"].encode() + _varint(len(record["value"])) + record["value"].encode()
            in data
        )


def _varint(n: int) -> bytes:
    """A zigzag varint, as record batches write lengths (short values: one byte)."""
    assert n < 64
    return bytes([n << 1])


@pytest.mark.parametrize("name", MANIFESTS)
def test_without_the_key_log_there_is_no_kafka(name):
    capture, port, _ = paths(name)
    assert requests(capture, port, None) == []


@pytest.mark.parametrize("name", MANIFESTS)
def test_another_captures_key_log_decrypts_nothing(name):
    capture, port, _ = paths(name)
    other = next(n for n in MANIFESTS if n != name) if len(MANIFESTS) > 1 else None
    if other is None:
        pytest.skip("one TLS capture only")
    assert requests(capture, port, paths(other)[2]) == []


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_negotiated_version_and_suite(name):
    """The ServerHello in the capture, the clients' sockets and the proxy agree with the
    scenario."""
    m = manifest(name)
    capture, port, _ = paths(name)
    hellos = tshark(
        capture, port, None, "-Y", "tls.handshake.type == 2", "-T", "fields",
        "-e", "tls.handshake.ciphersuite", "-e", "tls.handshake.extensions.supported_version",
    )  # fmt: skip
    assert hellos
    version = VERSIONS[m["tls"]["version"]]
    for line in hellos:
        suite, supported = line.split("\t")
        assert int(suite, 0) == SUITES[m["tls"]["iana"]]
        assert int(supported or "0x0303", 0) == version
    seen = m["negotiated"]["clients"] + m["negotiated"]["proxy"]
    assert {(s["version"], s["cipher"]) for s in seen} == {(m["tls"]["version"], m["tls"]["suite"])}


def test_the_pcapng_carries_its_secrets():
    with_pcapng = [n for n in MANIFESTS if manifest(n).get("pcapng")]
    assert with_pcapng, "no manifest names a pcapng"
    for name in with_pcapng:
        capture, port, keylog = paths(name)
        pcapng = CAPTURES / manifest(name)["pcapng"]
        got = requests(pcapng, port, None)
        assert got and got == requests(capture, port, keylog)
