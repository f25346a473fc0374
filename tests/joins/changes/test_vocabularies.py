"""The vocabulary registry (streamjoin.changes): adding a vocabulary is one new class.

A small Maxwell-like vocabulary (``type`` in insert/update/delete, the row in a ``data`` struct,
``ts`` in milliseconds) is defined here, registered, detected, and run through the engine-free
enrichment join and table-table join; both give what the same history gives in the plain
vocabulary.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.changes import (
    DELETE,
    OP,
    SEQ,
    TIME,
    UPSERT,
    ChangeFormat,
    ChangeVocabulary,
    Normalised,
    detect_vocabulary,
    get_vocabulary,
    is_text,
    is_time,
    micros,
    normalise,
    op_codes,
    pre_stage,
    register_vocabulary,
    require_column,
    require_sequence,
    resolve_format,
    routable_format,
    sequence_numbers,
    struct_rows,
    to_internal,
    unregister_vocabulary,
    vocabularies,
)
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.local import LocalRunner
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.table.operator import TableTableJoin


class MaxwellLike(ChangeVocabulary):
    """``type`` in insert/update/delete, the row (also a delete's) in ``data``, ``ts`` in ms."""

    name = "maxwell_like"
    ops = {"insert": UPSERT, "update": UPSERT, "delete": DELETE}

    def detect(self, schema: pa.Schema) -> bool:
        return {"type", "data", "ts"} <= set(schema.names) and pa.types.is_struct(schema.field("data").type)

    def default_format(self, schema, key, *, time, sequence, time_argument) -> ChangeFormat:
        return ChangeFormat(self, key, time or "ts", op="type", sequence=sequence, time_unit="ms", column="data")

    def validate(self, schema: pa.Schema, fmt: ChangeFormat) -> list[pa.Field]:
        require_column(schema, fmt.op, is_text, "a string column")
        require_column(schema, fmt.time, is_time, "a timestamp or integer column")
        require_sequence(schema, fmt.sequence)
        require_column(schema, fmt.column, pa.types.is_struct, "a struct of the row's columns")
        return list(schema.field(fmt.column).type)

    def normalise(self, table: pa.Table, fmt: ChangeFormat, *, timeless_snapshots: bool = False) -> Normalised:
        fields = fmt.row_fields(table.schema)
        ops = op_codes(table.column(fmt.op), self.ops)
        times = micros(table.column(fmt.time), fmt.time_unit)
        row = struct_rows(table.column(fmt.column), fields)
        return to_internal(table, fmt, ops, times, sequence_numbers(table, fmt), row,
                           timeless_snapshots=timeless_snapshots)


@pytest.fixture
def maxwell():
    vocabulary = register_vocabulary(MaxwellLike())
    yield vocabulary
    unregister_vocabulary(vocabulary.name)


EPOCH = dt.datetime(1970, 1, 1)
ROW = pa.schema([("id", pa.int64()), ("name", pa.string())])
MAXWELL = pa.schema([("type", pa.string()), ("ts", pa.int64()), ("data", pa.struct(ROW))])
PLAIN = pa.schema([("id", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("name", pa.string())])
PLAIN_FORMAT = ChangeFormat.plain("id", time="at")

# one history of a users table per batch: (id, op, second, name); "truncate" is an unknown op
HISTORY = [
    [(1, "insert", 1, "ann"), (2, "insert", 2, "bob")],
    [(1, "update", 5, "ann2"), (2, "delete", 6, "bob"), (3, "insert", 6, "cy"), (9, "truncate", 6, None)],
    [(3, "update", 9, "cy2"), (2, "insert", 10, "bob2")],
]


def _maxwell(changes) -> pa.Table:
    return pa.Table.from_pylist([{"type": op, "ts": s * 1000, "data": {"id": i, "name": n}}
                                 for i, op, s, n in changes], schema=MAXWELL)


def _plain(changes) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "op": op, "at": EPOCH + dt.timedelta(seconds=s), "name": n}
                                 for i, op, s, n in changes], schema=PLAIN)


changes_strategy = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["insert", "update", "delete", "replace"]),
                                      st.integers(-10**5, 10**5), st.sampled_from(["ann", "bob", None])), max_size=12)


@given(changes=changes_strategy)
def test_vocabularies_new_vocabulary_normalises_like_the_plain_one(changes):
    register_vocabulary(MaxwellLike(), replace=True)
    try:
        fmt = ChangeFormat("maxwell_like", "id", "ts", op="type", time_unit="ms", column="data")
        ours, plain = normalise(_maxwell(changes), fmt), normalise(_plain(changes), PLAIN_FORMAT)
    finally:
        unregister_vocabulary("maxwell_like")
    columns = ["id", OP, TIME, SEQ, "name"]
    assert ours.changes.select(columns).equals(plain.changes.select(columns))
    assert ours.aside.column("_reason").to_pylist() == plain.aside.column("_reason").to_pylist()
    assert ours.counts == plain.counts


def test_vocabularies_registered_vocabulary_is_detected_and_named(maxwell):
    assert detect_vocabulary(MAXWELL) is maxwell
    assert vocabularies()[0] is maxwell                     # the newest is asked first
    detected = resolve_format(MAXWELL, None, ["id"])
    assert detected == resolve_format(MAXWELL, "maxwell_like", ["id"]) == ChangeFormat(
        maxwell, ("id",), "ts", op="type", time_unit="ms", column="data")
    assert detected.definition()["vocabulary"] == "maxwell_like"
    assert detect_vocabulary(PLAIN).name == "plain"      # the built-ins are still told apart as before
    assert get_vocabulary("maxwell_like") is maxwell


