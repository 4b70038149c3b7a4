"""Bad capture files, through the command line and the API.

Every input error is one line naming the file, the frame number and the byte offset, with exit
status 2 and no traceback; a capture cut short is decoded up to the cut with a one-line warning
and exit status 0.
"""

import gzip
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import dissector
from dissector.capture import open_capture
from dissector.errors import CaptureError

SAMPLE = Path(__file__).resolve().parent.parent / "captures" / "kafka-python.pcap"
KEY = ["api_name", "api_version", "correlation_id", "request_frame", "response_frame", "status"]

# ---------------------------------------------------------------- helpers


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "dissector", "analyze", *map(str, args), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_error(path, message):
    """The command fails with exactly this one-line error, and the API raises it."""
    res = run(path)
    assert res.returncode == 2, res.stderr
    assert res.stderr == f"kafka-dissect: error: {message}\n"
    assert res.stdout == ""
    with pytest.raises(CaptureError) as e:
        dissector.read_pcap(path)
    assert str(e.value) == message
    return e.value


def read_with_warnings(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pairs = dissector.read_pcap(path)
    return pairs, [str(w.message) for w in caught]


def sample_packets():
    with open_capture(SAMPLE) as r:
        return list(r)


def pcap_records(content):
    """(offset, end) of every record of a little-endian pcap file."""
    out, pos = [], 24
    while pos + 16 <= len(content):
        incl = struct.unpack_from("<I", content, pos + 8)[0]
        out.append((pos, pos + 16 + incl))
        pos += 16 + incl
    return out


def pad4(b):
    return b + b"\0" * (-len(b) % 4)


def block(btype, body):
    body = pad4(body)
    return struct.pack("<II", btype, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


SHB = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))


def idb(linktype):
    tsresol = struct.pack("<HH", 9, 1) + b"\x09\0\0\0" + struct.pack("<HH", 0, 0)
    return block(1, struct.pack("<HHI", linktype, 0, 0) + tsresol)


def epb(iface, ts, data):
    return block(
        6, struct.pack("<IIIII", iface, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data)) + data
    )


def pcapng_of(packets, extra=()):
    """The sample's packets as pcapng on interface 0 (Ethernet, ns); returns (bytes, offsets).

    extra: (index, block bytes) inserted before the packet of that index.
    """
    extra = dict(extra)
    out = [SHB, idb(1)]
    size = len(SHB) + len(out[1])
    offsets = []
    for i, p in enumerate(packets):
        if i in extra:
            out.append(extra[i])
            size += len(extra[i])
        offsets.append(size)
        b = epb(0, p.ts, p.data)
        out.append(b)
        size += len(b)
    return b"".join(out), offsets


def completed_before(pairs, frame):
    """Rows whose request and response both came before `frame`."""
    done = pairs[(pairs.request_frame < frame) & (pairs.response_frame < frame)]
    return done[KEY].values.tolist()


# ---------------------------------------------------------------- not a capture


def test_not_a_capture(tmp_path):
    path = tmp_path / "notes.pcap"
    path.write_text("GET / HTTP/1.1\r\nHost: kafka\r\n\r\n")
    e = assert_error(
        path, f"{path}: frame 1, offset 0: not a capture file (unknown magic 47455420)"
    )
    assert (e.frame, e.offset) == (1, 0)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.pcap"
    path.write_bytes(b"")
    assert_error(path, f"{path}: frame 1, offset 0: empty file, not a capture")


def test_empty_gzip_file(tmp_path):
    path = tmp_path / "empty.pcap.gz"
    path.write_bytes(gzip.compress(b""))
    assert_error(path, f"{path}: frame 1, offset 0: empty compressed file")


def test_cut_inside_the_file_header(tmp_path):
    path = tmp_path / "head.pcap"
    path.write_bytes(SAMPLE.read_bytes()[:20])
    assert_error(path, f"{path}: frame 1, offset 0: file ends inside the pcap file header")
    ng = tmp_path / "head.pcapng"
    ng.write_bytes(SHB[:20])
    assert_error(ng, f"{ng}: frame 1, offset 0: file ends inside the section header block")


