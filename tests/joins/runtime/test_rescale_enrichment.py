"""Rescaling the enrichment join (:mod:`streamjoin.enrichment.regroup`): a run cut at any version
and continued with 1..6 partitions gives the output, the rows set aside, the metrics and the
logical state of a run that never changed its partition count; two old partitions merge into
one canonical state."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import event, given, settings
from hypothesis import strategies as st

from streamjoin.changelog import Changelog, restore
from streamjoin.changes import DELETE, OP, SEQ, TIME, ChangeFormat
from streamjoin.enrichment import state as es
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.enrichment.spec import Mode
from streamjoin.enrichment.step import needed_versions
from streamjoin.kit.order import ascending
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.keygroups import routing_types
from streamjoin.runtime.local import LocalRunner
from streamjoin.runtime.operator import NEG_INF, POS_INF
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.regroup import Ownership
from streamjoin.runtime.rescale import Epoch, changelog_uri
from streamjoin.statestore import open_store
from tests.examples import scaled
from tests.joins.enrichment.test_properties import Run, cases, rows_of
from tests.joins.runtime.test_rescale import restored

#: Metrics summed over partitions that do not depend on the partition count.
COMPARED = ("matched", "stale_changes", "late_events", "late_changes", "expired_lookups", "released_by_grace",
            "null_time_events", "null_key_events", "events_waiting")


def asides(run: Run) -> Counter:
    """Every row set aside so far (input folder, row, reason)."""
    found: Counter = Counter()
    for spec in run.stage().operator.inputs:
        table = run.set_aside(spec.name)
        if table is not None:
            found += Counter((spec.name, tuple(sorted(r.items()))) for r in table.to_pylist())
    return found


def metrics(steps: list[dict]) -> tuple[Counter, set]:
    """The compared metrics of one version's ``steps`` summed over partitions, and the
    watermarks the partitions reported."""
    return Counter({k: sum(m.get(k, 0) for m in steps) for k in COMPARED}), \
        {(m["event_watermark"], m["table_watermark"]) for m in steps}


def logical_state(run: Run, version: int) -> Counter:
    """The state as lookups see it, over every partition: the watermarks, the waiting events, and
    each key's versions still needed (pruned as a fold would prune them now, and without a
    leading delete, which finds no row as no version does), whatever was folded when."""
    spec = run.stage().operator.spec
    found: Counter = Counter()
    versions, events = [], []
    for entries in restored(run.stage(), version):
        for key, value in entries:
            area = es.LAYOUT.area_of(key)
            if area.name == "meta":
                meta = es.Meta(*area.value.decode(value))
                found[("watermarks", meta.event_watermark, meta.table_watermark)] = 1
            elif area.name == "versions":
                versions.append(es.unblob(value))
            elif area.name == "events":
                events.append(es.unblob(value))
    for table in events:
        found += Counter(("event", tuple(r.items())) for r in table.to_pylist())
    marks = [k for k in found if k[0] == "watermarks"]
    if not versions or not marks:
        return found
    _, ew, tw = marks[0]
    rows = pa.concat_tables(versions)
    rows = rows.take(pc.sort_indices(rows, sort_keys=ascending(*spec.keys, TIME, SEQ)))
    keep_to, gone_before, expire_before = _bounds(spec, ew, tw)
    rows = rows.filter(pa.array(needed_versions(rows, spec.keys, keep_to, gone_before, expire_before)[1]))
    keys = list(zip(*(rows.column(k).to_pylist() for k in spec.keys)))
    first = np.array([i == 0 or keys[i] != keys[i - 1] for i in range(len(keys))], dtype=bool)
    leading_delete = first & (rows.column(OP).to_numpy(zero_copy_only=False) == DELETE)
    found += Counter(("version", tuple(r.items())) for r in rows.filter(pa.array(~leading_delete)).to_pylist())
    return found


def _bounds(spec, ew: int, tw: int) -> tuple[int, int, int]:
    """(keep_to, gone_before, expire_before) of a fold after a version with watermarks ew, tw."""
    if spec.mode is Mode.LATEST or tw == POS_INF:
        release = POS_INF
    else:
        release = tw if spec.grace is None else max(tw, max(ew - spec.grace, NEG_INF))
    keep_to = POS_INF if spec.mode is Mode.LATEST else min(ew, release)
    expire_before = NEG_INF
    if spec.ttl is not None:
        bound = tw if spec.mode is Mode.LATEST else min(ew, release)
        expire_before = bound if bound in (NEG_INF, POS_INF) else max(bound - spec.ttl, NEG_INF)
    return keep_to, tw, expire_before


@settings(max_examples=scaled(40), deadline=None)
@given(case=cases(max_partitions=4), mode=st.sampled_from(["as_of", "latest"]),
       grace=st.sampled_from([None, 0, 1, 4]), data=st.data())
def test_enrichment_rescale_equals_uninterrupted_run(case, mode, grace, data):
    versions = [*range(len(case.batches)), None]
    cut = data.draw(st.integers(0, len(versions) - 1), label="cut")
    partitions = data.draw(st.integers(1, 6), label="new partitions")
    options = {} if grace is None or mode == "latest" else {"grace": dt.timedelta(seconds=grace)}
    options["layout"] = "buckets"   # (its logical state; the runs layout's: tests/joins/enrichment/test_runs.py)
    plain, rescaled = Run(case, mode, **options), Run(case, mode, **options)
    try:
        for version, index in enumerate(versions):
            if version == cut:
                rescaled.restart(partitions)
            seen = len(rescaled.stage().metrics), len(plain.stage().metrics)
            assert rows_of(rescaled.run(index)) == rows_of(plain.run(index)), f"version {version}"
            assert metrics(rescaled.stage().metrics[seen[0]:]) == metrics(plain.stage().metrics[seen[1]:]), \
                f"version {version}"
            if version == cut:
                state = logical_state(rescaled, version)
                assert state == logical_state(plain, version)
                event(f"at the cut: versions held {any(k[0] == 'version' for k in state)}, events waiting "
                      f"{any(k[0] == 'event' for k in state)}, ttl {case.ttl is not None}")
        assert asides(rescaled) == asides(plain)
        last = len(versions) - 1
        assert logical_state(rescaled, last) == logical_state(plain, last)
    finally:
        plain.close()
        rescaled.close()


# -- two old partitions merging into one ---------------------------------------------------------

EVENTS = pa.schema([("k", pa.int32()), ("ts", pa.timestamp("us")), ("e", pa.string())])
TABLE = pa.schema([("k", pa.int32()), ("v", pa.string()), ("op", pa.string()), ("at", pa.timestamp("us"))])
T0 = dt.datetime(2024, 1, 1)


def _join() -> EnrichmentJoin:
    return EnrichmentJoin(EVENTS, TABLE, "k", stream_time="ts", changes=ChangeFormat.plain("k", time="at"),
                          delay=dt.timedelta(seconds=2), buckets=4, table_ttl=dt.timedelta(seconds=30), layout="buckets")


def _batch(i: int) -> tuple[pa.Table, pa.Table]:
    events = [{"k": (i * 3 + j) % 11, "ts": T0 + dt.timedelta(seconds=5 * i + j), "e": f"e{i}.{j}"} for j in range(6)]
    changes = [{"k": (i * 5 + j) % 11, "v": f"v{i}.{j}", "op": "delete" if j == 4 else "upsert",
                "at": T0 + dt.timedelta(seconds=5 * i + j)} for j in range(5)]
    return pa.Table.from_pylist(events, schema=EVENTS), pa.Table.from_pylist(changes, schema=TABLE)


def _stores(entries_of: list[list[tuple[bytes, bytes]]], tmp) -> list:
    stores = []
    for i, entries in enumerate(entries_of):
        store = open_store("memory", f"{tmp}/s{i}")
        store.write(list(entries))
        stores.append(store)
    return stores


def _outputs(root, plan: list[int]) -> Counter:
    """The output of running :func:`_batch` with the partition counts of ``plan`` (the last
    version final)."""
    op = _join()
    config = StateConfig(store="memory", local_dir=str(root / "local"))
    found: Counter = Counter()
    for version, partitions in enumerate(plan):
        runner = LocalRunner(op, str(root / "ck"), partitions=partitions, config=config)
        runner.version = version
        final = version == len(plan) - 1
        tables = _batch(version) if not final else (EVENTS.empty_table(), TABLE.empty_table())
        found += Counter(tuple(r.values()) for r in runner.run(*tables, final=final).to_pylist())
    return found


def test_enrichment_rescale_merges_two_partitions_into_one_canonical_state(tmp_path):
    op = _join()
    expected = _outputs(tmp_path / "plain", [2] * 6)
    got = _outputs(tmp_path / "merged", [2, 2, 2, 1, 1, 1])
    assert got == expected and sum(expected.values()) == 30
    two = []
    for p in range(2):   # the old partitions' states as of version 2
        log = Changelog(changelog_uri(Checkpoint(str(tmp_path / "merged" / "ck")), Epoch(0, 2), p))
        store = open_store("memory", str(tmp_path / f"old{p}"))
        restore(log, store, 2)
        two.append(list(store.scan()))
        store.close()
    assert all(two)
    groups = Checkpoint(str(tmp_path / "merged" / "ck")).binding.key_groups()
    owned = Ownership(groups, 0, 1, tuple(routing_types(op.inputs)))
    stores = _stores(two, tmp_path / "sources")
    try:
        merged = list(op.regroup(stores, owned))
        assert merged == list(op.regroup(stores[::-1], owned))           # whatever the old order
        again = _stores([merged], tmp_path / "again")
        assert list(op.regroup(again, owned)) == merged                   # merged state is canonical
        again[0].close()
    finally:
        for s in stores:
            s.close()
    meta_key = es.LAYOUT["meta"].prefix
    meta = es.Meta(*es.LAYOUT["meta"].value.decode(dict(merged)[meta_key]))
    old = [es.Meta(*es.LAYOUT["meta"].value.decode(dict(e)[meta_key])) for e in two]
    by_area: dict[str, list] = {}
    for key, value in merged:
        by_area.setdefault(es.LAYOUT.area_of(key).name, []).append((key, value))
    held = sum(es.unblob(v).num_rows for _, v in by_area["versions"])
    waiting = sum(es.unblob(v).num_rows for _, v in by_area["events"])
    assert (meta.versions_held, meta.events_waiting) == (held, waiting)
    assert held > 0 and waiting == sum(m.events_waiting for m in old) > 0
    assert (meta.event_watermark, meta.table_watermark) == (old[0].event_watermark, old[0].table_watermark)
    # one base per key bucket held (no deltas); expiry entries name exactly the buckets holding rows
    versions = es.LAYOUT["versions"]
    assert all(len(versions.decode(k)) == 1 for k, _ in by_area["versions"])
    buckets = {versions.decode(k)[0] for k, _ in by_area["versions"]}
    assert {es.LAYOUT["expiry"].decode(k)[1] for k, _ in by_area["expiry"]} == buckets


def test_enrichment_rescale_splits_state_as_rows_are_routed_for_narrow_keys(tmp_path):
    """int32 keys route as int32 (Spark's hashInt), while the state holds them as int64: 2 -> 3
    and 3 -> 2 partitions give the output of an uninterrupted run."""
    expected = _outputs(tmp_path / "plain", [2] * 6)
    for plan in ([2, 2, 3, 3, 3, 3], [3, 3, 3, 2, 2, 2]):
        assert _outputs(tmp_path / "-".join(map(str, plan)), plan) == expected, plan
