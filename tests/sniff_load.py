"""A steady load of small Kafka requests against a broker, for live-capture tests and the soak
benchmark: each connection sends Metadata v1 requests naming no topic (and every 50th an
ApiVersions v0), one at a time with TCP_NODELAY, and reads each response before the next, so
each request goes out in two segments (its size, then the rest, as clients that write the
prefix apart do) and with TCP_QUICKACK the client acknowledges each response at once, so every
exchange is four packets on loopback: two for the request, the response, the ACK.

    python tests/sniff_load.py --port 9092 --seconds 10 --connections 2 [--rate 500]

prints one JSON object: exchanges completed per API name, and the client ids used.
"""

import argparse
import json
import socket
import struct
import threading
import time

METADATA, API_VERSIONS = 3, 18
QUICKACK = getattr(socket, "TCP_QUICKACK", 12)


def request(api_key, version, corr, client_id, body=b""):
    cid = client_id.encode()
    payload = struct.pack(">hhih", api_key, version, corr, len(cid)) + cid + body
    return struct.pack(">i", len(payload)) + payload


def metadata_v1(corr, client_id):
    return request(METADATA, 1, corr, client_id, struct.pack(">i", 0))  # no topics


def api_versions_v0(corr, client_id):
    return request(API_VERSIONS, 0, corr, client_id)


def _recv_frame(sock):
    head = _recv_exact(sock, 4)
    (size,) = struct.unpack(">i", head)
    return _recv_exact(sock, size)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def one_connection(port, seconds, client_id, counts, rate=None, reconnect=None):
    """Request/response until `seconds` pass (at most `rate` a second if given), on a new
    connection every `reconnect` seconds if given."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        part = min(end - time.monotonic(), reconnect or seconds)
        _session(port, part, client_id, counts, rate)


def _session(port, seconds, client_id, counts, rate):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        end = time.monotonic() + seconds
        corr = 0
        start = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= end:
                break
            if rate and corr > (now - start) * rate:
                time.sleep(min(0.01, corr / rate - (now - start)))
                continue
            corr += 1
            if corr % 50 == 0:
                data = api_versions_v0(corr, client_id)
                name = "ApiVersions"
            else:
                data = metadata_v1(corr, client_id)
                name = "Metadata"
            sock.sendall(data[:4])
            sock.sendall(data[4:])
            # Re-armed each time: the kernel leaves quick-ACK mode on its own.
            sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
            frame = _recv_frame(sock)
            if struct.unpack_from(">i", frame)[0] != corr:
                raise AssertionError(f"response to {corr} expected")
            counts[name] = counts.get(name, 0) + 1
        time.sleep(0.05)  # let the last ACKs pass before the FIN


def run(port, seconds, connections, rate=None, prefix="load", reconnect=None):
    results = [{} for _ in range(connections)]
    ids = [f"{prefix}-{i}" for i in range(connections)]
    threads = [
        threading.Thread(
            target=one_connection, args=(port, seconds, ids[i], results[i], rate, reconnect)
        )
        for i in range(connections)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = {}
    for r in results:
        for k, v in r.items():
            total[k] = total.get(k, 0) + v
    return {"exchanges": total, "client_ids": ids}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--connections", type=int, default=2)
    p.add_argument("--rate", type=float, help="requests per second per connection")
    p.add_argument("--prefix", default="load")
    p.add_argument("--reconnect", type=float, help="seconds each connection lasts")
    a = p.parse_args()
    print(json.dumps(run(a.port, a.seconds, a.connections, a.rate, a.prefix, a.reconnect)))


if __name__ == "__main__":
    main()
