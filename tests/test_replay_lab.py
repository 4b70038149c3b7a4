"""The replay lab (tools/replay_lab.py): a sample capture replayed by tcpreplay onto a veth pair
and captured on its other end by `kafka-dissect live` gives exactly the exchanges `kafka-dissect
analyze` finds in the file, nothing dropped; the pair is gone afterwards, also when its
process is stopped by SIGTERM or Ctrl-C, and `clean()` removes the pair of a killed one.

Those need root, iproute2, tcpreplay and tcpdump (skipped with the reason otherwise); preparing
captures tcpreplay cannot send as they are and reading its statistics need nothing.
"""

import gzip
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from dissector.capture import Packet, open_capture
from dissector.live.ring import PcapRing
from dissector.net.link import LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_RAW
from tools import replay_lab

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "captures" / "group-rebalance.pcap"  # 998 packets, a consumer group's life

UNAVAILABLE = replay_lab.unavailable()
needs_lab = pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE))


def packets(path):
    with open_capture(path) as reader:
        return list(reader)


def write_pcap(directory, packets):
    ring = PcapRing(directory, files=1, file_bytes=1 << 62)
    for p in packets:
        ring.write(p)
    ring.close()
    return ring.written[0]


# -- with root: the lab ----------------------------------------------------------------------


@needs_lab
def test_replayed_capture_gives_the_exchanges_analyze_finds(tmp_path, monkeypatch):
    # The live and analyze commands run this checkout's code.
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    ref = replay_lab.reference(SAMPLE, tmp_path)
    assert ref.ports == [9092] and len(ref.exchanges) > 250
    with replay_lab.veth_pair() as lab:
        assert {lab.sender, lab.receiver} <= set(replay_lab.lab_links())
        run = replay_lab.live_replay(lab, SAMPLE, ref.ports, tmp_path / "live.parquet", 2000)
    assert not {lab.sender, lab.receiver} & set(replay_lab.lab_links())
    assert (run.replayed.packets, run.replayed.failed) == (len(packets(SAMPLE)), 0)
    assert 500 < run.replayed.pps < 2_200  # paced, not at top speed; a busy machine lags
    assert run.kernel_drops == 0 and run.packets == run.replayed.packets
    assert run.exchanges == ref.exchanges  # client, broker, api key, correlation id, status
    assert run.cpu_seconds > 0


def start_lab_process():
    """A process holding a lab until stopped; the lab's ends, once made."""
    code = (
        "import time\nfrom tools import replay_lab\n"
        "with replay_lab.veth_pair() as lab:\n"
        "    print(lab.sender, lab.receiver, flush=True)\n"
        "    time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    ends = set(proc.stdout.readline().split())
    assert len(ends) == 2 and ends <= set(replay_lab.lab_links())
    return proc, ends


@needs_lab
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_lab_is_removed_when_its_process_is_stopped(sig):
    proc, ends = start_lab_process()
    proc.send_signal(sig)
    assert proc.wait(timeout=10) != 0
    assert not ends & set(replay_lab.lab_links())


@needs_lab
def test_clean_removes_the_lab_of_a_killed_process():
    proc, ends = start_lab_process()
    proc.kill()  # nothing runs: the lab stays
    proc.wait(timeout=10)
    assert ends <= set(replay_lab.lab_links())
    assert min(ends) in replay_lab.clean()  # the sender end, kdlab0-...; its peer goes along
    assert not ends & set(replay_lab.lab_links())


# -- without root: captures made ready, tcpreplay's figures ------------------------------------


def test_an_ethernet_pcap_is_replayed_as_it_is(tmp_path):
    assert replay_lab.prepare(SAMPLE, tmp_path) == (SAMPLE, 0)
    assert not any(tmp_path.iterdir())


def relinked(p, linktype, header):
    """The packet of an Ethernet capture as another link type would carry it."""
    return p._replace(
        linktype=linktype, data=header + p.data[14:], wirelen=p.wirelen - 14 + len(header)
    )


def sll_header(protocol):
    return struct.pack(">HHH8sH", 0, 772, 6, b"", protocol)


def test_other_captures_become_ethernet_copies(tmp_path):
    """Gzip, Linux cooked and raw IP captures become pcap of Ethernet frames carrying the same
    IP packets at the same times; what carries no IP, or exceeds the veth's MTU, is left out."""
    original = packets(SAMPLE)
    compressed = tmp_path / "sample.pcap.gz"
    compressed.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    arp = Packet(0, 1, LINKTYPE_LINUX_SLL, sll_header(0x0806) + bytes(28), 44)
    huge = Packet(
        0, 2, LINKTYPE_RAW, b"\x45" + bytes(replay_lab.MAX_FRAME - 14), replay_lab.MAX_FRAME - 13
    )
    sll = [relinked(p, LINKTYPE_LINUX_SLL, sll_header(0x0800)) for p in original]
    raw = [relinked(p, LINKTYPE_RAW, b"") for p in original]
    variants = {
        "gzip": (compressed, 0),
        "sll": (write_pcap(tmp_path / "sll", [*sll, arp]), 1),
        "raw": (write_pcap(tmp_path / "raw", [*raw, huge]), 1),
    }
    for name, (capture, left_out) in variants.items():
        ready, skipped = replay_lab.prepare(capture, tmp_path / f"{name}-ready")
        assert ready != capture and skipped == left_out, name
        copy = packets(ready)
        assert {p.linktype for p in copy} == {LINKTYPE_ETHERNET}, name
        # Loopback's Ethernet header has no addresses, as the copies' have.
        assert [p[1:] for p in copy] == [p[1:] for p in original], name


TCPREPLAY_OUTPUT = """\
Actual: 998 packets (128975 bytes) sent in 0.499903 seconds
Rated: 258000.0 Bps, 2.06 Mbps, 1996.38 pps
Flows: 26 flows, 52.01 fps, 998 unique flow packets, 0 unique non-flow packets
Statistics for network device: kdlab0-1a2b3c
\tSuccessful packets:        997
\tFailed packets:            1
\tTruncated packets:         0
\tRetried packets (ENOBUFS): 0
\tRetried packets (EAGAIN):  0
"""


def test_tcpreplay_statistics():
    assert replay_lab.parse_replay(TCPREPLAY_OUTPUT) == replay_lab.Replayed(
        997, 1, 0.499903, 1996.38
    )
    with pytest.raises(replay_lab.LabError, match="no statistics"):
        replay_lab.parse_replay("tcpreplay: something else\n")
