"""Framing: size-prefixed frames out of arbitrarily chunked streams."""

import random
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from dissector.framing import CutFrame, Frame, Framer, Skipped

MAGIC = b"KF"


def fr(body):
    return struct.pack(">i", len(body)) + body


def body(n, seed=0):
    """A frame body our test is_frame_start recognises: it starts with MAGIC."""
    rng = random.Random(seed)
    return (MAGIC + bytes(rng.randrange(256) for _ in range(n)))[:n] if n >= 2 else b"K" * n


def starts_with_magic(buf, pos, size, ts=None):
    return size >= 2 and buf[pos : pos + 2] == MAGIC


def chunks(data, sizes):
    out = []
    pos = 0
    i = 0
    while pos < len(data):
        n = sizes[i % len(sizes)]
        out.append(data[pos : pos + n])
        pos += n
        i += 1
    return out


def run(framer, pieces, first_frame=1):
    """Feed pieces as packets first_frame, first_frame + 1, ...; ts = frame * 10."""
    out = []
    for i, piece in enumerate(pieces):
        f = first_frame + i
        if isinstance(piece, int):
            out += framer.gap(piece, f, f * 10)
        else:
            out += framer.feed(piece, f, f * 10)
    return out + framer.finish()


def check_accounting(framer, items, fed):
    framed = sum(4 + len(x.data) for x in items if isinstance(x, (Frame, CutFrame)))
    skipped = sum(x.size for x in items if isinstance(x, Skipped))
    assert framed + skipped == fed
    assert framer.bytes_framed == framed
    assert framer.bytes_skipped == skipped
    assert framer.frames == sum(isinstance(x, (Frame, CutFrame)) for x in items)
    # Reported pieces tile the stream in order (gap bytes aside); a CutFrame comes out at its
    # end, after the skipped bytes of its hole. A gap of unknown size that cuts a frame short
    # ends it where its bytes ran out: the stream goes on from there (its size prefix, its
    # bytes captured and those lost in known gaps), not from where its size would end it.
    pos = 0
    for x in items:
        if isinstance(x, CutFrame):
            assert x.offset >= pos - 4 - x.size
            pos = max(pos, x.offset + 4 + min(x.size, len(x.data) + x.lost))
            continue
        size = 4 + len(x.data) if isinstance(x, Frame) else x.size
        assert x.offset >= pos
        pos = x.offset + size


def test_many_frames_in_one_chunk():
    bodies = [body(n, n) for n in (0, 1, 5, 100, 3)]
    f = Framer(min_frame=0)  # frames of any size, as a protocol without a header would have
    items = f.feed(b"".join(fr(b) for b in bodies), 7, 70)
    assert [x.data for x in items] == bodies
    assert [x.offset for x in items] == [0, 4, 9, 18, 122]
    assert all(
        (x.first_frame, x.last_frame, x.first_ts, x.last_ts) == (7, 7, 70, 70) for x in items
    )
    assert f.finish() == []


def test_frame_spanning_many_chunks():
    b = body(100_000)
    f = Framer()
    pieces = chunks(fr(b), [1460])
    items = run(f, pieces, first_frame=100)
    assert items == [Frame(b, 0, 100, 1000, 100 + len(pieces) - 1, (100 + len(pieces) - 1) * 10)]


def test_one_byte_chunks():
    bodies = [body(n, n) for n in (3, 0, 10, 1)]
    stream = b"".join(fr(b) for b in bodies)
    f = Framer()
    items = run(f, [bytes([c]) for c in stream])
    assert [x.data for x in items] == bodies
    # Frame 2 (empty body) is carried by bytes 8..11 of the stream: packets 8 to 11.
    assert [(x.first_frame, x.last_frame) for x in items] == [(1, 7), (8, 11), (12, 25), (26, 30)]
    check_accounting(f, items, len(stream))


def test_size_prefix_split_across_chunks():
    b = body(20)
    data = fr(b) + fr(b"xyz")
    f = Framer()
    items = run(f, [data[:2], data[2:5], data[5:26], data[26:]])
    assert items == [Frame(b, 0, 1, 10, 3, 30), Frame(b"xyz", 24, 3, 30, 4, 40)]


def test_frame_and_timestamps_of_first_and_last_byte():
    a, b = body(50, 1), body(70, 2)
    data = fr(a) + fr(b)
    f = Framer()
    items = run(f, [data[:30], data[30:60], data[60:]], first_frame=5)
    assert items == [Frame(a, 0, 5, 50, 6, 60), Frame(b, 54, 6, 60, 7, 70)]


