"""The interval join operator on hand-written examples: bounds, emission times, nulls, late rows,
eviction. Each reads like a script: add rows to a side, check the version's output."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from streamjoin.errors import JoinError
from streamjoin.interval.operator import IntervalJoin
from streamjoin.interval.spec import ROW_ID
from streamjoin.interval.state import marks_put, rows_puts, scan_groups
from streamjoin.runtime.operator import REASON_COLUMN
from streamjoin.statestore import open_store
from streamjoin.statestore.codecs import encode_int, encode_timestamp
from tests.joins.drivers import StepDriver

T0 = dt.datetime(2024, 1, 1)
LEFT = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("q", pa.string())])
RIGHT = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("c", pa.string())])


def at(seconds: float, micros: int = 0) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds, microseconds=micros)


def rows(schema: pa.Schema, *values: tuple) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, v)) for v in values], schema=schema)


def join(how="inner", lower=-2, upper=3, delay=0, **kw) -> StepDriver:
    op = IntervalJoin(LEFT, RIGHT, "k", left_time="ts", right_time="ts", how=how, delay=dt.timedelta(seconds=delay),
                      lower=dt.timedelta(seconds=lower), upper=dt.timedelta(seconds=upper), **kw)
    return StepDriver(op, partitions=kw.pop("partitions", 1))


def out(driver: StepDriver, left=(), right=(), final=False) -> list[tuple]:
    table, _ = driver.run(rows(LEFT, *left), rows(RIGHT, *right), final=final)
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


@pytest.mark.parametrize("order", ["together", "left_first", "right_first"])
def test_interval_join_bounds_are_inclusive_to_the_microsecond(order):
    left = [(1, at(10), "s")]
    right = [(1, at(8), "lo"), (1, at(8, -1), "below"), (1, at(13), "hi"), (1, at(13, 1), "above")]
    driver = join()
    if order == "together":
        got = out(driver, left, right)
    elif order == "left_first":
        got = out(driver, left) + out(driver, (), right)
    else:
        got = out(driver, (), right) + out(driver, left)
    assert sorted(got) == [(1, at(10), "s", at(8), "lo"), (1, at(10), "s", at(13), "hi")]


def test_interval_join_negative_window_matches_only_earlier_right_rows():
    driver = join(lower=-5, upper=-2)
    got = out(driver, [(1, at(10), "s")], [(1, at(5), "a"), (1, at(8), "b"), (1, at(8, 1), "c"), (1, at(10), "d")])
    assert [r[4] for r in got] == ["a", "b"]


def test_interval_join_positive_window_excludes_equal_times():
    driver = join(lower=1, upper=2)
    got = out(driver, [(1, at(10), "s")], [(1, at(10), "same"), (1, at(11), "a"), (1, at(12), "b")])
    assert [r[4] for r in got] == ["a", "b"]


def test_interval_join_left_outer_row_is_emitted_once_the_watermark_passes_its_window():
    driver = join("left", lower=-2, upper=3)
    assert out(driver, [(1, at(10), "s")], [(2, at(10), "other")]) == []
    # watermark of the next version = min(max left, max right) - delay = 13 s: not > 13 s yet
    assert out(driver, [(3, at(13), "x")], [(2, at(13), "y")]) == []
    assert out(driver, [], [(2, at(20), "z")]) == []           # watermark 13 s again
    got = out(driver, [(3, at(14), "x")], [])                  # watermark 13 s: still nothing
    assert got == []
    # left max 14 s, right max 20 s: watermark 14 s > 13 s, so the row is due (x's window is open)
    assert out(driver) == [(1, at(10), "s", None, None)]
    assert out(driver, final=True) == [(3, at(13), "x", None, None), (3, at(14), "x", None, None)]


def test_interval_join_right_outer_row_waits_for_watermark_past_t_minus_lower():
    driver = join("right", lower=-2, upper=3)
    assert out(driver, [(8, at(0), "l")], [(1, at(10), "c")]) == []
    assert out(driver, [(8, at(12), "l")], [(9, at(12), "r")]) == []   # watermark 0 s
    assert out(driver) == []                                         # watermark 12 s = 10 - (-2)
    assert out(driver, [(8, at(13), "l")], [(9, at(13), "r")]) == []  # watermark 12 s
    assert out(driver) == [(1, None, None, at(10), "c")]             # watermark 13 s > 12 s


def test_interval_join_left_semi_emits_a_row_once_at_its_first_match():
    driver = join("left_semi", lower=0, upper=10)
    assert out(driver, [(1, at(0), "s"), (2, at(0), "t")], []) == []
    assert out(driver, [], [(1, at(1), "a"), (1, at(2), "b")]) == [(1, at(0), "s")]
    assert out(driver, [], [(1, at(3), "c"), (2, at(4), "d")]) == [(2, at(0), "t")]
    assert out(driver, final=True) == []


def test_interval_join_left_anti_emits_unmatched_rows_when_their_window_closes():
    driver = join("left_anti", lower=0, upper=2)
    assert out(driver, [(1, at(0), "m"), (2, at(0), "u")], [(1, at(1), "a")]) == []
    assert out(driver, [(3, at(5), "x")], [(3, at(5), "y")]) == []  # watermark 0 s
    assert out(driver) == [(2, at(0), "u")]                          # watermark 5 s > 0 + 2
    assert out(driver, final=True) == []


def test_interval_join_null_keys_on_preserved_sides_are_output_at_once():
    driver = join("full")
    table, (left_aside, right_aside) = driver.run(rows(LEFT, (None, at(0), "nl")), rows(RIGHT, (None, at(0), "nr")))
    assert sorted(map(repr, table.to_pylist())) == sorted(map(repr, [
        {"k": None, "ts_left": at(0), "q": "nl", "ts_right": None, "c": None},
        {"k": None, "ts_left": None, "q": None, "ts_right": at(0), "c": "nr"},
    ]))
    assert left_aside.num_rows == right_aside.num_rows == 0


@pytest.mark.parametrize("how, left_aside, right_aside", [
    ("inner", 1, 1), ("left", 0, 1), ("right", 1, 0), ("left_semi", 1, 1), ("left_anti", 0, 1),
])
def test_interval_join_null_keys_on_other_sides_are_set_aside(how, left_aside, right_aside):
    driver = join(how)
    table, asides = driver.run(rows(LEFT, (None, at(0), "nl")), rows(RIGHT, (None, at(0), "nr")))
    assert [a.num_rows for a in asides] == [left_aside, right_aside]
    for aside in asides:
        assert aside.column(REASON_COLUMN).to_pylist() == ["null key"] * aside.num_rows
    assert table.num_rows == 2 - left_aside - right_aside


def test_interval_join_sets_aside_null_times_and_late_rows_which_never_join():
    driver = join("full", delay=1)
    out(driver, [(1, at(10), "s")], [(2, at(10), "t")])
    table, (left_aside, right_aside) = driver.run(
        rows(LEFT, (1, at(8, 999_999), "late"), (1, None, "nt"), (1, at(9), "ok")),
        rows(RIGHT, (1, at(8), "late too")),
    )
    assert left_aside.schema == LEFT.append(pa.field(REASON_COLUMN, pa.string()))
    assert sorted(left_aside.to_pylist(), key=repr) == sorted([
        {"k": 1, "ts": at(8, 999_999), "q": "late", REASON_COLUMN: "late"},
        {"k": 1, "ts": None, "q": "nt", REASON_COLUMN: "null event time"},
    ], key=repr)
    assert right_aside.to_pylist() == [{"k": 1, "ts": at(8), "c": "late too", REASON_COLUMN: "late"}]
    assert table.num_rows == 0
    final = out(driver, final=True)
    assert {r[2] for r in final} == {"s", "ok", None} and len(final) == 3


def test_interval_join_row_expired_on_arrival_is_matched_then_output_at_once():
    driver = join("left", lower=-6, upper=-4)        # a left row waits for right rows 4..6 s before it
    assert out(driver, [(9, at(20), "push")], [(1, at(15), "r15"), (9, at(20), "push")]) == []
    # watermark 20 s: left rows at 20 s and later are on time, but can only match right rows that
    # are in state already (their windows end at t - 4 s < 20 s), and are output or dropped at once
    got = out(driver, [(1, at(20), "hit"), (2, at(21), "miss")], [])
    assert got == [(1, at(20), "hit", at(15), "r15"), (2, at(21), "miss", None, None), (9, at(20), "push", None, None)]
    assert all(key[:1] != b"L" for key, _ in driver.state()[0])
    assert out(driver, final=True) == []


def test_interval_join_eviction_leaves_only_the_watermark():
    driver = join("full", lower=-1, upper=1)
    out(driver, [(k, at(s), "l") for k in range(5) for s in range(10)], [(k, at(s), "r") for k in range(5) for s in range(10)])
    full = len(driver.state()[0])
    out(driver, [(9, at(5), "l")], [(9, at(5), "r")])
    partial = len(driver.state()[0])
    out(driver, [(8, at(100), "l")], [(9, at(100), "r")])
    out(driver)
    assert full > partial > len(driver.state()[0]) == 2 + 1   # two row blobs and the watermark
    out(driver, final=True)
    assert [key for key, _ in driver.state()[0]] == [b"\x00watermark"]


def test_interval_join_batch_run_is_the_relational_join():
    driver = join("full", lower=0, upper=1)
    got = out(driver, [(1, at(0), "a"), (2, at(0), "b")], [(1, at(1), "x"), (1, at(2), "y")], final=True)
    assert got == sorted([(1, at(0), "a", at(1), "x"), (2, at(0), "b", None, None), (1, None, None, at(2), "y")], key=repr)


def test_interval_join_compares_instants_across_time_zones():
    left = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us", "UTC"))])
    right = pa.schema([("k", pa.int64()), ("t2", pa.timestamp("ms", "America/New_York"))])
    op = IntervalJoin(left, right, "k", left_time="ts", right_time="t2", lower=dt.timedelta(0),
                      upper=dt.timedelta(seconds=1), delay=dt.timedelta(0))
    utc = dt.timezone.utc
    driver = StepDriver(op)
    table, _ = driver.run(pa.table({"k": [1], "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=utc)], left.field("ts").type)}),
                          pa.table({"k": [1, 1], "t2": pa.array([dt.datetime(2024, 1, 1, 0, 0, 1, tzinfo=utc),
                                                                 dt.datetime(2024, 1, 1, 0, 0, 2, tzinfo=utc)],
                                                                right.field("t2").type)}))
    assert table.num_rows == 1 and table.schema.field("t2").type == right.field("t2").type


def test_interval_join_refuses_a_batch_without_a_declared_column():
    driver = join()
    with pytest.raises(JoinError, match="lacks columns"):
        driver.run(pa.table({"k": [1]}), rows(RIGHT))


@pytest.mark.parametrize("options", [dict(group_rows=1, blob_rows=1), dict(compression="zstd"), dict(compression="lz4")])
def test_interval_join_tuning_does_not_change_results(options):
    script = [([(k, at(s), "l") for k in range(3) for s in (0, 4, 8)], [(k, at(s + 1), "r") for k in range(3) for s in (0, 5)]),
              ([(1, at(12), "l")], [(2, at(12), "r")]), ([], [])]
    results = []
    for kwargs in ({}, options):
        driver = join("full", lower=-1, upper=2, **kwargs)
        results.append([out(driver, left, right) for left, right in script] + [out(driver, final=True)])
    assert results[0] == results[1]


def test_interval_state_files_rows_by_expiry_bucket_in_arrow_blobs_with_match_marks():
    driver = join("left", lower=-1, upper=2, bucket=dt.timedelta(seconds=1), blob_rows=2)
    out(driver, [(1, at(0), "a"), (2, at(0, 1), "b"), (3, at(0, 2), "c"), (4, at(1), "d")], [(1, at(1), "x")])
    base = int((T0 - dt.datetime(1970, 1, 1)).total_seconds()) * 1_000_000
    bucket = lambda side, s: side + encode_timestamp(base + s * 1_000_000)   # noqa: E731
    entries = dict(driver.state()[0])
    assert sorted(entries) == sorted([
        bucket(b"L", 2) + b"m" + encode_int(0),
        bucket(b"L", 2) + b"r" + encode_int(0) + (0).to_bytes(4, "big"),
        bucket(b"L", 2) + b"r" + encode_int(0) + (1).to_bytes(4, "big"),
        bucket(b"L", 3) + b"r" + encode_int(0) + (0).to_bytes(4, "big"),
        bucket(b"R", 2) + b"r" + encode_int(0) + (0).to_bytes(4, "big"),
    ])
    first = pa.ipc.open_stream(entries[bucket(b"L", 2) + b"r" + encode_int(0) + bytes(4)]).read_all()
    assert first.column_names == ["k", "ts", "q", ROW_ID]
    assert first.column("q").to_pylist() == ["a", "b"] and first.column(ROW_ID).to_pylist() == [0, 1]
    assert np.frombuffer(entries[bucket(b"L", 2) + b"m" + encode_int(0)], "<i8").tolist() == [0]


def test_interval_state_groups_rows_up_to_a_budget_and_carries_bucket_marks_over():
    store = open_store("memory", "test-interval-groups")
    try:
        blob = lambda ids: pa.table({ROW_ID: ids})   # noqa: E731
        puts = rows_puts("left", 0, 1, blob([1, 2, 3]), 2, None) + rows_puts("left", 10, 1, blob([4]), 2, None)
        puts += [marks_put("left", 0, 1, np.array([2])), marks_put("left", 10, 1, np.array([4]))]
        store.write(puts)
        groups = list(scan_groups(store, "left", [(None, None)], 2))
        assert [[t.column(ROW_ID).to_pylist() for t in g.tables] for g in groups] == [[[1, 2]], [[3], [4]]]
        assert [sorted(int(i) for m in g.marks for i in m) for g in groups] == [[2], [2, 4]]
        assert [len(g.tables) for g in scan_groups(store, "left", [(10, 10)], 100)] == [1]
    finally:
        store.close()


def test_interval_join_dictionary_keys_match_across_batches_by_value():
    left = pa.schema([("k", pa.dictionary(pa.int32(), pa.string())), ("ts", pa.timestamp("us"))])
    right = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us"))])
    op = IntervalJoin(left, right, "k", left_time="ts", right_time="ts", lower=dt.timedelta(0),
                      upper=dt.timedelta(seconds=5), delay=dt.timedelta(0), how="full")
    driver = StepDriver(op)
    driver.run(pa.table({"k": pa.array(["a", "b"]).dictionary_encode(), "ts": pa.array([at(0)] * 2, pa.timestamp("us"))}),
               right.empty_table())
    got, _ = driver.run(pa.table({"k": pa.array(["b", "c"]).dictionary_encode(), "ts": pa.array([at(1)] * 2, pa.timestamp("us"))}),
                        pa.table({"k": ["a", "c"], "ts": pa.array([at(1), at(2)], pa.timestamp("us"))}))
    assert sorted((r["k"], r["ts_left"], r["ts_right"]) for r in got.to_pylist()) == [("a", at(0), at(1)), ("c", at(1), at(2))]


def test_interval_join_carries_columns_arrow_cannot_sort():
    left = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("tags", pa.list_(pa.string()))])
    op = IntervalJoin(left, RIGHT, "k", left_time="ts", right_time="ts", lower=dt.timedelta(0),
                      upper=dt.timedelta(seconds=1), delay=dt.timedelta(0), how="left")
    driver = StepDriver(op)
    driver.run(pa.Table.from_pylist([{"k": 1, "ts": at(0), "tags": ["x", "y"]}, {"k": 2, "ts": at(0), "tags": None}], schema=left),
               rows(RIGHT, (1, at(1), "c")))
    got, _ = driver.run(left.empty_table(), RIGHT.empty_table(), final=True)
    assert got.to_pylist() == [{"k": 2, "ts_left": at(0), "tags": None, "ts_right": None, "c": None}]
