"""Table versions held sorted, probed a batch at a time (the enrichment's ``runs`` layout).

A :class:`SortedVersions` is a table of versions (:attr:`EnrichmentSpec.versions_schema`) with
its rows in *version order*: by key code, then timeless rows first, change time, a null sequence
first, sequence (:class:`Order`). A row's *key code* (:func:`key_codes`) is its one integer key
as ``int64``, or else the ``pack`` bytes of its key values in the fixed-width form of
:func:`streamjoin.statestore.arrangement.encode_keys`: equal keys have equal codes and every key
one code, so a key's versions are adjacent and in the order a lookup needs. The codes order keys
by no meaning of their values; they only have to be the same in every process, which they are.

A probe (:meth:`SortedVersions.floor`) finds, for each of a batch of (key code, point), the last
row of that key at or before the point: two ``searchsorted`` of the codes give each key's rows,
and a bisection of those rows, a few vectorised steps for all probes at once, the point. No
Python loop runs per row and no hash table is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa

from streamjoin.changes import SEQ, TIME
from streamjoin.runtime.operator import NEG_INF, POS_INF
from streamjoin.statestore.arrangement import encode_keys, widen_keys
from streamjoin.statestore.packed_columns import pack_array

__all__ = ["Order", "SortedVersions", "key_codes", "common_codes", "concat_codes", "AFTER_EVERY_SEQUENCE"]

#: A probe's sequence that every version's sequence at the same change time is at or before.
AFTER_EVERY_SEQUENCE = (1 << 63) - 1


def key_codes(keys: Sequence[pa.Array]) -> np.ndarray:
    """The key code of each row of the key columns ``keys`` (see module): ``int64`` for one
    integer or boolean column, else fixed-width bytes (``S`` values). No key may be null."""
    if len(keys) == 1 and (pa.types.is_integer(keys[0].type) or pa.types.is_boolean(keys[0].type)):
        return np.asarray(keys[0].cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)
    n = len(keys[0]) if keys else 0
    return encode_keys(pack_array(list(keys), n))


def common_codes(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two arrays of key codes in one width (bytes codes are widened; the order is kept), so
    they compare as their keys' codes do."""
    if a.dtype.kind != "S" or a.dtype == b.dtype:
        return a, b
    width = max(a.dtype.itemsize, b.dtype.itemsize) - 4   # (encode_keys adds four bytes of length)
    return (a if a.dtype.itemsize - 4 == width else widen_keys(a, width),
            b if b.dtype.itemsize - 4 == width else widen_keys(b, width))


def concat_codes(codes: Sequence[np.ndarray]) -> np.ndarray:
    """Arrays of key codes (at least one) as one, bytes codes widened once to the widest."""
    if codes[0].dtype.kind != "S" or all(c.dtype == codes[0].dtype for c in codes):
        return np.concatenate(codes)
    width = max(c.dtype.itemsize for c in codes) - 4   # (encode_keys adds four bytes of length)
    return np.concatenate([c if c.dtype.itemsize - 4 == width else widen_keys(c, width) for c in codes])


@dataclass(frozen=True)
class Order:
    """The version order of rows: key code, whether timed (a timeless row first), change time
    (0 where timeless), whether sequenced (a null sequence first), sequence (0 where null)."""

    code: np.ndarray
    timed: np.ndarray
    time: np.ndarray
    sequenced: np.ndarray
    seq: np.ndarray

    @classmethod
    def of(cls, codes: np.ndarray, table: pa.Table) -> Order:
        """The order of ``table``'s rows (versions, with ``codes`` their key codes)."""
        time, seq = table.column(TIME), table.column(SEQ)
        return cls(codes, _valid(time), _values(time), _valid(seq), _values(seq))

    def __len__(self) -> int:
        return len(self.code)

    def take(self, rows: np.ndarray | slice) -> Order:
        """The order of rows ``rows``."""
        return Order(self.code[rows], self.timed[rows], self.time[rows], self.sequenced[rows], self.seq[rows])

    @classmethod
    def joined(cls, orders: Sequence[Order]) -> Order:
        """The orders of ``orders``' rows (at least one), one after another."""
        if len(orders) == 1:
            return orders[0]
        return cls(concat_codes([o.code for o in orders]), np.concatenate([o.timed for o in orders]),
                   np.concatenate([o.time for o in orders]), np.concatenate([o.sequenced for o in orders]),
                   np.concatenate([o.seq for o in orders]))

    def argsort(self) -> np.ndarray:
        """The rows in version order (stable: equal rows keep their order)."""
        return np.lexsort((self.seq, self.sequenced, self.time, self.timed, self.code))

    def same_as_previous(self) -> np.ndarray:
        """Whether each row (in version order) equals the previous one in key, time and sequence."""
        same = np.zeros(len(self), bool)
        if len(self) > 1:
            same[1:] = self.same_key_as_previous()[1:] & _eq(self.timed) & _eq(self.time) \
                & _eq(self.sequenced) & _eq(self.seq)
        return same

    def same_key_as_previous(self) -> np.ndarray:
        """Whether each row has the key of the previous one."""
        same = np.zeros(len(self), bool)
        same[1:] = _eq(self.code)
        return same

    def at_or_before(self, rows: np.ndarray, other: Order, theirs: np.ndarray) -> np.ndarray:
        """Whether each row ``rows[i]`` of this order is at or before row ``theirs[i]`` of
        ``other`` in (timed, time, sequenced, sequence) (the keys are not compared)."""
        a = (self.timed[rows], self.time[rows], self.sequenced[rows], self.seq[rows])
        b = (other.timed[theirs], other.time[theirs], other.sequenced[theirs], other.seq[theirs])
        before, tied = np.zeros(len(rows), bool), np.ones(len(rows), bool)
        for x, y in zip(a, b):
            before |= tied & (x < y)
            tied &= x == y
        return before | tied


