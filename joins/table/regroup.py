"""Splitting the table-table join's state by key group (:mod:`streamjoin.runtime.regroup`).

Both stages key every entry by the values they are routed by: stage 1 (``TableRekey``)
by primary key (``K | pack(primary key)``, and its retention's expiry index
``T | change time | pack(primary key)``), stage 2 (``TableJoinStage``) by join key
(``L``/``R`` ``| pack(join key, primary key)``); so a new partition keeps the entries whose
leading values fall in its key groups, unchanged. Stage 2's count of rows held per side is
counted again over the entries kept. A key stage whose changes are routed by join key (fused into
stage 2 for a side whose join key never changes: :func:`streamjoin.table.fused.fusable`) keeps
its entries by the join key its values hold, and its expiry index with the keys it indexes.
"""

from __future__ import annotations

from typing import Sequence

from streamjoin.runtime.areas import StateLayout
from streamjoin.runtime.regroup import Ownership, merged_scan, regroup_packed
from streamjoin.statestore.base import KeyValue, Store
from streamjoin.statestore.codecs import unpack

__all__ = ["regroup_keys", "regroup_keys_by_join_key", "regroup_stage"]


def regroup_keys(layout: StateLayout, width: int, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
    """Stage 1's entries of the owned key groups (``width``: the primary key's columns): its keys,
    and the expiry index (whose keys hold an 8-byte change time before the primary key)."""
    kept = regroup_packed(sources, (layout["keys"],), width, owned)
    kept += regroup_packed(sources, (layout["expiry"],), width, owned, skip=8)
    return sorted(kept)


def regroup_keys_by_join_key(layout: StateLayout, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
    """Stage 1's entries of the owned key groups when its changes are routed by join key: a key
    whose value's join key (``pack(change time, sequence, has row, *join key)``, a deleted key's
    too) is owned, and the expiry-index entries of the keys kept."""
    keys, expiry = layout["keys"], layout["expiry"]
    entries: list[KeyValue] = []
    last = None
    for _, key, value in merged_scan(sources, keys.prefix, keys.end):
        if key != last:
            entries.append((key, value))
            last = key
    mask = owned.values([unpack(value)[3:] for _, value in entries])
    kept = [entry for entry, keep in zip(entries, mask) if keep]
    cut = len(keys.prefix)
    pks = {key[cut:] for key, _ in kept}
    at = len(expiry.prefix) + 8
    last = None
    for _, key, value in merged_scan(sources, expiry.prefix, expiry.end):
        if key != last and key[at:] in pks:
            kept.append((key, value))
        last = key
    return sorted(kept)


def regroup_stage(layout: StateLayout, width: int, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
    """Stage 2's entries of the owned key groups (``width``: the join key's columns), with the
    rows held per side counted over them."""
    sides = (layout["left"], layout["right"])
    kept = regroup_packed(sources, sides, width, owned)
    counts = [sum(1 for key, _ in kept if key.startswith(area.prefix)) for area in sides]
    held = layout["held"]
    if any(held.get(s) is not None for s in sources):
        kept.append(held.put(tuple(counts)))
    return sorted(kept)
