"""The public reference wrappers (streamjoin.testing.reference) against the row-level references
they wrap and against the joins' own batch runs, on small cases; pandas inputs as Arrow ones."""

from __future__ import annotations

import datetime as dt
import tempfile
from collections import Counter

import pyarrow as pa
import pytest

from streamjoin.testing import (
    LocalJoins,
    as_of_join_reference,
    interval_join_reference,
    rows_of,
    view_reference,
    view_rows,
)
from streamjoin.testing.enrichment import reference_as_of
from streamjoin.testing.interval import reference_interval_join
from streamjoin.testing.table import Change, ReferenceTable, reference_view
from tests.joins.testing.pipelines import UTC_US, at

SECOND = 1_000_000
MICROS_AT_0 = int(at(0).timestamp()) * SECOND


def micros(seconds: float) -> int:
    return MICROS_AT_0 + int(seconds * SECOND)


def batch_run(call) -> pa.Table:
    """``call(joins)`` as one batch run of LocalJoins (every row, a final version)."""
    with tempfile.TemporaryDirectory() as root:
        joins = LocalJoins(root)
        joins.begin(0, final=True)
        return call(joins)


LEFT = pa.table({"k": [1, 1, 2, None, 3], "ts": pa.array([at(s) for s in (0, 5, 10, 12, 20)], UTC_US),
                 "v": ["a", "b", "c", "d", "e"]})
RIGHT = pa.table({"k": [1, 2, 2, 4], "ts": pa.array([at(s) for s in (2, 9, 30, 1)], UTC_US), "w": [10, 20, 30, 40]})
BOUNDS = dict(lower=dt.timedelta(seconds=-2), upper=dt.timedelta(seconds=3))


@pytest.mark.parametrize("how", ["inner", "left", "full", "left_semi", "left_anti"])
def test_interval_join_reference_equals_the_row_reference_and_the_join(how):
    got = interval_join_reference(LEFT, RIGHT, "k", left_time="ts", right_time="ts", how=how, **BOUNDS)
    as_rows = [{**r, "ts": micros((r["ts"] - at(0)).total_seconds())} for r in LEFT.to_pylist()]
    bs_rows = [{**r, "ts": micros((r["ts"] - at(0)).total_seconds())} for r in RIGHT.to_pylist()]
    expected = reference_interval_join(as_rows, bs_rows, left_key=["k"], right_key=["k"], left_time="ts",
                                       right_time="ts", lower=-2 * SECOND, upper=3 * SECOND, how=how,
                                       left_columns=LEFT.column_names, right_columns=RIGHT.column_names)
    to_micros = [c for c in got.column_names if c.startswith("ts")]
    converted = [tuple(micros((v - at(0)).total_seconds()) if c in to_micros and v is not None else v
                       for c, v in row.items()) for row in got.to_pylist()]
    assert Counter(converted) == Counter(expected)
    joined = batch_run(lambda joins: joins.interval_join(LEFT, RIGHT, "k", left_time="ts", right_time="ts", how=how,
                                                         delay=dt.timedelta(0), **BOUNDS))
    assert rows_of(joined) == rows_of(got) and len(got) > 0
    on_time = dict(left_time="ts", right_time="ts", how=how, **BOUNDS)
    no_null = LEFT.slice(0, 3)  # pandas has no nullable int64 by default
    assert rows_of(interval_join_reference(no_null.to_pandas(), RIGHT.to_pandas(), "k", **on_time)) == rows_of(
        interval_join_reference(no_null, RIGHT, "k", **on_time))


EVENTS = pa.table({"user_id": [1, 1, 2, 3, None], "ts": pa.array([at(s) for s in (1, 12, 5, 7, 8)], UTC_US),
                   "action": ["buy", "buy", "view", "buy", "buy"]})
CHANGES = pa.table({"user_id": [1, 2, 1, 2, None], "op": ["insert", "upsert", "update", "delete", "heartbeat"],
                    "changed_at": pa.array([at(s) for s in (0, 3, 10, 6, 100)], UTC_US),
                    "plan": ["free", "pro", "pro", None, None]})


