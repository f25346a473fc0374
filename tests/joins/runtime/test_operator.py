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
    with pytest.raises(JoinError, match="key column 'user' is declared bigint but holds string; 'u1'"):
        key_columns(table, ["user"], [pa.int64()])


def test_operator_waits_for_watermark_only_where_some_output_waits_for_it():
    # what decides whether a streaming join needs the Python flush source (streamjoin.spark.flush):
    # outer and anti interval joins, as-of enrichment and expiring table rows wait; the rest emit
    # everything in the version whose rows caused it
    import datetime as dt

    from streamjoin.changes import ChangeFormat
    from streamjoin.enrichment.operator import EnrichmentJoin
    from streamjoin.interval.operator import IntervalJoin
    from streamjoin.table.operator import TableTableJoin

    events = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC")), ("v", pa.string())])
    table = pa.schema([("k", pa.int64()), ("at", pa.timestamp("us", "UTC")), ("x", pa.string()), ("op", pa.string())])

    def interval(how: str) -> bool:
        return IntervalJoin(events, events, "k", left_time="t", right_time="t", lower=dt.timedelta(0),
                            upper=dt.timedelta(seconds=1), delay=dt.timedelta(0), how=how).plan.waits_for_watermark

    assert {how: interval(how) for how in ("inner", "left_semi", "left", "right", "full", "left_anti")} == {
        "inner": False, "left_semi": False, "left": True, "right": True, "full": True, "left_anti": True}

    def enrichment(mode: str) -> bool:
        return EnrichmentJoin(events, table, "k", stream_time="t", changes=ChangeFormat.plain("k", time="at"),
                              mode=mode).plan.waits_for_watermark

    assert (enrichment("as_of"), enrichment("latest")) == (True, False)

    def table_join(**options) -> bool:
        return TableTableJoin(table, table, "k", left_key="k", right_key="k", left_time="at", right_time="at",
                              **options).plan.waits_for_watermark

    assert table_join() is False and table_join(retention="1 hour") is False
    assert table_join(retention="1 hour", expire_rows=True) is True
