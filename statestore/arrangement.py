"""An arrangement: an immutable sorted ``bytes -> bytes`` map held as columns, probed a batch at a time.

The keys are kept twice, aligned by position:

* ``ekeys``: a numpy fixed-width byte array (dtype ``S<width>``) of the keys in an
  order-preserving form (:func:`encode_keys`), sorted ascending: one ``np.searchsorted`` finds a
  whole batch of keys, or the bounds of a whole batch of ranges, in C, with no Python per key;
* ``keys`` and ``values``: Arrow ``large_binary`` arrays of the keys as given and their values,
  from which found entries are taken (``take``) and turned into Python bytes once.

**The fixed-width form.** numpy compares ``S`` values byte by byte over the whole width, but pads
with ``\\x00`` and cannot tell ``b"a"`` from ``b"a\\x00"``. Each key is therefore escaped the way
order-preserving tuple encodings do: every ``\\x00`` becomes ``\\x00\\xff``, and a ``\\x00``
terminator follows. Distinct keys then have distinct padded forms, and the forms' byte order is
the keys' byte order (a key before its extensions, the empty key first), as the store contract
requires.

An arrangement never changes: :meth:`Arrangement.applied` returns a new one with a write's range
deletes, deletes and puts applied (in that order, as the store contract says), merging the sorted
puts into the kept entries in one pass (``np.searchsorted`` then one ``take`` of each column).
That costs a copy of the state per write: the price of simple, instantly consistent versions
(the previous arrangement is untouched until the new one replaces it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa

from streamjoin.statestore.base import KeyValue

__all__ = ["Arrangement", "encode_keys", "ekeys_of"]

_EMPTY_EKEYS = np.zeros(0, "S1")


def encode_keys(keys: Sequence[bytes]) -> np.ndarray:
    """``keys`` in the order-preserving fixed-width form (see module), as an ``S<width>`` array."""
    if not keys:
        return _EMPTY_EKEYS
    escaped = [k.replace(b"\x00", b"\x00\xff") + b"\x00" for k in keys]
    return np.array(escaped, dtype=bytes)


def _same_width(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a`` and ``b`` at the wider of their widths (numpy would cut the wider one to compare)."""
    if a.dtype.itemsize == b.dtype.itemsize:
        return a, b
    width = max(a.dtype.itemsize, b.dtype.itemsize)
    return a.astype(f"S{width}"), b.astype(f"S{width}")


