"""Row-wise joins of binary columns (:mod:`streamjoin.statestore.byte_rows`) against joining the
rows' bytes in Python, for parts of one length (the byte-matrix path) and of any."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.statestore.byte_rows import fixed_rows, join_rows, rows_array


def _column(rows: int) -> st.SearchStrategy[list[bytes | None]]:
    fixed = st.integers(0, 9).flatmap(lambda w: st.lists(st.binary(min_size=w, max_size=w), min_size=rows, max_size=rows))
    return fixed | st.lists(st.none() | st.binary(max_size=6), min_size=rows, max_size=rows)


_PARTS = st.integers(1, 4).flatmap(lambda rows: st.lists(st.binary(max_size=3) | _column(rows), min_size=1, max_size=4)
                                   .filter(lambda parts: any(isinstance(p, list) for p in parts)))


@given(_PARTS, st.sampled_from([pa.binary(), pa.large_binary()]), st.booleans())
def test_join_rows_is_each_rows_bytes_joined(parts, kind, sliced):
    arrays = [p if isinstance(p, bytes) else (pa.array([b"x", *p], kind)[1:] if sliced else pa.array(p, kind))
              for p in parts]
    rows = len(next(p for p in parts if isinstance(p, list)))
    expected = []
    for i in range(rows):
        pieces = [p if isinstance(p, bytes) else p[i] for p in parts]
        expected.append(None if any(x is None for x in pieces) else b"".join(pieces))
    joined = join_rows(*arrays)
    assert joined.type == pa.binary() and joined.to_pylist() == expected


def test_fixed_rows_is_a_matrix_only_for_values_of_one_length_without_nulls():
    matrix = fixed_rows(pa.array([b"ab", b"cd", b"ef"], pa.binary())[1:])
    assert matrix is not None and matrix.tolist() == [[99, 100], [101, 102]]
    assert fixed_rows(pa.array([b"ab", b"c"], pa.binary())) is None
    assert fixed_rows(pa.array([b"ab", None], pa.binary())) is None
    assert rows_array(np.array([[1, 2], [3, 4]], np.uint8)).to_pylist() == [b"\x01\x02", b"\x03\x04"]