def test_oversize_prefix_resyncs_on_a_frame_start():
    good = [body(30, i) for i in range(3)]
    junk = struct.pack(">i", 1 << 30) + b"\x01\x02junk"
    data = fr(good[0]) + junk + fr(good[1]) + fr(good[2])
    f = Framer(max_frame=1 << 20, is_frame_start=starts_with_magic)
    items = run(f, chunks(data, [7]))
    assert [type(x) for x in items] == [Frame, Skipped, Frame, Frame]
    assert items[1] == Skipped(34, len(junk), "bad-size", 5, 50)
    assert [x.data for x in items if isinstance(x, Frame)] == good
    assert items[2].offset == 34 + len(junk)
    check_accounting(f, items, len(data))


def test_negative_size_without_frame_start_check_skips_the_rest():
    data = fr(b"ok") + struct.pack(">i", -5) + fr(b"lost")
    f = Framer()
    items = run(f, [data])
    assert items == [Frame(b"ok", 0, 1, 10, 1, 10), Skipped(6, 12, "bad-size", 1, 10)]


def test_oversize_prefix_split_across_chunks_resyncs():
    good = body(10, 3)
    data = b"\x7f" + b"\xff\xff\xff" + fr(good)
    f = Framer(max_frame=1000, is_frame_start=starts_with_magic)
    items = run(f, [data[:1], data[1:3], data[3:9], data[9:]])
    assert items == [Skipped(0, 4, "bad-size", 1, 10), Frame(good, 4, 3, 30, 4, 40)]


def test_hostile_size_does_not_allocate():
    f = Framer(max_frame=0x7FFFFFFF)
    items = run(f, [struct.pack(">i", 0x7FFFFFF0) + b"abc"])
    assert items == [Skipped(0, 7, "truncated", 1, 10)]


def test_gap_mid_frame_with_known_size_stays_in_step():
    a, b, c = body(100, 1), body(100, 2), body(40, 3)
    data = fr(a) + fr(b) + fr(c)
    f = Framer()
    # Bytes 130..160 (inside frame b, which spans 104..208) never arrive: b keeps its place,
    # its body up to the hole, the rest of it skipped.
    items = run(f, [data[:130], 30, data[160:]])
    assert items == [
        Frame(a, 0, 1, 10, 1, 10),
        Skipped(160, 48, "hole", 3, 30),
        CutFrame(b[:22], 104, 1, 10, 3, 30, 100, 30),
        Frame(c, 208, 3, 30, 3, 30),
    ]
    check_accounting(f, items, len(data) - 30)
    assert f.bytes_missing == 30


def test_several_holes_in_a_frame():
    a, b = body(300, 1), body(40, 2)
    data = fr(a) + fr(b)
    f = Framer()
    items = run(f, [data[:50], 20, data[70:100], 10, data[110:200], data[200:]])
    assert items == [
        Skipped(70, 30, "hole", 3, 30),
        Skipped(110, 194, "hole", 5, 50),
        CutFrame(a[:46], 0, 1, 10, 6, 60, 300, 30),
        Frame(b, 304, 6, 60, 6, 60),
    ]
    check_accounting(f, items, len(data) - 30)


def test_a_snap_length_cut_is_no_loss():
    a = body(100, 1)
    f = Framer()
    items = f.feed(fr(a)[:30], 1, 10) + f.gap(74, 1, 10, cut=True) + f.finish()
    assert items == [CutFrame(a[:26], 0, 1, 10, 1, 10, 100, 0)]


def test_gap_of_unknown_size_resyncs():
    a, b, c = body(100, 1), body(100, 2), body(40, 3)
    data = fr(a) + fr(b) + fr(c)
    f = Framer(is_frame_start=starts_with_magic)
    items = run(f, [data[:130], 0, data[160:190], data[190:]])
    assert items == [
        Frame(a, 0, 1, 10, 1, 10),
        Skipped(104, 26, "gap", 1, 10),
        Skipped(130, 48, "resync", 3, 30),
        Frame(c, 178, 4, 40, 4, 40),
    ]
    check_accounting(f, items, len(data) - 30)