@dataclass(frozen=True)
class Arrangement:
    """A sorted map of unique keys (see module); build with :meth:`empty`, :meth:`from_sorted` or
    :meth:`from_columns`, change with :meth:`applied`."""

    ekeys: np.ndarray
    keys: pa.Array
    values: pa.Array

    @classmethod
    def empty(cls) -> Arrangement:
        return cls(_EMPTY_EKEYS, pa.array([], pa.large_binary()), pa.array([], pa.large_binary()))

    @classmethod
    def from_sorted(cls, keys: Sequence[bytes], values: Sequence[bytes]) -> Arrangement:
        """From strictly ascending ``keys`` and their ``values`` (the caller checked the order)."""
        return cls(encode_keys(keys), pa.array(keys, pa.large_binary()), pa.array(values, pa.large_binary()))

    @classmethod
    def from_columns(cls, ekeys: np.ndarray, keys: pa.Array, values: pa.Array) -> Arrangement:
        """From columns already in arrangement form (e.g. read back from a file of
        :meth:`columns`): no encoding, no sort, no copy."""
        return cls(ekeys, keys.cast(pa.large_binary()), values.cast(pa.large_binary()))

    def __len__(self) -> int:
        return len(self.ekeys)

    @property
    def nbytes(self) -> int:
        """Bytes of keys and values as the contract counts them (not the fixed-width copy)."""
        return int(_data_size(self.keys) + _data_size(self.values))

    # -- reads ------------------------------------------------------------------------------------

    def find(self, ekeys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each encoded key, its position (where it is, or would be inserted) and whether it is there."""
        mine, theirs = _same_width(self.ekeys, ekeys)
        at = np.searchsorted(mine, theirs)
        found = np.zeros(len(theirs), bool)
        inside = at < len(mine)
        found[inside] = mine[at[inside]] == theirs[inside]
        return at, found

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The value of each of ``keys`` (None: absent), in the order given."""
        if not keys or not len(self):
            return [None] * len(keys)
        at, found = self.find(encode_keys(keys))
        values = self.values.take(pa.array(at, pa.int64(), mask=~found))
        return values.to_pylist()

    def bounds(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> tuple[np.ndarray, np.ndarray]:
        """Per ``[start, end)`` range (None: unbounded), the positions ``lo, hi`` of its entries."""
        starts = [s for s, _ in ranges if s is not None]
        ends = [e for _, e in ranges if e is not None]
        n = len(self)
        lo = np.zeros(len(ranges), np.int64)
        hi = np.full(len(ranges), n, np.int64)
        if starts:
            mine, theirs = _same_width(self.ekeys, encode_keys(starts))
            lo[[i for i, (s, _) in enumerate(ranges) if s is not None]] = np.searchsorted(mine, theirs)
        if ends:
            mine, theirs = _same_width(self.ekeys, encode_keys(ends))
            hi[[i for i, (_, e) in enumerate(ranges) if e is not None]] = np.searchsorted(mine, theirs)
        return lo, np.maximum(hi, lo)

    def entries(self, lo: int, hi: int) -> list[KeyValue]:
        """The entries at positions ``lo`` to ``hi`` (exclusive), in key order."""
        if hi <= lo:
            return []
        return list(zip(self.keys[lo:hi].to_pylist(), self.values[lo:hi].to_pylist()))

    def scan_ranges(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> list[list[KeyValue]]:
        """The entries of each range, one list per range in the order given (see :meth:`bounds`)."""
        lo, hi = self.bounds(ranges)
        counts = hi - lo
        total = int(counts.sum())
        if not total:
            return [[] for _ in ranges]
        starts = np.cumsum(counts) - counts
        at = pa.array(np.repeat(lo - starts, counts) + np.arange(total), pa.int64())
        pairs = list(zip(self.keys.take(at).to_pylist(), self.values.take(at).to_pylist()))
        ends = (starts + counts).tolist()
        return [pairs[s:e] for s, e in zip(starts.tolist(), ends)]

    # -- writes -----------------------------------------------------------------------------------

    def applied(
        self,
        puts: Sequence[KeyValue],
        deletes: Sequence[bytes] = (),
        delete_ranges: Sequence[tuple[bytes, bytes]] = (),
    ) -> Arrangement:
        """A new arrangement: this one with ``delete_ranges``, then ``deletes``, then ``puts``
        applied (a key put twice keeps its last value)."""
        n = len(self)
        keep = np.ones(n, bool)
        if delete_ranges and n:
            lo, hi = self.bounds(list(delete_ranges))
            for a, b in zip(lo.tolist(), hi.tolist()):
                keep[a:b] = False
        if deletes and n:
            at, found = self.find(encode_keys(deletes))
            keep[at[found]] = False
        if not puts:
            if keep.all():
                return self
            kept = pa.array(np.flatnonzero(keep), pa.int64())
            return Arrangement(self.ekeys[keep], self.keys.take(kept), self.values.take(kept))
        put_keys = [k for k, _ in puts]
        put_ekeys = encode_keys(put_keys)
        order = np.argsort(put_ekeys, kind="stable")
        sorted_ekeys = put_ekeys[order]
        # of equal keys the last put wins: keep the last of each run of equal sorted keys
        last = np.ones(len(order), bool)
        last[:-1] = sorted_ekeys[1:] != sorted_ekeys[:-1]
        order, sorted_ekeys = order[last], sorted_ekeys[last]
        if n:
            at, found = self.find(sorted_ekeys)
            keep[at[found]] = False
        mine, theirs = _same_width(self.ekeys[keep], sorted_ekeys)
        slots = np.searchsorted(mine, theirs) + np.arange(len(theirs))
        total = len(mine) + len(theirs)
        ekeys = np.empty(total, mine.dtype)
        is_put = np.zeros(total, bool)
        is_put[slots] = True
        ekeys[slots] = theirs
        ekeys[~is_put] = mine
        source = np.empty(total, np.int64)     # into (this arrangement's entries, then the puts)
        source[slots] = n + order
        source[~is_put] = np.flatnonzero(keep)
        at_source = pa.array(source, pa.int64())
        keys = pa.concat_arrays([self.keys, pa.array(put_keys, pa.large_binary())]).take(at_source)
        values = pa.concat_arrays([self.values, pa.array([v for _, v in puts], pa.large_binary())]).take(at_source)
        return Arrangement(ekeys, keys, values)

    def columns(self) -> pa.Table:
        """The arrangement as a table (``ekey`` fixed-size binary, ``key``, ``value``), which
        :meth:`from_columns` reads back without encoding or sorting."""
        width = max(self.ekeys.dtype.itemsize, 1)
        ekeys = np.ascontiguousarray(self.ekeys.astype(f"S{width}"))
        fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(ekeys), [None, pa.py_buffer(ekeys)])
        return pa.table({"ekey": fixed, "key": self.keys, "value": self.values})


def ekeys_of(column: pa.Array) -> np.ndarray:
    """A ``fixed_size_binary`` column of :meth:`Arrangement.columns` as an ``S<width>`` array (no copy)."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    width = column.type.byte_width
    if not len(column):
        return np.zeros(0, f"S{width}")
    data = column.buffers()[1]
    return np.frombuffer(data, dtype=f"S{width}", count=len(column), offset=column.offset * width)


def _data_size(array: pa.Array) -> int:
    """The bytes of a binary array's values (without offsets)."""
    if not len(array):
        return 0
    offsets = np.frombuffer(array.buffers()[1], np.int64, len(array) + 1, array.offset * 8)
    return int(offsets[-1] - offsets[0])
