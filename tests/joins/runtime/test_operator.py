"""The operator contract's shared helpers: conforming an input batch to its declared schema."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamjoin.enrichment.state import key_columns
from streamjoin.errors import JoinError
from streamjoin.runtime.operator import conform


def test_conform_string_key_where_an_integer_was_declared_names_column_types_and_value():
    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    batch = pa.table({"k": pa.array(["7", "abc"]), "v": pa.array(["x", "y"])})
    with pytest.raises(JoinError) as caught:
        conform(batch, schema, "stream")
    message = str(caught.value)
    assert "'k'" in message and "stream" in message and "int64" in message and "'abc'" in message


def test_conform_converts_what_converts():
    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    batch = pa.table({"v": pa.array(["x"]), "k": pa.array([7], pa.int32())})
    assert conform(batch, schema, "stream").to_pydict() == {"k": [7], "v": ["x"]}


def test_enrichment_key_columns_name_a_key_that_does_not_convert():
    table = pa.table({"user": pa.array(["u1"])})
    with pytest.raises(JoinError, match="key column 'user'.*int64.*'u1'"):
        key_columns(table, ["user"], [pa.int64()])
