"""``concat_binary`` gives exactly what Arrow's ``binary_join_element_wise`` gives, on either path."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.statestore import binary_concat
from streamjoin.statestore.binary_concat import concat_binary, matrix_rows


def _arrow(*pieces, large: bool) -> pa.Array:
    kind = pa.large_binary() if large else pa.binary()
    typed = [pa.scalar(p, kind) if isinstance(p, bytes) else p.cast(kind) for p in pieces]
    return pc.binary_join_element_wise(*typed, pa.scalar(b"", kind))


@st.composite
def _pieces(draw):
    rows = draw(st.integers(0, 12))
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            pieces.append(draw(st.binary(max_size=3)))
            continue
        if draw(st.booleans()):   # one width a column: the matrix path
            width = draw(st.integers(0, 5))
            values = draw(st.lists(st.binary(min_size=width, max_size=width), min_size=rows, max_size=rows))
        else:
            values = draw(st.lists(st.none() | st.binary(max_size=6), min_size=rows, max_size=rows))
        skip = draw(st.integers(0, 2))   # a sliced array (an offset into its buffers)
        kind = pa.large_binary() if draw(st.booleans()) else pa.binary()
        pieces.append(pa.array([b"?"] * skip + values, kind).slice(skip))
    if all(isinstance(p, bytes) for p in pieces):
        pieces.append(pa.array([b"k"] * rows, pa.binary()))
    return pieces


@given(_pieces())
def test_concat_binary_matches_arrow(pieces):
    large = any(not isinstance(p, bytes) and p.type == pa.large_binary() for p in pieces)
    got = concat_binary(*pieces)
    want = _arrow(*pieces, large=large)
    assert got.type == want.type
    assert got.equals(want)


def test_concat_binary_uniform_columns_take_the_matrix_path(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("Arrow's kernel called")

    monkeypatch.setattr(binary_concat.pc, "binary_join_element_wise", refuse)
    keys = pa.array([i.to_bytes(8, "big") for i in range(1000)], pa.binary())
    got = concat_binary(b"\x05", keys, pa.scalar(b"ab", pa.binary()), keys.slice(0, 1000))
    assert got.type == pa.binary()
    assert got.to_pylist()[7] == b"\x05" + (7).to_bytes(8, "big") + b"ab" + (7).to_bytes(8, "big")


@pytest.mark.parametrize("values", [[b"a", b"bc"], [b"a", None]])
def test_concat_binary_other_columns_take_arrows_kernel(values):
    column = pa.array(values, pa.binary())
    assert concat_binary(b"x", column).to_pylist() == [None if v is None else b"x" + v for v in values]


def test_concat_binary_result_offsets_are_of_its_type():
    got = concat_binary(pa.array([b"ab"] * 3, pa.large_binary()), b"c")
    assert got.type == pa.large_binary()
    offsets = np.frombuffer(got.buffers()[1], np.int64, 4)
    assert offsets.tolist() == [0, 3, 6, 9]


@pytest.mark.parametrize("large", [False, True])
def test_matrix_rows_gives_each_row_as_a_value(large):
    matrix = np.arange(24, dtype=np.uint8).reshape(4, 6)[:, 1:4]   # not contiguous: copied
    rows = matrix_rows(matrix, large)
    assert rows.type == (pa.large_binary() if large else pa.binary())
    assert rows.to_pylist() == [bytes(row) for row in matrix]
    assert matrix_rows(np.zeros((3, 0), np.uint8)).to_pylist() == [b"", b"", b""]
