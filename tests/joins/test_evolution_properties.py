"""Property: a join whose inputs' columns evolve between micro-batches (columns added, dropped,
added again, widened; an added column sometimes with an existence default), restarted on its checkpoint at each evolution (sometimes with its local
stores lost), gives after every version what the join of that version's columns gives from the
start over every input so far read in those columns (:func:`streamjoin.runtime.evolution.as_schema`:
the reference learns evolution as Spark's schema merging reads old files, defaults included). For the table-table
join (rows stored as ``pack`` tuples in layouts, :mod:`streamjoin.table.layouts`), the
stream-table join and the interval join (Arrow blobs)."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import tempfile

import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.runtime.evolution import as_schema
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.table.operator import TableTableJoin
from tests.examples import scaled

T0 = dt.datetime(2024, 1, 1)
TYPES = [pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string(), pa.date32(), pa.timestamp("us"),
         pa.decimal128(7, 2)]
WIDER = {pa.int32(): pa.int64(), pa.float32(): pa.float64(), pa.date32(): pa.timestamp("us"),
         pa.decimal128(7, 2): pa.decimal128(9, 3)}
NAMES = ["v0", "v1", "v2", "v3"]


def _value(kind: pa.DataType, n: int):
    if n == 0:
        return None
    if pa.types.is_integer(kind):
        return n
    if pa.types.is_floating(kind):
        return n + 0.5
    if pa.types.is_string(kind):
        return "s" * n
    if pa.types.is_date(kind):
        return dt.date(2024, 1, n)
    if pa.types.is_timestamp(kind):
        return dt.datetime(2024, 1, n, 6)
    return decimal.Decimal(n) / 4


#: an existence default (Spark's EXISTS_DEFAULT) of each type, also one of its wider type
DEFAULTS = {pa.int32(): "2", pa.int64(): "2L", pa.float32(): "2.5D", pa.float64(): "2.5D", pa.string(): "'dflt'",
            pa.date32(): "DATE '2024-01-09'", pa.timestamp("us"): "TIMESTAMP_NTZ '2024-01-09 06:00:00'",
            pa.decimal128(7, 2): "1.25BD"}


@st.composite
def _column(draw, name: str) -> pa.Field:
    """A value column, sometimes with an existence default (read by rows from before it was added)."""
    kind = draw(st.sampled_from(TYPES))
    return pa.field(name, kind, metadata={"EXISTS_DEFAULT": DEFAULTS[kind]} if draw(st.booleans()) else None)


@st.composite
def _columns(draw) -> list[list[pa.Field]]:
    """Generations of one input's value columns: each an evolution of the one before (a column's
    default kept as long as the column is)."""
    first = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    current = [draw(_column(name)) for name in first]
    out = [list(current)]
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["add", "drop", "widen", "same"]))
        names = [f.name for f in current]
        if action == "add" and len(names) < len(NAMES):
            current = current + [draw(_column(draw(st.sampled_from([n for n in NAMES if n not in names]))))]
        elif action == "drop" and len(current) > 1:
            gone = draw(st.sampled_from(names))
            current = [c for c in current if c.name != gone]
        elif action == "widen" and any(f.type in WIDER for f in current):
            name = draw(st.sampled_from([f.name for f in current if f.type in WIDER]))
            current = [f.with_type(WIDER[f.type]) if f.name == name else f for f in current]
        out.append(list(current))
    return out


def _rows(table: pa.Table) -> list:
    return sorted((tuple(sorted(r.items())) for r in table.to_pylist()), key=repr)


def _check(make_join, make_inputs, versions, generation_of, lose, config_store="memory"):
    """Run versions with a restart at each new generation; compare each version with its
    generation's join run from the start over the inputs read in that generation's columns."""
    root = tempfile.mkdtemp(prefix="sj-evolve-")

    def runner(join, name, local="local"):
        config = StateConfig(store=config_store, local_dir=os.path.join(root, name, local), snapshot_every=2)
        return PlanRunner(join.plan, os.path.join(root, name, "ck"), partitions=2, config=config, query_id="q")

    got, current, run = [], None, None
    for version in range(len(versions)):
        g = generation_of[version]
        if g != current:
            run = runner(make_join(g), "evolved", local=f"local-{g if lose[g] else 0}")
            run.version, current = version, g
        got.append(run.run(*make_inputs(version, g, g)))
    for g in sorted(set(generation_of)):
        join = make_join(g)
        reference = runner(join, f"reference-{g}")
        columns = [n for n in join.output_schema.names if not n.startswith("_")]
        columns += [n for n in ("_change_type",) if n in join.output_schema.names]
        for version in range(len(versions)):
            if generation_of[version] > g:
                break
            want = reference.run(*make_inputs(version, generation_of[version], g))
            if generation_of[version] == g:
                assert _rows(got[version].select(columns)) == _rows(want.select(columns)), \
                    f"version {version} (generation {g})"


@st.composite
def _plan(draw, batch):
    """(left generations, right generations, batches, the generation of each version, lose)."""
    left, right = draw(_columns()), draw(_columns())
    generations = max(len(left), len(right))
    left += [left[-1]] * (generations - len(left))
    right += [right[-1]] * (generations - len(right))
    versions = draw(st.integers(generations, generations + 3))
    cuts = sorted(draw(st.lists(st.integers(1, versions - 1), min_size=generations - 1, max_size=generations - 1,
                                unique=True))) if generations > 1 else []
    generation_of = [sum(v >= c for c in cuts) for v in range(versions)]
    batches = [draw(batch) for _ in range(versions)]
    lose = [draw(st.booleans()) for _ in range(generations)]
    return left, right, batches, generation_of, lose


_TABLE_BATCH = st.tuples(
    st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3), st.sampled_from(["upsert", "delete"]),
                       st.lists(st.integers(0, 3), min_size=4, max_size=4)), max_size=4),
    st.lists(st.tuples(st.integers(1, 3), st.sampled_from(["upsert", "upsert", "delete"]),
                       st.lists(st.integers(0, 1), min_size=4, max_size=4)), max_size=3))


#: a customer's row stored, a column added to the customers, then the same row again: no view change
_SAME_ROW_AGAIN = ([[pa.field("v0", pa.int32())]] * 2,
                   [[pa.field("v0", pa.string())], [pa.field("v0", pa.string()), pa.field("v1", pa.int64())]],
                   [([(1, 1, "upsert", [1, 0, 0, 0])], [(1, "upsert", [1, 0, 0, 0])]),
                    ([], [(1, "upsert", [1, 0, 0, 0])])], [0, 1], [False, False])


@settings(max_examples=scaled(12))
@example(plan=_SAME_ROW_AGAIN, fuse=True, how="inner")
@given(plan=_plan(_TABLE_BATCH), fuse=st.booleans(), how=st.sampled_from(["inner", "left", "full"]))
def test_table_join_evolution_equals_the_join_of_each_generation(plan, fuse, how):
    left, right, batches, generation_of, lose = plan

    def schemas(g):
        orders = pa.schema([("order_id", pa.int64()), ("customer_id", pa.int64()), ("op", pa.string()),
                            ("at", pa.timestamp("us"))] + left[g])
        # the customers as a Delta change feed: the change time is not a row column, so an update
        # may leave a row as it was
        customers = pa.schema([("customer_id", pa.int64())] + right[g] + [
            ("_change_type", pa.string()), ("_commit_version", pa.int64()), ("_commit_timestamp", pa.timestamp("us"))])
        return orders, customers

    def make_join(g):
        orders, customers = schemas(g)
        return TableTableJoin(orders, customers, "customer_id", left_key="order_id", right_key="customer_id",
                              left_time="at", right_changes=ChangeFormat.delta("customer_id"),
                              fuse_key_stages=fuse, how=how)

    def make_inputs(version, g, read_as):
        orders, customers = schemas(g)
        batch = batches[version]
        at = T0 + dt.timedelta(seconds=version + 1)
        o = pa.Table.from_pylist([{"order_id": oid, "customer_id": cid, "op": op, "at": at,
                                   **{f.name: _value(f.type, v) for f, v in zip(left[g], values)}}
                                  for oid, cid, op, values in _last(batch[0], 0)], schema=orders)
        c = pa.Table.from_pylist([{"customer_id": cid, "_change_type": "update_postimage" if op == "upsert" else op,
                                   "_commit_version": version + 1, "_commit_timestamp": at,
                                   **{f.name: _value(f.type, v) for f, v in zip(right[g], values)}}
                                  for cid, op, values in _last(batch[1], 0)], schema=customers)
        return as_schema(o, schemas(read_as)[0]), as_schema(c, schemas(read_as)[1])

    _check(make_join, make_inputs, batches, generation_of, lose)


def _last(rows, key_at):
    """One change per key (the last), so a version's changes share one change time."""
    return list({r[key_at]: r for r in rows}.values())


