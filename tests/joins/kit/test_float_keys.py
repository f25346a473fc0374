"""Floating-point join keys compare as in Spark's joins: -0.0 equals 0.0, NaN equals NaN (one value).

(The enrichment join takes integer, string, binary or boolean keys only, so it has no float keys.)

Each join runs in process over one partition (routing is tested on its own below) and is
compared with the references, which compare keys by :func:`streamjoin.testing.interval.join_key`;
output values are the rows' own, bit for bit (``-0.0`` stays ``-0.0``, a NaN keeps its payload).
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from collections import Counter

import pyarrow as pa
import pytest

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.errors import JoinDefinitionError
from streamjoin.interval.operator import IntervalJoin
from streamjoin.kit import normal_key_array, normal_keys
from streamjoin.runtime.local import LocalRunner
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.statestore import open_store
from streamjoin.table.operator import TableTableJoin
from streamjoin.testing.interval import join_key, reference_interval_join
from streamjoin.testing.table import reference_view
from streamjoin.view import MaterializedView

NAN = float("nan")
T0 = dt.datetime(2024, 1, 1)
SEC = dt.timedelta(seconds=1)
KEYS = [0.0, -0.0, NAN, -NAN, 1.5, None]


def canonical(values) -> tuple:
    """A row's values with keys as joins compare them, so NaN rows compare equal."""
    return tuple(join_key(v) for v in values)


def bits(value) -> object:
    """A value as its exact bits where it is a float (``-0.0`` differs from ``0.0``, NaN payloads
    differ), else itself."""
    return struct.pack(">d", value) if isinstance(value, float) else value


def test_normal_key_array_makes_negative_zero_zero_and_every_nan_one_value():
    out = normal_key_array(pa.array([-0.0, 0.0, NAN, -NAN, None, 2.5], pa.float64())).to_pylist()
    bits = [None if v is None else struct.pack(">d", v) for v in out]
    assert bits[0] == bits[1] == struct.pack(">d", 0.0)
    assert bits[2] == bits[3] and math.isnan(out[2])
    assert out[4] is None and out[5] == 2.5
    f32 = normal_key_array(pa.array([-0.0, NAN], pa.float32()))
    assert f32.type == pa.float32() and math.copysign(1, f32[0].as_py()) == 1 and math.isnan(f32[1].as_py())
    table = pa.table({"k": pa.array([-0.0]), "v": pa.array([-0.0])})
    assert normal_keys(table, ["k"]).to_pydict() == {"k": [0.0], "v": [-0.0]}
    assert math.copysign(1, normal_keys(table, ["k"]).column("v")[0].as_py()) == -1


@pytest.mark.parametrize("how", ["inner", "left", "full", "left_semi", "left_anti"])
def test_interval_join_float_keys_match_negative_zero_and_nan_as_the_reference(tmp_path, how):
    schema = pa.schema([("k", pa.float64()), ("ts", pa.timestamp("us")), ("v", pa.string())])
    left_rows = [{"k": k, "ts": T0, "v": f"l{i}"} for i, k in enumerate(KEYS)]
    right_rows = [{"k": k, "ts": T0 + SEC, "v": f"r{i}"} for i, k in enumerate(reversed(KEYS))]
    op = IntervalJoin(schema, schema, "k", left_time="ts", right_time="ts", lower=-SEC, upper=SEC, delay=SEC, how=how)
    runner = LocalRunner(op, str(tmp_path / "cp"), config=StateConfig(store="memory", local_dir=str(tmp_path / "l")))
    first = runner.run(pa.Table.from_pylist(left_rows, schema), schema.empty_table())
    second = runner.run(schema.empty_table(), pa.Table.from_pylist(right_rows, schema), final=True)
    out = pa.concat_tables([first, second]).to_pylist()
    got = Counter(canonical(r.values()) for r in out)
    columns = schema.names
    expected = reference_interval_join(left_rows, right_rows, left_key=["k"], right_key=["k"], left_time="ts",
                                       right_time="ts", lower=-SEC, upper=SEC, how=how,
                                       left_columns=columns, right_columns=columns)
    assert got == Counter(canonical(r) for r in expected)
    # and each value is the row's own, bit for bit
    assert Counter(tuple(map(bits, r.values())) for r in out) == Counter(tuple(map(bits, r)) for r in expected)
    if how == "inner":   # 0.0 and -0.0 on each side: 2 x 2 pairs; NaN and -NaN: 2 x 2; 1.5: 1
        assert sum(got.values()) == 9


