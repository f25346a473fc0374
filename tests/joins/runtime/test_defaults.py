"""Column defaults (Spark's ``EXISTS_DEFAULT``): the literals read, the definition entries, rows
read with them, and a default that changes on a column the checkpoint has refused."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from streamjoin.errors import CheckpointMismatchError, JoinDefinitionError
from streamjoin.runtime.defaults import column_entries, default_value, entries_schema, entry_defaults
from streamjoin.runtime.evolution import SchemaPlace, as_schema, schema_evolution


@pytest.mark.parametrize("text, type_, value", [
    ("0", pa.int32(), 0), ("7Y", pa.int8(), 7), ("-3S", pa.int16(), -3), ("12L", pa.int64(), 12),
    ("1.50BD", pa.decimal128(5, 2), Decimal("1.50")), ("2.5D", pa.float64(), 2.5), ("2.5", pa.float64(), 2.5),
    ("CAST(2.5 AS FLOAT)", pa.float32(), 2.5), ("'EU'", pa.string(), "EU"), ("'it''s'", pa.string(), "it's"),
    ("TRUE", pa.bool_(), True), ("false", pa.bool_(), False), ("NULL", pa.string(), None),
    ("DATE '2024-02-29'", pa.date32(), dt.date(2024, 2, 29)),
    ("TIMESTAMP_NTZ '2024-01-01 10:00:00'", pa.timestamp("us"), dt.datetime(2024, 1, 1, 10)),
    ("TIMESTAMP '2024-01-01 10:00:00'", pa.timestamp("us", "UTC"),
     dt.datetime(2024, 1, 1, 10, tzinfo=dt.timezone.utc)),
    ("X'0aff'", pa.binary(), b"\x0a\xff"),
])
def test_default_value_reads_the_literals_spark_writes(text, type_, value):
    found = default_value(text, type_, "c")
    assert found.type == type_ and found.as_py() == value


@pytest.mark.parametrize("text, type_", [("'EU'", pa.int32()), ("1.5", pa.int32()), ("now()", pa.timestamp("us")),
                                         ("'open", pa.string())])
def test_default_value_refuses_what_is_not_a_literal_of_the_type(text, type_):
    with pytest.raises(JoinDefinitionError, match=r"column 'c': its default \(EXISTS_DEFAULT metadata\)"):
        default_value(text, type_, "c")


def test_column_entries_keep_defaults_and_give_them_back():
    schema = pa.schema([pa.field("k", pa.int64()), pa.field("tier", pa.string(), metadata={"EXISTS_DEFAULT": "'basic'"})])
    entries = column_entries(schema)
    assert entries == [["k", "int64"], ["tier", "string", "'basic'"]]
    assert entry_defaults(entries) == {"tier": "'basic'"}
    back = entries_schema(entries)
    assert back.equals(schema, check_metadata=True)
    old = pa.table({"k": [1, 2]})
    assert as_schema(old, back).column("tier").to_pylist() == ["basic", "basic"]
    with pytest.raises(JoinDefinitionError, match="'tier'"):
        column_entries(pa.schema([pa.field("tier", pa.int32(), metadata={"EXISTS_DEFAULT": "'basic'"})]))


def test_schema_evolution_names_an_added_default_and_refuses_one_that_changes():
    place = SchemaPlace("table", ("table",), ("k",))
    old = {"kind": "x", "table": [["k", "int64"], ["a", "string"]]}
    added = {"kind": "x", "table": [["k", "int64"], ["a", "string"], ["tier", "string", "'basic'"]]}
    found = schema_evolution(old, added, [place], where="ck")
    assert [line for c in found for line in c.lines()] == ["table: added tier (string, default 'basic')"]
    for changed in ([["k", "int64"], ["a", "string"], ["tier", "string", "'gold'"]],
                    [["k", "int64"], ["a", "string"], ["tier", "string"]],
                    [["k", "int64"], ["a", "string", "'x'"], ["tier", "string", "'basic'"]]):
        with pytest.raises(CheckpointMismatchError, match=r"default \(EXISTS_DEFAULT\).*fixed when it is added"):
            schema_evolution(added, {"kind": "x", "table": changed}, [place], where="ck")
