"""Schema evolution of an enrichment join's inputs on the same checkpoint: a restart with a
column added, one dropped and one widened gives what a run of the evolved join over the evolved
inputs gives from the start (the old rows read with nulls, without the dropped column, widened)."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pytest

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.errors import CheckpointMismatchError
from streamjoin.runtime.evolution import as_schema
from streamjoin.runtime.inspect import describe_checkpoint
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner

EVENTS = pa.schema([("user", pa.int64()), ("ts", pa.timestamp("us")), ("n", pa.int32()), ("what", pa.string())])
TABLE = pa.schema([("user", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("plan", pa.string()),
                   ("note", pa.string())])
# evolved: events' n widened, what dropped, ch added (columns in another order); the table's note dropped, region added, price added
EVENTS2 = pa.schema([("user", pa.int64()), ("ch", pa.string()), ("ts", pa.timestamp("us")), ("n", pa.int64())])
TABLE2 = pa.schema([("user", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("plan", pa.string()),
                    ("region", pa.string()), ("price", pa.decimal128(9, 2))])
FORMAT = ChangeFormat.plain("user", time="at")
T0 = dt.datetime(2024, 1, 1)


def _join(events: pa.Schema, table: pa.Schema, mode: str) -> EnrichmentJoin:
    return EnrichmentJoin(events, table, "user", stream_time="ts", changes=FORMAT, mode=mode, delay=dt.timedelta(0))


def _events(rows, schema):
    return pa.Table.from_pylist([{"user": u, "ts": T0 + dt.timedelta(seconds=s), "n": n, "what": f"e{s}", "ch": "web"}
                                 for u, s, n in rows], schema=schema)


def _changes(rows, schema):
    return pa.Table.from_pylist([{"user": u, "op": op, "at": T0 + dt.timedelta(seconds=s), "plan": p, "note": "x",
                                  "region": "eu", "price": None} for u, op, s, p in rows], schema=schema)


BEFORE = [  # (events, changes) of the versions run before the evolution
    ([(1, 5, 1), (2, 6, 2)], [(1, "upsert", 1, "free"), (2, "upsert", 2, "pro"), (3, "upsert", 3, "max")]),
    ([(1, 20, 3), (3, 21, 4)], [(1, "upsert", 9, "pro"), (2, "delete", 10, None), (4, "upsert", 11, "free")]),
]
AFTER = [
    ([(2, 30, 5), (4, 31, 6)], [(1, "upsert", 25, "max"), (3, "upsert", 40, "pro")]),
    ([(1, 41, 7), (3, 45, 8)], [(5, "upsert", 50, "free")]),
    ([], [(5, "upsert", 60, "free")]),
]


def _rows(table: pa.Table) -> list[tuple]:
    return sorted((tuple(sorted(r.items())) for r in table.to_pylist()), key=repr)


def _defaulted(schema: pa.Schema, **defaults: str) -> pa.Schema:
    """``schema`` with existence defaults (Spark's EXISTS_DEFAULT metadata) on some columns."""
    return pa.schema([f.with_metadata({"EXISTS_DEFAULT": defaults[f.name]}) if f.name in defaults else f
                      for f in schema])


@pytest.mark.parametrize("mode", ["as_of", "latest"])
@pytest.mark.parametrize("store, defaults", [("arranged", False), ("rocksdb-kv", False), ("arranged", True)])
def test_enrichment_evolution_equals_a_run_over_the_evolved_inputs(tmp_path, mode, store, defaults):
    """With ``defaults``, the added columns carry existence defaults, which the rows held from
    before read instead of nulls."""
    events2, table2 = EVENTS2, TABLE2
    if defaults:
        events2, table2 = _defaulted(EVENTS2, ch="'app'"), _defaulted(TABLE2, region="'EU'", price="1.50BD")

    new = _join(events2, table2, mode)
    got, expected = _evolved(tmp_path, store, new, events2, table2, lose=store == "rocksdb-kv")
    assert got == expected
    assert sum(len(g) for g in got) >= 6
    region = "EU" if defaults else None   # the table version from before the change, read with its default
    assert any(r for out in got[2:] for r in out if dict(r)["region"] == region)
    if defaults and mode == "as_of":   # an event waiting from before the change
        assert any(r for out in got[2:] for r in out if dict(r)["ch"] == "app")
    report = describe_checkpoint(os.path.join(tmp_path, "evolved", "ck"))
    assert report.definition == new.definition()
    if not defaults:
        assert report.evolutions == (("stream: added ch (string)", "stream: dropped what",
                                      "stream: widened n int32 -> int64", "table: added region (string)",
                                      "table: added price (decimal128(9, 2))", "table: dropped note"),)
    else:
        assert report.evolutions == (("stream: added ch (string, default 'app')", "stream: dropped what",
                                      "stream: widened n int32 -> int64", "table: added region (string, default 'EU')",
                                      "table: added price (decimal128(9, 2), default 1.50BD)", "table: dropped note"),)


def test_enrichment_evolution_refuses_a_key_type_change(tmp_path):
    config = StateConfig(store="memory", local_dir=str(tmp_path / "local"))
    first = PlanRunner(_join(EVENTS, TABLE, "as_of").plan, str(tmp_path / "ck"), config=config, query_id="q")
    first.run(_events(BEFORE[0][0], EVENTS), _changes(BEFORE[0][1], TABLE))
    events = EVENTS.set(EVENTS.get_field_index("ts"), pa.field("ts", pa.timestamp("ms")))
    with pytest.raises(CheckpointMismatchError, match="'ts'.*key or time column"):
        PlanRunner(_join(events, TABLE, "as_of").plan, str(tmp_path / "ck"), config=config, query_id="q")


def test_enrichment_definition_takes_a_longer_table_ttl_and_refuses_a_shorter_one(tmp_path):
    def join(ttl):
        return EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=FORMAT, delay=dt.timedelta(0),
                              table_ttl=ttl)

    config = StateConfig(store="memory", local_dir=str(tmp_path / "local"))
    ck = str(tmp_path / "ck")
    first = PlanRunner(join(dt.timedelta(minutes=1)).plan, ck, config=config, query_id="q")
    first.run(_events(BEFORE[0][0], EVENTS), _changes(BEFORE[0][1], TABLE))
    PlanRunner(join(dt.timedelta(hours=1)).plan, ck, config=config, query_id="q")
    PlanRunner(join(None).plan, ck, config=config, query_id="q")          # no TTL: kept for ever
    assert describe_checkpoint(ck).evolutions == (("table_ttl: 1 minute -> 1 hour",),
                                                  ("table_ttl: 1 hour -> none (forever)",))
    with pytest.raises(CheckpointMismatchError, match="table_ttl: none .forever. -> 1 hour shrinks"):
        PlanRunner(join(dt.timedelta(hours=1)).plan, ck, config=config, query_id="q")


