"""The order of a column of binary keys, sorted by their codes instead of as byte strings.

    order = sort_order(keys)                 # what pc.sort_indices(keys) gives
    order = sort_order(keys, then=seq)       # by key, then by a small integer
    at = index_in(keys, others)              # pc.index_in(keys, value_set=others), -1 for null
    ids, firsts = group_ids(keys)            # a number per distinct key, and where each is first

Arrow sorts a binary column by comparing byte strings, several times slower than numpy sorts
integers. The keys a join sorts (state keys, view keys: a tag and a few packed integers) mostly
have one length and differ in a few byte positions; those bytes, read big-endian as one
``uint64`` (``streamjoin.statestore.keycodes``), order the keys exactly as their whole bytes
do. The codes are sorted by numpy's fastest sort; where two codes are equal, a stable sort of
them gives equal keys in their first order, so the result is always Arrow's stable order. A
lookup of keys among others searches the sorted codes of both (coded from the positions where
any of them differ); distinct keys are numbered from the sorted codes. Keys of several lengths,
or that differ in more positions than a code holds, go to Arrow's sort, hash lookup or
dictionary encoding.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.statestore.binary_concat import value_offsets
from streamjoin.statestore.keycodes import CODE_BYTES, pack_codes, varying

__all__ = ["sort_order", "index_in", "group_ids"]


def sort_order(keys: pa.Array | pa.ChunkedArray, then: np.ndarray | None = None) -> np.ndarray:
    """The indices of binary ``keys`` (no nulls) in ascending order, equal keys in their order
    (``pc.sort_indices``'s stable order); with ``then`` (integers in ``[0, 256)``, one per key),
    ordered by key, then by ``then``, then by position. As int64."""
    flat = _flat(keys)
    n = len(flat)
    if n < 2:
        return np.arange(n, dtype=np.int64)
    codes = _codes(flat, then is not None)
    if codes is None:
        if then is None:
            return pc.sort_indices(flat).to_numpy()
        table = pa.table({"key": flat, "then": pa.array(then, pa.int64())})
        return pc.sort_indices(table, [("key", "ascending"), ("then", "ascending")]).to_numpy()
    if then is not None:
        codes |= then.astype(np.uint64)
    return _ascending(codes)[0]


def index_in(values: pa.Array, value_set: pa.Array) -> np.ndarray:
    """Per key of ``values`` (binary, no nulls), the position of its first equal in ``value_set``
    (binary, no nulls), -1 where there is none: ``pc.index_in`` as int64."""
    n, m = len(values), len(value_set)
    if not n or not m:
        return np.full(n, -1, np.int64)
    values, value_set = _flat(values), _flat(value_set)
    if value_set.type != values.type:
        value_set = value_set.cast(values.type)
    codes = _codes(pa.concat_arrays([values, value_set]), False)
    if codes is None:
        return pc.index_in(values, value_set=value_set).fill_null(-1).to_numpy().astype(np.int64)
    mine, theirs = codes[:n], codes[n:]
    order = np.argsort(theirs)
    ordered = theirs[order]
    twice = ordered[1:] == ordered[:-1]
    if bool(twice.any()):   # a key twice in the set: each equal gives the first position of its run
        new = np.append(True, ~twice)
        order = np.minimum.reduceat(order, np.flatnonzero(new))[np.cumsum(new) - 1]
    at = np.minimum(np.searchsorted(ordered, mine), m - 1)
    return np.where(ordered[at] == mine, order[at], -1).astype(np.int64, copy=False)


def group_ids(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A number per distinct key of ``keys`` (binary, no nulls), given to each key, and the
    position of one key of each number: ``ids`` and ``firsts`` with ``keys[firsts[ids]]`` equal
    to ``keys``. The numbering is the keys' order where they are coded, else their first
    appearance (Arrow's dictionary encoding)."""
    flat = _flat(keys)
    codes = _codes(flat, False) if len(flat) else None
    if codes is None:
        encoded = flat.dictionary_encode()
        ids = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        return ids, np.unique(ids, return_index=True)[1].astype(np.int64)
    order = np.argsort(codes)
    ordered = codes[order]
    new = np.ones(len(codes), bool)
    new[1:] = ordered[1:] != ordered[:-1]
    ids = np.empty(len(codes), np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids, order[new].astype(np.int64, copy=False)


def _ascending(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions of ``codes`` in ascending order, equal codes in their first order (numpy's
    fastest sort, a stable one only where two are equal), as int64, and the codes in that order."""
    order = np.argsort(codes)
    ordered = codes[order]
    if bool((ordered[1:] == ordered[:-1]).any()):
        order = np.argsort(codes, kind="stable")
        ordered = codes[order]
    return order.astype(np.int64, copy=False), ordered


def _flat(keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    return keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys


def _codes(flat: pa.Array, room: bool) -> np.ndarray | None:
    """Each key's varying bytes as a big-endian ``uint64`` (with ``room``, its lowest byte left
    zero), or None when the keys are of several lengths or vary in too many positions."""
    kind = flat.type
    if not (pa.types.is_binary(kind) or pa.types.is_string(kind) or pa.types.is_large_binary(kind)
            or pa.types.is_large_string(kind)):
        return None
    n = len(flat)
    offsets = value_offsets(flat)
    start, size = int(offsets[0]), int(offsets[1] - offsets[0])
    if int(offsets[-1]) - start != n * size or bool((np.diff(offsets) != size).any()):
        return None
    if not size:
        return np.zeros(n, np.uint64)
    data = flat.buffers()[2]
    matrix = np.frombuffer(data, np.uint8, n * size, start).reshape(n, size)
    at = varying(matrix)
    if len(at) > CODE_BYTES - (1 if room else 0):
        return None
    return pack_codes(matrix, at)
