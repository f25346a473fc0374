"""Folding deltas into a sorted state, vectorised with Arrow (no Python work per entry).

:func:`compose` turns a run of deltas into one equivalent *net* delta: for every key its last point
write (put or delete) unless a later range delete removed it, sorted by key, plus the union of all
range deletes (which, applied to the older state first, are exactly what the run removes from it).
Applying the net delta to a state equals applying the deltas one by one, because in every delta
range deletes apply first, then deletes, then puts (the :class:`streamjoin.statestore.Store` rule).

:func:`merge` applies a net delta to a stream of sorted (keys, values) chunks of an older state and
yields the new state's sorted chunks, newest value winning. Memory is one chunk of the older state
plus the net delta (bounded by the deltas folded, not by the state).
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changelog.format import BATCH_ROWS, Delta
from streamjoin.statestore.keysort import sort_order

__all__ = ["NetDelta", "compose", "merge"]

_BIN = pa.large_binary()
Chunk = tuple[pa.Array, pa.Array]


class _Keys:
    """A sorted Arrow binary array as a sequence, for :mod:`bisect` (O(log n) scalar reads)."""

    def __init__(self, array: pa.Array) -> None:
        self._array = array

    def __len__(self) -> int:
        return len(self._array)

    def __getitem__(self, index: int) -> bytes:
        return self._array[index].as_py()


@dataclass(frozen=True)
class NetDelta:
    """The net effect of a run of deltas.

    ``keys``: sorted unique keys written; ``is_put``: whether each one's last write is a put (else
    a delete); ``ranges``: disjoint sorted ``[start, end)`` ranges removed from the older state.
    Values stay in the deltas' arrays (``sources``) until asked for: ``rows`` is each key's row in
    their concatenation.
    """

    keys: pa.Array
    is_put: pa.Array
    ranges: tuple[tuple[bytes, bytes], ...]
    rows: pa.Array
    sources: tuple[pa.Array, ...]

    @property
    def entries(self) -> int:
        return len(self.keys) + len(self.ranges)

    @cached_property
    def values(self) -> pa.Array:
        """Each key's value (null for a delete), gathered into one array on first use."""
        return _gather(self.sources, self.rows)

    def puts(self) -> tuple[pa.Array, pa.Array]:
        """The keys and values of the puts alone (one gather, no copy of the deletes)."""
        if pc.all(self.is_put).as_py() is not False:
            return self.keys, self.values
        return self.keys.filter(self.is_put), _gather(self.sources, self.rows.filter(self.is_put))


def compose(deltas: Sequence[Delta]) -> NetDelta:
    """The net delta of ``deltas`` applied in order (see module docstring)."""
    keys, values, flags, position = [], [], [], []
    for index, delta in enumerate(deltas):
        n_del, n_put = len(delta.delete_keys), len(delta.put_keys)
        keys += [delta.delete_keys, delta.put_keys]
        values += [pa.nulls(n_del, _BIN), delta.put_values]
        flags += [pa.repeat(pa.scalar(False), n_del), pa.repeat(pa.scalar(True), n_put)]
        position.append(pa.repeat(pa.scalar(index, pa.int32()), n_del + n_put))
    all_keys = _concat(keys)
    order = pa.array(sort_order(all_keys), pa.int64())  # stable: equal keys keep write order, the last one wins
    sorted_keys = all_keys.take(order)
    n = len(sorted_keys)
    last = pa.concat_arrays([pc.not_equal(sorted_keys.slice(0, n - 1), sorted_keys.slice(1)),
                             pa.array([True])]) if n else pa.array([], pa.bool_())
    rows = order.filter(last)
    net_keys, is_put = sorted_keys.filter(last), _concat(flags, pa.bool_()).take(rows)
    ranges = [(s, e, i) for i, d in enumerate(deltas)
              for s, e in zip(d.range_starts.to_pylist(), d.range_ends.to_pylist()) if s < e]
    if ranges:
        net_position = _concat(position, pa.int32()).take(rows)
        keep = _mask(net_keys, _segments(ranges), lambda lo, hi, newest: pc.greater_equal(
            net_position.slice(lo, hi - lo), newest))
        net_keys, is_put, rows = net_keys.filter(keep), is_put.filter(keep), rows.filter(keep)
    return NetDelta(net_keys, is_put, tuple(_union(ranges)), rows, tuple(values))


