"""One version of one partition of the enrichment join in the ``runs`` layout.

The rules, the arrivals, the release of events and the waiting events are those of
:class:`streamjoin.enrichment.step.Step`; what differs is how the versions are held and probed
(:mod:`streamjoin.enrichment.runs`). The order of work:

1. this version's changes in version order (:mod:`streamjoin.enrichment.sorted_versions`); of
   changes equal in key, time and sequence the first in canonical row order is kept, and a
   change equal to a version held is a duplicate (the held one wins): both are counted stale;
2. the versions held of the changed keys (a range of the base and of each of the delta's stacks,
   :func:`streamjoin.enrichment.runs.stacked`) merged with
   the new changes and pruned as the buckets layout prunes (:func:`~streamjoin.enrichment.step.needed_versions`):
   a new change pruning drops is stale, one it keeps is *accepted*;
3. each released event looked up by one probe of the base, each stack and the new changes (the
   newest of them at or before its lookup time; a delete gives no row);
4. the accepted changes written as this version's run (the top stack), or, once the delta and they outgrow
   ``fold_fraction`` of the base (or, with a table TTL, once the oldest version held has expired
   by a slot: :func:`streamjoin.enrichment.runs.expiry_due`), every version still needed written
   as the new base (a fold).

No version pruning would drop is ever needed by a later lookup (see
:mod:`streamjoin.enrichment.step`, "Why versions may stay until their bucket folds": the argument
holds for one bucket as for all of a partition), so folding only at intervals gives every result
that pruning at every version gives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from streamjoin.changes import OP, SEQ, TIME
from streamjoin.enrichment import runs
from streamjoin.enrichment.runs_base import Base
from streamjoin.enrichment.sorted_versions import AFTER_EVERY_SEQUENCE, Order, SortedVersions, concat_codes, key_codes
from streamjoin.enrichment.spec import Mode
from streamjoin.enrichment.step import Step, needed_versions
from streamjoin.kit.order import canonical_order, canonical_sort_keys
from streamjoin.kit.times import times_of
from streamjoin.runtime.operator import POS_INF
from streamjoin.statestore.columns import ColumnWrite

__all__ = ["RunsStep"]


class RunsStep(Step):
    """A :class:`Step` whose versions are held as sorted runs (see module)."""

    def _arrange(self, versions: pa.Table, keys: list[pa.Array]) -> pa.Table:
        """This version's changes in version order (kept as ``self.new``); of equal ones, the
        first in canonical row order first."""
        order = Order.of(key_codes(keys), versions)
        rows = order.argsort()
        if order.take(rows).same_as_previous().any():   # ties: the canonical order decides
            first = [*self.keys, TIME, SEQ]
            ranked = np.asarray(canonical_order(versions, canonical_sort_keys(
                versions.select([*first, *self.spec.values]).schema, first)))
            rows = ranked[order.take(ranked).argsort()]
        schema = self.spec.versions_schema
        table = pa.Table.from_arrays([versions.column(n) for n in schema.names], schema=schema)
        if rows.size > 1 and not bool((rows[1:] > rows[:-1]).all()):   # (a bootstrap comes in key order)
            table, order = table.take(pa.array(rows)), order.take(rows)
        self.new = SortedVersions(table, order)
        return table

    def _released(self) -> pa.Table:
        """The events released in this version: of each file of waiting events, those from the
        previous version's release bound to this one's (a slice: see :mod:`streamjoin.enrichment.runs`;
        a file with none left is removed), and the new ones with time < the bound."""
        spec, bound = self.spec, self.release
        self.runs = runs.RunsCache.of(self.state, spec.versions_schema)
        previous = self._release_bound(self.meta.event_watermark, self.meta.table_watermark, final=False)
        parts, self.waiting_files, released = [], [], 0
        for filed in self.runs.read_waiting(self.state, spec.stream, spec.stream_time):
            part = filed.between(self.state, spec.stream, spec.stream_time, previous, bound)
            if part is not None:
                parts.append(part)
                released += part.num_rows
            if filed.last < bound:   # (none left)
                self.deletes += filed.stored
            else:
                self.waiting_files.append(filed)
        self.meta.events_waiting -= released
        return self._with_new_events(parts)

    def _store_waiting(self) -> None:
        """File the new events that wait as this version's (as_of, not final)."""
        events = self.waiting
        if events.num_rows:
            puts = runs.waiting_puts(self.version, events)
            self.puts += puts
            self.waiting_files.append(runs.Waiting.of(
                self.version, events, times_of(events, self.spec.stream_time), tuple(k for k, _ in puts),
                hold=events.nbytes <= runs.waiting_room(self.waiting_files)))
            self.meta.events_waiting += events.num_rows

    def _commit_caches(self) -> None:
        self.runs.commit(self.version, self.next_held, self.waiting_files)

    def _state_changes(self) -> dict[str, Any]:
        """The version's writes as one column write: the changelog's delta file is then the
        arranged store's run as it is (the runs and files are a few large values)."""
        puts = sorted(self.puts)
        return {"writes": ColumnWrite.of([k for k, _ in puts], [v for _, v in puts], sorted(self.deletes))}

    def _merge(self, released: pa.Table) -> pa.Table:
        """Drop the duplicate new changes, and decide which of the others pruning keeps
        (``self.accepted``: those it keeps and still needs)."""
        self.held = self.runs.read(self.state, self.keys)
        new = self.new
        codes = new.order.code
        if self.held.base.whole is None and released.num_rows:   # (a base read by chunks: these keys' versions)
            codes = concat_codes([codes, key_codes([released.column(k).combine_chunks() for k in self.keys])])
        self.base = self.held.base.of_keys(codes, new.slice(0, 0))
        dup = new.order.same_as_previous()
        for held in (self.base, *self.held.delta):
            if len(held) and len(new):
                at = held.floor(new.order)
                hit = at >= 0
                rows = np.flatnonzero(hit)
                same = held.order.at_or_before(at[rows], new.order, rows) \
                    & new.order.at_or_before(rows, held.order, at[rows])
                dup[rows[same]] = True
        self.metrics["stale_changes"] += int(dup.sum())
        if dup.any():
            kept = np.flatnonzero(~dup)
            new = SortedVersions(new.table.take(pa.array(kept)), new.order.take(kept))
        self.fresh = new
        self.accepted = self._accepted(new)
        return new.table

    def _accepted(self, new: SortedVersions) -> np.ndarray:
        """Which rows of ``new`` (no duplicates) pruning, with every version held of their keys,
        keeps and still needs; the others are counted stale."""
        if not len(new):
            return np.zeros(0, bool)
        parts = [new.table.select([*self.keys, OP, TIME])]
        orders, flags = [new.order], [np.ones(len(new), bool)]
        for held in (self.base, *self.held.delta):
            rows = held.rows_of(new.order.code) if len(held) else np.zeros(0, np.int64)
            if rows.size:
                parts.append(held.table.select([*self.keys, OP, TIME]).take(pa.array(rows)))
                orders.append(held.order.take(rows))
                flags.append(np.zeros(rows.size, bool))
        is_new = np.concatenate(flags)
        if len(parts) == 1:
            together, ranked = parts[0], None
        else:
            ranked = Order.joined(orders).argsort()
            together = pa.concat_tables(parts).take(pa.array(ranked))
            is_new = is_new[ranked]
        keep_to, gone_before = self._keep_bounds()
        keep, needed = needed_versions(together, self.keys, keep_to, gone_before, self.expire_before)
        self.metrics["stale_changes"] += int((is_new & ~keep).sum())
        accepted = np.zeros(len(new), bool)
        if ranked is None:
            accepted[:] = needed
        else:
            accepted[ranked[is_new]] = needed[is_new]
        return accepted

    def _lookup(self, released: pa.Table, versions: pa.Table) -> None:
        """Join each released event with its key's last version at or before its lookup time,
        among the base, the delta and this version's new changes."""
        n = released.num_rows
        if n == 0:
            return
        at = times_of(released, self.spec.stream_time) if self.spec.mode is Mode.AS_OF else np.full(n, POS_INF)
        codes = key_codes([released.column(k).combine_chunks() for k in self.keys])
        ranked = np.argsort(codes, kind="stable")   # probes in key order search the columns in one sweep
        probes = Order(codes[ranked], np.ones(n, bool), np.asarray(at, np.int64)[ranked], np.ones(n, bool),
                       np.full(n, AFTER_EVERY_SEQUENCE, np.int64))
        sources = [s for s in (self.base, *self.held.delta, self.fresh) if len(s)]
        best_source, best_row = np.full(n, -1), np.full(n, -1)
        for i, source in enumerate(sources):
            row = source.floor(probes)
            hit = np.flatnonzero(row >= 0)
            better = hit
            held = np.flatnonzero(best_source[hit] >= 0)
            if held.size:   # a later source's version wins where it is after the best so far
                rows = hit[held]
                after = np.ones(hit.size, bool)
                after[held] = _after(source, row[rows], sources, best_source[rows], best_row[rows])
                better = hit[after]
            best_source[better], best_row[better] = i, row[better]
        found = np.full(n, -1, np.int64)
        gathered = []
        offset = 0
        columns = [OP, TIME, *self.spec.values]
        for i, source in enumerate(sources):
            mine = np.flatnonzero(best_source == i)   # (in key order: the rows taken ascend within a key)
            if mine.size:
                gathered.append(source.table.select(columns).take(pa.array(best_row[mine])))
                found[ranked[mine]] = offset + np.arange(mine.size)
                offset += mine.size
        versions = pa.concat_tables(gathered) if gathered else self.spec.versions_schema.empty_table().select(columns)
        self._output(released, found, at, versions)

    def _prune_and_store(self, versions: pa.Table) -> None:
        """Write the accepted changes as this version's run, or fold (see module)."""
        accepted = self.fresh
        if not self.accepted.all():
            accepted = accepted.take(np.flatnonzero(self.accepted))
        base, delta = self.held.base, self.held.delta
        beside = sum(map(len, delta)) + len(accepted)
        expiring = self.spec.ttl is not None and runs.expiry_due(
            min(base.oldest(), accepted.oldest(), *(d.oldest() for d in delta)), self.expire_before, self.spec.ttl)
        large = beside and sum(d.table.nbytes for d in delta) + accepted.table.nbytes > runs.memory_budget() // 4
        if expiring or large or beside > max(self.spec.fold_fraction * len(base), runs.MIN_FOLD_ROWS):
            self._fold_all(accepted)
            return
        stored = self.held.stored
        if len(accepted):
            puts = runs.run_puts(self.version, accepted.table)
            self.puts += puts
            stored += tuple(k for k, _ in puts)
            delta = runs.stacked(delta, accepted)
        self.meta.versions_held = len(base) + sum(map(len, delta))
        self.next_held = runs.Held(base, delta, stored)

    def _fold_all(self, accepted: SortedVersions) -> None:
        """Write every version still needed (base, delta and ``accepted``) as this version's base
        run, in place of every earlier run: a base chunk at a time, each merged with the delta's
        and ``accepted``'s versions of its keys (every key's versions are in one chunk)."""
        base, delta = self.held.base, self.held.delta
        budget = runs.base_budget()
        builder = runs.BaseBuilder(self.version, budget if base.whole is not None or not len(base) else -1)
        if not len(base) and not delta:   # nothing held: the accepted changes were pruned with every version there is
            builder.add(accepted)
        else:
            beside = SortedVersions.merged([*delta, accepted])
            if not len(base.index):
                builder.add(self._needed(beside))
            else:
                owners = base.index.owners(beside.order.code)   # (ascending: ``beside`` is in key order)
                cuts = np.searchsorted(owners, np.arange(len(base.index) + 1), "left")
                for i, chunk in enumerate(base.chunks()):
                    builder.add(self._needed(SortedVersions.merged([chunk, beside.slice(int(cuts[i]), int(cuts[i + 1]))])))
        self.deletes += self.held.stored
        puts, index, whole = builder.finish()
        self.puts += puts
        self.meta.versions_held = int(index.rows.sum())
        empty = accepted.slice(0, 0)
        if whole is not None or not len(index):
            held = Base.held(whole if whole is not None else empty, index)
        else:
            held = runs.stored_base(self.state, self.spec.versions_schema, self.keys, self.version, index, -1)
        self.next_held = runs.Held(held, (), tuple(k for k, _ in puts))

    def _needed(self, versions: SortedVersions) -> SortedVersions:
        """The versions of ``versions`` (every version held of their keys) still needed."""
        if not len(versions):
            return versions
        keep_to, gone_before = self._keep_bounds()
        _, needed = needed_versions(versions.table.select([*self.keys, OP, TIME]), self.keys, keep_to, gone_before,
                                    self.expire_before)
        return versions if needed.all() else versions.take(np.flatnonzero(needed))


def _after(source: SortedVersions, rows: np.ndarray, sources: list[SortedVersions], best_source: np.ndarray,
           best_row: np.ndarray) -> np.ndarray:
    """Whether row ``rows[i]`` of ``source`` is after row ``best_row[i]`` of source
    ``best_source[i]`` (same key; no two versions held are equal)."""
    out = np.zeros(rows.size, bool)
    for j, other in enumerate(sources):
        mine = np.flatnonzero(best_source == j)
        if mine.size:
            out[mine] = ~source.order.at_or_before(rows[mine], other.order, best_row[mine])
    return out
