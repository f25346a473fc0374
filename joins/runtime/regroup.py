"""Splitting an operator's state by key group: what an operator's ``regroup`` hook is given.

When a checkpoint is restarted with another partition count (:mod:`streamjoin.runtime.rescale`),
each new partition's state is built from the old partitions whose key groups overlap its own:
the runtime restores each of them (as of the version before the new layout's first one) into a
store and calls :meth:`streamjoin.runtime.operator.Operator.regroup` with those stores and an
:class:`Ownership` that tells which rows are the new partition's. The hook returns the new
partition's entries, in ascending key order, such that running on from them gives the output a
run that never changed its partition count gives. It may rewrite entries (merge blobs of several
old partitions under one key, renumber row ids, recount totals); it never writes the sources.

:func:`regroup_packed` is the hook's body for areas keyed ``prefix | pack(routing key, ...)``,
whose entries each belong to the key group of their leading key values.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from streamjoin.runtime.areas import Area
from streamjoin.runtime.keygroups import key_groups, owners, values_table
from streamjoin.statestore.base import KeyValue, Store
from streamjoin.statestore.codecs import unpack

__all__ = ["Ownership", "regroup_packed", "merged_scan"]


@dataclass(frozen=True)
class Ownership:
    """Partition ``partition`` of ``partitions`` over ``groups`` key groups, whose keys are
    routed in ``types`` (one per key column, :func:`streamjoin.runtime.keygroups.routing_types`)."""

    groups: int
    partition: int
    partitions: int
    types: tuple[pa.DataType, ...]

    def rows(self, table: pa.Table, key: Sequence[str]) -> np.ndarray:
        """Whether each row of ``table`` (its ``key`` columns, in the routing key's order) is owned."""
        kg = key_groups(table, key, self.groups, self.types)
        return owners(kg, self.partitions, self.groups) == self.partition

    def values(self, keys: Sequence[Sequence[object]]) -> np.ndarray:
        """Whether each tuple of key values (Python values, as ``unpack`` gives them) is owned."""
        if not keys:
            return np.zeros(0, dtype=bool)
        table = values_table(keys, self.types)
        return self.rows(table, table.column_names)


def merged_scan(sources: Sequence[Store], start: bytes, end: bytes) -> Iterator[tuple[int, bytes, bytes]]:
    """(source index, key, value) of every entry in ``[start, end)`` of every source, in key order
    (equal keys: by source index)."""
    scans = [_tagged(i, store.scan(start, end)) for i, store in enumerate(sources)]
    for key, i, value in heapq.merge(*scans):
        yield i, key, value


def _tagged(index: int, entries: Iterator[KeyValue]) -> Iterator[tuple[bytes, int, bytes]]:
    for key, value in entries:
        yield key, index, value


def regroup_packed(
    sources: Sequence[Store], areas: Iterable[Area], width: int, owned: Ownership, batch: int = 65536,
    skip: int = 0,
) -> list[KeyValue]:
    """The entries of ``areas`` (keys ``prefix | <skip bytes> | pack(values...)``) whose first
    ``width`` packed values (the routing key) are in an owned key group, from every source, in key
    order. A key found in two sources keeps the first source's value (old partitions never share a
    key group, so a routing key is in one of them only)."""
    out: list[KeyValue] = []
    for area in areas:
        cut = len(area.prefix) + skip
        pending: list[KeyValue] = []
        last = None
        for _, key, value in merged_scan(sources, area.prefix, area.end):
            if key == last:
                continue
            last = key
            pending.append((key, value))
            if len(pending) >= batch:
                out.extend(_keep(pending, cut, width, owned))
                pending = []
        out.extend(_keep(pending, cut, width, owned))
    return out


def _keep(entries: list[KeyValue], cut: int, width: int, owned: Ownership) -> list[KeyValue]:
    if not entries:
        return []
    mask = owned.values([unpack(key[cut:])[:width] for key, _ in entries])
    return [entry for entry, keep in zip(entries, mask) if keep]