@pytest.mark.parametrize("how", ["left", "inner"])
def test_as_of_join_reference_equals_the_row_reference_and_the_join(how):
    got = as_of_join_reference(EVENTS, CHANGES, "user_id", stream_time="ts", table_key="user_id",
                               table_time="changed_at", how=how)
    assert got.column_names == ["user_id", "ts", "action", "changed_at", "plan"]
    events = [{"key": (r["user_id"],), "time": micros((r["ts"] - at(0)).total_seconds()), "row": tuple(r.values())}
              for r in EVENTS.to_pylist()]
    ops = {"insert": "upsert", "update": "upsert", "upsert": "upsert", "delete": "delete", "heartbeat": "heartbeat"}
    changes = [{"key": (r["user_id"],), "op": ops[r["op"]], "time": micros((r["changed_at"] - at(0)).total_seconds()),
                "seq": None, "row": (r["changed_at"], r["plan"])} for r in CHANGES.to_pylist()]
    expected = reference_as_of([(events, changes)], how=how, delay=0, width=2)
    assert Counter(tuple(r.values()) for r in got.to_pylist()) == Counter(expected)
    joined = batch_run(lambda joins: joins.stream_table_join(EVENTS, CHANGES, "user_id", stream_time="ts",
                                                             table_key="user_id", table_time="changed_at", how=how,
                                                             delay=dt.timedelta(0)))
    assert rows_of(joined) == rows_of(got)
    user_1 = {r["ts"]: r["plan"] for r in got.to_pylist() if r["user_id"] == 1}
    assert user_1 == {at(1): "free", at(12): "pro"}


POSTS = pa.table({"post_id": [1, 2, 1, 3, 2], "op": ["insert", "insert", "update", "insert", "delete"],
                  "changed_at": pa.array([at(s) for s in (0, 1, 2, 3, 4)], UTC_US), "author_id": [7, 8, 9, 7, 8]})
FOLLOWS = pa.table({"follow_id": [1, 2, 3], "op": ["insert", "insert", "heartbeat"],
                    "changed_at": pa.array([at(s) for s in (0, 1, 9)], UTC_US), "followee_id": [7, 9, None]})


@pytest.mark.parametrize("how", ["inner", "left", "full"])
def test_view_reference_equals_the_row_reference_and_the_joins_view(how):
    on = (["author_id"], ["followee_id"])
    got = view_reference(POSTS, FOLLOWS, on, left_key="post_id", right_key="follow_id", left_time="changed_at",
                         right_time="changed_at", how=how)
    tables = []
    for changes, key in ((POSTS, "post_id"), (FOLLOWS, "follow_id")):
        table = ReferenceTable([key])
        table.apply([Change((r[key],), "delete" if r["op"] == "delete" else "upsert", r["changed_at"], None,
                            {c: v for c, v in r.items() if c != "op"})
                     for r in changes.to_pylist() if r["op"] != "heartbeat"])
        tables.append(table.rows)
    expected = reference_view(*tables, left_on=["author_id"], right_on=["followee_id"], how=how,
                              left_columns=["post_id", "changed_at", "author_id"],
                              right_columns=["follow_id", "changed_at", "followee_id"])
    assert Counter(tuple(r.values()) for r in got.to_pylist()) == Counter(expected.values())
    changes = batch_run(lambda joins: joins.table_table_join(POSTS, FOLLOWS, on, left_key="post_id",
                                                             right_key="follow_id", how=how, left_time="changed_at",
                                                             right_time="changed_at"))
    assert rows_of(view_rows(changes, left_key="post_id", right_key="follow_id")) == rows_of(got)
    assert {(r["post_id"], r["follow_id"]) for r in got.to_pylist() if r["post_id"] and r["follow_id"]} == {(1, 2),
                                                                                                           (3, 1)}


def test_view_rows_applies_changes_in_version_and_sequence_order():
    changes = pa.table({"a": [1, 1, 1, 2], "b": [5, 5, 5, 6], "x": ["new", "old", "old", "gone"],
                        "_change_type": ["update_postimage", "update_preimage", "insert", "delete"],
                        "_commit_version": [1, 1, 0, 1], "_seq": [1, 0, 0, 2]})
    assert view_rows(changes, left_key="a", right_key="b").to_pylist() == [{"a": 1, "b": 5, "x": "new"}]


