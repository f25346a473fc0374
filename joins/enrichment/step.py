"""One version of one partition of the enrichment join (the rules are in :mod:`streamjoin.enrichment.operator`).

The order of work: watermarks; sort out the new events and changes; decide which events are
released (new ones and waiting ones); read the key buckets of the new changes and the released
events (base and deltas, plus one bucket swept per version and, with a table TTL, the buckets
the expiry index names); take the versions of the keys this
version needs (those of the new changes and the released events) and merge the changes into them;
look the released events up (one Arrow hash join on the key columns with ``change time <= lookup
time``, then the greatest version per event); decide which versions are no longer needed; write
each touched bucket's accepted changes as a delta, or fold the bucket into a new base; write the
events still waiting. No Python loop runs per row; loops run per touched bucket (or per waiting
blob read). Buckets and waiting events come from the store's :class:`~streamjoin.enrichment.cache.BucketCache`
where it holds them (what the previous version read or wrote, decoded), else from the store.

**Why versions may stay until their bucket folds.** Pruning keeps, per key, the newest version
``<= keep_to`` (``min(ew, release bound)``, never decreasing) and every later one, and drops a key
whose one version left is a delete older than ``tw``. Every event looked up from now on has a
lookup time ``>= keep_to`` (new events are not late, waiting ones were not released), so a version
pruned away is older than a kept one at or before every later lookup time: the lookup (the newest
version ``<=`` its time) never picks it. A lone delete ``d`` kept past its drop: a later lookup
finds ``d`` (a delete: no row, as with no version), a later change, or nothing (``d > keep_to``
then, so the key has no older version). Pruning composes (keeping the newest ``<= k`` then the
newest ``<= k' >= k`` is keeping the newest ``<= k'``), so pruning at fold time gives what pruning
every version would have (with a TTL, also the drop of a kept version older than
``expire_before``, which every later lookup finds expired), and a new change is stale (a version newer than it is ``<= keep_to``)
or a duplicate exactly as it would be against eagerly pruned versions, with one exception: a new
change older than ``expire_before`` of the previous version (every version that old has left an
eagerly pruned state, while a lazy one may still hold a newer one it is stale against) is expired
for every lookup from now on, so it is dropped on arrival and counted as ``expired_changes``
whatever the folding. The tests of
``tests/joins/enrichment/test_folding.py`` check this against folding every touched bucket in
every version.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changes import DELETE, HEARTBEAT, OP, SEQ, TIME, normalise
from streamjoin.enrichment import state as st
from streamjoin.enrichment.cache import BucketCache
from streamjoin.enrichment.spec import EnrichmentSpec, Mode
from streamjoin.kit.arrivals import set_aside, sort_out
from streamjoin.kit.how import How
from streamjoin.kit.order import ascending, canonical_sort_keys, sort_canonically
from streamjoin.kit.times import times_of
from streamjoin.runtime.evolution import as_schema
from streamjoin.runtime.operator import NEG_INF, POS_INF, StepInput, StepResult, conform
from streamjoin.statestore.base import KeyValue, Store

__all__ = ["Step", "release_bound", "needed_versions"]

_NEW, _BUCKET = "__sj_new", "__sj_bucket"


def _minus(value: int | None, amount: int) -> int:
    return NEG_INF if value is None else max(value - amount, NEG_INF)


class Step:
    """One version of one partition: collects the output, the writes and the metrics."""

    def __init__(self, spec: EnrichmentSpec, state: Store, batch: StepInput) -> None:
        self.spec, self.state, self.version, self.final = spec, state, batch.version, batch.final
        self.meta = st.read_meta(state)
        self.ew = max(self.meta.event_watermark, _minus(batch.max_times[0], spec.stream_delay))
        self.tw = max(self.meta.table_watermark, _minus(batch.max_times[1], spec.table_delay))
        self.release = self._release_bound()
        self.expire_before = self._expire_before(self.ew, self.tw, self.release)
        # what an eagerly pruned state would have dropped by the end of the previous version
        before = self.meta.event_watermark, self.meta.table_watermark
        self.expired_earlier = self._expire_before(*before, self._release_bound(*before, final=False))
        self.keys = spec.keys
        self.metrics: Counter[str] = Counter()
        self.puts: list[KeyValue] = []
        self.deletes: list[bytes] = []
        self.delete_ranges: list[tuple[bytes, bytes]] = []
        self.output: list[pa.Table] = []
        self.events, self.event_aside = self._events(batch.rows[0])
        self.changes, self.change_aside = self._changes(batch.rows[1])

    def _release_bound(self, ew: int | None = None, tw: int | None = None, final: bool | None = None) -> int:
        """Events with time ``< bound`` are released in this version (or with watermarks ``ew``, ``tw``)."""
        ew, tw = self.ew if ew is None else ew, self.tw if tw is None else tw
        if (self.final if final is None else final) or self.spec.mode is Mode.LATEST:
            return POS_INF
        return release_bound(ew, tw, self.spec.grace)

    def _expire_before(self, ew: int, tw: int, release: int) -> int:
        """A key's newest version ``<= keep_to`` older than this has expired for every later lookup
        (docs/design/semantics.md "Enrichment", Table TTL); NEG_INF without a TTL."""
        ttl = self.spec.ttl
        if ttl is None:
            return NEG_INF
        bound = tw if self.spec.mode is Mode.LATEST else min(ew, release)
        return bound if bound in (NEG_INF, POS_INF) else _minus(bound, ttl)

    def run(self) -> StepResult:
        released = self._released()
        versions = self._merge(released)
        self._lookup(released, versions)
        self._prune_and_store(versions)
        self._store_waiting()
        self.meta.event_watermark = POS_INF if self.final else self.ew
        self.meta.table_watermark = POS_INF if self.final else self.tw
        self.puts.append(st.meta_put(self.meta))
        self._commit_caches()
        output = pa.concat_tables(self.output) if self.output else self.spec.output_schema.empty_table()
        return StepResult(output, (self.event_aside, self.change_aside), metrics=self._metrics(),
                          **self._state_changes())

    def _state_changes(self) -> dict[str, Any]:
        """The version's state changes, as :class:`StepResult` takes them."""
        return {"puts": self.puts, "deletes": self.deletes, "delete_ranges": self.delete_ranges}

    def _commit_caches(self) -> None:
        """Tell the store's cache what this version wrote (:meth:`BucketCache.commit`)."""
        self.cache.waiting_written(self.waiting_removed, self.waiting_writes)
        self.cache.commit(self.version)

    # -- arrivals --------------------------------------------------------------------------------

    def _events(self, table: pa.Table) -> tuple[pa.Table, pa.Table]:
        """This version's events to join (canonical order, join key columns added) and those set aside."""
        spec = self.spec
        found = sort_out(table, schema=spec.stream, name="stream", order=spec.event_sort, time=spec.stream_time,
                         key=spec.stream_key, watermark=self.ew, heartbeats=spec.heartbeats)
        counts = found.counts()
        self.metrics.update(null_time_events=counts["null_time"], late_events=counts["late"],
                            null_key_events=counts["null_key"], heartbeat_events=counts["heartbeat"])
        if spec.how is How.LEFT and found.null_key.any():
            self._emit(found.table.filter(pa.array(found.null_key)), np.full(counts["null_key"], -1), None)
        aside = found.aside(keyless_kept=spec.how is How.LEFT)
        return self._with_keys(found.table.filter(pa.array(found.keep))), aside

    def _with_keys(self, events: pa.Table) -> pa.Table:
        """``events`` (in the stream's schema) with the join key columns appended."""
        keys = st.key_columns(events, self.spec.stream_key, self.spec.key_types)
        for name, values in zip(self.keys, keys):
            events = events.append_column(name, values)
        return events

    def _changes(self, table: pa.Table) -> tuple[pa.Table, pa.Table]:
        """This version's changes as versions (canonical order), and the rows set aside."""
        spec = self.spec
        table = conform(table, spec.table, "table")
        parsed = normalise(table, spec.changes, timeless_snapshots=True)
        changes = parsed.changes
        ops = changes.column(OP).to_numpy()
        timeless, times = _change_times(changes)
        late = np.where(timeless, self.tw > NEG_INF, times < self.tw) & (ops != HEARTBEAT)
        late_aside = set_aside(table.take(pa.array(parsed.index[late], pa.int64())),
                               [(np.ones(int(late.sum()), dtype=bool), "late change")])
        self.metrics.update({f"changes_{k}": v for k, v in parsed.counts.items()})
        self.metrics["late_changes"] = int(late.sum())
        # older than everything an eagerly pruned state still holds: expired for every event looked
        # up from now on, and stale or not depending on versions only a lazily folded state still
        # has, so counted on its own whatever the folding (see module)
        expired = ~late & (ops != HEARTBEAT) & (timeless | (times < self.expired_earlier)) \
            if self.expired_earlier > NEG_INF else np.zeros(len(ops), dtype=bool)
        if spec.ttl is not None:
            self.metrics["expired_changes"] = int(expired.sum())
        changes = changes.filter(pa.array(~late & ~expired & (ops != HEARTBEAT)))
        keys = st.key_columns(changes, spec.changes.key, spec.key_types)
        versions = changes.drop_columns(list(spec.changes.key))
        for i, (name, values) in enumerate(zip(self.keys, keys)):
            versions = versions.add_column(i, name, values)
        aside = pa.concat_tables([parsed.aside, late_aside]) if late_aside.num_rows else parsed.aside
        return self._arrange(versions, keys), aside

    def _arrange(self, versions: pa.Table, keys: list[pa.Array]) -> pa.Table:
        """This version's changes as versions (``keys``: their key columns), marked new, with
        their key bucket, in canonical order by bucket first."""
        versions = versions.append_column(_NEW, pa.repeat(pa.scalar(True), versions.num_rows))
        versions = versions.append_column(_BUCKET, pa.array(st.bucket_ids(keys, self.spec.buckets), pa.int64()))
        first = [_BUCKET, *self.keys, TIME, SEQ]
        return sort_canonically(versions, canonical_sort_keys(versions.select([*first, *self.spec.values]).schema, first))

    def _released(self) -> pa.Table:
        """The events released in this version: waiting ones and new ones with time < the bound.

        A waiting blob whose time bucket lies wholly below the bound is released as it is (the
        blobs up to the last such one go in one range delete); only blobs of the bucket the bound
        cuts are filtered and the rest written back.
        """
        spec, bound, width = self.spec, self.release, self.spec.event_bucket
        parts, released, last_whole = [], 0, None
        self.cache = BucketCache.of(self.state, self.spec.versions_schema)
        self.waiting_writes: dict[bytes, tuple[pa.Table, int] | None] = {}
        for key, stored in self.cache.waiting_below(self.state, bound, width):
            events = as_schema(stored, spec.stream)   # stored under an earlier schema of the stream
            if st.event_start(key) + width <= bound:
                parts.append(events)
                released += events.num_rows
                last_whole = key
                continue
            go = times_of(events, spec.stream_time) < bound
            parts.append(events.filter(pa.array(go)))
            rest = events.filter(pa.array(~go))
            if rest.num_rows:
                value = st.blob(rest)
                self.puts.append((key, value))
                self.waiting_writes[key] = rest, len(value)
            else:
                self.deletes.append(key)
                self.waiting_writes[key] = None
            released += int(go.sum())
        if last_whole is not None:
            self.delete_ranges.append(st.waiting_through(last_whole))
        self.waiting_removed = None if last_whole is None else st.waiting_through(last_whole)
        self.meta.events_waiting -= released
        return self._with_new_events(parts)

    def _with_new_events(self, waited: list[pa.Table]) -> pa.Table:
        """The events released: ``waited`` (waiting ones released, in the stream's schema) and
        this version's new events with time < the bound, in canonical order; the other new events
        are left in ``self.waiting`` to be filed."""
        spec = self.spec
        parts = [self._with_keys(pa.concat_tables(waited))] if waited else []
        new_go = times_of(self.events, spec.stream_time) < self.release
        self.waiting = self.events.filter(pa.array(~new_go)).drop_columns(self.keys)
        table = pa.concat_tables([*parts, self.events.filter(pa.array(new_go))])
        if not self.final and spec.grace is not None:
            self.metrics["released_by_grace"] = int((times_of(table, spec.stream_time) >= self.tw).sum())
        return sort_canonically(table, spec.event_sort)

    # -- versions --------------------------------------------------------------------------------

    def _merge(self, released: pa.Table) -> pa.Table:
        """The versions held of the keys of the new changes and released events, merged with the
        new changes, duplicates dropped; with their bucket, sorted by bucket, key, time, sequence
        (so a key's versions are together, in time order, and a bucket's rows are in the order
        its blobs keep them).

        Reads every touched bucket (base and deltas, kept in ``self.stored`` for folding) through
        the store's :class:`BucketCache` (told what this version writes).
        """
        spec, schema = self.spec, self.spec.versions_schema
        change_keys = [self.changes.column(k).combine_chunks() for k in self.keys]
        event_keys = [released.column(k).combine_chunks() for k in self.keys]
        new_buckets = self.changes.column(_BUCKET).to_numpy()
        event_buckets = st.bucket_ids(event_keys, spec.buckets)
        self.sweep = self.version % spec.buckets   # every bucket folds at least once per `buckets` versions
        self.due = self._due_buckets()
        touched = np.union1d(np.union1d(new_buckets, event_buckets), [self.sweep, *self.due]).tolist()
        self.stored = self.cache.read(self.state, touched)
        held = _with_buckets([(b, t) for b, stored in self.stored.items() for t in stored.tables()], schema)
        held = _with_keys_in(held, self.keys, [pa.concat_arrays([c, e]) for c, e in zip(change_keys, event_keys)])
        if held.num_rows:
            held = held.append_column(_NEW, pa.array(np.zeros(held.num_rows, dtype=bool)))
            merged = pa.concat_tables([held, self.changes.select(held.schema.names)]).combine_chunks()
            merged = merged.take(pc.sort_indices(merged, sort_keys=ascending(_BUCKET, *self.keys, TIME, SEQ, _NEW)))
        else:   # nothing held of these keys: the changes are in that order already (a bootstrap's load)
            merged = self.changes.combine_chunks()
        dup = _same_as_previous(merged, [*self.keys, TIME, SEQ])
        self.metrics["stale_changes"] += int(dup.sum())
        return merged.filter(pa.array(~dup)) if dup.any() else merged

    def _due_buckets(self) -> set[int]:
        """The key buckets the expiry index names as holding expired versions (to fold now);
        their index entries are removed."""
        if self.spec.ttl is None:
            return set()
        due, bounds = st.due_buckets(self.state, self.expire_before, st.slot_width(self.spec.ttl))
        if bounds is not None:
            self.delete_ranges.append(bounds)
        return set(due)

    def _lookup(self, released: pa.Table, versions: pa.Table) -> None:
        """Join each released event with its key's last version at or before its lookup time."""
        if released.num_rows == 0:
            return
        at = times_of(released, self.spec.stream_time) if self.spec.mode is Mode.AS_OF else np.full(released.num_rows, POS_INF)
        found = np.full(released.num_rows, -1, dtype=np.int64)
        if versions.num_rows:
            events = released.select(self.keys).append_column("__t", pa.array(at)).append_column(
                "__ei", pa.array(np.arange(released.num_rows)))
            table = versions.select([*self.keys, TIME]).append_column("__vi", pa.array(np.arange(versions.num_rows)))
            at_or_before = pc.field(TIME).is_null() | (pc.field(TIME) <= pc.field("__t"))   # null: timeless
            joined = events.join(table, self.keys, join_type="inner", use_threads=False,
                                 filter_expression=at_or_before)
            best = joined.group_by("__ei", use_threads=False).aggregate([("__vi", "max")])
            found[best.column("__ei").to_numpy()] = best.column("__vi_max").to_numpy()
        self._output(released, found, at, versions)

    def _output(self, released: pa.Table, found: np.ndarray, at: np.ndarray, versions: pa.Table) -> None:
        """Output ``released`` (their lookup times ``at``), each with version ``found[i]`` of
        ``versions`` (-1: none): a delete or an expired version gives no row."""
        deleted = found >= 0
        deleted[deleted] = versions.column(OP).to_numpy()[found[deleted]] == DELETE
        found[deleted] = -1
        self._expire(found, at, versions)
        self.metrics["matched"] += int((found >= 0).sum())
        self._emit(released.drop_columns(self.keys), found, versions)

    def _expire(self, found: np.ndarray, at: np.ndarray, versions: pa.Table) -> None:
        """Set ``found`` to -1 where the version found has expired (as_of: change time ``< at -
        ttl``; latest: ``< tw - ttl``); count those an eagerly pruned state would still hold."""
        ttl = self.spec.ttl
        if ttl is None:
            return
        # reported whenever events are looked up, even as 0: whether the state still holds a
        # version to find (it may fold late) must not change which metrics a step reports
        self.metrics["expired_lookups"] += 0
        if not (found >= 0).any():
            return
        hit = np.flatnonzero(found >= 0)
        timeless, times = _change_times(versions.select([TIME]).take(pa.array(found[hit])))
        times = np.where(timeless, NEG_INF, times)
        if self.spec.mode is Mode.AS_OF:
            limit = np.maximum(at[hit], NEG_INF + ttl) - ttl
        else:
            limit = np.full(hit.size, _minus(self.tw, ttl) if self.tw != POS_INF else POS_INF)
        expired = times < limit
        self.metrics["expired_lookups"] += int((expired & (times >= self.expired_earlier)).sum())
        found[hit[expired]] = -1

    def _emit(self, events: pa.Table, found: np.ndarray, versions: pa.Table | None) -> None:
        """Output rows: ``events`` with version ``found[i]`` (-1: none) of ``versions``."""
        if self.spec.how is How.INNER:
            events, found = events.filter(pa.array(found >= 0)), found[found >= 0]
        index = pa.array(found, pa.int64(), mask=found < 0)
        arrays = [events.column(n) for n in self.spec.stream.names]
        for name in self.spec.values:
            kind = self.spec.internal.field(name).type
            arrays.append(pa.nulls(len(found), kind) if versions is None else versions.column(name).take(index))
        self.output.append(pa.Table.from_arrays(arrays, schema=self.spec.output_schema))

    def _keep_bounds(self) -> tuple[int, int]:
        """(keep_to, gone_before): a key keeps its newest version <= keep_to and every later one;
        a key whose one version left is a delete older than gone_before is dropped."""
        keep_to = POS_INF if self.final or self.spec.mode is Mode.LATEST else min(self.ew, self.release)
        return keep_to, POS_INF if self.final else self.tw

    def _prune_and_store(self, versions: pa.Table) -> None:
        """Count the stale new changes; write each touched bucket's accepted changes as a delta,
        or fold the bucket when its deltas and the versions seen to be no longer needed are many."""
        keep_to, gone_before = self._keep_bounds()
        keep, needed = needed_versions(versions, self.keys, keep_to, gone_before, self.expire_before)
        new = versions.column(_NEW).to_numpy(zero_copy_only=False)
        self.metrics["stale_changes"] += int((new & ~keep).sum())
        buckets = versions.column(_BUCKET).to_numpy()
        touched = np.array(list(self.stored), dtype=np.int64)
        accepted = new & needed
        new_rows = _count_per(buckets[accepted], touched)
        garbage = _count_per(buckets[~new & ~needed], touched)
        fold = []
        for bucket, rows, seen in zip(touched.tolist(), new_rows.tolist(), garbage.tolist()):
            stored = self.stored[bucket]
            deltas = len(stored.deltas) + (rows > 0)
            if (bucket == self.sweep or bucket in self.due or deltas > self._delta_limit(bucket)
                    or stored.delta_rows + rows + seen > self.spec.fold_fraction * stored.base.num_rows):
                fold.append(bucket)
        folding = np.isin(buckets, np.array(fold, dtype=np.int64))
        if self.spec.ttl is not None:
            timeless, times = _change_times(versions.select([TIME]))
            self.puts += st.expiry_puts(timeless[accepted], times[accepted], buckets[accepted],
                                        st.slot_width(self.spec.ttl))
        self._write_deltas(versions.filter(pa.array(accepted & ~folding)))
        self._fold(fold, versions.filter(pa.array(new & folding)), needed[new & folding], keep_to, gone_before)

    def _delta_limit(self, bucket: int) -> int:
        """The most deltas ``bucket`` keeps without folding; staggered over the buckets, so that
        buckets changed in every version do not all fold in the same one."""
        limit = self.spec.fold_deltas
        return limit + bucket % limit if limit > 0 else 0

    def _write_deltas(self, accepted: pa.Table) -> None:
        """One delta per bucket: its accepted new versions (in bucket order, each bucket's sorted
        by key, time, sequence)."""
        if accepted.num_rows == 0:
            return
        buckets = accepted.column(_BUCKET).to_numpy()
        rows = accepted.select(self.spec.versions_schema.names).combine_chunks()
        bounds = np.r_[0, np.flatnonzero(np.diff(buckets)) + 1, buckets.size]
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            bucket, value = int(buckets[lo]), st.blob(rows.slice(lo, hi - lo))
            self.puts.append((st.delta_key(bucket, self.version), value))
            self.cache.appended(bucket, self.stored[bucket], value)
        self.meta.versions_held += accepted.num_rows

    def _fold(self, fold: list[int], new: pa.Table, new_needed: np.ndarray, keep_to: int, gone_before: int) -> None:
        """Merge each of ``fold``'s base, deltas and this version's new versions (``new``, after
        duplicates were dropped, in bucket order; ``new_needed``: whether pruning them with what
        is held of their keys keeps each), drop the versions no longer needed, write the result
        as the bucket's base and remove its deltas."""
        if not fold:
            return
        names = self.spec.versions_schema.names
        held = [(bucket, t.append_column(_NEW, pa.array(np.zeros(t.num_rows, dtype=bool))))
                for bucket in fold for t in self.stored[bucket].tables() if t.num_rows]
        if held:
            # the rows' order by bucket, key, time, sequence, decided on the columns pruning reads;
            # then every column taken once, in that order
            rows = pa.concat_tables([new.select([*names, _BUCKET, _NEW]),
                                     _with_buckets(held, held[0][1].schema).select([*names, _BUCKET, _NEW])])
            rows = rows.combine_chunks()
            order = pc.sort_indices(rows, sort_keys=ascending(_BUCKET, *self.keys, TIME, SEQ)).to_numpy()
            narrow = rows.select([*self.keys, OP, TIME]).take(pa.array(order))
            order = order[needed_versions(narrow, self.keys, keep_to, gone_before, self.expire_before)[1]]
        else:   # nothing held in these buckets: ``new`` is every version of its keys, in this order
            rows, order = new, np.flatnonzero(new_needed)
        buckets = rows.column(_BUCKET).to_numpy()[order]
        added = rows.column(_NEW).to_numpy(zero_copy_only=False)[order]
        if order.size == rows.num_rows and bool((order[1:] > order[:-1]).all()):   # every row, in order
            rows = rows.select(names).combine_chunks()
        else:
            rows = rows.select(names).take(pa.array(order)).combine_chunks()
        targets = np.array(fold, dtype=np.int64)
        lo, hi = np.searchsorted(buckets, targets, "left"), np.searchsorted(buckets, targets, "right")
        added = np.r_[0, np.cumsum(added)]
        for bucket, start, end in zip(fold, lo.tolist(), hi.tolist()):
            stored = self.stored[bucket]
            if not stored.deltas and added[end] == added[start] and end - start == stored.base.num_rows:
                continue                                  # nothing new, nothing dropped: base as it is
            if stored.deltas:
                self.delete_ranges.append(st.delta_range(bucket))
            if end > start:
                value = st.blob(rows.slice(start, end - start))
                self.puts.append((st.version_key(bucket), value))
                self.cache.replaced(bucket, value)
            else:
                if stored.base.num_rows:
                    self.deletes.append(st.version_key(bucket))
                self.cache.replaced(bucket, None)
            self.meta.versions_held += (end - start) - stored.rows

    def _store_waiting(self) -> None:
        """File the new events that wait by time bucket (as_of, not final)."""
        events = self.waiting
        if events.num_rows == 0:
            return
        width = self.spec.event_bucket
        starts = (times_of(events, self.spec.stream_time) // width) * width     # ascending: canonical order
        bounds = np.r_[0, np.flatnonzero(np.diff(starts)) + 1, starts.size]
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            key, filed = st.event_key(int(starts[lo]), self.version), events.slice(lo, hi - lo)
            value = st.blob(filed)
            self.puts.append((key, value))
            self.waiting_writes[key] = filed, len(value)
        self.meta.events_waiting += events.num_rows

    def _metrics(self) -> dict[str, int]:
        metrics = dict(self.metrics)
        metrics.update(event_watermark=self.meta.event_watermark, table_watermark=self.meta.table_watermark,
                       events_waiting=self.meta.events_waiting, versions_held=self.meta.versions_held)
        return metrics


def release_bound(ew: int, tw: int, grace: int | None) -> int:
    """as_of: events with time ``< bound`` are released by a version that ends with event and table
    watermarks ``ew`` and ``tw`` (not the final one), with ``grace`` (µs; None: none)."""
    if tw == POS_INF:
        return POS_INF
    if grace is None:
        return tw
    return max(tw, _minus(ew, grace))


def _change_times(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(timeless, times) of ``table[TIME]``: whether each row is a timeless snapshot row (null
    change time: before every change), and the change times in µs (0 where timeless, never to be
    read there)."""
    column = table.column(TIME)
    return column.is_null().to_numpy(zero_copy_only=False), column.fill_null(0).to_numpy()


def _same_as_previous(table: pa.Table, columns: list[str]) -> np.ndarray:
    """Whether each row equals the previous row in every one of ``columns`` (nulls equal nulls)."""
    n = table.num_rows
    same = np.zeros(n, dtype=bool)
    if n < 2:
        return same
    equal = np.ones(n - 1, dtype=bool)
    for name in columns:
        column = table.column(name).combine_chunks()
        a, b = column.slice(1), column.slice(0, n - 1)
        eq = pc.equal(a, b).fill_null(False).to_numpy(zero_copy_only=False)
        both_null = (a.is_null().to_numpy(zero_copy_only=False) & b.is_null().to_numpy(zero_copy_only=False))
        equal &= eq | both_null
    same[1:] = equal
    return same


def needed_versions(
    versions: pa.Table, keys: list[str], keep_to: int, gone_before: int, expire_before: int = NEG_INF
) -> tuple[np.ndarray, np.ndarray]:
    """For ``versions`` sorted by key, time, sequence (all of each key's): whether pruning keeps
    each (the newest version <= ``keep_to`` of its key and every later one), and whether it is
    still needed after that (not a key's one version left that is a delete older than
    ``gone_before``, nor a kept version older than ``expire_before <= keep_to``, which has
    expired: a timeless one as soon as that bound is above NEG_INF)."""
    timeless, times = _change_times(versions)
    at_or_before = timeless | (times <= keep_to)
    same_next = np.r_[_same_as_previous(versions, keys)[1:], False]
    next_le = np.r_[at_or_before[1:], False] & same_next
    keep = ~at_or_before | ~next_le
    kept = np.flatnonzero(keep)
    rest = versions.select([*keys, OP, TIME]).take(pa.array(kept))
    same_previous = _same_as_previous(rest, keys)
    alone = ~same_previous & ~np.r_[same_previous[1:], False]
    older = timeless[kept] | (times[kept] < gone_before)
    drop = alone & (rest.column(OP).to_numpy() == DELETE) & older
    needed = keep.copy()
    needed[kept[drop]] = False
    if expire_before > NEG_INF:
        needed &= ~(timeless | (times < expire_before))
    return keep, needed


def _with_buckets(tables: list[tuple[int, pa.Table]], schema: pa.Schema) -> pa.Table:
    """``tables`` (each with the key bucket its rows are in; of ``schema``) as one table, with a
    column of that bucket."""
    if not tables:
        return schema.empty_table().append_column(_BUCKET, pa.array([], pa.int64()))
    rows = pa.concat_tables([t for _, t in tables])
    buckets = np.repeat(np.array([b for b, _ in tables], np.int64), [t.num_rows for _, t in tables])
    return rows.append_column(_BUCKET, pa.array(buckets, pa.int64()))


def _count_per(values: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """How many of ``values`` equal each of ``targets``."""
    ordered = np.sort(values)
    return np.searchsorted(ordered, targets, "right") - np.searchsorted(ordered, targets, "left")


def _with_keys_in(table: pa.Table, keys: list[str], wanted: list[pa.Array]) -> pa.Table:
    """The rows of ``table`` whose key columns equal those of some row of ``wanted`` (in order)."""
    if table.num_rows == 0 or len(wanted[0]) == 0:
        return table.slice(0, 0)
    if len(keys) == 1:
        # a take of the few rows found is about twice as fast as a filter over every chunk held
        found = pc.is_in(table.column(keys[0]), value_set=pc.unique(wanted[0])).to_numpy(zero_copy_only=False)
        return table.take(pa.array(np.flatnonzero(found), pa.int64()))
    index = table.select(keys).append_column("__hi", pa.array(np.arange(table.num_rows)))
    found = index.join(pa.table(dict(zip(keys, wanted))), keys, join_type="left semi", use_threads=False)
    return table.take(pa.array(np.sort(found.column("__hi").to_numpy()), pa.int64()))
