"""Arrow arrays built from their buffers (tables/columns.py) equal what pyarrow builds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dissector.tables import columns
from dissector.tables.columns import _offsets, column
from dissector.tables.schema import RECORD_TIME, SCHEMAS, TIME

CAPTURES = Path(__file__).resolve().parent.parent / "captures"

CASES = [
    ((1, None, 3), pa.int16()),
    ((-128, 127, None), pa.int8()),
    ((2**31 - 1, -(2**31)), pa.int32()),
    ((1, 2, 3), pa.int64()),
    ((-5, 2**62, None, 0), pa.int64()),
    ((None, None), pa.int32()),
    ((), pa.int64()),
    ((1.5, None, -2.25, 0.0), pa.float64()),
    ((True, False, None, True, True, False, False, True, False), pa.bool_()),
    (("a", "é€😀", None, ""), pa.string()),
    ((b'{"a":1}', None, "text"), pa.string()),
    ((b"a", None, b"\x00\xff", b""), pa.binary()),
    ((bytearray(b"ab"), None, memoryview(b"cd"), b"e"), pa.binary()),
    ((["a", "b"], [], ["c"], ["d", "é"]), pa.list_(pa.string())),
    ((1_795_433_685_038_123_456, None, 0), TIME),
    ((1_795_433_685_038, None), RECORD_TIME),
]


@pytest.fixture(params=["C", "Python"])
def builders(request, monkeypatch):
    """Text and validity buffers filled in C (text_buffers.pyx, where built) or in Python."""
    if request.param == "Python":
        monkeypatch.setattr(columns, "text_buffers", None)
        monkeypatch.setattr(columns, "present_bitmap", None)
    elif columns.text_buffers is None:
        pytest.skip("text_buffers.pyx not built")
    return request.param


@pytest.mark.parametrize(("values", "kind"), CASES, ids=[str(k) for _, k in CASES])
def test_equal_to_pyarrow(values, kind, builders):
    built = column(values, kind)
    built.validate(full=True)
    expected = pa.array(
        [bytes(v).decode() if _bytes_like(v) and kind == pa.string() else v for v in values],
        type=kind,
    )
    assert built.type == kind
    assert built.null_count == sum(v is None for v in values)
    assert built.equals(expected)
    assert built.to_pylist() == expected.to_pylist()


def _bytes_like(v):
    return isinstance(v, (bytes, bytearray, memoryview))


def test_nine_hundred_values_with_scattered_nulls(builders):
    """Bitmaps span many bytes: every 7th value null, every 3rd boolean true."""
    ints = tuple(None if i % 7 == 0 else i * 1000 for i in range(900))
    bools = tuple(None if i % 7 == 0 else i % 3 == 0 for i in range(900))
    assert column(ints, pa.int64()).to_pylist() == list(ints)
    assert column(bools, pa.bool_()).to_pylist() == list(bools)
    texts = tuple(None if i % 7 == 0 else "é" * (i % 5) for i in range(900))
    assert column(texts, pa.string()).to_pylist() == list(texts)


def test_text_that_is_not_utf8_is_refused_as_str_encode_refuses_it(builders):
    with pytest.raises(UnicodeEncodeError):
        column(("ok", "\udcff"), pa.string())


def test_other_types_are_left_to_pyarrow():
    headers = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    values = ([{"key": "k", "value": b"v"}], [])
    assert column(values, headers).to_pylist() == list(values)


def test_text_beyond_int32_offsets_is_refused():
    with pytest.raises(ValueError, match="more than int32 offsets hold"):
        _offsets([2**30, 2**30])


def test_every_pairs_column_type_is_built_from_buffers(monkeypatch):
    """No pairs column falls back to pa.array (which would load pandas)."""

    def refused(*args, **kwargs):
        raise AssertionError("pa.array called")

    monkeypatch.setattr(pa, "array", refused)
    for field in SCHEMAS["pairs"]:
        nulls = (None,) if field.nullable else ()
        sample = {
            pa.string(): ("x",),
            pa.list_(pa.string()): (["t"],),
        }.get(field.type, (1.0,) if field.type == pa.float64() else (1,))
        column(sample + nulls, field.type).validate(full=True)


def test_writing_pairs_parquet_does_not_load_pandas(tmp_path):
    """`analyze -o pairs.parquet` stays clear of pandas (150 ms to import)."""
    out = tmp_path / "pairs.parquet"
    code = (
        "import sys\n"
        "from dissector import cli\n"
        f"assert cli.main(['analyze', {str(CAPTURES / 'kcat.pcap')!r}, '--no-progress', "
        f"'-o', {str(out)!r}]) == 0\n"
        "print('pandas' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip().splitlines()[-1] == "False"
    assert pq.read_table(out).num_rows > 0


def test_a_body_too_large_for_a_column_leaves_its_row_with_a_reason():
    """Arrow's strings have int32 offsets: a body whose JSON text passes what one column of
    a batch holds is left out of its row, whose `reason` says so, and batches are cut before
    a column would overflow; no row is lost and the run goes on (here with the bound made
    small: a real one takes a 2 GiB body)."""
    import pyarrow as pa

    import dissector
    from dissector.tables.arrow import arrow_batches
    from dissector.tables.pairs import pairs_row

    exchanges = list(dissector.dissect(CAPTURES / "kafka-python.pcap"))
    sizes = [(len(r[-2] or ""), len(r[-1] or "")) for r in map(pairs_row, exchanges)]
    bound = sorted(max(s) for s in sizes)[len(sizes) // 2]  # half the rows have a body past it
    batches = list(arrow_batches(exchanges, "pairs", max_text=bound))
    table = pa.Table.from_batches(batches).to_pylist()
    assert len(table) == len(exchanges)
    for row, (request, response) in zip(table, sizes, strict=True):
        for side, size in (("request", request), ("response", response)):
            if size > bound:
                assert row[side] is None
                assert f"{side} body of {size} bytes as JSON text left out" in row["reason"]
            else:
                assert len((row[side] or "").encode()) == size  # kept whole
    for batch in batches:
        for side in ("request", "response"):
            assert sum(len((v or "").encode()) for v in batch.column(side).to_pylist()) <= bound
    assert sum(1 for s in sizes if max(s) > bound) > 0


@settings(max_examples=200, deadline=None)
@given(
    chunks=st.lists(
        st.tuples(
            st.lists(st.one_of(st.none(), st.binary(max_size=12)), min_size=1, max_size=9),
            st.integers(0, 3),  # rows sliced off the front: arrays with an offset
            st.booleans(),  # string or binary
        ),
        min_size=1,
        max_size=4,
    ),
    data=st.data(),
)
def test_text_gathered_from_several_arrays_equals_arrow_take(chunks, data):
    text_buffers = pytest.importorskip("dissector.tables.text_buffers")
    kind = pa.string() if chunks[0][2] else pa.binary()
    arrays = []
    for values, cut, _ in chunks:
        values = [None if v is None else v.hex() if kind == pa.string() else v for v in values]
        arrays.append(pa.array(values, type=kind).slice(min(cut, len(values) - 1)))
    picks = data.draw(
        st.lists(
            st.integers(0, len(arrays) - 1).flatmap(
                lambda c: st.tuples(st.just(c), st.integers(0, len(arrays[c]) - 1))
            ),
            max_size=30,
        )
    )
    chunk_of = np.array([c for c, _ in picks], dtype=np.int64)
    row_of = np.array([r for _, r in picks], dtype=np.int64)
    validity, nulls, offsets, text = text_buffers.gather_text(arrays, chunk_of, row_of)
    buffers = [None if validity is None else pa.py_buffer(validity)]
    got = pa.Array.from_buffers(
        kind, len(picks), buffers + [pa.py_buffer(offsets), pa.py_buffer(text)], nulls
    )
    got.validate(full=True)
    starts = np.cumsum([len(a) for a in arrays]) - [len(a) for a in arrays]
    expected = pa.chunked_array(arrays, type=kind).take(starts[chunk_of] + row_of)
    assert got.equals(expected.combine_chunks())


@pytest.mark.parametrize("gathered", ["C", "take"])
def test_rows_put_in_capture_order_in_batches_bounded_by_text(gathered, monkeypatch):
    """Records given in reverse, in capture order again whether their text is gathered in C
    or taken by Arrow, in output batches cut at a few kilobytes of text."""
    import dissector
    from dissector.tables import arrow, sort_table

    if gathered == "take":
        monkeypatch.setattr(arrow, "gather_text", None)
    elif arrow.gather_text is None:
        pytest.skip("text_buffers.pyx not built")
    path = CAPTURES / "kafka-python.pcap"
    whole = pa.Table.from_batches(
        arrow.arrow_batches(dissector.dissect(path, records="full"), "records")
    )
    # Batches of 3 rows, the last first: rows of one output batch come from several.
    batches = whole.to_batches(max_chunksize=3)[::-1]
    expected = sort_table(pa.Table.from_batches(batches).to_pandas(), "records")
    assert pa.Table.from_batches(batches).column("key").null_count > 0
    monkeypatch.setattr(arrow, "BATCH_TEXT", 1024)
    out = arrow.in_capture_order(batches, "records")
    assert len(out) > 3
    for b in out:
        text = sum(
            sum(len(v) for v in a.to_pylist() if v is not None)
            for a in b.columns
            if a.type in (pa.string(), pa.binary())
        )
        assert b.num_rows == 1 or text <= 1024
    assert max(b.num_rows for b in out) > 1
    got = pa.Table.from_batches(out).to_pandas()
    assert got.equals(expected)