def test_gap_beyond_the_frame_resyncs():
    a, b, c = body(100, 1), body(100, 2), body(40, 3)
    data = fr(a) + fr(b) + fr(c) + fr(c)
    f = Framer(is_frame_start=starts_with_magic)
    # The hole swallows the end of b and the start of the first c: b keeps its place, the
    # frame after the hole is found again.
    items = run(f, [data[:150], 70, data[220:]])
    frames = [x for x in items if isinstance(x, (Frame, CutFrame))]
    assert frames == [
        Frame(a, 0, 1, 10, 1, 10),
        CutFrame(b[:42], 104, 1, 10, 2, 20, 100, 58),
        Frame(c, 252, 3, 30, 3, 30),
    ]
    assert [x.reason for x in items if isinstance(x, Skipped)] == ["resync"]
    check_accounting(f, items, len(data) - 70)


def test_gap_at_a_frame_boundary_resyncs():
    a, b = body(20, 1), body(20, 2)
    f = Framer(is_frame_start=starts_with_magic)
    items = run(f, [fr(a), 24, b"\x00" * 5, fr(b)])
    assert items == [
        Frame(a, 0, 1, 10, 1, 10),
        Skipped(48, 5, "resync", 3, 30),
        Frame(b, 53, 4, 40, 4, 40),
    ]


def test_gap_without_frame_start_check_skips_everything_after():
    a = body(20, 1)
    f = Framer()
    items = run(f, [fr(a), 10, fr(a), fr(a)])
    assert items == [Frame(a, 0, 1, 10, 1, 10), Skipped(34, 48, "resync", 3, 30)]
    check_accounting(f, items, 72)


def test_start_mid_stream_searches():
    frames = [body(300, i) for i in range(4)]
    data = b"".join(fr(b) for b in frames)[150:]
    f = Framer(is_frame_start=starts_with_magic, synced=False)
    assert not f.synced
    items = run(f, chunks(data, [100]))
    assert items[0] == Skipped(0, 154, "resync", 1, 10)
    assert [x.data for x in items[1:]] == frames[1:]
    assert items[1].first_frame == 2 and items[1].offset == 154
    check_accounting(f, items, len(data))


def test_frame_start_found_in_bytes_of_earlier_packets():
    # The candidate prefix arrives in tiny packets: it must be reframed with their numbers.
    good = body(10, 5)
    data = b"\xff\xff" + fr(good)
    f = Framer(is_frame_start=starts_with_magic, synced=False)
    items = run(f, [bytes([c]) for c in data])
    assert items == [Skipped(0, 2, "resync", 1, 10), Frame(good, 2, 3, 30, 16, 160)]


def test_search_reports_skipped_bytes_in_bounded_pieces():
    noise = bytes([0xFF]) * 10_000
    f = Framer(is_frame_start=starts_with_magic, synced=False, max_search=4096)
    items = run(f, chunks(noise + fr(body(10)), [1000]))
    skipped = [x for x in items if isinstance(x, Skipped)]
    # Reported once past max_search, each with the packet of its first byte.
    assert skipped == [Skipped(0, 5000, "resync", 1, 10), Skipped(5000, 5000, "resync", 6, 60)]
    assert sum(x.size for x in skipped) == 10_000
    assert len(f._sbuf) == 0
    assert isinstance(items[-1], Frame)


def test_search_buffer_stays_small_without_frame_start():
    f = Framer(is_frame_start=lambda buf, pos, size, ts: False, synced=False, max_search=1 << 16)
    zeros = bytes(1460)  # every position a plausible size, none a start
    for i in range(200):
        f.feed(zeros, i, i)
        assert len(f._sbuf) <= 1460 + 4 + f.lookahead
    items = f.finish()
    assert f.bytes_skipped == 200 * 1460
    assert sum(x.size for x in items) <= 200 * 1460


def test_truncated_at_finish():
    f = Framer()
    items = run(f, [fr(b"abc") + fr(b"0123456789")[:7]])
    assert items == [Frame(b"abc", 0, 1, 10, 1, 10), Skipped(7, 7, "truncated", 1, 10)]


def test_frame_data_is_bytes():
    f = Framer()
    b = body(3000)
    items = run(f, chunks(fr(b), [1000]))
    assert type(items[0].data) is bytes and items[0].data == b
    f.min_frame = 0
    items = run(f, [fr(b"ab") + fr(b"cd")])
    assert all(type(x.data) is bytes for x in items)


frame_sizes = st.lists(st.integers(0, 3000), min_size=0, max_size=25)


