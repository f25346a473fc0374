"""Schema evolution of a table-table join's inputs on the same checkpoint: a restart with columns
added, dropped and widened gives the view changes the evolved join gives from the start over the
evolved inputs, after every version: rows stored before the change are read in the new columns
(:mod:`streamjoin.table.layouts`), an update that leaves a row as it was (read in the new
columns) changes nothing in the view, and a later evolution reads rows of every layout."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import pyarrow as pa
import pytest

from streamjoin.errors import CheckpointMismatchError
from streamjoin.runtime.evolution import as_schema
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.table.operator import TableTableJoin

BASE = [("order_id", pa.int64()), ("customer_id", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us"))]
ORDERS = [pa.schema(BASE + [("qty", pa.int32()), ("day", pa.date32())]),
          pa.schema(BASE + [("qty", pa.int64()), ("day", pa.timestamp("us")), ("note", pa.string())]),
          pa.schema(BASE + [("day", pa.timestamp("us")), ("note", pa.string())])]          # qty dropped later
CUSTOMERS = [pa.schema([("customer_id", pa.int64()), ("name", pa.string()), ("op", pa.string()),
                        ("at", pa.timestamp("us")), ("tier", pa.string())]),
             pa.schema([("customer_id", pa.int64()), ("name", pa.string()), ("op", pa.string()),
                        ("at", pa.timestamp("us")), ("price", pa.decimal128(7, 2))]),
             pa.schema([("customer_id", pa.int64()), ("name", pa.string()), ("op", pa.string()),
                        ("at", pa.timestamp("us")), ("price", pa.decimal128(9, 3)), ("tier", pa.string())])]
T0 = dt.datetime(2024, 1, 1)


def _join(orders: pa.Schema, customers: pa.Schema, fuse: bool, how: str) -> TableTableJoin:
    return TableTableJoin(orders, customers, "customer_id", left_key="order_id", right_key="customer_id",
                          left_time="at", right_time="at", fuse_key_stages=fuse, how=how)


def _orders(rows, schema):
    def day(q):   # a date, or the same day as a timestamp once widened
        found = dt.date(2024, 1, q % 28 + 1)
        return found if schema.field("day").type == pa.date32() else dt.datetime.combine(found, dt.time())

    return pa.Table.from_pylist([{"order_id": o, "customer_id": c, "op": op, "at": T0 + dt.timedelta(seconds=s),
                                  "qty": q, "day": day(q), "note": None}
                                 for o, c, op, s, q in rows], schema=schema)


def _customers(rows, schema):
    return pa.Table.from_pylist([{"customer_id": c, "name": n, "op": op, "at": T0 + dt.timedelta(seconds=s),
                                  "tier": "gold", "price": None} for c, n, op, s in rows], schema=schema)


# (orders: order, customer, op, second, qty), (customers: customer, name, op, second), per version and schema
STEPS = [
    (0, [(1, 10, "upsert", 1, 3), (2, 10, "upsert", 1, 4), (3, 20, "upsert", 2, 5)],
     [(10, "ann", "upsert", 1), (20, "bob", "upsert", 1), (30, "cy", "upsert", 1)]),
    (0, [(2, 30, "upsert", 5, 4), (4, 40, "upsert", 5, 6)], [(20, "bob", "delete", 6)]),
    (1, [(1, 10, "upsert", 9, 3), (5, 30, "upsert", 9, 7)],           # order 1 again as it was: no view change
     [(10, "ann", "upsert", 9), (40, "dee", "upsert", 9)]),           # ann again as she was (tier dropped)
    (1, [(3, 20, "delete", 12, 5), (2, 10, "upsert", 12, 8)], [(30, "cyd", "upsert", 12)]),
    (2, [(4, 40, "upsert", 15, 6), (6, 10, "upsert", 15, 9)], [(40, "dee", "upsert", 15), (20, "bo", "upsert", 15)]),
    (2, [], [(10, "ann", "delete", 20)]),
]


def _rows(table: pa.Table) -> list[tuple]:
    return sorted((tuple(sorted(r.items())) for r in table.to_pylist()), key=repr)


def _defaulted(schema: pa.Schema, **defaults: str) -> pa.Schema:
    """``schema`` with existence defaults (Spark's EXISTS_DEFAULT metadata) on some columns."""
    return pa.schema([f.with_metadata({"EXISTS_DEFAULT": defaults[f.name]}) if f.name in defaults else f
                      for f in schema])


# the same generations, each added column with an existence default (kept once given): rows stored
# before read it; tier, dropped and added again, reads its old values where a row had one
ORDERS_DEFAULTED = [ORDERS[0], _defaulted(ORDERS[1], note="'n/a'"), _defaulted(ORDERS[2], note="'n/a'")]
CUSTOMERS_DEFAULTED = [CUSTOMERS[0], _defaulted(CUSTOMERS[1], price="9.99BD"),
                       _defaulted(CUSTOMERS[2], price="9.99BD", tier="'basic'")]


@pytest.mark.parametrize("fuse, how, store, defaults", [(True, "inner", "arranged", False),
                                                        (False, "left", "rocksdb-kv", False),
                                                        (True, "full", "lmdb-kv", False), (False, "full", "arranged", True)])
def test_table_join_evolution_equals_a_run_over_the_evolved_inputs(tmp_path, fuse, how, store, defaults):
    orders_schemas, customers_schemas = (ORDERS_DEFAULTED, CUSTOMERS_DEFAULTED) if defaults else (ORDERS, CUSTOMERS)

    def runner(join, name, local="local"):
        config = StateConfig(store=store, local_dir=os.path.join(tmp_path, name, local), snapshot_every=2)
        return PlanRunner(join.plan, os.path.join(tmp_path, name, "ck"), partitions=2, config=config, query_id="q")

    got, version, current = [], 0, None
    for generation, orders, customers in STEPS:
        if current != generation:   # a restart with the inputs' next columns; the second one on lost stores
            join = _join(orders_schemas[generation], customers_schemas[generation], fuse, how)
            run = runner(join, "evolved", local=f"local-{generation // 2}")
            run.version, current = version, generation
        out = run.run(_orders(orders, orders_schemas[generation]), _customers(customers, customers_schemas[generation]))
        got.append(out)
        version += 1
    # each version against the join of its generation over every input so far in that generation's columns
    for generation in sorted({g for g, _, _ in STEPS}):
        join = _join(orders_schemas[generation], customers_schemas[generation], fuse, how)
        reference = runner(join, f"reference-{generation}")
        schema = join.output_schema
        view_columns = [n for n in schema.names if not n.startswith("_")] + ["_change_type"]
        for i, (g, orders, customers) in enumerate(STEPS):
            if g > generation:
                break
            want = reference.run(as_schema(_orders(orders, orders_schemas[g]), orders_schemas[generation]),
                                 as_schema(_customers(customers, customers_schemas[g]), customers_schemas[generation]))
            if g == generation:
                assert _rows(got[i].select(view_columns)) == _rows(want.select(view_columns)), f"version {i}"
    assert sum(len(o) for o in got) >= 10
    if defaults:   # rows stored before the columns came, changed in the view after it, with the defaults
        later = [r for out in got[2:] for r in out.to_pylist()]
        assert any(r["note"] == "n/a" for r in later) and any(r["price"] == Decimal("9.990") for r in later)
        assert any(r.get("tier") == "basic" for r in later) and any(r.get("tier") == "gold" for r in later)


def test_table_join_evolution_refuses_a_join_key_type_change(tmp_path):
    config = StateConfig(store="memory", local_dir=str(tmp_path / "local"))
    first = PlanRunner(_join(ORDERS[0], CUSTOMERS[0], True, "inner").plan, str(tmp_path / "ck"), config=config,
                       query_id="q")
    first.run(_orders(STEPS[0][1], ORDERS[0]), _customers(STEPS[0][2], CUSTOMERS[0]))
    orders = ORDERS[0].set(1, pa.field("customer_id", pa.int32()))
    with pytest.raises(CheckpointMismatchError, match="'customer_id'.*key or time column"):
        PlanRunner(_join(orders, CUSTOMERS[0], True, "inner").plan, str(tmp_path / "ck"), config=config,
                   query_id="q")


DELTA = [pa.schema([("customer_id", pa.int64()), ("name", pa.string()), ("tier", pa.string()),
                    ("_change_type", pa.string()), ("_commit_version", pa.int64()),
                    ("_commit_timestamp", pa.timestamp("us", "UTC"))]),
         pa.schema([("customer_id", pa.int64()), ("name", pa.string()),
                    ("_change_type", pa.string()), ("_commit_version", pa.int64()),
                    ("_commit_timestamp", pa.timestamp("us", "UTC"))])]


def _feed(rows, schema):
    return pa.Table.from_pylist([{"customer_id": c, "name": n, "tier": "gold", "_change_type": kind,
                                  "_commit_version": v, "_commit_timestamp": T0 + dt.timedelta(seconds=v)}
                                 for c, n, kind, v in rows], schema=schema)


@pytest.mark.parametrize("fuse", [True, False])
def test_table_join_evolution_keeps_an_unchanged_row_unchanged(tmp_path, fuse):
    """A Delta feed's update that leaves a customer's row as it was, once its dropped column is
    read as gone, changes nothing in the view (the row stored before the change is compared in
    the new columns, not as the bytes it was stored as)."""
    def join(customers):
        return TableTableJoin(ORDERS[0], customers, "customer_id", left_key="order_id", right_key="customer_id",
                              left_time="at", fuse_key_stages=fuse)

    config = StateConfig(store="arranged", local_dir=str(tmp_path / "local"))
    first = PlanRunner(join(DELTA[0]).plan, str(tmp_path / "ck"), config=config, query_id="q")
    out = first.run(_orders([(1, 10, "upsert", 1, 3)], ORDERS[0]), _feed([(10, "ann", "insert", 1)], DELTA[0]))
    assert out.num_rows == 1
    second = PlanRunner(join(DELTA[1]).plan, str(tmp_path / "ck"), config=config, query_id="q")
    second.version = 1
    same = _feed([(10, "ann", "update_preimage", 2), (10, "ann", "update_postimage", 2)], DELTA[1])
    assert second.run(ORDERS[0].empty_table(), same).num_rows == 0
    renamed = _feed([(10, "anne", "update_preimage", 3), (10, "anne", "update_postimage", 3)], DELTA[1])
    assert second.run(ORDERS[0].empty_table(), renamed).column("name").to_pylist() == ["ann", "anne"]


@pytest.mark.parametrize("fuse", [True, False])
def test_table_join_definition_takes_a_longer_retention(tmp_path, fuse):
    def join(retention):
        return TableTableJoin(ORDERS[0], CUSTOMERS[0], "customer_id", left_key="order_id", right_key="customer_id",
                              left_time="at", right_time="at", fuse_key_stages=fuse, retention=retention)

    config = StateConfig(store="memory", local_dir=str(tmp_path / "local"))
    ck = str(tmp_path / "ck")
    first = PlanRunner(join(dt.timedelta(days=1)).plan, ck, config=config, query_id="q")
    first.run(_orders(STEPS[0][1], ORDERS[0]), _customers(STEPS[0][2], CUSTOMERS[0]))
    second = PlanRunner(join(dt.timedelta(days=7)).plan, ck, config=config, query_id="q")
    second.version = 1
    assert second.run(_orders(STEPS[1][1], ORDERS[0]), _customers(STEPS[1][2], CUSTOMERS[0])).num_rows > 0
    with pytest.raises(CheckpointMismatchError, match="retention.*7 days -> 1 day shrinks"):
        PlanRunner(join(dt.timedelta(days=1)).plan, ck, config=config, query_id="q")
