"""An arranged store's state in two layers: a sorted base mapped from files, and the changes since it in memory.

``Layers`` is what the arranged store reads and writes. Its ``base``
(``streamjoin.statestore.sorted_base.SortedBase``) is memory-mapped and never changes; its
``delta`` is an ``streamjoin.statestore.arrangement.Arrangement`` in the process's memory of every
key written since the base, a deleted key held with a null value (a *tombstone*) when the base has
it. Reads probe both a batch at a time and merge: the delta's entry of a key hides the base's,
a tombstone hides it and is never returned. A write makes new layers with a new delta; the base is
only replaced by ``write_base``, which streams the merge of the two into a new base's files a chunk
at a time, so neither a write nor a merge holds more than the delta and one chunk of the base in
memory. The store decides when to merge (its memory budget, the size of its runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa

from streamjoin.statestore.arrangement import (
    LENGTH_BYTES,
    Arrangement,
    decode_keys,
    interleave,
    key_lengths,
    widen_keys,
)
from streamjoin.statestore.base import KeyValue
from streamjoin.statestore.keycodes import CODE_BYTES, Carried
from streamjoin.statestore.sorted_base import BaseWriter, SortedBase

__all__ = ["Layers", "MERGE_ROWS"]

#: Entries of the base merged (and written) at a time.
MERGE_ROWS = 1 << 17
_SCAN_CHUNK = 65536


@dataclass(frozen=True)
class Layers:
    """A sorted map as a base and a delta over it (see module)."""

    base: SortedBase = field(default_factory=SortedBase.empty)
    delta: Arrangement = field(default_factory=Arrangement.empty)

    @cached_property
    def delta_bytes(self) -> int:
        """Bytes of memory the delta holds (its keys, row ids, value log and search codes, 8
        bytes a key whether made yet or not)."""
        d = self.delta
        return int(d.ekeys.nbytes + d.rows.nbytes + CODE_BYTES * len(d) + sum(chunk.nbytes for chunk in d.log.chunks))

    def _delta_entries(self) -> tuple[np.ndarray, np.ndarray]:
        """Per delta entry, whether it holds a value (not a tombstone), and its key's and value's bytes."""
        d = self.delta
        live, lengths = d.log.lengths(d.rows)
        return live, key_lengths(d.ekeys) + lengths

    @cached_property
    def _live(self) -> tuple[int, int]:
        """(entries, bytes of their keys and values) of the merged map."""
        base, d = self.base, self.delta
        if not len(d):
            return len(base), base.nbytes
        if not len(base):   # no base, so no tombstones
            return len(d) - d.nulls, d.nbytes - d.null_key_bytes
        live, sizes = self._delta_entries()
        at, in_base = base.find_encoded(d.ekeys)
        shadowed = int(key_lengths(base.ekeys[at[in_base]]).sum()) + base.values.sizes(at[in_base]) if in_base.any() else 0
        count = len(base) + int((live & ~in_base).sum()) - int((~live & in_base).sum())
        return count, base.nbytes + int(sizes[live].sum()) - shadowed

    def __len__(self) -> int:
        counted = self.__dict__.get("_counted")   # a whole scan's count (``columns``): no probe
        return counted if counted is not None else self._live[0]

    def stats(self) -> tuple[int, int, bool]:
        """(entries, bytes of their keys and values, exact): exact when one layer is empty,
        else an estimate that needs no probe of the base (a delta entry that replaces a base
        entry counts twice)."""
        base, d = self.base, self.delta
        if not len(d) or not len(base) or "_live" in self.__dict__:
            return (*self._live, True)
        # the delta's counts are kept as it is written (``Arrangement.nulls``): no pass over it
        live = len(d) - d.nulls
        return len(base) + live - d.nulls, base.nbytes + d.nbytes - d.null_key_bytes, False

    @property
    def nbytes(self) -> int:
        return self._live[1]

    # -- reads ------------------------------------------------------------------------------------

    def get_column(self, keys: pa.Array) -> pa.Array:
        """The value of each of ``keys`` (a binary array) as a binary array, null where absent."""
        keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        d = self.delta
        if not len(d) or not len(keys):
            return self.base.get_column(keys)
        at, found = d.find(keys)
        mine = d.log.take(np.where(found, d.rows[np.minimum(at, len(d) - 1)], -1)).cast(pa.binary())
        if found.all():
            return mine
        rest = np.flatnonzero(~found)
        index = np.arange(len(keys))
        index[rest] = len(keys) + np.arange(len(rest))
        return pa.concat_arrays([mine, self.base.get_column(keys.take(pa.array(rest)))]).take(pa.array(index))

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The value of each of ``keys`` (None: absent), in the order given."""
        return self.get_column(pa.array(keys, pa.binary())).to_pylist() if keys else []

    def scan_prefix_columns(self, prefixes: pa.Array) -> tuple[np.ndarray, pa.Array, pa.Array]:
        """The entries under each prefix (a binary array): per prefix their count, and the entries
        of all prefixes, in the order given and key order within one, as binary key and value arrays."""
        prefixes = prefixes.combine_chunks() if isinstance(prefixes, pa.ChunkedArray) else prefixes
        empty = (np.zeros(len(prefixes), np.int64),) * 2
        lo_d, hi_d = self.delta.prefix_bounds(prefixes) if len(self.delta) and len(prefixes) else empty
        return self._merged(*self.base.prefix_bounds(prefixes), lo_d, hi_d)

    def scan_prefixes(self, prefixes: Sequence[bytes]) -> list[list[KeyValue]]:
        """The entries under each prefix, one list per prefix in the order given."""
        return _split(*self.scan_prefix_columns(pa.array(prefixes, pa.binary())))

    def scan_ranges(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> list[list[KeyValue]]:
        """The entries of each ``[start, end)`` range (None: unbounded), one list per range."""
        lo_d, hi_d = self.delta.bounds(ranges) if len(self.delta) else (np.zeros(len(ranges), np.int64),) * 2
        return _split(*self._merged(*self.base.bounds(ranges), lo_d, hi_d))

    def entries(self, start: bytes | None, end: bytes | None, reverse: bool) -> Iterator[KeyValue]:
        """The entries of ``[start, end)`` in key order (descending with ``reverse``), a chunk of
        the base at a time with the delta's entries between its keys."""
        if not len(self.base):   # no base, so no tombstones: the delta's entries as they are
            (dlo,), (dhi,) = self.delta.bounds([(start, end)])
            cuts = list(range(int(dlo), int(dhi), _SCAN_CHUNK))
            for at in (reversed(cuts) if reverse else cuts):
                pairs = self.delta.entries(at, min(at + _SCAN_CHUNK, int(dhi)))
                yield from (reversed(pairs) if reverse else pairs)
            return
        (lo,), (hi,) = self.base.bounds([(start, end)])
        (dlo,), (dhi,) = self.delta.bounds([(start, end)]) if len(self.delta) else ((0,), (0,))
        cuts = list(range(int(lo), int(hi), _SCAN_CHUNK))[1:]
        dcuts = self.delta.find(self.base.keys_at(np.array(cuts, np.int64)))[0].tolist() if cuts and len(self.delta) \
            else [dlo] * len(cuts)
        bounds = list(zip([int(lo), *cuts], [*cuts, int(hi)], [int(dlo), *dcuts], [*dcuts, int(dhi)]))
        for b_lo, b_hi, d_lo, d_hi in (reversed(bounds) if reverse else bounds):
            pairs = _split(*self._merged(*(np.array([x], np.int64) for x in (b_lo, b_hi, d_lo, d_hi))))[0]
            yield from (reversed(pairs) if reverse else pairs)

    def _merged(self, lo_b: np.ndarray, hi_b: np.ndarray, lo_d: np.ndarray, hi_d: np.ndarray
                ) -> tuple[np.ndarray, pa.Array, pa.Array]:
        """Groups of entries, group ``i`` the base's positions ``lo_b[i]:hi_b[i]`` and the delta's
        ``lo_d[i]:hi_d[i]`` merged in key order (the delta's entry of a key hides the base's, a
        tombstone is dropped): per group its count, and the entries as binary keys and values."""
        base, d = self.base, self.delta
        at_b, group_b = _expand(lo_b, hi_b)
        at_d, group_d = _expand(lo_d, hi_d)
        if not len(at_d):
            return hi_b - lo_b, base.keys_at(at_b).cast(pa.binary()), base.values.take(at_b).cast(pa.binary())
        if not len(at_b):   # a tombstone is of a base key in its group: none here
            return (hi_d - lo_d, decode_keys(d.ekeys[at_d]).cast(pa.binary()),
                    d.log.take(d.rows[at_d]).cast(pa.binary()))
        # both sides are in (group, key) order: a delta entry's place is its key's place in the
        # base, moved from the base's positions to its group's among the base entries taken
        mine, theirs = _one_width(base.ekeys[at_b], d.ekeys[at_d])
        place, hides = base.find_encoded(d.ekeys[at_d])
        sizes = hi_b - lo_b
        firsts = np.cumsum(sizes) - sizes
        slot = firsts[group_d] + np.clip(place - lo_b[group_d], 0, sizes[group_d])
        kept_b = np.ones(len(at_b), bool)
        kept_b[slot[hides]] = False   # a base entry the delta's entry of its key hides
        theirs_values = d.log.take(d.rows[at_d]).cast(pa.large_binary())
        live_d = np.asarray(theirs_values.is_valid())   # (a tombstone is dropped)
        before = np.zeros(len(at_b) + 1, np.int64)
        np.cumsum(kept_b, out=before[1:])
        slot_d = before[slot[live_d]] + np.arange(int(live_d.sum()))   # kept base entries before it, live delta entries before it
        keys, from_d = interleave(slot_d, theirs[live_d], mine[kept_b])
        group, _ = interleave(slot_d, group_d[live_d], group_b[kept_b])
        # one gather of the values: the base's taken ones first, the delta's after them
        index, _ = interleave(slot_d, len(at_b) + np.flatnonzero(live_d), np.flatnonzero(kept_b))
        values = pa.concat_arrays([base.values.take(at_b).cast(pa.large_binary()), theirs_values])
        return (np.bincount(group, minlength=len(lo_b)).astype(np.int64), decode_keys(keys).cast(pa.binary()),
                values.take(pa.array(index)).cast(pa.binary()))

    # -- writes -----------------------------------------------------------------------------------

    def applied_columns(self, put_keys: pa.Array, put_values: pa.Array, deletes: pa.Array,
                        delete_ranges: Sequence[tuple[bytes, bytes]] = ()) -> Layers:
        """New layers: these with ``delete_ranges``, then ``deletes``, then ``puts`` applied (a key
        put twice keeps its last value). A deleted key of the base becomes a tombstone."""
        base = self.base
        tombs = [pa.array([], pa.binary())]
        if delete_ranges and len(base):
            lo, hi = base.bounds(list(delete_ranges))
            at = np.concatenate([np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist())])
            tombs.append(base.keys_at(at).cast(pa.binary()))
        drop = deletes.cast(pa.binary())
        if len(drop) and len(base):
            in_base = base.find(drop)[1]
            tombs.append(drop.filter(pa.array(in_base)))
            drop = drop.filter(pa.array(~in_base))
        tomb_keys = pa.concat_arrays(tombs)
        keys = pa.concat_arrays([tomb_keys, put_keys.cast(pa.binary())])
        values = pa.concat_arrays([pa.nulls(len(tomb_keys), pa.binary()), put_values.cast(pa.binary())])
        return Layers(base, self.delta.applied_columns(keys, values, drop, delete_ranges))

    def write_base(self, directory: str, stem: str, sync: bool) -> list[tuple[str, int, int]]:
        """Write the merged map as a new base (``stem`` + the base's suffixes in ``directory``), a
        chunk of the old base at a time with the delta's entries among it; its manifest entries."""
        return self.write_coded_base(directory, stem, sync)[0]

    def write_coded_base(self, directory: str, stem: str, sync: bool) -> tuple[list[tuple[str, int, int]], Carried | None]:
        """``write_base``, and the new base's key codes carried from the old base's (None where
        the old base's codes are not made or cannot take the delta's keys:
        ``streamjoin.statestore.keycodes.KeyIndex.carried``), to ``bind`` to its keys once mapped."""
        index = self.base.made_codes
        trace: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = \
            [] if index is not None and self.base.width == self.delta.width else None
        out = BaseWriter(directory, stem, sync)
        try:
            for keys, values in self._merged_chunks(None, None, trace):
                out.add(keys, values)
            files = out.finish()
        except BaseException:
            out.abort()
            raise
        if index is None or not trace:   # (no trace: nothing left to code)
            return files, None
        kept, added, slots = (np.concatenate([part[i] for part in trace]) for i in range(3))
        return files, index.carried(kept, added, slots)

    def columns(self, start: bytes | None, end: bytes | None) -> Iterator[tuple[pa.Array, pa.Array]]:
        """The entries of ``[start, end)`` (None: unbounded) in key order as ``(keys, values)``
        binary chunks, a chunk of the base at a time with the delta's entries among it. A whole
        scan read to its end leaves its count as the map's length (the layers never change)."""
        counted = 0
        for keys, values in self._merged_chunks(start, end):
            counted += len(keys)
            yield decode_keys(keys), values
        if start is None and end is None:
            self.__dict__["_counted"] = counted

    def _merged_chunks(self, start: bytes | None, end: bytes | None,
                       trace: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
                       ) -> Iterator[tuple[np.ndarray, pa.Array]]:
        """The merged map's live entries of ``[start, end)`` in key order: per chunk of up to
        :data:`MERGE_ROWS` base entries, the encoded keys (at the wider layer's width) and the
        values (large binary), the delta's entries among the base's, its tombstones dropped.
        ``trace``: appended per chunk, the base positions it keeps, the delta keys it adds and
        their positions in the merged map."""
        base, d = self.base, self.delta
        width = max(base.width, d.width)
        (lo,), (hi,) = base.bounds([(start, end)]) if len(base) else ((0,), (0,))
        (d_start,), (d_end,) = d.bounds([(start, end)]) if len(d) else ((0,), (0,))
        lo, hi, d_start, d_end = int(lo), int(hi), int(d_start), int(d_end)
        ekeys = d.ekeys[d_start:d_end]
        theirs = ekeys if d.width == width else widen_keys(ekeys, width)
        values = d.log.take(d.rows[d_start:d_end])
        live = np.asarray(values.is_valid()) if len(ekeys) else np.zeros(0, bool)
        at, found = base.find_encoded(ekeys) if len(ekeys) else (np.zeros(0, np.int64), np.zeros(0, bool))
        hidden = at[found]
        done = 0
        for first in range(lo, max(hi, lo + 1), MERGE_ROWS):
            stop = min(first + MERGE_ROWS, hi)
            d_lo = int(np.searchsorted(at, first, "left"))
            d_hi = len(ekeys) if stop >= hi else int(np.searchsorted(at, stop, "left"))
            keep = np.ones(stop - first, bool)
            keep[hidden[(hidden >= first) & (hidden < stop)] - first] = False
            positions = np.arange(first, stop)[keep]
            chosen = d_lo + np.flatnonzero(live[d_lo:d_hi])
            if not len(chosen) and len(positions) == stop - first and base.width == width and stop > first:
                # the delta has nothing here (a snapshot just after a merge): the base's slices as they are
                if trace is not None:
                    trace.append((positions, theirs[:0], np.zeros(0, np.int64)))
                done += stop - first
                yield base.ekeys[first:stop], base.values.slice(first, stop - first)
                continue
            mine = base.ekeys[positions]
            if base.width != width:
                mine = widen_keys(mine, width)
            total = len(mine) + len(chosen)
            if not total:
                continue
            # a delta key's place among the chunk's kept base keys: those before its place in the
            # base (a base key it hides is not kept), counted once for the chunk
            before = np.zeros(stop - first + 1, np.int64)
            np.cumsum(keep, out=before[1:])
            slots = before[at[chosen] - first] + np.arange(len(chosen))
            keys, _ = interleave(slots, theirs[chosen], mine)
            # one gather of the values: the chunk's base values (the hidden ones among them
            # skipped) and the delta's after them
            index, _ = interleave(slots, (stop - first) + (chosen - d_lo), positions - first)
            both = pa.concat_arrays([base.values.slice(first, stop - first), values.slice(d_lo, d_hi - d_lo)])
            if trace is not None:
                trace.append((positions, theirs[chosen], done + slots))
            done += total
            yield keys, both.take(pa.array(index))


def _expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions ``lo[i]:hi[i]`` of every ``i`` back to back, and each one's ``i``."""
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    starts = np.cumsum(counts) - counts
    return (np.repeat(lo - starts, counts) + np.arange(total)).astype(np.int64), np.repeat(np.arange(len(lo)), counts)


def _one_width(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two arrays of encoded keys at the wider one's width."""
    if a.dtype.itemsize == b.dtype.itemsize:
        return a, b
    width = max(a.dtype.itemsize, b.dtype.itemsize) - LENGTH_BYTES
    return tuple(x if x.dtype.itemsize == width + LENGTH_BYTES else widen_keys(x, width) for x in (a, b))  # type: ignore[return-value]


def _split(counts: np.ndarray, keys: pa.Array, values: pa.Array) -> list[list[KeyValue]]:
    """Per group of ``counts``, its entries as (key, value) pairs."""
    pairs = list(zip(keys.to_pylist(), values.to_pylist()))
    ends = np.cumsum(counts).tolist()
    return [pairs[e - c:e] for c, e in zip(counts.tolist(), ends)]