def merge(older: Iterable[Chunk] | None, net: NetDelta) -> Iterator[Chunk]:
    """The sorted chunks of ``older`` (sorted chunks, or None for empty) with ``net`` applied."""
    puts = net.is_put
    chunks = (c for c in (older or ()) if len(c[0]))
    current = next(chunks, None)
    if current is None:
        keys, values = net.puts()
        for start in range(0, len(keys), BATCH_ROWS):
            yield keys.slice(start, BATCH_ROWS), values.slice(start, BATCH_ROWS)
        return
    keys = _Keys(net.keys)
    starts = [s for s, _ in net.ranges]
    low = 0
    while current is not None:
        following = next(chunks, None)
        high = len(keys) if following is None else bisect.bisect_left(keys, following[0][0].as_py())
        yield _merge_chunk(current, net, puts, low, high, starts)
        low, current = high, following


def _merge_chunk(
    chunk: Chunk, net: NetDelta, puts: pa.Array, low: int, high: int, starts: list[bytes]
) -> Chunk:
    """One older chunk with the net delta's keys ``[low, high)`` and its ranges applied."""
    keys, values = chunk
    if len(keys) == 0:
        return keys, values
    first, last = keys[0].as_py(), keys[len(keys) - 1].as_py()
    lo_range = max(0, bisect.bisect_right(starts, first) - 1)
    ranges = [r for r in net.ranges[lo_range:bisect.bisect_right(starts, last)] if r[1] > first]
    if ranges:
        drop_all = pa.scalar(False)
        keep = _mask(keys, [(s, e, 0) for s, e in ranges], lambda lo, hi, _: pa.repeat(drop_all, hi - lo))
        keys, values = keys.filter(keep), values.filter(keep)
    if high == low:
        return keys, values
    touched = net.keys.slice(low, high - low)
    keep = pc.invert(pc.is_in(keys, value_set=touched))
    put_mask = puts.slice(low, high - low)
    new_keys = _concat([keys.filter(keep), touched.filter(put_mask)])
    new_values = _concat([values.filter(keep), net.values.slice(low, high - low).filter(put_mask)])
    order = pa.array(sort_order(new_keys), pa.int64())
    return new_keys.take(order), new_values.take(order)


Segment = tuple[bytes, bytes, int]


def _mask(keys: pa.Array, segments: Iterable[Segment],
          inside: Callable[[int, int, int], pa.Array]) -> pa.Array:
    """A keep-mask over sorted ``keys``: True outside the segments, ``inside(lo, hi, tag)`` within.

    ``segments`` are disjoint sorted (start, end, tag); ``inside`` returns a boolean array for the
    index range ``[lo, hi)`` of keys in ``[start, end)``.
    """
    seq = _Keys(keys)
    pieces, done, keep_all = [], 0, pa.scalar(True)
    for start, end, tag in segments:
        lo = bisect.bisect_left(seq, start, done)
        hi = bisect.bisect_left(seq, end, lo)
        if hi > lo:
            pieces += [pa.repeat(keep_all, lo - done), inside(lo, hi, tag)]
            done = hi
    pieces.append(pa.repeat(keep_all, len(keys) - done))
    return pa.concat_arrays(pieces)


def _segments(ranges: list[tuple[bytes, bytes, int]]) -> list[tuple[bytes, bytes, int]]:
    """Split overlapping (start, end, tag) ranges into disjoint sorted pieces, each with the
    largest tag of the ranges covering it (a sweep over the boundaries with a lazy max-heap)."""
    bounds = sorted({b for s, e, _ in ranges for b in (s, e)})
    by_start = sorted(ranges)
    heap: list[tuple[int, bytes]] = []  # (-tag, end)
    out, i = [], 0
    for lo, hi in zip(bounds, bounds[1:]):
        while i < len(by_start) and by_start[i][0] <= lo:
            heapq.heappush(heap, (-by_start[i][2], by_start[i][1]))
            i += 1
        while heap and heap[0][1] <= lo:
            heapq.heappop(heap)
        if heap:
            out.append((lo, hi, -heap[0][0]))
    return out


def _union(ranges: list[tuple[bytes, bytes, int]]) -> list[tuple[bytes, bytes]]:
    """The union of ``[start, end)`` ranges as disjoint sorted ranges."""
    out: list[tuple[bytes, bytes]] = []
    for start, end, _ in sorted(ranges):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _gather(sources: Sequence[pa.Array], rows: pa.Array) -> pa.Array:
    """``rows`` of the concatenation of ``sources``, without building the concatenation."""
    return pa.chunked_array(sources, _BIN).take(rows).combine_chunks()


def _concat(arrays: list[pa.Array], type_: pa.DataType = _BIN) -> pa.Array:
    arrays = [a for a in arrays if len(a)]
    if not arrays:
        return pa.array([], type_)
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