def test_missing_file_and_directory(tmp_path):
    for path in (tmp_path / "missing.pcap", tmp_path):
        res = run(path)
        assert res.returncode == 2
        assert res.stderr.count("\n") == 1 and str(path) in res.stderr
        assert "Traceback" not in res.stderr


# ---------------------------------------------------------------- cut short


@pytest.mark.parametrize("compressed", [False, True])
def test_pcap_cut_in_the_middle_of_a_record(tmp_path, compressed):
    content = SAMPLE.read_bytes()
    records = pcap_records(content)
    index = len(records) // 2
    start, end = records[index]
    path = tmp_path / ("cut.pcap.gz" if compressed else "cut.pcap")
    cut = content[: start + (end - start) // 2]
    path.write_bytes(gzip.compress(cut) if compressed else cut)
    frame = index + 1
    warning = (
        f"{path}: frame {frame}, offset {start}: truncated capture: file ends inside a record; "
        "decoded up to the cut"
    )
    res = run(path)
    assert res.returncode == 0, res.stderr
    assert res.stderr == f"kafka-dissect: warning: {warning}\n"
    pairs, caught = read_with_warnings(path)
    assert caught == [warning]
    assert f"{len(pairs)} exchanges" in res.stdout
    full = dissector.read_pcap(SAMPLE)
    expected = completed_before(full, frame)
    assert len(expected) > 10
    assert completed_before(pairs, frame) == expected
    assert pairs.request_frame.max() < frame


def test_gzip_stream_cut_in_the_middle(tmp_path):
    content = SAMPLE.read_bytes()
    z = gzip.compress(content)
    path = tmp_path / "cut.pcap.gz"
    path.write_bytes(z[: len(z) // 2])
    res = run(path)
    assert res.returncode == 0, res.stderr
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"kafka-dissect: warning: {path}: frame ")
    assert line.endswith(
        ": truncated capture: compressed stream ends early inside a record; decoded up to the cut"
    )
    frame = int(line.split("frame ")[1].split(",")[0])
    offset = int(line.split("offset ")[1].split(":")[0])
    assert offset == pcap_records(content)[frame - 1][0]
    pairs, caught = read_with_warnings(path)
    assert caught == [line.removeprefix("kafka-dissect: warning: ")]
    assert completed_before(pairs, frame) == completed_before(dissector.read_pcap(SAMPLE), frame)


def test_gzip_stream_without_its_end_at_a_record_boundary(tmp_path):
    content = SAMPLE.read_bytes()
    start = pcap_records(content)[40][0]
    whole = gzip.compress(content[:start])
    path = tmp_path / "boundary.pcap.gz"
    path.write_bytes(whole[:-8])  # the trailer (CRC and size) missing
    res = run(path)
    assert res.returncode == 0, res.stderr
    assert res.stderr == (
        f"kafka-dissect: warning: {path}: frame 41, offset {start}: truncated capture: "
        "compressed stream ends early, without its end marker; decoded up to the cut\n"
    )


@pytest.mark.parametrize("compressed", [False, True])
def test_pcapng_cut_in_the_middle_of_a_block(tmp_path, compressed):
    packets = sample_packets()
    content, offsets = pcapng_of(packets)
    index = 70
    cut = content[: offsets[index] + 30]
    path = tmp_path / ("cut.pcapng.gz" if compressed else "cut.pcapng")
    path.write_bytes(gzip.compress(cut) if compressed else cut)
    warning = (
        f"{path}: frame {index + 1}, offset {offsets[index]}: truncated capture: "
        "file ends inside a block; decoded up to the cut"
    )
    res = run(path)
    assert res.returncode == 0, res.stderr
    assert res.stderr == f"kafka-dissect: warning: {warning}\n"
    pairs, caught = read_with_warnings(path)
    assert caught == [warning]
    full = dissector.read_pcap(SAMPLE)
    assert completed_before(pairs, index + 1) == completed_before(full, index + 1)


# ---------------------------------------------------------------- corrupt files


def test_pcap_record_claiming_a_gigabyte(tmp_path):
    content = bytearray(SAMPLE.read_bytes())
    start, _ = pcap_records(bytes(content))[9]
    struct.pack_into("<I", content, start + 8, 1 << 30)
    path = tmp_path / "huge.pcap"
    path.write_bytes(bytes(content))
    assert_error(path, f"{path}: frame 10, offset {start}: record claims {1 << 30} captured bytes")


def corrupt_pcapng(tmp_path, index, change):
    content, offsets = pcapng_of(sample_packets())
    content = bytearray(content)
    change(content, offsets[index])
    path = tmp_path / "corrupt.pcapng"
    path.write_bytes(bytes(content))
    return path, offsets[index]


def test_pcapng_bad_block_length(tmp_path):
    path, at = corrupt_pcapng(tmp_path, 30, lambda c, o: struct.pack_into("<I", c, o + 4, 30))
    assert_error(path, f"{path}: frame 31, offset {at}: block of type 0x6 has a bad length 30")


def test_pcapng_block_length_beyond_the_limit(tmp_path):
    path, at = corrupt_pcapng(tmp_path, 5, lambda c, o: struct.pack_into("<I", c, o + 4, 1 << 30))
    assert_error(
        path, f"{path}: frame 6, offset {at}: block of type 0x6 has a bad length {1 << 30}"
    )


def test_pcapng_trailing_length_mismatch(tmp_path):
    def change(content, at):
        length = struct.unpack_from("<I", content, at + 4)[0]
        struct.pack_into("<I", content, at + length - 4, length + 4)

    path, at = corrupt_pcapng(tmp_path, 12, change)
    length = struct.unpack_from("<I", path.read_bytes(), at + 4)[0]
    assert_error(
        path,
        f"{path}: frame 13, offset {at}: block of type 0x6: trailing length differs from {length}",
    )


def test_pcapng_packet_of_an_unknown_interface(tmp_path):
    path, at = corrupt_pcapng(tmp_path, 44, lambda c, o: struct.pack_into("<I", c, o + 8, 5))
    assert_error(path, f"{path}: frame 45, offset {at}: packet block refers to unknown interface 5")


def test_pcapng_unknown_blocks_are_skipped(tmp_path):
    packets = sample_packets()
    extra = [
        (0, block(0x00000BAD, struct.pack("<I", 32473) + b"custom block")),
        (10, block(0x40000BAD, struct.pack("<I", 32473) + b"custom, not to be copied")),
        (20, block(0x12345678, b"a block type nobody defined")),
        (30, block(5, struct.pack("<III", 0, 0, 0))),  # interface statistics
        (40, block(4, struct.pack("<HH", 0, 0))),  # name resolution, empty
    ]
    content, _ = pcapng_of(packets, extra)
    path = tmp_path / "extra.pcapng"
    path.write_bytes(content)
    res = run(path)
    assert res.returncode == 0 and res.stderr == ""
    pairs, caught = read_with_warnings(path)
    assert caught == []
    assert pairs[KEY].values.tolist() == dissector.read_pcap(SAMPLE)[KEY].values.tolist()


def test_gzip_with_corrupt_compressed_data(tmp_path):
    z = bytearray(gzip.compress(SAMPLE.read_bytes()))
    for i in range(len(z) // 2, len(z) // 2 + 64):
        z[i] ^= 0x5A
    path = tmp_path / "corrupt.pcap.gz"
    path.write_bytes(bytes(z))
    res = run(path)
    assert res.returncode == 2
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"kafka-dissect: error: {path}: frame ")
    with pytest.raises(CaptureError) as e:
        dissector.read_pcap(path)
    assert line == f"kafka-dissect: error: {e.value}"
    assert e.value.frame > 1 and e.value.offset > 24  # where the damage is, not the start


def test_gzip_with_a_bad_checksum_fails_after_the_last_packet(tmp_path):
    content = SAMPLE.read_bytes()
    z = bytearray(gzip.compress(content))
    z[-8] ^= 0xFF  # CRC32 of the member
    path = tmp_path / "crc.pcap.gz"
    path.write_bytes(bytes(z))
    res = run(path)
    assert res.returncode == 2
    n = len(pcap_records(content))
    assert res.stderr.startswith(
        f"kafka-dissect: error: {path}: frame {n + 1}, offset {len(content)}: cannot read: "
    )
    assert res.stderr.count("\n") == 1


def test_pcapng_timestamp_out_of_range_is_clamped_with_a_warning(tmp_path):
    packets = sample_packets()
    content, offsets = pcapng_of(packets)
    content = bytearray(content)
    struct.pack_into("<I", content, offsets[3] + 12, 0xFFFFFFFF)  # high 32 bits: year 2554
    path = tmp_path / "future.pcapng"
    path.write_bytes(bytes(content))
    warning = (
        f"{path}: frame 4, offset {offsets[3]}: timestamp out of range "
        "(before 1677 or after 2262), clamped"
    )
    res = run(path)
    assert res.returncode == 0, res.stderr
    assert res.stderr == f"kafka-dissect: warning: {warning}\n"
    _, caught = read_with_warnings(path)
    assert caught == [warning]


# ---------------------------------------------------------------- link types


def sample_with_linktype(tmp_path, linktype):
    content = bytearray(SAMPLE.read_bytes())
    struct.pack_into("<I", content, 20, linktype)
    path = tmp_path / f"linktype{linktype}.pcap"
    path.write_bytes(bytes(content))
    return path


def mixed_linktypes(tmp_path):
    """The sample on an Ethernet interface, with packets of link types 147 and 9 interleaved."""
    packets = sample_packets()
    odd = [(3, 147), (10, 147), (11, 9), (50, 147)]
    out = [SHB, idb(1), idb(147), idb(9)]
    offset = sum(map(len, out))
    first = None
    extra = dict(odd)
    for i, p in enumerate(packets):
        if i in extra:
            iface = 1 if extra[i] == 147 else 2
            b = epb(iface, p.ts, b"\x0f\x00" + p.data)
            if first is None:
                first = (i + 1, offset)
            out.append(b)
            offset += len(b)
        b = epb(0, p.ts, p.data)
        out.append(b)
        offset += len(b)
    path = tmp_path / "mixed.pcapng"
    path.write_bytes(b"".join(out))
    return path, len(packets) + len(odd), first


def test_some_packets_of_an_unsupported_link_type(tmp_path):
    path, _total, _first = mixed_linktypes(tmp_path)
    res = run(path)
    assert res.returncode == 0, res.stderr
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"kafka-dissect: warning: {path}: ") and "147" in line and "9" in line
    pairs, caught = read_with_warnings(path)
    assert len(caught) == 1
    cols = ["api_name", "api_version", "correlation_id", "status"]
    assert pairs[cols].values.tolist() == dissector.read_pcap(SAMPLE)[cols].values.tolist()


def test_some_packets_of_an_unsupported_link_type_counted(tmp_path):
    path, total, (frame, offset) = mixed_linktypes(tmp_path)
    res = run(path)
    assert res.stderr == (
        f"kafka-dissect: warning: {path}: frame {frame}, offset {offset}: 4 of {total} packets "
        "skipped, of link types the dissector does not read: 9 (1 packet), 147 (3 packets)\n"
    )


def test_no_packet_of_a_supported_link_type(tmp_path):
    path = sample_with_linktype(tmp_path, 147)
    n = len(sample_packets())
    assert_error(
        path,
        f"{path}: frame 1, offset 24: no packet has a link type the dissector reads: "
        f"147 ({n} packets)",
    )


def test_no_packet_of_a_supported_link_type_is_not_a_traceback(tmp_path):
    res = run(sample_with_linktype(tmp_path, 147))
    assert res.stderr.count("\n") == 1 and "147" in res.stderr
    assert "Traceback" not in res.stderr