@settings(max_examples=200, deadline=None)
@given(sizes=frame_sizes, cuts=st.lists(st.integers(1, 5000), min_size=1, max_size=30))
def test_any_chunking_yields_the_same_frames(sizes, cuts):
    bodies = [body(n, i) for i, n in enumerate(sizes)]
    data = b"".join(fr(b) for b in bodies)
    f = Framer(min_frame=0)
    items = run(f, chunks(data, cuts))
    assert [x.data for x in items] == bodies
    assert all(isinstance(x, Frame) for x in items)
    check_accounting(f, items, len(data))
    # The first and last packets of each frame are where its first and last bytes were.
    ends = []
    pos = 0
    for i, piece in enumerate(chunks(data, cuts)):
        ends.append((pos, pos + len(piece), i + 1))
        pos += len(piece)

    def packet(offset):
        return next(p for a, b, p in ends if a <= offset < b)

    for x in items:
        assert x.first_frame == packet(x.offset)
        assert x.last_frame == packet(x.offset + 3 + len(x.data))


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(2, 600), min_size=1, max_size=20),
    cuts=st.lists(st.integers(1, 700), min_size=1, max_size=20),
    holes=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 200), st.booleans()), max_size=4),
    junk=st.binary(max_size=300),
    synced=st.booleans(),
)
def test_gaps_and_junk_keep_the_accounts(sizes, cuts, holes, junk, synced):
    bodies = [body(n, i) for i, n in enumerate(sizes)]
    data = junk + b"".join(fr(b) for b in bodies)
    pieces = chunks(data, cuts)
    fed = len(data)
    for index, size, known in holes:
        if index < len(pieces) and size and isinstance(pieces[index], bytes):
            # Replace part of a piece by a gap of that many bytes (or of unknown size).
            piece = pieces[index]
            cut = min(size, len(piece))
            pieces[index : index + 1] = [piece[cut:], cut if known else 0]
            fed -= cut
    pieces = [p for p in pieces if not isinstance(p, bytes) or p]
    f = Framer(
        max_frame=1000, is_frame_start=starts_with_magic, synced=synced and not junk, min_frame=0
    )
    items = run(f, pieces)
    check_accounting(f, items, fed)
    # Frames found are frames that were sent.
    for x in items:
        if isinstance(x, Frame):
            assert data[x.offset : x.offset + 4 + len(x.data)] == fr(x.data) or holes
    if not holes and not junk:
        assert [x.data for x in items] == bodies
    if not holes and MAGIC not in junk:
        # After junk, search finds every frame (junk may at worst hide ones it swallowed).
        found = [x.data for x in items if isinstance(x, Frame)]
        assert found == bodies[len(bodies) - len(found) :]


@settings(max_examples=200, deadline=None)
@given(
    sizes=frame_sizes,
    cuts=st.lists(st.integers(1, 5000), min_size=1, max_size=30),
    heads=st.lists(st.integers(0, 70), min_size=1, max_size=30),
    synced=st.booleans(),
)
def test_bytes_left_in_their_packet_frame_as_copies_do(sizes, cuts, heads, synced):
    """Each piece fed as data[start:], behind `start` bytes of packet headers (what the core
    feeds from NetDecoder(in_place=True)): the same frames, offsets, packets and accounts as
    the piece fed alone, in step or searching for a frame start."""
    bodies = [body(n, i) for i, n in enumerate(sizes)]
    data = b"\x01\x02\x03" + b"".join(fr(b) for b in bodies)
    pieces = chunks(data if not synced else data[3:], cuts)
    copied = Framer(is_frame_start=starts_with_magic, synced=synced)
    expected = run(copied, pieces)
    in_place = Framer(is_frame_start=starts_with_magic, synced=synced)
    items = []
    for i, piece in enumerate(pieces):
        head = b"\xff" * heads[i % len(heads)]  # an oversize prefix if it were ever read
        items += in_place.feed(head + piece, i + 1, (i + 1) * 10, len(head))
    items += in_place.finish()
    assert items == expected
    assert (in_place.bytes_framed, in_place.bytes_skipped, in_place.frames) == (
        copied.bytes_framed,
        copied.bytes_skipped,
        copied.frames,
    )


# ---------------------------------------------------------------- frames too small


