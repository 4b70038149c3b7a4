"""Capture reading: pcap and pcapng byte by byte, gzip, truncation and corrupt input."""

import contextlib
import gzip
import os
import shlex
import shutil
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dissector.capture import Packet, open_capture
from dissector.capture import reader as reader_mod
from dissector.errors import CaptureError

# ---------------------------------------------------------------- builders


def pcap_bytes(records, *, bo="<", nsec=False, linktype=1, snaplen=65535):
    """records: (sec, frac, data[, wirelen]) with frac in usec or nsec per `nsec`."""
    magic = 0xA1B23C4D if nsec else 0xA1B2C3D4
    out = [struct.pack(bo + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for rec in records:
        sec, frac, data = rec[:3]
        wirelen = rec[3] if len(rec) > 3 else len(data)
        out.append(struct.pack(bo + "IIII", sec, frac, len(data), wirelen) + data)
    return b"".join(out)


def pad4(b):
    return b + b"\0" * (-len(b) % 4)


def block(btype, body, bo="<"):
    body = pad4(body)
    length = 12 + len(body)
    return struct.pack(bo + "II", btype, length) + body + struct.pack(bo + "I", length)


def option(code, value, bo="<"):
    return struct.pack(bo + "HH", code, len(value)) + pad4(value)


def shb(bo="<", options=b""):
    return block(0x0A0D0D0A, struct.pack(bo + "IHHq", 0x1A2B3C4D, 1, 0, -1) + options, bo)


def idb(linktype, snaplen=0, tsresol=None, tsoffset=None, bo="<"):
    opts = b""
    if tsresol is not None:
        opts += option(9, bytes([tsresol]), bo)
    if tsoffset is not None:
        opts += option(14, struct.pack(bo + "q", tsoffset), bo)
    if opts:
        opts += struct.pack(bo + "HH", 0, 0)
    return block(1, struct.pack(bo + "HHI", linktype, 0, snaplen) + opts, bo)


def epb(iface, ts_units, data, wirelen=None, bo="<"):
    wirelen = len(data) if wirelen is None else wirelen
    head = struct.pack(
        bo + "IIIII", iface, ts_units >> 32, ts_units & 0xFFFFFFFF, len(data), wirelen
    )
    return block(6, head + pad4(data), bo)


def spb(data, wirelen=None, bo="<"):
    wirelen = len(data) if wirelen is None else wirelen
    return block(3, struct.pack(bo + "I", wirelen) + data, bo)


def pb(iface, ts_units, data, bo="<"):
    head = struct.pack(
        bo + "HHIIII", iface, 0, ts_units >> 32, ts_units & 0xFFFFFFFF, len(data), len(data)
    )
    return block(2, head + pad4(data), bo)


def write(tmp_path, content, name="c.pcap"):
    p = tmp_path / name
    p.write_bytes(content)
    return p


def read_all(path):
    with open_capture(path) as r:
        return list(r), r.warnings


# ---------------------------------------------------------------- classic pcap


@pytest.mark.parametrize("bo", ["<", ">"])
def test_pcap_usec_both_byte_orders(tmp_path, bo):
    recs = [(1_700_000_000, 123_456, b"\x01" * 60), (1_700_000_001, 999_999, b"abc", 1500)]
    packets, warnings = read_all(write(tmp_path, pcap_bytes(recs, bo=bo)))
    assert warnings == []
    assert packets == [
        Packet(1, 1_700_000_000_123_456_000, 1, b"\x01" * 60, 60),
        Packet(2, 1_700_000_001_999_999_000, 1, b"abc", 1500),
    ]
    assert isinstance(packets[0], Packet)


@pytest.mark.parametrize("bo", ["<", ">"])
def test_pcap_nsec_exact_timestamps(tmp_path, bo):
    recs = [(1_700_000_000, 123_456_789, b"x"), (0, 1, b"y")]
    packets, _ = read_all(write(tmp_path, pcap_bytes(recs, bo=bo, nsec=True, linktype=113)))
    assert [p.ts for p in packets] == [1_700_000_000_123_456_789, 1]
    assert {p.linktype for p in packets} == {113}


def test_pcap_linktype_fcs_bits_masked(tmp_path):
    # FCS length 4 (in 16-bit words: 2) in the top bits, plus the "FCS present" bit.
    network = (2 << 28) | 0x04000000 | 1
    packets, _ = read_all(write(tmp_path, pcap_bytes([(1, 0, b"z")], linktype=network)))
    assert packets[0].linktype == 1


def test_pcap_empty_capture_has_no_packets(tmp_path):
    packets, warnings = read_all(write(tmp_path, pcap_bytes([])))
    assert packets == [] and warnings == []


def test_pcap_many_packets_across_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(reader_mod, "CHUNK", 4096)
    recs = [(i, i % 1_000_000, bytes([i % 251]) * (i % 300)) for i in range(3000)]
    p = write(tmp_path, pcap_bytes(recs))
    with open_capture(p) as r:
        assert r.total_bytes == p.stat().st_size
        packets = []
        progress = []
        for pkt in r:
            packets.append(pkt)
            progress.append(r.bytes_read)
        assert r.bytes_read == r.total_bytes
    assert progress == sorted(progress) and progress[0] < r.total_bytes
    assert [p.frame for p in packets] == list(range(1, 3001))
    assert all(p.data == rec[2] for p, rec in zip(packets, recs, strict=True))
    assert packets[2999].ts == 2999 * 1_000_000_000 + 2999 * 1000


def test_pcap_record_larger_than_chunk(tmp_path, monkeypatch):
    monkeypatch.setattr(reader_mod, "CHUNK", 1024)
    big = bytes(range(256)) * 40  # 10 KiB, ten chunks
    packets, warnings = read_all(
        write(tmp_path, pcap_bytes([(1, 0, b"a"), (2, 0, big), (3, 0, b"b")]))
    )
    assert [p.data for p in packets] == [b"a", big, b"b"] and warnings == []


def test_pcap_snaplen_cut_keeps_wirelen(tmp_path):
    packets, _ = read_all(write(tmp_path, pcap_bytes([(1, 0, b"q" * 96, 1514)])))
    assert (len(packets[0].data), packets[0].wirelen) == (96, 1514)


# ---------------------------------------------------------------- pcapng


def test_pcapng_two_interfaces_resolutions_and_unknown_blocks(tmp_path):
    units_ns = 1_700_000_000_123_456_789
    units_2p20 = (1_700_000_000 << 20) + (1 << 19)  # x.5 s in 2^-20 ticks
    content = b"".join(
        [
            shb(options=option(4, b"test app") + struct.pack("<HH", 0, 0)),
            idb(1, tsresol=9),
            block(4, struct.pack("<HH", 0, 0)),  # NRB with no records
            idb(113, tsresol=0x80 | 20, tsoffset=100),
            epb(0, units_ns, b"eth frame"),
            block(0x00000BAD, struct.pack("<I", 32473) + b"custom!!"),  # custom block
            epb(1, units_2p20, b"sll frame", wirelen=200),
            block(5, struct.pack("<III", 0, 0, 0)),  # ISB
            block(0x0000000A, struct.pack("<I", 0x4B534C4B) + b"keys"),  # DSB
            idb(101),  # no tsresol: microseconds
            epb(2, 5_000_001, b"raw"),
        ]
    )
    packets, warnings = read_all(write(tmp_path, content, "c.pcapng"))
    assert warnings == []
    assert packets == [
        Packet(1, units_ns, 1, b"eth frame", 9),
        Packet(2, (1_700_000_000 + 100) * 1_000_000_000 + 500_000_000, 113, b"sll frame", 200),
        Packet(3, 5_000_001_000, 101, b"raw", 3),
    ]


def test_pcapng_tsresol_finer_than_nanoseconds(tmp_path):
    content = shb() + idb(1, tsresol=12) + epb(0, 1_000_000_000_123_456, b"p")  # picoseconds
    packets, _ = read_all(write(tmp_path, content, "c.pcapng"))
    assert packets[0].ts == 1_000_000_000_123


def test_pcapng_simple_packet_block_uses_snaplen_of_interface_0(tmp_path):
    content = shb() + idb(228, snaplen=8) + spb(b"0123456789AB", wirelen=40) + spb(b"abc")
    packets, _ = read_all(write(tmp_path, content, "c.pcapng"))
    assert packets == [Packet(1, 0, 228, b"01234567", 40), Packet(2, 0, 228, b"abc", 3)]


def test_pcapng_obsolete_packet_block(tmp_path):
    content = shb() + idb(1, tsresol=3) + pb(0, 42, b"old")
    packets, _ = read_all(write(tmp_path, content, "c.pcapng"))
    assert packets == [Packet(1, 42_000_000, 1, b"old", 3)]


def test_pcapng_big_endian_and_several_sections(tmp_path):
    content = b"".join(
        [
            shb(">"),
            idb(1, bo=">"),
            epb(0, 1_000_000, b"one", bo=">"),
            # A new section forgets the interfaces of the previous one and may swap byte order.
            shb("<"),
            idb(276, tsresol=9),
            epb(0, 7, b"two"),
            epb(0, 8, b"three"),
            shb(">"),
            idb(0, tsresol=0, bo=">"),
            epb(0, 3, b"four", bo=">"),
        ]
    )
    packets, warnings = read_all(write(tmp_path, content, "c.pcapng"))
    assert warnings == []
    assert [(p.frame, p.ts, p.linktype, p.data) for p in packets] == [
        (1, 1_000_000_000, 1, b"one"),
        (2, 7, 276, b"two"),
        (3, 8, 276, b"three"),
        (4, 3_000_000_000, 0, b"four"),
    ]


def test_pcapng_new_section_forgets_interfaces(tmp_path):
    content = shb() + idb(1) + idb(1) + epb(1, 0, b"a") + shb() + idb(1) + epb(1, 0, b"b")
    p = write(tmp_path, content, "c.pcapng")
    with open_capture(p) as r, pytest.raises(CaptureError) as e:
        list(r)
    offset = len(shb() + idb(1) + idb(1) + epb(1, 0, b"a") + shb() + idb(1))
    assert (e.value.frame, e.value.offset) == (2, offset)
    assert "unknown interface 1" in str(e.value)


def test_pcapng_across_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(reader_mod, "CHUNK", 1000)
    datas = [bytes([i % 256]) * (i % 97) for i in range(2000)]
    content = shb() + idb(1, tsresol=9) + b"".join(epb(0, i, d) for i, d in enumerate(datas))
    packets, warnings = read_all(write(tmp_path, content, "c.pcapng"))
    assert warnings == []
    assert [(p.frame, p.ts, p.data) for p in packets] == [
        (i + 1, i, d) for i, d in enumerate(datas)
    ]


# ---------------------------------------------------------------- gzip


def test_gzip_pcap(tmp_path):
    recs = [(10, i, bytes([i]) * 50) for i in range(100)]
    p = write(tmp_path, gzip.compress(pcap_bytes(recs, nsec=True)), "c.pcap.gz")
    with open_capture(p) as r:
        assert r.compressed and r.format == "pcap"
        assert r.total_bytes == p.stat().st_size
        packets = list(r)
        assert r.bytes_read == r.total_bytes
    assert [p.ts for p in packets] == [10_000_000_000 + i for i in range(100)]
    assert packets[99].data == b"\x63" * 50


def test_gzip_pcapng(tmp_path):
    content = shb() + idb(1, tsresol=9) + epb(0, 5, b"zipped")
    packets, _ = read_all(write(tmp_path, gzip.compress(content), "c.pcapng.gz"))
    assert packets == [Packet(1, 5, 1, b"zipped", 6)]


def test_gzip_stream_cut_short(tmp_path):
    recs = [(1, i, b"x" * 400) for i in range(200)]
    z = gzip.compress(pcap_bytes(recs), compresslevel=1)
    packets, warnings = read_all(write(tmp_path, z[: len(z) // 2], "c.pcap.gz"))
    assert 0 < len(packets) < 200
    assert [p.frame for p in packets] == list(range(1, len(packets) + 1))
    assert any("compressed stream ends early" in w for w in warnings)


def test_gzip_corrupt_checksum(tmp_path):
    z = bytearray(gzip.compress(pcap_bytes([(1, i, b"y" * 100) for i in range(50)])))
    z[-8] ^= 0xFF  # CRC32 of the member
    with pytest.raises(CaptureError) as e:
        read_all(write(tmp_path, bytes(z), "c.pcap.gz"))
    assert "cannot read" in str(e.value) and e.value.frame is not None


def test_gzip_of_garbage(tmp_path):
    with pytest.raises(CaptureError, match="frame 1, offset 0"):
        open_capture(write(tmp_path, gzip.compress(b"hello world, no capture here"), "g.gz"))


# ---------------------------------------------------------------- streams that cannot seek

SAMPLE = Path(__file__).resolve().parent.parent / "captures" / "kafka-python.pcap"


@contextlib.contextmanager
def fifo(tmp_path, content):
    """A FIFO a thread writes `content` into: a path that cannot be seeked."""
    path = tmp_path / "fifo"
    os.mkfifo(path)

    def write_all():
        with open(path, "wb") as f:
            f.write(content)

    writer = threading.Thread(target=write_all, daemon=True)
    writer.start()
    try:
        yield path
    finally:
        writer.join(timeout=10)


def _pcapng_of(packets):
    content = shb() + idb(1, tsresol=9)
    return content + b"".join(epb(0, p.ts, p.data, p.wirelen) for p in packets)


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_fifo_is_read_as_a_stream(tmp_path, fmt, compress):
    """A FIFO by path (as /dev/stdin and a shell's <(...) are) is read as it comes, never
    seeked: gzip or not, pcap or pcapng, the packets of the file."""
    with open_capture(SAMPLE) as r:
        expected = list(r)
    content = SAMPLE.read_bytes() if fmt == "pcap" else _pcapng_of(expected)
    if compress:
        content = gzip.compress(content)
    with fifo(tmp_path, content) as path, open_capture(path) as r:
        assert (r.format, r.compressed, r.total_bytes) == (fmt, compress, None)
        packets = list(r)
        assert r.bytes_read == len(content)
    assert [(p.frame, p.ts, p.data, p.wirelen) for p in packets] == [
        (p.frame, p.ts, p.data, p.wirelen) for p in expected
    ]


def test_gzip_through_stdin_and_process_substitution(tmp_path):
    """`analyze /dev/stdin` and `analyze <(zcat ...)`-like inputs with a gzip capture: the
    summary of the file (it was `internal error: OSError: Illegal seek`)."""
    gz = write(tmp_path, gzip.compress(SAMPLE.read_bytes()), "k.pcap.gz")
    command = [sys.executable, "-m", "dissector", "analyze", "--no-progress"]
    res = subprocess.run([*command, str(gz)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    _, *summary = res.stdout.splitlines()
    with open(gz, "rb") as stdin:
        res = subprocess.run(
            [*command, "/dev/stdin"], stdin=stdin, capture_output=True, text=True, timeout=120
        )
    assert (res.returncode, res.stderr) == (0, "")
    assert res.stdout.splitlines()[1:] == summary
    pipe = subprocess.Popen(["cat", str(gz)], stdout=subprocess.PIPE)  # /dev/stdin as a pipe
    res = subprocess.run(
        [*command, "/dev/stdin"], stdin=pipe.stdout, capture_output=True, text=True, timeout=120
    )
    pipe.wait()
    assert (res.returncode, res.stderr) == (0, "")
    assert res.stdout.splitlines()[1:] == summary
    if shutil.which("bash"):  # <(...): a pipe named /dev/fd/N
        script = " ".join(shlex.quote(a) for a in command) + f" <(cat {shlex.quote(str(gz))})"
        res = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
        assert (res.returncode, res.stderr) == (0, "")
        title, *rest = res.stdout.splitlines()
        assert title.startswith("/dev/fd/") and rest == summary


# ---------------------------------------------------------------- truncation


def test_pcap_truncated_in_record_data(tmp_path):
    content = pcap_bytes([(1, 0, b"a" * 10), (2, 0, b"b" * 10), (3, 0, b"c" * 10)])
    cut = 24 + 2 * 26 + 16 + 4  # inside the third record's data
    path = write(tmp_path, content[:cut])
    packets, warnings = read_all(path)
    assert [p.data for p in packets] == [b"a" * 10, b"b" * 10]
    assert warnings == [
        f"{path}: frame 3, offset {24 + 2 * 26}: truncated capture: file ends inside a record; "
        "decoded up to the cut"
    ]


def test_pcap_truncated_in_record_header(tmp_path):
    content = pcap_bytes([(1, 0, b"a" * 10), (2, 0, b"b" * 10)])
    path = write(tmp_path, content[: 24 + 26 + 7])
    packets, warnings = read_all(path)
    assert len(packets) == 1
    assert warnings == [
        f"{path}: frame 2, offset 50: truncated capture: file ends inside a record header; "
        "decoded up to the cut"
    ]


def test_pcapng_truncated_block(tmp_path):
    head = shb() + idb(1)
    content = head + epb(0, 1, b"first") + epb(0, 2, b"second")
    cut = len(head + epb(0, 1, b"first")) + 20
    path = write(tmp_path, content[:cut], "c.pcapng")
    packets, warnings = read_all(path)
    assert [p.data for p in packets] == [b"first"]
    offset = len(head + epb(0, 1, b"first"))
    assert warnings == [
        f"{path}: frame 2, offset {offset}: truncated capture: file ends inside a block; "
        "decoded up to the cut"
    ]


def test_pcap_header_only_truncated(tmp_path):
    with pytest.raises(CaptureError, match="frame 1, offset 0"):
        open_capture(write(tmp_path, pcap_bytes([])[:10]))


# ---------------------------------------------------------------- errors


def test_empty_file(tmp_path):
    with pytest.raises(CaptureError) as e:
        open_capture(write(tmp_path, b""))
    assert (e.value.frame, e.value.offset) == (1, 0)
    assert "c.pcap" in str(e.value) and "frame 1" in str(e.value) and "offset 0" in str(e.value)
    assert "empty" in str(e.value)


def test_garbage_file(tmp_path):
    with pytest.raises(CaptureError) as e:
        open_capture(write(tmp_path, b"GET / HTTP/1.1\r\nHost: example\r\n\r\n", "g.txt"))
    assert str(e.value).startswith(str(tmp_path / "g.txt") + ": frame 1, offset 0: ")
    assert "unknown magic" in str(e.value)


def test_missing_file_is_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        open_capture(tmp_path / "nope.pcap")


def test_pcap_bad_version(tmp_path):
    content = bytearray(pcap_bytes([]))
    content[4:6] = struct.pack("<H", 9)
    with pytest.raises(CaptureError, match="version 9"):
        open_capture(write(tmp_path, bytes(content)))


def test_pcap_absurd_record_length(tmp_path):
    content = pcap_bytes([(1, 0, b"ok")]) + struct.pack("<IIII", 2, 0, 1 << 30, 1 << 30) + b"x" * 8
    with open_capture(write(tmp_path, content)) as r:
        it = iter(r)
        assert next(it).data == b"ok"
        with pytest.raises(CaptureError) as e:
            next(it)
    assert (e.value.frame, e.value.offset) == (2, 24 + 18)


@pytest.mark.parametrize(
    "bad_length, reason",
    [(30, "bad length 30"), (8, "bad length 8"), (512 * 1024 * 1024, "bad length")],
)
def test_pcapng_corrupt_block_length(tmp_path, bad_length, reason):
    head = shb() + idb(1) + epb(0, 1, b"good")
    bad = struct.pack("<II", 6, bad_length) + b"\0" * 40
    with open_capture(write(tmp_path, head + bad, "c.pcapng")) as r:
        it = iter(r)
        assert next(it).data == b"good"
        with pytest.raises(CaptureError, match=reason) as e:
            next(it)
    assert (e.value.frame, e.value.offset) == (2, len(head))
    assert f"frame 2, offset {len(head)}" in str(e.value)


@pytest.mark.parametrize("good_before", [0, 1, 3])
def test_pcapng_trailing_length_mismatch(tmp_path, good_before):
    bad = bytearray(epb(0, 1, b"data"))
    bad[-4:] = struct.pack("<I", 99)
    head = shb() + idb(1) + epb(0, 0, b"ok") * good_before
    with open_capture(write(tmp_path, head + bytes(bad), "c.pcapng")) as r:
        it = iter(r)
        assert [next(it).data for _ in range(good_before)] == [b"ok"] * good_before
        with pytest.raises(CaptureError, match="trailing length") as e:
            next(it)
    assert (e.value.frame, e.value.offset) == (good_before + 1, len(head))


def test_pcapng_epb_unknown_interface(tmp_path):
    head = shb() + idb(1)
    with pytest.raises(CaptureError, match="unknown interface 3") as e:
        read_all(write(tmp_path, head + epb(3, 0, b"x"), "c.pcapng"))
    assert (e.value.frame, e.value.offset) == (1, len(head))


@pytest.mark.parametrize("good_before", [0, 2])
def test_pcapng_caplen_beyond_block(tmp_path, good_before):
    bad = bytearray(epb(0, 0, b"12345678"))
    bad[20:24] = struct.pack("<I", 64)  # captured length larger than the block holds
    head = shb() + idb(1) + epb(0, 0, b"ok") * good_before
    with pytest.raises(CaptureError, match="captured bytes") as e:
        read_all(write(tmp_path, head + bytes(bad), "c.pcapng"))
    assert (e.value.frame, e.value.offset) == (good_before + 1, len(head))


def test_pcapng_bad_byte_order_magic(tmp_path):
    bad = bytearray(shb())
    bad[8:12] = b"XXXX"
    with pytest.raises(CaptureError, match="byte-order magic"):
        read_all(write(tmp_path, bytes(bad), "c.pcapng"))


def test_context_manager_closes_file(tmp_path):
    p = write(tmp_path, pcap_bytes([(1, 0, b"a")]))
    with open_capture(p) as r:
        pass
    assert r._raw.closed
    assert r.bytes_read == r.total_bytes


# ---------------------------------------------------------------- written by scapy


def test_scapy_written_pcap_and_pcapng(tmp_path):
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.utils import PcapNgWriter, wrpcap

    pkts = []
    for i in range(5):
        pkt = Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=1000 + i) / (b"k" * i)
        pkt.time = 1_700_000_000 + i / 4
        pkts.append(pkt)
    wrpcap(str(tmp_path / "s.pcap"), pkts)
    with PcapNgWriter(str(tmp_path / "s.pcapng")) as w:
        for pkt in pkts:
            w.write(pkt)
    for name in ("s.pcap", "s.pcapng"):
        packets, warnings = read_all(tmp_path / name)
        assert warnings == []
        assert [p.data for p in packets] == [bytes(pkt) for pkt in pkts]
        assert [p.ts for p in packets] == [
            1_700_000_000_000_000_000 + i * 250_000_000 for i in range(5)
        ]
        assert {p.linktype for p in packets} == {1}


# ---------------------------------------------------------------- offsets and bounds


def test_last_offset_and_first_packet_of_each_linktype(tmp_path):
    recs = [(1, 0, b"a" * 10), (2, 0, b"b" * 3), (3, 0, b"c")]
    with open_capture(write(tmp_path, pcap_bytes(recs, linktype=113))) as r:
        offsets = [r.last_offset for _ in r]
        assert r.first_of_linktype == {113: (1, 24)}
    assert offsets == [24, 24 + 26, 24 + 26 + 19]
    blocks = [shb(), idb(1), idb(147), epb(0, 1, b"eth"), epb(1, 2, b"odd"), epb(0, 3, b"eth")]
    at = [sum(map(len, blocks[:i])) for i in range(len(blocks))]
    blocks += [spb(b"simple"), pb(1, 4, b"old")]
    with open_capture(write(tmp_path, b"".join(blocks), "c.pcapng")) as r:
        offsets = [r.last_offset for _ in r]
        assert r.first_of_linktype == {1: (1, at[3]), 147: (2, at[4])}
    end = sum(map(len, blocks[:6]))
    assert offsets == [at[3], at[4], at[5], end, end + len(blocks[6])]


def test_pcapng_cut_inside_the_section_header(tmp_path):
    for size in (8, 20):
        with pytest.raises(CaptureError, match="inside the section header block") as e:
            read_all(write(tmp_path, shb()[:size], "c.pcapng"))
        assert (e.value.frame, e.value.offset) == (1, 0)


def test_pcapng_timestamps_beyond_64_bit_nanoseconds_are_clamped(tmp_path):
    from dissector.capture.packet import TS_MAX, TS_MIN

    content = b"".join(
        [
            shb(),
            idb(1, tsresol=0, tsoffset=-(1 << 62)),  # seconds, and a hostile offset
            epb(0, 1 << 40, b"far future"),
            epb(0, 0, b"far past"),
            idb(1, tsresol=6),
            epb(1, 5, b"fine"),
        ]
    )
    path = write(tmp_path, content, "c.pcapng")
    packets, warnings = read_all(path)
    assert [p.ts for p in packets] == [TS_MIN, TS_MIN, 5000]
    content = shb() + idb(1, tsresol=0) + epb(0, 1 << 40, b"x") + epb(0, 1 << 41, b"y")
    packets, warnings = read_all(write(tmp_path, content, "d.pcapng"))
    assert [p.ts for p in packets] == [TS_MAX, TS_MAX]
    offset = len(shb() + idb(1, tsresol=0))
    assert warnings == [
        f"{tmp_path / 'd.pcapng'}: frame 1, offset {offset}: timestamp out of range "
        "(before 1677 or after 2262), clamped"
    ]


def test_a_record_claiming_more_than_the_file_holds_costs_only_the_file(tmp_path):
    import tracemalloc

    claimed = 200 * 1024 * 1024  # below the 256 MiB limit: read as a cut capture
    content = pcap_bytes([(1, 0, b"ok")]) + struct.pack("<IIII", 2, 0, claimed, claimed) + b"z" * 50
    path = write(tmp_path, content)
    tracemalloc.start()
    try:
        packets, warnings = read_all(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [p.data for p in packets] == [b"ok"] and len(warnings) == 1
    assert peak < 40 * 1024 * 1024


def test_gzip_corruption_is_reported_at_the_first_frame_it_spoils(tmp_path, monkeypatch):
    monkeypatch.setattr(reader_mod, "CHUNK", 4096)
    recs = [(1, i, bytes([i % 256]) * 300) for i in range(400)]
    z = bytearray(gzip.compress(pcap_bytes(recs), compresslevel=1))
    z[-8] ^= 0xFF  # CRC32 of the member: every packet decompresses, the end fails
    with open_capture(write(tmp_path, bytes(z), "c.pcap.gz")) as r:
        packets = []
        with pytest.raises(CaptureError, match="cannot read") as e:
            for p in r:
                packets.append(p)
    assert len(packets) == 400
    assert (e.value.frame, e.value.offset) == (401, 24 + 400 * 316)