def _eq(values: np.ndarray) -> np.ndarray:
    return values[1:] == values[:-1]


def _valid(column: pa.ChunkedArray) -> np.ndarray:
    if column.null_count == 0:
        return np.ones(len(column), bool)
    return np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _values(column: pa.ChunkedArray) -> np.ndarray:
    """The values as int64, 0 where null."""
    if column.null_count == len(column):
        return np.zeros(len(column), np.int64)
    return np.asarray(column.cast(pa.int64()).fill_null(0).to_numpy(), dtype=np.int64)


@dataclass(frozen=True)
class SortedVersions:
    """Versions (``table``) in version order (``order``); see module."""

    table: pa.Table
    order: Order

    @classmethod
    def empty(cls, schema: pa.Schema, codes: np.ndarray) -> SortedVersions:
        return cls(schema.empty_table(), Order.of(codes[:0], schema.empty_table()))

    @classmethod
    def sorted(cls, table: pa.Table, codes: np.ndarray) -> SortedVersions:
        """``table``'s rows (with key codes ``codes``) put in version order."""
        order = Order.of(codes, table)
        rows = order.argsort()
        if rows.size and not bool((rows[1:] > rows[:-1]).all()):
            return cls(table.take(pa.array(rows)), order.take(rows))
        return cls(table, order)

    @classmethod
    def joined(cls, parts: Sequence[SortedVersions]) -> SortedVersions:
        """``parts`` (at least one) as one: each in version order, and every key of a part
        before every key of the next (chunks of a base run), so no sort is needed."""
        if len(parts) == 1:
            return parts[0]
        return cls(pa.concat_tables([p.table for p in parts]).combine_chunks(), Order.joined([p.order for p in parts]))

    @classmethod
    def merged(cls, parts: Sequence[SortedVersions]) -> SortedVersions:
        """The versions of ``parts`` (at least one, each in version order) as one, in version
        order (their keys interleaved)."""
        parts = [p for p in parts if len(p)] or list(parts[:1])
        if len(parts) == 1:
            return parts[0]
        together = cls.joined(parts)
        return together.take(together.order.argsort())

    def __len__(self) -> int:
        return self.table.num_rows

    def slice(self, start: int, stop: int) -> SortedVersions:
        """Rows ``[start, stop)`` (zero-copy)."""
        return SortedVersions(self.table.slice(start, stop - start), self.order.take(slice(start, stop)))

    def take(self, rows: np.ndarray) -> SortedVersions:
        """Rows ``rows`` (ascending, to stay in version order)."""
        return SortedVersions(self.table.take(pa.array(rows)), self.order.take(rows))

    def oldest(self) -> int:
        """The earliest change time held (``NEG_INF`` if a version is timeless; ``POS_INF``: none)."""
        if not len(self):
            return POS_INF
        if not self.order.timed.all():
            return NEG_INF
        return int(self.order.time.min())

    def key_ranges(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each of ``codes``, the rows ``[lo, hi)`` of that key."""
        mine, theirs = common_codes(self.order.code, codes)
        return np.searchsorted(mine, theirs, "left"), np.searchsorted(mine, theirs, "right")

    def floor(self, probes: Order) -> np.ndarray:
        """For each probe, the last row of its key at or before it in (timed, time, sequenced,
        sequence), or -1 where its key has none."""
        lo, hi = self.key_ranges(probes.code)
        first = lo.copy()
        everyone = np.arange(len(probes))
        active = lo < hi
        while active.any():   # bisection: rows [lo, hi) of each probe's key not yet decided
            at = np.flatnonzero(active)
            mid = (lo[at] + hi[at]) // 2
            go = self.order.at_or_before(mid, probes, everyone[at])
            lo[at[go]] = mid[go] + 1
            hi[at[~go]] = mid[~go]
            active[at] = lo[at] < hi[at]
        return np.where(lo > first, lo - 1, -1)

    def rows_of(self, codes: np.ndarray) -> np.ndarray:
        """Every row of the keys ``codes`` (each key once), ascending."""
        lo, hi = self.key_ranges(np.unique(codes))
        counts = hi - lo
        if not counts.sum():
            return np.zeros(0, np.int64)
        starts = np.repeat(lo - np.r_[0, np.cumsum(counts)[:-1]], counts)
        return np.arange(int(counts.sum()), dtype=np.int64) + starts