def test_a_run_of_frames_too_small_is_skipped_not_framed():
    """Zeros read as size prefixes are frames of nothing: a run of them is a framing error,
    skipped as bytes; framing goes on at the next frame start."""
    a, b = body(10, 1), body(10, 2)
    data = fr(a) + bytes(1000) + fr(b)
    f = Framer(is_frame_start=starts_with_magic)
    items = run(f, chunks(data, [1448]))
    assert items == [
        Frame(a, 0, 1, 10, 1, 10),
        Skipped(14, 1000, "bad-size", 1, 10),
        Frame(b, 1014, 1, 10, 1, 10),
    ]
    assert (f.frames, f.bytes_framed, f.bytes_skipped) == (2, 28, 1000)
    check_accounting(f, items, len(data))
    # Without a way to find a frame start, all that follows is skipped, still not framed.
    f = Framer()
    items = run(f, [data])
    assert items == [Frame(a, 0, 1, 10, 1, 10), Skipped(14, 1014, "bad-size", 1, 10)]
    check_accounting(f, items, len(data))


def test_a_frame_too_small_on_its_own_is_a_frame():
    """The empty token a broker answers a raw SASL PLAIN login with, a 0.7 response that is
    only its error code: a small frame followed by a larger one, or by nothing yet."""
    a = body(10, 1)
    for small in (b"", b"\x00\x01"):
        f = Framer(is_frame_start=starts_with_magic)
        assert run(f, [fr(small) + fr(a)]) == [
            Frame(small, 0, 1, 10, 1, 10),
            Frame(a, 4 + len(small), 1, 10, 1, 10),
        ]
        f = Framer(is_frame_start=starts_with_magic)
        assert run(f, [fr(small), fr(small) + fr(a)]) == [
            Frame(small, 0, 1, 10, 1, 10),
            Frame(small, 4 + len(small), 2, 20, 2, 20),
            Frame(a, 8 + 2 * len(small), 2, 20, 2, 20),
        ]
    # as the size prefix split across packets is
    f = Framer(is_frame_start=starts_with_magic)
    assert run(f, [b"\x00\x00", b"\x00\x00" + fr(a)]) == [
        Frame(b"", 0, 1, 10, 2, 20),
        Frame(a, 4, 2, 20, 2, 20),
    ]
    f = Framer(is_frame_start=starts_with_magic)
    items = run(f, [b"\x00\x00", bytes(100) + fr(a)])
    assert items == [Skipped(0, 102, "bad-size", 1, 10), Frame(a, 102, 2, 20, 2, 20)]
    # the floor is the framer's to change: none, and every empty frame is a frame
    f = Framer(min_frame=0)
    assert run(f, [bytes(12)]) == [Frame(b"", i, 1, 10, 1, 10) for i in (0, 4, 8)]


def test_a_search_passes_over_zeros_without_checking_them():
    """Searching, a run of zeros costs no check of a frame start and no step per byte: 4 MiB
    of them, then a frame, found with one check."""
    calls = []

    def check(buf, pos, size, ts=None):
        calls.append(size)
        return starts_with_magic(buf, pos, size)

    a = body(10, 1)
    data = bytes(4 << 20) + fr(a)
    f = Framer(is_frame_start=check, synced=False)
    items = run(f, chunks(data, [1448]))
    assert [x for x in items if isinstance(x, Frame)] == [
        Frame(a, 4 << 20, 2897, 28970, 2897, 28970)
    ]
    assert calls == [10]
    assert f.bytes_skipped == 4 << 20
    check_accounting(f, items, len(data))


def test_a_frame_held_at_a_packet_start_is_confirmed_by_the_end_of_the_stream():
    # Mid-stream, the broker's last response does not decode (its check refuses it), but it
    # starts where a packet begins and ends exactly where the stream ends: it is a frame.
    def refuse(buf, pos, size, ts):
        return False

    last = struct.pack(">ii", 8, 7) + b"\x00\x01\x00\x02"  # corr 7, a body cut short
    for ended in (None, "FIN"):
        f = Framer(is_frame_start=refuse, synced=False, orphans=lambda: True)
        out = f.feed(b"\xff" * 9, 1, 10)  # the rest of a frame whose start was not captured
        out += f.feed(last, 2, 20)
        assert not [x for x in out if isinstance(x, Frame)]
        out += f.finish(ended)
        frames = [x for x in out if isinstance(x, Frame)]
        assert [(x.data, x.offset, x.first_frame, x.last_frame) for x in frames] == [
            (last[4:], 9, 2, 2)
        ]
        assert sum(x.size for x in out if isinstance(x, Skipped)) == 9
    # Bytes after it: the end does not confirm it.
    f = Framer(is_frame_start=refuse, synced=False, orphans=lambda: True)
    out = f.feed(b"\xff" * 9, 1, 10) + f.feed(last + b"\xff", 2, 20) + f.finish()
    assert not [x for x in out if isinstance(x, Frame)]
