"""The enrichment join's decoded-state cache (streamjoin.enrichment.cache) kept with the open store.

A step that takes buckets and waiting events from the cache gives exactly the output, the writes
and the metrics of a step that reads them from the store, version after version, with the cache
holding everything, a part (a small limit) or nothing; also when a step's write never happened
(the step executed again on the same store must not trust what the lost step cached).
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.enrichment import cache
from streamjoin.enrichment.cache import BucketCache
from streamjoin.runtime.operator import StepInput, StepResult
from streamjoin.statestore import destroy_store, open_store
from tests.examples import scaled
from tests.joins.enrichment.test_folding import TUNINGS, tuned
from tests.joins.enrichment.test_properties import cases

_PATHS = itertools.count()


@contextmanager
def cache_limit(limit: int) -> Iterator[None]:
    old, cache.LIMIT_BYTES = cache.LIMIT_BYTES, limit
    try:
        yield
    finally:
        cache.LIMIT_BYTES = old


def _max_time(table: pa.Table, column: str) -> int | None:
    return pc.max(table.column(column).cast(pa.timestamp("us")).cast(pa.int64())).as_py() if table.num_rows else None


def _same(a: StepResult, b: StepResult) -> None:
    assert a.output.equals(b.output)
    assert list(a.puts) == list(b.puts)
    assert list(a.deletes) == list(b.deletes)
    assert list(a.delete_ranges) == list(b.delete_ranges)
    assert a.metrics == b.metrics


@settings(max_examples=scaled(40))
@given(case=cases(), mode=st.sampled_from(["as_of", "latest"]), tuning=st.sampled_from(TUNINGS),
       small=st.sampled_from([1, 3_000]), data=st.data())
def test_enrichment_cache_gives_the_steps_of_reading_the_store(case, mode, tuning, small, data):
    fraction, deltas, buckets = tuning
    operator = tuned(case.operator(mode, buckets=buckets, layout="buckets"), fraction, deltas)
    limits = [cache.LIMIT_BYTES, small, 0]                    # all cached, some, none
    paths = [f"enrichment-cache-{next(_PATHS)}" for _ in limits]
    stores = [open_store("memory", path) for path in paths]
    max_times: list[int | None] = [None, None]
    try:
        for version, index in enumerate([*range(len(case.batches)), None]):
            final = index is None
            tables = case.tables(index) if not final else (case.variant.stream.empty_table(), case.variant.table.empty_table())
            batch = StepInput(version, 0, tables, (None, None) if final else tuple(max_times), final)
            if data.draw(st.booleans(), label="a step whose write never happens first"):
                with cache_limit(limits[0]):
                    operator.step(stores[0], batch)
            results = []
            for store, limit in zip(stores, limits):
                with cache_limit(limit):
                    results.append(operator.step(store, batch))
                store.write(results[-1].puts, results[-1].deletes, results[-1].delete_ranges, version=version)
            for result in results[1:]:
                _same(results[0], result)
            for i, (table, spec) in enumerate(zip(tables, operator.inputs)):
                now = _max_time(table, spec.time)
                if now is not None and (max_times[i] is None or now > max_times[i]):
                    max_times[i] = now
        assert dict(stores[0].scan()) == dict(stores[2].scan())
    finally:
        for store, path in zip(stores, paths):
            store.close()
            destroy_store("memory", path)


def test_enrichment_cache_is_dropped_when_the_store_is_not_at_its_version():
    store = open_store("memory", "enrichment-cache-label")
    try:
        schema = pa.schema([("k", pa.int64())])
        first = BucketCache.of(store, schema)
        first.commit(3)                                      # a step of version 3 whose write never came
        assert BucketCache.of(store, schema) is not first    # the store is still at None
        store.write([(b"x", b"")], version=3)
        second = BucketCache.of(store, schema)
        second.commit(4)
        store.write([(b"x", b"")], version=4)
        assert BucketCache.of(store, schema) is second
        assert BucketCache.of(store, pa.schema([("k", pa.string())])) is not second   # another layout
    finally:
        store.close()
        destroy_store("memory", "enrichment-cache-label")
