"""Sorting out arriving rows (:mod:`streamjoin.kit.arrivals`): heartbeats."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.arrivals import check_heartbeats, heartbeat_rows, sort_out
from streamjoin.kit.order import canonical_sort_keys

SCHEMA = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("x", pa.float64()), ("s", pa.string())])
T0 = dt.datetime(2024, 1, 1)


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def table(*rows: tuple) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rows], schema=SCHEMA)


def found(rows: pa.Table, heartbeats: bool, watermark: int):
    return sort_out(rows, schema=SCHEMA, name="left", order=canonical_sort_keys(SCHEMA, ["ts", "k"]), time="ts",
                    key=["k"], watermark=watermark, heartbeats=heartbeats)


ROWS = table(
    (None, at(5), None, None),          # heartbeat
    (None, at(1), None, None),          # heartbeat older than the watermark: still only a heartbeat
    (None, None, None, None),           # no time: null event time
    (None, at(6), float("nan"), None),  # a NaN is a value: null key
    (None, at(7), None, ""),            # an empty string is a value: null key
    (1, at(8), None, None),             # a key: a row
)
WATERMARK = int((at(3) - dt.datetime(1970, 1, 1)) / dt.timedelta(microseconds=1))


def test_arrivals_heartbeats_are_rows_with_only_an_event_time_never_late_or_set_aside():
    got = found(ROWS, True, WATERMARK)
    ts = got.table.column("ts").to_pylist()
    assert [t for t, b in zip(ts, got.heartbeat) if b] == [at(1), at(5)]
    assert got.counts() == {"late": 0, "null_time": 1, "null_key": 2, "heartbeat": 2}
    assert got.late.sum() == 0
    assert got.aside(keyless_kept=False).column("_reason").to_pylist() == ["null event time", "null key", "null key"]
    assert [t for t, keep in zip(ts, got.keep) if keep] == [at(8)]


def test_arrivals_without_heartbeats_rows_with_only_a_time_are_late_or_null_key():
    got = found(ROWS, False, WATERMARK)
    assert got.counts() == {"late": 1, "null_time": 1, "null_key": 3, "heartbeat": 0}


def test_arrivals_heartbeat_rows_of_an_empty_table_are_none():
    assert heartbeat_rows(SCHEMA.empty_table(), "ts").size == 0


@pytest.mark.parametrize("value", [1, None, "False"])
def test_arrivals_check_heartbeats_refuses_anything_but_a_bool(value):
    with pytest.raises(JoinDefinitionError, match="heartbeats must be True or False"):
        check_heartbeats(value)
    assert check_heartbeats(True) is True and check_heartbeats(False) is False
