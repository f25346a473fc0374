"""The key stage's state values (:mod:`streamjoin.table.rekey`), decoded column-wise.

A key's value is ``pack(change time, sequence, has row, *join key)``; :func:`decode_held` turns
the values a ``multi_get`` returned into numpy columns (and the join key's bytes, left encoded),
in numpy where the bytes are the usual ones and value by value otherwise. Where the key step
holds its side's rows (``TableRekey(holds_rows=True)``) the bytes after the head are the row's,
and ``Held.jk`` holds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.statestore.codecs import unpack_head
from streamjoin.statestore.columns import binary_suffixes
from streamjoin.statestore.packed_columns import INT_WIDTH as _WIDTH
from streamjoin.statestore.packed_columns import TAG, decode_ints, padded_bytes

__all__ = ["Held", "decode_held", "held_rows"]

_INT, _NULL, _TRUE, _FALSE = TAG["int"], TAG["null"], TAG["true"], TAG["false"]
_NO_BYTES = pa.array([], pa.binary())


@dataclass
class Held:
    """Per key (in the order asked): whether it has state, and its last change's time, sequence
    (``has_seq`` False: null), whether it leaves a row, and the row's join key as ``pack``
    bytes (a binary array, null where the key has no state)."""

    exists: np.ndarray
    time: np.ndarray
    has_seq: np.ndarray
    seq: np.ndarray
    row: np.ndarray
    jk: pa.Array


def decode_held(values: Sequence[bytes | None] | pa.Array) -> Held:
    """The columns of ``values`` (each None or a key stage's state value; a list, or a binary
    array as ``Store.multi_get_column`` returns). Raises ValueError for bytes ``pack`` cannot make."""
    column = values if isinstance(values, pa.Array) else pa.array(values, pa.binary())
    n = len(column)
    valid = column.is_valid()
    exists = valid.to_numpy(zero_copy_only=False)
    present = column.filter(valid)
    columns = _columns(present)
    if columns is None:
        columns = _row_wise(present.to_pylist())
    held = Held(exists, np.zeros(n, np.int64), np.zeros(n, bool), np.zeros(n, np.int64), np.zeros(n, bool),
                pa.nulls(n, pa.binary()))
    at = np.flatnonzero(exists)
    held.time[at], held.has_seq[at], held.seq[at], held.row[at] = columns[:4]
    where = np.full(n, -1, np.int64)
    where[at] = np.arange(len(at))
    held.jk = columns[4].take(pa.array(where, pa.int64(), mask=where < 0))
    return held


def _columns(present: pa.Array) -> tuple | None:
    """The columns in numpy, or None when some value is not a usual one (an integer time, a null
    or integer sequence, a boolean)."""
    m = len(present)
    if not m:
        return np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64), np.zeros(0, bool), _NO_BYTES
    buf, offsets = padded_bytes(present, 2 * _WIDTH)
    start = offsets[:-1]
    seq_at = start + _WIDTH
    has_seq = buf[seq_at] == _INT
    row_at = seq_at + np.where(has_seq, _WIDTH, 1)
    usual = ((buf[start] == _INT) & (has_seq | (buf[seq_at] == _NULL))
             & ((buf[row_at] == _TRUE) | (buf[row_at] == _FALSE)) & (row_at < offsets[1:]))
    if not usual.all():
        return None
    time, seq = decode_ints(buf, start + 1), np.where(has_seq, decode_ints(buf, seq_at + 1), 0)
    return time, has_seq, seq, buf[row_at] == _TRUE, binary_suffixes(present, row_at + 1 - start)


def _row_wise(present: list[bytes]) -> tuple:
    heads = [unpack_head(v, 3) for v in present]
    m = len(heads)
    return (np.fromiter((h[0][0] for h in heads), np.int64, m),
            np.fromiter((h[0][1] is not None for h in heads), bool, m),
            np.fromiter((h[0][1] or 0 for h in heads), np.int64, m),
            np.fromiter((bool(h[0][2]) for h in heads), bool, m), pa.array([h[1] for h in heads], pa.binary()))


def held_rows(values: pa.Array) -> pa.Array:
    """The rows a key step holds after its heads (``TableRekey(holds_rows=True)``) of ``values``
    (a binary array as ``Store.multi_get_column`` returns it; null: no state): each value's bytes
    after ``pack(change time, sequence, has row)``, null where there is no state or no row. The
    head's length is read from its tags, and the head cut off in Arrow."""
    values = values.cast(pa.binary())
    n = len(values)
    if not n or values.null_count == n:
        return pa.nulls(n, pa.binary())
    offsets = np.frombuffer(values.buffers()[1], np.int32, n + 1, values.offset * 4).astype(np.int64)
    data = np.frombuffer(values.buffers()[2], np.uint8)
    valid = np.asarray(values.is_valid())
    start, length = offsets[:-1], offsets[1:] - offsets[:-1]
    at = np.flatnonzero(valid)
    seq_tag = np.full(n, _NULL, np.uint8)
    seq_tag[at] = data[np.minimum(start[at] + _WIDTH, len(data) - 1)]
    head = np.where(seq_tag == _INT, 2 * _WIDTH + 1, _WIDTH + 2)   # time (tag, 8 bytes), sequence, has row
    flag = np.full(n, _FALSE, np.uint8)
    ok = valid & (length >= head)
    flag[ok] = data[start[ok] + head[ok] - 1]
    usual = ~valid | (ok & (data[np.minimum(start, len(data) - 1)] == _INT) & ((seq_tag == _INT) | (seq_tag == _NULL))
                      & ((flag == _TRUE) | (flag == _FALSE)))
    if not usual.all():   # values of another shape: decoded one by one (raises for bytes pack cannot make)
        held = decode_held(values)
        return pc.if_else(pa.array(held.row), held.jk, pa.nulls(n, pa.binary()))
    # the bytes after each head: the head cut off in Arrow, once per head length (a sequence or none)
    sequenced = seq_tag == _INT
    lengths = [length for length, some in ((_WIDTH + 2, not sequenced[valid].all()), (2 * _WIDTH + 1, sequenced.any()))
               if some]
    tails = pc.binary_replace_slice(values, 0, lengths[0], b"")
    if len(lengths) > 1:
        longer = pc.binary_replace_slice(values, 0, lengths[1], b"")
        tails = pc.if_else(pa.array(sequenced), longer, tails)
    return pc.if_else(pa.array(flag == _TRUE), tails, pa.nulls(n, pa.binary()))
