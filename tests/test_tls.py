"""Kafka over TLS: decrypted with a key log (or the secrets a pcapng carries), reported when
it cannot be.

The real captures (captures/tls-samples/, tools/record_tls.py) are kafka-python and aiokafka
clients talking to a broker behind a TLS endpoint, one per cipher suite, with the key log
the clients wrote; their manifests say what was produced and consumed. The synthetic
sessions (tls_encoder.py) are built byte by byte from the RFCs, for what the real ones do not
show: KeyUpdate, frames split across records and records holding several frames, TLS 1.3 key
logs without handshake secrets, TLS 1.2 resumption's order, hostile records.
"""

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from bounded import run_bounded
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_encoder import encode_request, encode_response
from synth import Capture, Connection, frame_bytes
from tls_encoder import APPLICATION_DATA, HANDSHAKE, Tls12Session, Tls13Session, record

import dissector
from dissector.flow import Dissector
from dissector.options import Options
from dissector.tls import KeyLog

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "captures" / "tls-samples"
NAMES = sorted(p.name.split(".")[0] for p in SAMPLES.glob("tls-*.manifest.json"))
TSHARK = shutil.which("tshark")


def manifest(name):
    return json.loads((SAMPLES / f"{name}.manifest.json").read_text())


def sample(name, suffix=".pcap"):
    return SAMPLES / f"{name}{suffix}"


def streams_of(path, **options):
    return dissector.read_pcap(path, table="streams", **options)


def requests(pairs):
    """(api key, correlation id) of every request, as a multiset."""
    asked = pairs[pairs["request_frame"].notna()]
    return Counter(zip(asked["api_key"], asked["correlation_id"], strict=True))


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "dissector", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


# -- the real captures --------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_each_suite_decrypts_to_the_records_the_clients_sent(name):
    m = manifest(name)
    keylog = sample(name, ".keylog")
    records = dissector.read_pcap(sample(name), table="records", tls_keylog=keylog)
    produced = records[(records["api_name"] == "Produce") & (records["direction"] == "request")]
    assert sorted(v.decode() for v in produced["value"]) == sorted(
        r["value"] for r in m["produced"]
    )
    fetched = records[(records["api_name"] == "Fetch") & (records["direction"] == "response")]
    assert set(m["consumed"]) <= {v.decode() for v in fetched["value"]}
    streams = streams_of(sample(name), tls_keylog=keylog)
    assert set(streams["tls"]) == {"decrypted"}
    assert set(streams["tls_version"]) == {m["tls"]["version"]}
    assert set(streams["tls_cipher"]) == {m["tls"]["iana"]}
    assert streams["kafka"].all() and streams["tls_error"].isna().all()
    # Every byte of the ciphertext stream is TLS or plaintext that was framed.
    assert (
        streams["bytes_delivered"]
        == streams["bytes_tls"] + streams["bytes_framed"] + streams["bytes_skipped"]
    ).all()
    assert (streams["bytes_tls"] > 0).all() and (streams["bytes_framed"] > 0).all()


