"""Column types in error messages, named as Spark SQL names them."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.keys import common_key_type
from streamjoin.kit.typenames import type_name
from streamjoin.testing import LocalJoins


@pytest.mark.parametrize(("kind", "name"), [
    (pa.int8(), "tinyint"), (pa.int16(), "smallint"), (pa.int32(), "int"), (pa.int64(), "bigint"),
    (pa.float32(), "float"), (pa.float64(), "double"), (pa.bool_(), "boolean"),
    (pa.string(), "string"), (pa.large_string(), "string"), (pa.binary(), "binary"),
    (pa.date32(), "date"), (pa.timestamp("us", "UTC"), "timestamp"), (pa.timestamp("ms", "Europe/Paris"), "timestamp"),
    (pa.timestamp("us"), "timestamp_ntz"), (pa.decimal128(7, 2), "decimal(7,2)"),
    (pa.duration("us"), "interval day to second"), (pa.time64("us"), "time(6)"),
    (pa.dictionary(pa.int32(), pa.string()), "string"),
    (pa.list_(pa.struct([("n", pa.int32()), ("tags", pa.list_(pa.string()))])), "array<struct<n:int,tags:array<string>>>"),
    (pa.map_(pa.string(), pa.list_(pa.float64())), "map<string,array<double>>"),
])
def test_type_name_is_spark_sqls_name(kind: pa.DataType, name: str) -> None:
    assert type_name(kind) == name


@pytest.mark.parametrize("kind", [pa.uint32(), pa.float16(), pa.timestamp("ns"), pa.decimal256(50, 2)])
def test_type_name_is_arrows_name_where_spark_has_no_such_type(kind: pa.DataType) -> None:
    assert type_name(kind) == str(kind)


def test_type_name_incompatible_key_columns_are_named_in_spark_types() -> None:
    with pytest.raises(JoinDefinitionError, match=r"left 'k' \(bigint\) and right 'k' \(string\) have incompatible"):
        common_key_type("k", pa.int64(), "k", pa.string())


def test_type_name_interval_join_time_column_of_another_type_is_named_in_spark_types(tmp_path) -> None:
    left = pa.table({"k": [1], "t": pa.array([1], pa.int64())})
    right = pa.table({"k": [1], "t": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us", "UTC"))})
    joins = LocalJoins(str(tmp_path))
    joins.begin(0, final=True)
    with pytest.raises(JoinDefinitionError, match=r"time column 't' must be a timestamp .*not bigint; cast it first"):
        joins.interval_join(left, right, "k", left_time="t", right_time="t", lower="0 seconds", upper="1 second",
                            delay="1 minute")