def test_vocabularies_registry_refuses_a_taken_name_and_unknown_names(maxwell):
    with pytest.raises(JoinDefinitionError, match="already registered"):
        register_vocabulary(MaxwellLike())
    with pytest.raises(JoinDefinitionError, match="ChangeVocabulary instance"):
        register_vocabulary("maxwell_like")
    with pytest.raises(JoinDefinitionError, match="unknown change vocabulary 'canal'.*maxwell_like"):
        ChangeFormat("canal", "id", "ts")
    with pytest.raises(JoinDefinitionError, match="cannot tell the vocabulary"):
        resolve_format(pa.schema([("id", pa.int64())]), None, ["id"])


def test_vocabularies_one_detection_rule_for_both_joins(maxwell):
    with pytest.raises(JoinDefinitionError, match="maxwell_like changes go through streamjoin.changes.pre_stage"):
        TableTableJoin(MAXWELL, PLAIN, "id", left_key="id", right_key="id", right_time="at")
    events = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us"))])
    with pytest.raises(JoinDefinitionError, match="maxwell_like changes go through streamjoin.changes.pre_stage"):
        EnrichmentJoin(events, MAXWELL, "id", stream_time="ts", changes=resolve_format(MAXWELL, None, ["id"]))


EVENTS = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("what", pa.string())])
EVENT_BATCHES = [[(1, 0), (1, 1), (2, 3)], [(1, 5), (2, 6), (3, 7), (2, 2)], [(3, 9), (2, 10), (1, 11)]]


def _enrich(tmp_path, fmt: ChangeFormat, batches: list[pa.Table]) -> list[tuple]:
    """Run the enrichment join in process over ``batches`` of changes (pre-staged when the
    vocabulary needs it); return (id, second, what, name) rows."""
    routable = routable_format(fmt)
    staged = [pre_stage(b, fmt)[0] if fmt.vocabulary.needs_pre_stage else b for b in batches]
    join = EnrichmentJoin(EVENTS, staged[0].schema, "id", stream_time="ts", changes=routable)
    runner = LocalRunner(join, str(tmp_path / fmt.vocabulary.name), partitions=2,
                         config=StateConfig(store="memory", local_dir=str(tmp_path / f"{fmt.vocabulary.name}-local")))
    rows = []
    for events, changes in zip(EVENT_BATCHES + [[]], staged + [staged[0].schema.empty_table()]):
        table = pa.Table.from_pylist([{"id": i, "ts": EPOCH + dt.timedelta(seconds=s), "what": f"{i}@{s}"}
                                      for i, s in events], schema=EVENTS)
        out = runner.run(table, changes, final=not events)
        rows += [(r["id"], int((r["ts"] - EPOCH).total_seconds()), r["what"], r["name"]) for r in out.to_pylist()]
    return sorted(rows)


def test_vocabularies_new_vocabulary_enriches_like_the_plain_one(tmp_path, maxwell):
    fmt = resolve_format(MAXWELL, None, ["id"])
    ours = _enrich(tmp_path, fmt, [_maxwell(b) for b in HISTORY])
    plain = _enrich(tmp_path, PLAIN_FORMAT, [_plain(b) for b in HISTORY])
    assert ours == plain
    assert (1, 1, "1@1", "ann") in ours and (2, 6, "2@6", None) in ours and (3, 9, "3@9", "cy2") in ours


ORDERS = pa.schema([("oid", pa.int64()), ("user_id", pa.int64()), ("item", pa.string()), ("op", pa.string()),
                    ("at", pa.int64())])
ORDER_BATCHES = [[(10, 1, "tea", "insert", 1)], [(11, 2, "pen", "insert", 3), (12, 3, "cup", "insert", 6)],
                 [(10, 2, "tea", "update", 9)]]


def _view_changes(tmp_path, fmt: ChangeFormat, batches: list[pa.Table]) -> list[list[tuple]]:
    """Run the table-table join (users full-joined with orders) in process; the view changes per
    batch, in output order."""
    staged = [pre_stage(b, fmt)[0] if fmt.vocabulary.needs_pre_stage else b for b in batches]
    join = TableTableJoin(staged[0].schema, ORDERS, (["id"], ["user_id"]), left_key="id", right_key="oid",
                          how="full", left_changes=routable_format(fmt), right_time="at")
    root = tmp_path / f"table-{fmt.vocabulary.name}"
    runner = PlanRunner(join.plan, str(root / "cp"), partitions=2,
                                   config=StateConfig(store="memory", local_dir=str(root / "local")))
    columns = ["id", "name", "oid", "item", "_change_type", "_commit_version"]
    out = []
    for users, orders in zip(staged, ORDER_BATCHES):
        order_rows = pa.Table.from_pylist([dict(zip(ORDERS.names, r)) for r in orders], schema=ORDERS)
        out.append([tuple(r.values()) for r in runner.run(users, order_rows).select(columns).to_pylist()])
    return out


def test_vocabularies_new_vocabulary_keeps_a_view_like_the_plain_one(tmp_path, maxwell):
    fmt = resolve_format(MAXWELL, "maxwell_like", ["id"])
    ours = _view_changes(tmp_path, fmt, [_maxwell(b) for b in HISTORY])
    plain = _view_changes(tmp_path, PLAIN_FORMAT, [_plain(b) for b in HISTORY])
    assert ours == plain
    assert (3, "cy", 12, "cup", "insert", 1) in ours[1]