@pytest.mark.skipif(TSHARK is None, reason="tshark not installed")
@pytest.mark.parametrize("name", NAMES)
def test_the_requests_decrypted_are_those_tshark_decrypts(name):
    m = manifest(name)
    keylog = sample(name, ".keylog")
    port = m["proxy_port"]
    cmd = [TSHARK, "-n", "-r", str(sample(name)), "-d", f"tcp.port=={port},tls"]
    cmd += ["-d", f"tls.port=={port},kafka", "-o", f"tls.keylog_file:{keylog}"]
    cmd += ["-Y", "kafka.request_key", "-T", "fields", "-e", "kafka.api_key"]
    cmd += ["-e", "kafka.correlation_id"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    theirs = Counter(tuple(map(int, line.split("\t"))) for line in out.splitlines())
    pairs = dissector.read_pcap(sample(name), tls_keylog=keylog)
    assert requests(pairs) == theirs
    assert (pairs["status"].isin(["ok", "error"])).all()


# What an exchange is apart from the connection, the timing and the sizes.
SAME = ["api_key", "api_version", "correlation_id", "client_id", "error_code", "status"]


def conversations(pairs):
    """Per connection, in the order connections opened: its exchanges as SAME, topics and
    bodies."""
    out = []
    for _stream, rows in pairs.sort_values(["stream", "request_frame"]).groupby("stream"):
        out.append(
            [
                (*(row[c] for c in SAME), tuple(row["topics"]), row["request"], row["response"])
                for _, row in rows.iterrows()
            ]
        )
    return out


@pytest.mark.parametrize("name", NAMES)
def test_decrypted_exchanges_are_those_of_the_plaintext_side(name):
    """The TLS endpoint forwards each connection's bytes to the broker unchanged: decrypted,
    each TLS connection holds the exchanges of its plaintext twin, request and response
    bodies included."""
    m = manifest(name)
    tls = dissector.read_pcap(sample(name), tls_keylog=sample(name, ".keylog"))
    plain = dissector.read_pcap(SAMPLES / m["plain_capture"])
    assert len(tls) == m["exchanges"]["decrypted"] == len(plain) == m["exchanges"]["plain"]
    assert conversations(tls) == conversations(plain)


def test_without_keys_each_connection_is_reported_and_nothing_else():
    name = "tls-13-aes128gcm"
    pairs = dissector.read_pcap(sample(name))
    assert pairs.empty
    streams = streams_of(sample(name))
    assert set(streams["tls"]) == {"no_key"} and not streams["kafka"].any()
    assert set(streams["tls_cipher"]) == {"TLS_AES_128_GCM_SHA256"}
    done = run_cli("analyze", sample(name), "--no-progress")
    assert done.returncode == 0, done.stderr
    said = done.stdout.splitlines()
    connections = len(streams) // 2
    assert (
        f"TLS: {connections} connections, no key for {connections}: pass --tls-keylog "
        "(an SSLKEYLOGFILE of the clients)"
    ) in said
    assert not any(line.startswith("not Kafka") for line in said)


def test_another_session_s_key_log_is_no_key():
    streams = streams_of(
        sample("tls-12-aes128gcm"), tls_keylog=sample("tls-13-chacha20", ".keylog")
    )
    assert set(streams["tls"]) == {"no_key"}


def test_a_wrong_secret_is_a_status_naming_frame_and_offset(tmp_path):
    name = "tls-12-aes256gcm"
    lines = sample(name, ".keylog").read_text().splitlines()
    wrong = tmp_path / "wrong.keylog"
    wrong.write_text(
        "".join(
            f"{label} {random} {'00' * (len(secret) // 2)}\n"
            for label, random, secret in (line.split() for line in lines if line[:1] != "#")
        )
    )
    streams = streams_of(sample(name), tls_keylog=wrong)
    assert set(streams["tls"]) == {"decrypt_failed"}
    for error in streams["tls_error"]:
        assert error.startswith("frame ") and ", offset " in error
        assert "does not decrypt (authentication failed: wrong key, or corrupt bytes)" in error
    assert dissector.read_pcap(sample(name), tls_keylog=wrong).empty
    done = run_cli("analyze", sample(name), "--tls-keylog", wrong, "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "decryption failed for 5 (the streams table's tls_error says where)" in done.stdout


def test_a_pcapng_carrying_its_secrets_is_decrypted_without_a_key_log():
    name = "tls-13-aes128gcm"
    embedded = dissector.read_pcap(sample(name, ".pcapng"))
    with_keylog = dissector.read_pcap(sample(name), tls_keylog=sample(name, ".keylog"))
    assert not embedded.empty
    assert requests(embedded) == requests(with_keylog)


def test_the_key_log_never_reaches_an_output(tmp_path):
    name = "tls-13-chacha20"
    keylog = sample(name, ".keylog")
    lines = keylog.read_text().splitlines()
    secrets = [line.split()[2] for line in lines if line[:1] != "#"]
    texts = []
    for suffix in (".jsonl", ".csv"):
        for table in ("pairs", "streams"):
            out = tmp_path / f"{table}{suffix}"
            done = run_cli("analyze", sample(name), "--tls-keylog", keylog, "-o", out,
                           "--table", table, "--no-progress")  # fmt: skip
            assert done.returncode == 0, done.stderr
            texts += [done.stdout, done.stderr, out.read_text()]
    assert "TLS: 5 connections, 5 decrypted" in texts[0]
    for secret in secrets:
        assert all(secret.lower() not in t.lower() for t in texts)


def test_live_reads_a_tls_stream_with_its_key_log(tmp_path):
    name = "tls-12-chacha20"
    out = tmp_path / "live.jsonl"
    with open(sample(name), "rb") as stream:
        done = subprocess.run(
            [sys.executable, "-m", "dissector", "live", "-r", "-", "-o", str(out),
             "--tls-keylog", str(sample(name, ".keylog"))],
            stdin=stream, capture_output=True, text=True, cwd=ROOT, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "TLS: 5 connections, 5 decrypted" in done.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    pairs = dissector.read_pcap(sample(name), tls_keylog=sample(name, ".keylog"))
    assert len(rows) == len(pairs)
    assert Counter(r["api_name"] for r in rows) == Counter(pairs["api_name"])


# -- sessions built from the RFCs ---------------------------------------------------------------


def metadata(corr):
    body = {"Topics": None, "AllowAutoTopicCreation": False}
    return encode_request(
        3, 12, corr, "tls-client", {**body, "IncludeTopicAuthorizedOperations": False}
    )


def metadata_answer(corr):
    return encode_response(3, 12, corr, {"ThrottleTimeMs": 0, "Brokers": [], "ClusterId": None,
                           "ControllerId": 1, "Topics": []})  # fmt: skip


def dissect_packets(cap, **options):
    d = Dissector(Options(**options))
    out = []
    for packet in cap.packets:
        out += d.feed(packet)
    out += d.finish()
    return out, d


def tls13_capture(session, requests_per_record=3, key_update=True, split=4):
    """A TLS 1.3 connection: the handshake, then Metadata requests, three to a record; one
    large request split across `split` records; a KeyUpdate from each side midway."""
    cap = Capture()
    conn = Connection(cap)
    conn.send("c", session.hello)
    conn.send("b", session.server_flight())
    conn.send("c", session.client_finished())
    corr = 0
    sent = []
    for batch in range(4):
        frames = b""
        for _ in range(requests_per_record):
            frames += frame_bytes(metadata(corr))
            sent.append(corr)
            corr += 1
        conn.send("c", session.client.seal(APPLICATION_DATA, frames))
        answers = b"".join(frame_bytes(metadata_answer(c)) for c in sent[-requests_per_record:])
        conn.send("b", session.server.seal(APPLICATION_DATA, answers, pad=7))
        if key_update and batch == 1:
            conn.send("c", session.client.key_update())
            conn.send("b", session.server.key_update())
    big = frame_bytes(metadata(corr))
    step = len(big) // split + 1
    records = b"".join(
        session.client.seal(APPLICATION_DATA, big[i : i + step]) for i in range(0, len(big), step)
    )
    last = conn.send("c", records)[-1]
    conn.send("b", session.server.seal(APPLICATION_DATA, frame_bytes(metadata_answer(corr))))
    sent.append(corr)
    conn.close()
    return cap, sent, last


def test_tls13_key_update_and_frames_across_and_within_records(tmp_path):
    session = Tls13Session()
    keylog = tmp_path / "keys.log"
    keylog.write_text(session.keylog())
    cap, sent, last = tls13_capture(session)
    out, d = dissect_packets(cap, tls_keylog=str(keylog))
    assert [e.correlation_id for e in out] == sent
    assert {e.status for e in out} == {"ok"} and {e.api_name for e in out} == {"Metadata"}
    # A frame split across records is complete with the packet of its last record.
    assert out[-1].request_frame == last
    assert d.stats()["tls"] == {"decrypted": 1}
    (row_c, row_b) = d.ended()[0].rows
    assert (row_c["tls"], row_c["tls_version"], row_c["tls_cipher"]) == (
        "decrypted",
        "TLSv1.3",
        "TLS_AES_128_GCM_SHA256",
    )
    assert (row_c["tls_sni"], row_c["tls_alpn"]) == ("broker.example", "kafka")
    for row in (row_c, row_b):
        assert (
            row["bytes_delivered"] == row["bytes_tls"] + row["bytes_framed"] + row["bytes_skipped"]
        )


def test_tls13_key_log_with_traffic_secrets_alone(tmp_path):
    session = Tls13Session(sni=None, alpn=())
    keylog = tmp_path / "keys.log"
    keylog.write_text(session.keylog({"CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"}))
    cap, sent, _ = tls13_capture(session, key_update=False)
    out, _ = dissect_packets(cap, tls_keylog=str(keylog))
    assert [e.correlation_id for e in out] == sent


def test_tls12_resumed_session_order():
    """A resumed TLS 1.2 session: the broker changes cipher first."""
    s = Tls12Session()
    cap = Capture()
    conn = Connection(cap)
    conn.send("c", s.hello)
    conn.send("b", s.server_hello + s.change_cipher(s.server))
    conn.send(
        "c", s.change_cipher(s.client) + s.client.seal(APPLICATION_DATA, frame_bytes(metadata(7)))
    )
    conn.send("b", s.server.seal(APPLICATION_DATA, frame_bytes(metadata_answer(7))))
    conn.close()
    out, d = dissect_packets(cap, tls_secrets=s.keylog())
    assert [(e.correlation_id, e.status) for e in out] == [(7, "ok")]
    assert d.ended()[0].rows[0]["tls_cipher"] == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"


def test_a_key_log_that_grows_during_the_run_is_read_again(tmp_path):
    """The broker's first encrypted records come before the client has written the session's
    line (as live, where the client writes it when it reads the ServerHello): they wait."""
    session = Tls13Session()
    keylog = tmp_path / "keys.log"
    keylog.write_text("# nothing yet\n")
    cap, sent, _ = tls13_capture(session, key_update=False)
    d = Dissector(Options(tls_keylog=str(keylog)))
    out = []
    handshake = 3 + 2  # SYN, SYN-ACK, ACK, ClientHello, the broker's flight
    for packet in cap.packets[:handshake]:
        out += d.feed(packet)
    assert d.stats()["tls"] == {"no_key": 1}  # for now
    with open(keylog, "a") as f:
        f.write(session.keylog()[:50])  # a line cut short: taken once whole
        f.flush()
        f.write(session.keylog()[50:])
    for packet in cap.packets[handshake:]:
        out += d.feed(packet)
    out += d.finish()
    assert [e.correlation_id for e in out] == sent


def test_a_session_never_in_the_growing_key_log_gives_up_after_a_bound(tmp_path):
    session = Tls13Session()
    keylog = tmp_path / "keys.log"
    keylog.write_text("")
    cap, _, _ = tls13_capture(session, key_update=False)
    out, d = dissect_packets(cap, tls_keylog=str(keylog))
    assert out == []
    row = d.ended()[0].rows[1]
    assert row["tls"] == "no_key" and row["bytes_tls"] == row["bytes_delivered"]


def test_key_log_lines(tmp_path):
    good = "CLIENT_RANDOM " + "ab" * 32 + " " + "cd" * 48
    assert "cd" * 48 not in repr(Options(tls_secrets=good))  # secrets, even in a repr
    keys = KeyLog()
    keys.add("# comment\n\n" + good + "\nCLIENT_RANDOM zz 00\nOTHER_LABEL " + "ab" * 32 + " 00\n")
    assert (keys.lines, keys.bad_lines) == (1, 2)
    assert keys.get(bytes.fromhex("ab" * 32)) == {"CLIENT_RANDOM": bytes.fromhex("cd" * 48)}
    path = tmp_path / "k.log"
    path.write_text(good + "\n")
    follows = KeyLog(path)
    path.write_text("")  # replaced by a shorter file: read anew
    assert follows.get(b"\x01" * 32) is None and follows.lines == 1
    path.write_text("CLIENT_RANDOM " + "01" * 32 + " " + "ef" * 8 + "\n")  # still shorter
    assert follows.get(b"\x01" * 32) == {"CLIENT_RANDOM": bytes.fromhex("ef" * 8)}
    with pytest.raises(OSError, match="cannot read the TLS key log"):
        KeyLog(tmp_path / "missing.log")
    done = run_cli("analyze", sample("tls-12-aes128gcm"), "--tls-keylog", tmp_path / "missing.log")
    assert done.returncode == 2 and "missing.log: cannot read the TLS key log" in done.stderr
    assert "Traceback" not in done.stderr


def test_hostile_records_end_the_side_with_a_status():
    s = Tls13Session()
    cases = {
        "a record longer than TLS allows": record(APPLICATION_DATA, bytes(20000)),
        "a handshake message of 16 MB": record(HANDSHAKE, b"\x0b\xff\xff\xff" + bytes(100)),
        "bytes that are not a TLS record": b"GET / HTTP/1.1\r\n\r\n",
    }
    for why, hostile in cases.items():
        cap = Capture()
        conn = Connection(cap)
        conn.send("c", s.hello)
        conn.send("b", hostile)
        conn.close()
        out, d = dissect_packets(cap, tls_secrets=s.keylog())
        row = d.ended()[0].rows[1]
        assert out == [] and row["tls"] in ("decrypt_failed", "incomplete"), why
        assert row["tls_error"].startswith("frame "), why


def test_random_bytes_after_a_client_hello_are_bounded(tmp_path):
    """200 connections of random records after real ClientHellos, in a child limited to
    400 MB: every one ends with a status, nothing raises."""
    script = (
        "import os, random, sys\n"
        "sys.path.insert(0, 'tests')\n"
        "from synth import Capture, Connection\n"
        "from tls_encoder import Tls13Session, record\n"
        "from dissector.flow import Dissector\n"
        "from dissector.options import Options\n"
        "rng = random.Random(7)\n"
        "cap = Capture()\n"
        "for i in range(200):\n"
        "    s = Tls13Session()\n"
        "    c = Connection(cap, client=('10.0.0.2', 30000 + i))\n"
        "    c.send('c', s.hello)\n"
        "    c.send('b', s.server_flight()[: rng.randrange(200)] + rng.randbytes(3000))\n"
        "    c.send('c', bytes([rng.choice([20, 21, 22, 23])]) + rng.randbytes(5000))\n"
        "    c.close()\n"
        "d = Dissector(Options(tls_secrets=''))\n"
        "for p in cap.packets:\n"
        "    d.feed(p)\n"
        "d.finish()\n"
        "print(sum(d.stats()['tls'].values()))\n"
    )
    done = run_bounded([sys.executable, "-c", script], timeout=120, memory=400 << 20)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "200"


def test_tls13_hello_retry_request_is_passed_over():
    """The broker asks the client to try again (HelloRetryRequest: a ServerHello with the
    special random); the session is the one after the second ClientHello."""
    from tls_encoder import server_hello

    session = Tls13Session()
    retry = bytes.fromhex("CF21AD74E59A6111BE1D8C021E65B891C2A211167ABB8C5E079E09E2C8A8339C")
    cap = Capture()
    conn = Connection(cap)
    conn.send("c", session.hello)
    conn.send("b", record(HANDSHAKE, server_hello(retry, 0x1301, True)))
    conn.send("c", session.hello)
    conn.send("b", session.server_flight())
    conn.send("c", session.client_finished())
    conn.send("c", session.client.seal(APPLICATION_DATA, frame_bytes(metadata(3))))
    conn.send("b", session.server.seal(APPLICATION_DATA, frame_bytes(metadata_answer(3))))
    conn.close()
    out, _ = dissect_packets(cap, tls_secrets=session.keylog())
    assert [(e.correlation_id, e.status) for e in out] == [(3, "ok")]


def test_live_picks_up_the_lines_a_key_log_gains_during_the_run(tmp_path):
    """`live -r FIFO --tls-keylog K`: the first connection's handshake and the broker's first
    encrypted records arrive while K is empty; the clients' lines are appended before the
    rest of the traffic, which is then decrypted, that connection's included."""
    import os
    import threading
    import time

    name = "tls-13-aes128gcm"
    raw = sample(name).read_bytes()
    # pcap: a 24-byte header, then records of a 16-byte header and the packet.
    cut = 24
    for _ in range(6):  # through the broker's ServerHello and encrypted flight
        cut += 16 + int.from_bytes(raw[cut + 8 : cut + 12], "little")
    keylog = tmp_path / "keys.log"
    keylog.write_text("")
    fifo = tmp_path / "capture.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "live.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dissector", "live", "-r", str(fifo), "--tls-keylog",
         str(keylog), "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip

    def play():
        with open(fifo, "wb") as f:
            f.write(raw[:cut])
            f.flush()
            time.sleep(1.0)  # the live run reads the handshake with no key for it
            keylog.write_text(sample(name, ".keylog").read_text())
            f.write(raw[cut:])

    writer = threading.Thread(target=play)
    writer.start()
    stdout, stderr = proc.communicate(timeout=120)
    writer.join()
    assert proc.returncode == 0, stderr
    assert "TLS: 7 connections, 7 decrypted" in stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    pairs = dissector.read_pcap(sample(name), tls_keylog=sample(name, ".keylog"))
    assert sorted((r["api_key"], r["correlation_id"], r["client"]) for r in rows) == sorted(
        zip(pairs["api_key"], pairs["correlation_id"], pairs["client"], strict=True)
    )


def test_sasl_over_tls_is_redacted_unless_asked():
    """SASL_SSL: PLAIN and SCRAM-SHA-256 logins inside TLS. The PLAIN password leaves in no
    output unless --show-secrets; the SCRAM one never crosses the wire."""
    name = "tls-13-sasl-plain"
    m = manifest(name)
    keylog = sample(name, ".keylog")
    pairs = dissector.read_pcap(sample(name), tls_keylog=keylog)
    assert set(pairs["api_name"]) == {"ApiVersions", "SaslHandshake", "SaslAuthenticate",
                                      "Metadata"}  # fmt: skip
    assert (pairs["status"] == "ok").all()
    logins = {login["mechanism"]: login for login in m["sasl"]}
    plain = logins["PLAIN"]
    text = pairs.to_json()
    assert plain["password"] not in text and plain["username"] in text
    shown = dissector.read_pcap(sample(name), tls_keylog=keylog, show_secrets=True)
    assert plain["password"] in shown.to_json()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cuts=st.lists(st.integers(1, 4000), min_size=1, max_size=12),
    mss=st.integers(7, 3000),
    update_after=st.integers(0, 6),
    pad=st.integers(0, 40),
)
def test_any_cut_into_records_and_segments_gives_the_same_exchanges(cuts, mss, update_after,
                                                                    pad):  # fmt: skip
    """The same six exchanges, the client's bytes cut into TLS records anywhere (records
    holding several frames, frames across records, tiny records), the records cut into TCP
    segments of any size, a KeyUpdate from each side after any record, padding in every
    record: always the same exchanges, every byte accounted for."""
    session = Tls13Session()
    cap = Capture()
    conn = Connection(cap, mss=mss)
    conn.send("c", session.hello)
    conn.send("b", session.server_flight())
    conn.send("c", session.client_finished())
    stream = b"".join(frame_bytes(metadata(corr)) for corr in range(6))
    bounds = sorted({0, len(stream), *(c % len(stream) for c in cuts)})
    records = []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        records.append(session.client.seal(APPLICATION_DATA, stream[a:b], pad=pad))
        if i == update_after:
            records.append(session.client.key_update())
    conn.send("c", b"".join(records))
    answers = b"".join(frame_bytes(metadata_answer(corr)) for corr in range(6))
    conn.send("b", session.server.seal(APPLICATION_DATA, answers[:100], pad=pad))
    conn.send("b", session.server.key_update())
    conn.send("b", session.server.seal(APPLICATION_DATA, answers[100:]))
    conn.close()
    out, d = dissect_packets(cap, tls_secrets=session.keylog())
    assert [(e.correlation_id, e.status) for e in out] == [(c, "ok") for c in range(6)]
    for row in d.ended()[0].rows:
        assert row["tls"] == "decrypted"
        assert row["bytes_delivered"] == row["bytes_tls"] + row["bytes_framed"]