POSTS = pa.schema([("post_id", pa.int64()), ("author", pa.float64()), ("op", pa.string()), ("at", pa.int64())])
FOLLOWS = pa.schema([("fid", pa.int64()), ("followee", pa.float64()), ("op", pa.string()), ("at", pa.int64())])


@pytest.mark.parametrize("how", ["inner", "left", "full"])
def test_table_join_float_join_keys_match_negative_zero_and_nan_as_the_reference(tmp_path, how):
    join = TableTableJoin(POSTS, FOLLOWS, (["author"], ["followee"]), left_key="post_id", right_key="fid",
                          how=how, left_time="at", right_time="at")
    runner = PlanRunner(join.plan, str(tmp_path / "cp"),
                                   config=StateConfig(store="memory", local_dir=str(tmp_path / "local")))
    view = MaterializedView(open_store("memory", str(tmp_path / "view")), *join.view_key, join.output_schema)
    posts = [{"post_id": i, "author": k, "op": "upsert", "at": 1} for i, k in enumerate(KEYS)]
    follows = [{"fid": 10 + i, "followee": k, "op": "upsert", "at": 1} for i, k in enumerate(reversed(KEYS))]
    view.apply(runner.run(pa.Table.from_pylist(posts, POSTS), FOLLOWS.empty_table()))
    view.apply(runner.run(POSTS.empty_table(), pa.Table.from_pylist(follows, FOLLOWS)))
    # a post moves from -0.0 to NaN, a follow from NaN to 0.0
    moves_p = [{"post_id": 1, "author": NAN, "op": "upsert", "at": 2}]
    moves_f = [{"fid": 12, "followee": 0.0, "op": "upsert", "at": 2}]
    view.apply(runner.run(pa.Table.from_pylist(moves_p, POSTS), pa.Table.from_pylist(moves_f, FOLLOWS)))
    left = {(r["post_id"],): r for r in posts + moves_p}
    right = {(r["fid"],): r for r in follows + moves_f}
    expected = reference_view(left, right, left_on=["author"], right_on=["followee"], how=how,
                              left_columns=["post_id", "author"], right_columns=["fid", "followee"])
    got = [(r["post_id"], r["author"], r["fid"], r["followee"]) for r in view.rows().to_pylist()]
    assert Counter(map(canonical, got)) == Counter(map(canonical, expected.values()))
    # and each value is the row's own, bit for bit (-0.0 stays -0.0, a NaN keeps its sign and payload)
    assert Counter(tuple(map(bits, r)) for r in got) == Counter(tuple(map(bits, r)) for r in expected.values())
    if how == "inner":   # keys 0.0 (posts 0, 1 -> NaN: post 0), NaN (posts 1, 2, 3), 1.5
        assert sum(1 for r in got if r[0] is not None and r[2] is not None) == len(expected)


def test_table_join_float_primary_keys_negative_zero_and_nan_are_one_row_each(tmp_path):
    left = pa.schema([("id", pa.float64()), ("g", pa.int64()), ("op", pa.string()), ("at", pa.int64())])
    right = pa.schema([("rid", pa.int64()), ("g", pa.int64()), ("op", pa.string()), ("at", pa.int64())])
    join = TableTableJoin(left, right, "g", left_key="id", right_key="rid", how="inner", left_time="at",
                          right_time="at")
    runner = PlanRunner(join.plan, str(tmp_path / "cp"),
                                   config=StateConfig(store="memory", local_dir=str(tmp_path / "local")))
    view = MaterializedView(open_store("memory", str(tmp_path / "view")), *join.view_key, join.output_schema)
    rows = [{"id": 0.0, "g": 1, "op": "upsert", "at": 1}, {"id": -0.0, "g": 1, "op": "upsert", "at": 2},
            {"id": NAN, "g": 1, "op": "upsert", "at": 1}, {"id": -NAN, "g": 2, "op": "upsert", "at": 2}]
    view.apply(runner.run(pa.Table.from_pylist(rows, left),
                          pa.Table.from_pylist([{"rid": 7, "g": 1, "op": "upsert", "at": 1}], right)))
    got = [(r["id"], r["g_left"]) for r in view.rows().to_pylist()]
    assert got == [(0.0, 1)]      # id 0.0 (its latest change: -0.0 at g=1); id NaN's latest is at g=2: no match