_ENRICH_BATCH = st.tuples(
    st.lists(st.tuples(st.integers(1, 3), st.integers(0, 9), st.lists(st.integers(0, 3), min_size=4, max_size=4)),
             max_size=4),
    st.lists(st.tuples(st.integers(1, 3), st.sampled_from(["upsert", "delete"]),
                       st.lists(st.integers(0, 3), min_size=4, max_size=4)), max_size=3))


@settings(max_examples=scaled(12))
@given(plan=_plan(_ENRICH_BATCH), mode=st.sampled_from(["as_of", "latest"]))
def test_enrichment_evolution_equals_the_join_of_each_generation(plan, mode):
    events_cols, table_cols, batches, generation_of, lose = plan

    def schemas(g):
        events = pa.schema([("user", pa.int64()), ("ts", pa.timestamp("us"))] + events_cols[g])
        table = pa.schema([("user", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us"))] + table_cols[g])
        return events, table

    def make_join(g):
        events, table = schemas(g)
        return EnrichmentJoin(events, table, "user", stream_time="ts", changes=ChangeFormat.plain("user", time="at"),
                              mode=mode, delay=dt.timedelta(0))

    def make_inputs(version, g, read_as):
        events, table = schemas(g)
        batch = batches[version]
        e = pa.Table.from_pylist([{"user": u, "ts": T0 + dt.timedelta(seconds=10 * version + s),
                                   **{f.name: _value(f.type, v) for f, v in zip(events_cols[g], values)}}
                                  for u, s, values in batch[0]], schema=events)
        c = pa.Table.from_pylist([{"user": u, "op": op, "at": T0 + dt.timedelta(seconds=10 * version + 5),
                                   **{f.name: _value(f.type, v) for f, v in zip(table_cols[g], values)}}
                                  for u, op, values in _last(batch[1], 0)], schema=table)
        return as_schema(e, schemas(read_as)[0]), as_schema(c, schemas(read_as)[1])

    _check(make_join, make_inputs, batches, generation_of, lose)


_INTERVAL_BATCH = st.tuples(
    *[st.lists(st.tuples(st.integers(1, 3), st.integers(0, 14), st.lists(st.integers(0, 3), min_size=4, max_size=4)),
               max_size=4)] * 2)


@settings(max_examples=scaled(10))
@given(plan=_plan(_INTERVAL_BATCH), how=st.sampled_from(["inner", "left", "full", "left_semi", "left_anti"]))
def test_interval_evolution_equals_the_join_of_each_generation(plan, how):
    from streamjoin.interval.operator import IntervalJoin

    left_cols, right_cols, batches, generation_of, lose = plan

    def schemas(g):
        return tuple(pa.schema([("k", pa.int64()), ("t", pa.timestamp("us"))] + cols[g])
                     for cols in (left_cols, right_cols))

    def make_join(g):
        left, right = schemas(g)
        return IntervalJoin(left, right, "k", left_time="t", right_time="t", lower=dt.timedelta(seconds=-5),
                            upper=dt.timedelta(seconds=5), delay=dt.timedelta(seconds=2), how=how)

    def make_inputs(version, g, read_as):
        tables = []
        for rows, cols, schema, target in zip(batches[version], (left_cols, right_cols), schemas(g), schemas(read_as)):
            table = pa.Table.from_pylist([{"k": k, "t": T0 + dt.timedelta(seconds=10 * version + s),
                                           **{f.name: _value(f.type, v) for f, v in zip(cols[g], values)}}
                                          for k, s, values in rows], schema=schema)
            tables.append(as_schema(table, target))
        return tuple(tables)

    _check(make_join, make_inputs, batches, generation_of, lose)