def test_enrichment_evolution_of_the_events_alone_releases_the_events_waiting_from_before(tmp_path):
    """Only the events' schema changes (the table's stays), so the restarted query's stores, kept
    open in this process, keep the events they filed as waiting under the old schema: those are
    released in the new one (a column dropped, one added, one widened), as a run over the evolved
    events gives them."""
    got, expected = _evolved(tmp_path, "arranged", _join(EVENTS2, TABLE, "as_of"), EVENTS2, TABLE)
    assert got == expected
    # events filed before the change are released after it, without the dropped column
    assert any(dict(r)["ts"] < T0 + dt.timedelta(seconds=25) for out in got[2:] for r in out)


def _evolved(tmp_path, store: str, new: EnrichmentJoin, events2: pa.Schema, table2: pa.Schema,
             lose: bool = False) -> tuple[list[list[tuple]], list[list[tuple]]]:
    """The rows of each version (``_rows``, in ``new``'s output columns) of a run of ``BEFORE`` with
    the join of ``EVENTS`` and ``TABLE`` (in ``new``'s mode) restarted on the same checkpoint with
    ``new`` for ``AFTER`` and a final version, and of a run of ``new`` from the start over the same
    changes read in the evolved columns. ``lose``: the restart also finds its local stores gone
    (state from the changelog); else they are still open in this process."""
    def runner(join, name, local="local"):
        config = StateConfig(store=store, local_dir=os.path.join(tmp_path, name, local), snapshot_every=2)
        return PlanRunner(join.plan, os.path.join(tmp_path, name, "ck"), partitions=2, config=config, query_id="q")

    first = runner(_join(EVENTS, TABLE, new.spec.mode), "evolved")
    outputs = [first.run(_events(e, EVENTS), _changes(c, TABLE)) for e, c in BEFORE]
    second = runner(new, "evolved", local="other" if lose else "local")
    second.version = first.version
    outputs += [second.run(_events(e, events2), _changes(c, table2)) for e, c in AFTER]
    outputs.append(second.run(events2.empty_table(), table2.empty_table(), final=True))

    reference = runner(new, "reference")
    expected = [reference.run(as_schema(_events(e, EVENTS), events2), as_schema(_changes(c, TABLE), table2))
                for e, c in BEFORE]
    expected += [reference.run(_events(e, events2), _changes(c, table2)) for e, c in AFTER]
    expected.append(reference.run(events2.empty_table(), table2.empty_table(), final=True))
    return [_rows(as_schema(out, new.output_schema)) for out in outputs], [_rows(out) for out in expected]
