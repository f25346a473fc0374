"""Schema evolution rules (streamjoin.runtime.evolution) and the binding's evolution records."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from streamjoin.errors import CheckpointMismatchError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.evolution import SchemaPlace, as_schema, schema_evolution, widens

PLACES = (SchemaPlace("table", ("table",), fixed=("id",), derived=(("kept",),)),)


def _definition(columns, kept=None, **extra):
    return {"kind": "k", "table": [list(c) for c in columns], "kept": kept or [c[0] for c in columns], **extra}


@pytest.mark.parametrize("old, new, ok", [
    ("int8", "int16", True), ("int16", "int64", True), ("int64", "int32", False), ("uint8", "int16", True),
    ("uint32", "int32", False), ("float", "double", True), ("double", "float", False),
    ("decimal128(5, 2)", "decimal128(7, 2)", True), ("decimal128(5, 2)", "decimal128(7, 4)", True),
    ("decimal128(5, 2)", "decimal128(6, 4)", False), ("decimal128(5, 2)", "decimal128(7, 1)", False),
    ("date32[day]", "timestamp[us]", True), ("date32[day]", "timestamp[us, tz=UTC]", False),
    ("int64", "string", False), ("string", "large_string", False),
])
def test_widens_follows_the_type_widening_rules(old, new, ok):
    assert widens(old, new) is ok


def test_schema_evolution_lists_added_dropped_and_widened_columns():
    old = _definition([("id", "int64"), ("n", "int32"), ("gone", "string")])
    new = _definition([("id", "int64"), ("n", "int64"), ("extra", "double")])
    (found,) = schema_evolution(old, new, PLACES, where="ck")
    assert (found.added, found.dropped, found.widened) == ((("extra", "double"),), ("gone",), (("n", "int32", "int64"),))
    assert found.lines() == ["table: added extra (double)", "table: dropped gone", "table: widened n int32 -> int64"]


def test_schema_evolution_is_none_when_another_option_differs():
    old = _definition([("id", "int64")], ttl=1)
    new = _definition([("id", "int64"), ("x", "string")], ttl=2)
    assert schema_evolution(old, new, PLACES, where="ck") is None
    assert schema_evolution(old, new, (), where="ck") is None


@pytest.mark.parametrize("new, words", [
    ([("id", "int64"), ("n", "int16")], ["'n'", "int32 -> int16", "Cast the column back"]),
    ([("id", "int32"), ("n", "int32")], ["'id'", "key or time column", "int64 -> int32"]),
    ([("id", "int64"), ("m", "int32")], ["'n'", "'m'", "rename"]),
])
def test_schema_evolution_refuses_what_state_cannot_follow(new, words):
    old = _definition([("id", "int64"), ("n", "int32")])
    with pytest.raises(CheckpointMismatchError) as caught:
        schema_evolution(old, _definition(new), PLACES, where="ck")
    assert all(w in str(caught.value) for w in words), str(caught.value)


def test_as_schema_reads_old_rows_in_the_new_columns():
    old = pa.table({"id": pa.array([1, 2], pa.int64()), "n": pa.array([3, None], pa.int32()),
                    "gone": ["a", "b"], "day": pa.array([dt.date(2024, 1, 2), None], pa.date32())})
    new = pa.schema([("id", pa.int64()), ("n", pa.int64()), ("day", pa.timestamp("us")), ("extra", pa.float64())])
    out = as_schema(old, new)
    assert out.schema == new
    assert out.to_pylist() == [{"id": 1, "n": 3, "day": dt.datetime(2024, 1, 2), "extra": None},
                               {"id": 2, "n": None, "day": None, "extra": None}]
    assert as_schema(out, new) is out


def test_binding_records_each_evolution_and_refuses_narrowing(tmp_path):
    cp = Checkpoint(str(tmp_path / "ck"))
    first = _definition([("id", "int64"), ("n", "int32")])
    cp.binding.bind(first, 1, places=PLACES)
    added = _definition([("id", "int64"), ("n", "int32"), ("x", "string")])
    cp.binding.bind(added, 1, places=PLACES)
    cp.binding.bind(added, 1, places=PLACES)            # the same again: nothing new recorded
    widened = _definition([("id", "int64"), ("n", "int64"), ("x", "string")])
    cp.binding.bind(widened, 1, places=PLACES)
    records = cp.binding.evolutions()
    assert [r["changes"] for r in records] == [["table: added x (string)"], ["table: widened n int32 -> int64"]]
    assert cp.binding.definition() == widened
    assert json.loads((tmp_path / "ck" / "streamjoin.json").read_text())["definition"] == first
    with pytest.raises(CheckpointMismatchError, match="int64 -> int32"):
        cp.binding.bind(added, 1, places=PLACES)          # back to the narrower type
    with pytest.raises(CheckpointMismatchError, match="another join definition"):
        cp.binding.bind(_definition([("id", "int64"), ("x", "string")]), 1)   # no places: no evolution


def test_schema_evolution_accepts_an_option_that_grows_and_refuses_one_that_shrinks():
    from streamjoin.runtime.evolution import OptionRule

    rules = (OptionRule(("delay_us",), "delay"), OptionRule(("ttl_us",), "table_ttl", absent_is_most=True),
             OptionRule(("keys", "retention"), "retention", "retention_us", absent_is_most=True))
    old = _definition([("id", "int64")], delay_us=10_000_000, ttl_us=60_000_000,
                      keys={"retention": {"retention_us": 5, "expire_rows": True}})
    longer = _definition([("id", "int64")], delay_us=20_000_000, keys={})          # TTL and retention: none
    found = schema_evolution(old, longer, PLACES, where="ck", options=rules)
    assert [line for c in found for line in c.lines()] == [
        "delay: 10 seconds -> 20 seconds", "table_ttl: 1 minute -> none (forever)", "retention: 5 microseconds -> none (forever)"]
    with pytest.raises(CheckpointMismatchError, match="delay: 10 seconds -> 5 seconds shrinks"):
        schema_evolution(old, {**old, "delay_us": 5_000_000}, PLACES, where="ck", options=rules)
    with pytest.raises(CheckpointMismatchError, match="table_ttl: none .forever. -> 1 minute"):
        schema_evolution(longer, {**longer, "ttl_us": 60_000_000}, PLACES, where="ck", options=rules)
    other = {**old, "keys": {"retention": {"retention_us": 9, "expire_rows": False}}}   # expire_rows changed too
    assert schema_evolution(old, other, PLACES, where="ck", options=rules) is None
    assert schema_evolution(old, {**old, "how": "left"}, PLACES, where="ck", options=rules) is None
