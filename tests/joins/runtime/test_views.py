"""The column types a join definition records (``str(type)``) read back as the types they were
(:func:`streamjoin.runtime.views.arrow_type`), nested ones too, so ``read_state`` and a restart
read the definition of a join that keeps lists, structs or maps."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.defaults import column_entries, entries_schema
from streamjoin.runtime.views import arrow_type

TYPES = [
    pa.int8(), pa.float32(), pa.string(), pa.large_binary(), pa.binary(4), pa.timestamp("us", "UTC"),
    pa.timestamp("ms"), pa.date32(), pa.time64("us"), pa.duration("ns"), pa.decimal128(38, 10),
    pa.dictionary(pa.int8(), pa.string()),
    pa.list_(pa.string()), pa.list_(pa.field("element", pa.int32())), pa.large_list(pa.int64()),
    pa.list_(pa.timestamp("us", "UTC"), 3),
    pa.struct([("sku", pa.string()), pa.field("qty", pa.int32(), False)]), pa.struct([]),
    pa.map_(pa.string(), pa.list_(pa.string())), pa.map_(pa.int32(), pa.float64(), keys_sorted=True),
    pa.list_(pa.struct([("x", pa.int32()), ("y", pa.list_(pa.decimal128(5, 2)))])),
    pa.struct([("a,b", pa.map_(pa.string(), pa.struct([("c", pa.date32())])))]),
]


@pytest.mark.parametrize("kind", TYPES, ids=str)
def test_views_arrow_type_reads_back_the_type_a_definition_records(kind):
    assert arrow_type(str(kind)) == kind
    schema = pa.schema([("v", kind)])
    assert entries_schema(column_entries(schema)) == schema


@pytest.mark.parametrize("text", ["list<x>", "struct<a int32>", "map<int32>", "map<int32, string ('v')>",
                                  "struct<a: int32, b: nothing>"])
def test_views_arrow_type_refuses_a_type_it_cannot_read(text):
    with pytest.raises(JoinDefinitionError, match="cannot read a column of type"):
        arrow_type(text)