@pytest.mark.parametrize("how", ["inner", "left", "full"])
def test_interval_join_reference_with_heartbeats_leaves_them_out_as_the_join_does(how):
    beats = pa.table({"k": pa.array([None, None], pa.int64()), "ts": pa.array([at(40), at(50)], UTC_US),
                      "w": pa.array([None, None], pa.int64())})
    right = pa.concat_tables([RIGHT, beats])
    args = dict(left_time="ts", right_time="ts", how=how, **BOUNDS)
    got = interval_join_reference(LEFT, right, "k", heartbeats=True, **args)
    assert rows_of(got) == rows_of(interval_join_reference(LEFT, RIGHT, "k", **args))
    joined = batch_run(lambda joins: joins.interval_join(LEFT, right, "k", delay=dt.timedelta(0), heartbeats=True,
                                                         **args))
    assert rows_of(joined) == rows_of(got)
    without = rows_of(interval_join_reference(LEFT, right, "k", **args))   # null-key rows, output by a full join
    assert (without != rows_of(got)) == (how == "full")


@pytest.mark.parametrize("how", ["left", "inner"])
def test_as_of_join_reference_with_heartbeats_leaves_event_heartbeats_out_as_the_join_does(how):
    beats = pa.table({"user_id": pa.array([None], pa.int64()), "ts": pa.array([at(30)], UTC_US),
                      "action": pa.array([None], pa.string())})
    events = pa.concat_tables([EVENTS, beats])
    args = dict(stream_time="ts", table_key="user_id", table_time="changed_at", how=how)
    got = as_of_join_reference(events, CHANGES, "user_id", heartbeats=True, **args)
    assert rows_of(got) == rows_of(as_of_join_reference(EVENTS, CHANGES, "user_id", **args))
    joined = batch_run(lambda joins: joins.stream_table_join(events, CHANGES, "user_id", delay=dt.timedelta(0),
                                                             heartbeats=True, **args))
    assert rows_of(joined) == rows_of(got)


NAN, ZERO = float("nan"), 0.0
SCORES = pa.table({"score_id": [1.5, NAN, -ZERO, NAN, ZERO, 2.5], "op": ["insert", "insert", "insert", "delete", "update", "insert"],
                   "changed_at": pa.array([at(s) for s in (0, 1, 2, 3, 4, 5)], UTC_US), "band": [NAN, ZERO, NAN, ZERO, -ZERO, 7.0]})
BANDS = pa.table({"band": [NAN, ZERO, 7.0], "op": ["insert", "insert", "insert"],
                  "changed_at": pa.array([at(s) for s in (0, 1, 2)], UTC_US), "label": ["nan", "zero", "seven"]})


@pytest.mark.parametrize("how", ["inner", "left", "full"])
def test_view_reference_and_view_rows_take_nan_and_signed_zero_keys_as_the_join_does(how):
    """Float keys compare as in Spark (-0.0 is 0.0, NaN equals NaN): a NaN key's delete removes its
    row, a -0.0 key's update replaces the 0.0 row, a NaN join key meets a NaN primary key."""
    on = (["band"], ["band"])
    got = view_reference(SCORES, BANDS, on, left_key="score_id", right_key="band", left_time="changed_at",
                         right_time="changed_at", how=how)
    changes = batch_run(lambda joins: joins.table_table_join(SCORES, BANDS, on, left_key="score_id", right_key="band",
                                                             how=how, left_time="changed_at", right_time="changed_at"))
    assert rows_of(view_rows(changes, left_key="score_id", right_key="band_right")) == rows_of(got)
    with tempfile.TemporaryDirectory() as root:   # one change a micro-batch: the NaN row's delete meets it
        joins = LocalJoins(root, partitions=2)
        outs = []
        for v in range(SCORES.num_rows):
            joins.begin(v, final=v == SCORES.num_rows - 1)
            outs.append(joins.table_table_join(SCORES.slice(v, 1), BANDS if v == 0 else BANDS.slice(0, 0), on,
                                               left_key="score_id", right_key="band", how=how,
                                               left_time="changed_at", right_time="changed_at"))
    assert rows_of(view_rows(pa.concat_tables(outs), left_key="score_id", right_key="band_right")) == rows_of(got)
    scores = {r["score_id"] for r in got.to_pylist() if r["score_id"] is not None}
    assert len(scores) == 3 and 0.0 in scores and 1.5 in scores   # NaN's row deleted; -0.0's replaced by 0.0's