def test_enrichment_float_keys_are_refused_at_definition():
    events = pa.schema([("k", pa.float64()), ("ts", pa.timestamp("us"))])
    table = pa.schema([("k", pa.float64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("name", pa.string())])
    with pytest.raises(JoinDefinitionError, match="event key 'k' .double. and table key 'k' .double. must both be"):
        EnrichmentJoin(events, table, "k", stream_time="ts", changes=ChangeFormat.plain("k", time="at"))


def test_local_route_sends_equal_float_keys_to_one_partition():
    from streamjoin.runtime.local import route

    table = pa.table({"k": pa.array([0.0, -0.0, NAN, -NAN] * 4, pa.float64()), "i": pa.array(range(16))})
    for partitions in (2, 3, 5, 7):
        parts = route(table, ["k"], partitions)
        zeros = {p for p, part in enumerate(parts) for v in part.column("k").to_pylist() if v == 0.0}
        nans = {p for p, part in enumerate(parts) for v in part.column("k").to_pylist() if math.isnan(v)}
        assert len(zeros) == 1 and len(nans) == 1, (partitions, zeros, nans)
        assert sum(part.num_rows for part in parts) == 16


NAN_PAYLOAD = struct.unpack(">d", bytes.fromhex("7ff8000000000123"))[0]


@pytest.mark.parametrize("how", ["inner", "full"])
def test_table_join_outputs_negative_zero_and_nan_payloads_as_the_rows_had_them(tmp_path, how):
    left = pa.schema([("id", pa.float64()), ("g", pa.float64()), ("x", pa.float64()), ("op", pa.string()),
                      ("at", pa.int64())])
    right = pa.schema([("rid", pa.int64()), ("g", pa.float64()), ("y", pa.float64()), ("op", pa.string()),
                       ("at", pa.int64())])
    join = TableTableJoin(left, right, "g", left_key="id", right_key="rid", how=how, left_time="at",
                          right_time="at")
    runner = PlanRunner(join.plan, str(tmp_path / "cp"),
                                   config=StateConfig(store="memory", local_dir=str(tmp_path / "local")))
    view = MaterializedView(open_store("memory", str(tmp_path / "view")), *join.view_key, join.output_schema)
    lrows = [{"id": -0.0, "g": -0.0, "x": -0.0, "op": "upsert", "at": 1},
             {"id": NAN_PAYLOAD, "g": NAN_PAYLOAD, "x": NAN_PAYLOAD, "op": "upsert", "at": 1}]
    rrows = [{"rid": 1, "g": 0.0, "y": -0.0, "op": "upsert", "at": 1},
             {"rid": 2, "g": NAN, "y": NAN_PAYLOAD, "op": "upsert", "at": 1}]
    first = runner.run(pa.Table.from_pylist(lrows, left), pa.Table.from_pylist(rrows, right))
    view.apply(first)
    cols = ["id", "g_left", "x", "rid", "g_right", "y"]
    got = sorted((tuple(bits(r[c]) for c in cols) for r in first.to_pylist()), key=repr)
    expected = sorted([tuple(map(bits, (-0.0, -0.0, -0.0, 1, 0.0, -0.0))),
                       tuple(map(bits, (NAN_PAYLOAD, NAN_PAYLOAD, NAN_PAYLOAD, 2, NAN, NAN_PAYLOAD)))], key=repr)
    assert got == expected
    assert bits(view.get(0.0, 1)["x"]) == bits(-0.0)      # the view finds a key as the join compares it
    assert bits(view.get(NAN, 2)["x"]) == bits(NAN_PAYLOAD)
    # the left row at -0.0 changes to 0.0 (one row: the same primary key and join key): an update whose
    # preimage is the row as held (-0.0) and postimage the new one (0.0); the view follows
    second = runner.run(pa.Table.from_pylist([{"id": 0.0, "g": 0.0, "x": 0.0, "op": "upsert", "at": 2}], left),
                        right.empty_table())
    changes = [(r["_change_type"], *(bits(r[c]) for c in ("id", "g_left", "x"))) for r in second.to_pylist()]
    assert changes == [("update_preimage", *map(bits, (-0.0, -0.0, -0.0))),
                       ("update_postimage", *map(bits, (0.0, 0.0, 0.0)))]
    view.apply(second)
    held = [tuple(bits(r[c]) for c in cols) for r in view.rows().to_pylist()]
    assert tuple(map(bits, (0.0, 0.0, 0.0, 1, 0.0, -0.0))) in held and len(held) == 2


def test_interval_join_outputs_negative_zero_and_nan_payloads_as_the_rows_had_them(tmp_path):
    schema = pa.schema([("k", pa.float64()), ("ts", pa.timestamp("us")), ("v", pa.float64())])
    op = IntervalJoin(schema, schema, "k", left_time="ts", right_time="ts", lower=-SEC, upper=SEC, delay=SEC,
                      how="full")
    runner = LocalRunner(op, str(tmp_path / "cp"), config=StateConfig(store="memory", local_dir=str(tmp_path / "l")))
    left = pa.Table.from_pylist([{"k": -0.0, "ts": T0, "v": -0.0}, {"k": NAN_PAYLOAD, "ts": T0, "v": NAN_PAYLOAD}],
                                schema)
    right = pa.Table.from_pylist([{"k": 0.0, "ts": T0, "v": -0.0}], schema)
    out = runner.run(left, right, final=True).to_pylist()
    assert len(out) == 2, out
    rows = {bits(r["k"]): r for r in out}   # the key column is the left's key (Spark's join using a column)
    joined, unmatched = rows[bits(-0.0)], rows[bits(NAN_PAYLOAD)]
    assert [bits(joined[c]) for c in ("k", "v_left", "v_right")] == list(map(bits, [-0.0, -0.0, -0.0]))
    assert [bits(v) for v in unmatched.values() if isinstance(v, float)] == list(map(bits, [NAN_PAYLOAD] * 2))


def test_enrichment_outputs_negative_zero_and_nan_payloads_as_the_rows_had_them(tmp_path):
    events = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("x", pa.float64())])
    table = pa.schema([("k", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("y", pa.float64())])
    op = EnrichmentJoin(events, table, "k", stream_time="ts", changes=ChangeFormat.plain("k", time="at"),
                        how="left", delay=SEC)
    runner = LocalRunner(op, str(tmp_path / "cp"), config=StateConfig(store="memory", local_dir=str(tmp_path / "l")))
    runner.run(events.empty_table(), pa.Table.from_pylist(
        [{"k": 1, "op": "upsert", "at": T0 - SEC, "y": -0.0}, {"k": 2, "op": "upsert", "at": T0 - SEC,
                                                                "y": NAN_PAYLOAD}], table))
    out = runner.run(pa.Table.from_pylist([{"k": 1, "ts": T0, "x": -0.0}, {"k": 2, "ts": T0, "x": NAN_PAYLOAD}],
                                          events), table.empty_table(), final=True).to_pylist()
    got = sorted(((r["k"], bits(r["x"]), bits(r["y"])) for r in out), key=repr)
    assert got == [(1, bits(-0.0), bits(-0.0)), (2, bits(NAN_PAYLOAD), bits(NAN_PAYLOAD))]


def test_canonical_order_orders_negative_zero_and_nan_payloads_whatever_the_input_order():
    from streamjoin.kit import canonical_sort_keys, sort_canonically

    values = [0.0, -0.0, NAN, NAN_PAYLOAD, -NAN, 1.0]
    table = pa.table({"k": pa.array(values, pa.float64()), "i": pa.array([0] * len(values))})
    keys = canonical_sort_keys(table.schema, ["k"])
    forward = [bits(v) for v in sort_canonically(table, keys).column("k").to_pylist()]
    backward = [bits(v) for v in sort_canonically(table.take(pa.array(range(len(values))[::-1])), keys)
                .column("k").to_pylist()]
    assert forward == backward


def test_table_join_key_stage_picks_the_same_change_of_tied_negative_and_positive_zero_keys(tmp_path):
    left = pa.schema([("id", pa.float64()), ("g", pa.int64()), ("op", pa.string()), ("at", pa.int64())])
    right = pa.schema([("rid", pa.int64()), ("g", pa.int64()), ("op", pa.string()), ("at", pa.int64())])
    rows = [{"id": 0.0, "g": 1, "op": "upsert", "at": 1}, {"id": -0.0, "g": 1, "op": "upsert", "at": 1}]
    outputs = []
    for name, order in (("a", rows), ("b", rows[::-1])):
        join = TableTableJoin(left, right, "g", left_key="id", right_key="rid", how="inner", left_time="at",
                              right_time="at")
        runner = PlanRunner(join.plan, str(tmp_path / name),
                                       config=StateConfig(store="memory", local_dir=str(tmp_path / f"{name}l")))
        out = runner.run(pa.Table.from_pylist(order, left),
                         pa.Table.from_pylist([{"rid": 7, "g": 1, "op": "upsert", "at": 1}], right))
        outputs.append([bits(v) for v in out.column("id").to_pylist()])
    assert outputs[0] == outputs[1] and len(outputs[0]) == 1
