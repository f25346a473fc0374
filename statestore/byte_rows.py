"""Binary columns as rows of bytes: values of one length as a byte matrix, and row-wise joins.

Keys and packed values are built by joining binary columns row by row (a prefix, then each
encoded part). Arrow's ``binary_join_element_wise`` does it for any lengths; when every part has
one length (integers, timestamps, fixed tags: most keys) the parts are laid side by side in one
``(rows, width)`` byte matrix instead, which numpy fills a column block at a time.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["fixed_rows", "rows_array", "join_rows"]

_NONE = pa.scalar(b"", pa.binary())


def fixed_rows(column: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """A binary column without nulls whose values all have one length, as an ``(n, length)``
    byte matrix over its buffer (no copy); None for any other column."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count or not len(column) or column.type not in (pa.binary(), pa.large_binary()):
        return None
    n = len(column)
    kind = np.int64 if column.type == pa.large_binary() else np.int32
    offsets = np.frombuffer(column.buffers()[1], kind, n + 1, column.offset * np.dtype(kind).itemsize)
    lengths = np.diff(offsets)
    if lengths.min() != lengths.max():
        return None
    width = int(lengths[0])
    if not width:
        return np.zeros((n, 0), np.uint8)
    return np.frombuffer(column.buffers()[2], np.uint8, n * width, int(offsets[0])).reshape(n, width)


def rows_array(matrix: np.ndarray) -> pa.Array:
    """The rows of a ``(n, width)`` byte matrix as a binary array (its buffer, no copy)."""
    n, width = matrix.shape
    offsets = np.arange(n + 1, dtype=np.int64 if n * width >= 2**31 else np.int32) * width
    kind = pa.large_binary() if offsets.dtype == np.int64 else pa.binary()
    data = np.ascontiguousarray(matrix)
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]).cast(pa.binary())


def join_rows(*parts: pa.Array | bytes) -> pa.Array:
    """Row by row, the bytes of ``parts`` one after the other (a ``bytes`` part is the same in
    every row), as a binary array; a null in any part makes the row null. At least one part is
    an array, all arrays of one length."""
    arrays = [p for p in parts if not isinstance(p, bytes)]
    n = len(arrays[0])
    rows = [fixed_rows(p) for p in arrays]
    if not n or any(r is None for r in rows):
        return pc.binary_join_element_wise(*(pa.scalar(p, pa.binary()) if isinstance(p, bytes) else p.cast(pa.binary())
                                             for p in parts), _NONE)
    blocks = iter(rows)
    pieces = [np.frombuffer(p, np.uint8)[None, :] if isinstance(p, bytes) else next(blocks) for p in parts]
    matrix = np.empty((n, sum(piece.shape[1] for piece in pieces)), np.uint8)
    at = 0
    for piece in pieces:
        matrix[:, at:at + piece.shape[1]] = piece
        at += piece.shape[1]
    return rows_array(matrix)
