"""Retention of the table-table join (streamjoin.table.retention): tombstones and, when asked, rows
older than the horizon (a side's newest change time minus ``retention``) leave the key stages'
state; changes older than the horizon are set aside as late. Times are integer microseconds."""

from __future__ import annotations

import datetime as dt

import pytest

from streamjoin.errors import JoinDefinitionError
from streamjoin.table.operator import TableTableJoin
from streamjoin.table.retention import LATE_REASON
from tests.joins.table.test_examples import FOLLOWS, POSTS


def _state_rows(t, stage: str = "left_keys") -> int:
    return sum(m["state_entries_estimate"] for m in t.runner.metrics(stage)[-t.runner.partitions:])


def test_table_retention_drops_tombstones_and_the_state_shrinks(timeline):
    t = timeline(retention="50 microseconds")
    t.run(posts=[(1, 7, "a", "upsert", 100), (2, 7, "b", "upsert", 100)])
    t.run(posts=[(1, 7, "a", "delete", 110), (3, 7, "c", "upsert", 500)])   # horizon 50: nothing expires
    before = _state_rows(t)                    # 3 keys, and the tombstone's index entry
    assert before == 4 and t.metric("tombstones_expired") == 0
    t.run()                                    # horizon 450: the tombstone (110) goes, rows stay
    assert t.metric("tombstones_expired") == 1 and t.metric("rows_expired") == 0
    assert _state_rows(t) == before - 2
    assert [r[0] for r in t.timeline()] == []  # no follows: the view is empty, and stays so


def test_table_retention_sets_aside_changes_older_than_the_horizon(timeline):
    t = timeline(retention="50 microseconds")
    t.run(posts=[(1, 7, "a", "upsert", 500)], follows=[(1, "ann", 7, "upsert", 100)])
    # left horizon 450: 449 is late; 450 is not (the horizon is inclusive), and applies
    out = t.run(posts=[(2, 7, "late", "upsert", 449), (3, 7, "edge", "upsert", 450)])
    assert out == [("insert", 3, "ann", 1)]
    assert t.metric("late_changes") == 1
    aside = t.runner.set_aside("changes", "left_keys").to_pylist()
    assert [(r["post_id"], r["_reason"]) for r in aside] == [(2, LATE_REASON)]
    assert t.runner.metric("late_rows_changes", "left_keys") == 1


def test_table_retention_late_change_is_not_checked_for_staleness(timeline):
    t = timeline(retention="50 microseconds")
    t.run(posts=[(1, 7, "a", "upsert", 100)])
    t.run(posts=[(1, 7, "a", "delete", 110), (9, 1, "x", "upsert", 500)])
    t.run()                                                   # the tombstone of post 1 expires
    t.run(posts=[(1, 7, "back", "upsert", 105)])              # older than the tombstone, and late
    assert t.metric("late_changes") == 1 and t.metric("stale_changes") == 0


def test_table_retention_expire_rows_retracts_their_view_rows(timeline):
    t = timeline(how="left", retention="50 microseconds", expire_rows=True)
    t.run(posts=[(1, 7, "old", "upsert", 100), (2, 8, "new", "upsert", 100)],
          follows=[(1, "ann", 7, "upsert", 100), (2, "bob", 8, "upsert", 100)])
    assert t.timeline() == [(1, "old", "ann"), (2, "new", "bob")]
    t.run(posts=[(2, 8, "newer", "upsert", 460), (3, 9, "other", "upsert", 500)])
    # left horizon 450: post 1 (last changed at 100) expires; post 2 (460) and 3 (500) stay.
    # The follows' own horizon (100 - 50) keeps both follows.
    out = t.run()
    assert out == [("delete", 1, "ann", 0)]
    assert t.timeline() == [(2, "newer", "bob"), (3, "other", None)]
    assert t.metric("rows_expired") == 1 and t.metric("tombstones_expired") == 0


def test_table_retention_expiry_due_in_a_final_version_is_emitted_in_it(timeline):
    t = timeline(how="left", retention="50 microseconds", expire_rows=True)
    t.run(posts=[(1, 7, "old", "upsert", 100)], follows=[(1, "ann", 7, "upsert", 100)])
    t.run(posts=[(3, 9, "other", "upsert", 500)])          # left horizon 50: nothing expires yet
    # the closing version (end_of_run="release") has the horizon of the progress before it (450):
    # post 1 (100) expires in it, not in a version after the inputs were closed
    assert t.run(final=True) == [("delete", 1, "ann", 0)]
    assert t.timeline() == [(3, "other", None)]
    assert t.metric("rows_expired") == 1
    assert t.run() == []


def test_table_retention_does_not_expire_a_key_changed_in_the_version(timeline):
    t = timeline(retention="50 microseconds", expire_rows=True)
    t.run(posts=[(1, 7, "a", "upsert", 100)], follows=[(1, "ann", 7, "upsert", 100)])
    t.run(posts=[(2, 1, "x", "upsert", 500)])
    # post 1's stored change (100) is below the horizon (450), but this version updates it
    assert t.run(posts=[(1, 7, "b", "upsert", 460)]) == [("update_postimage", 1, "ann", 1),
                                                         ("update_preimage", 1, "ann", 0)]
    assert t.metric("rows_expired") == 0


@pytest.mark.parametrize("options, message", [
    ({"expire_rows": True}, "expire_rows=True needs a retention"),
    ({"retention": "-1 second"}, "negative"),
    ({"retention": "3 months"}, "months"),
    ({"retention": 5}, "timedelta"),
])
def test_table_retention_bad_arguments_are_refused(options, message):
    with pytest.raises(JoinDefinitionError, match=message):
        TableTableJoin(POSTS, FOLLOWS, (["author"], ["followee"]), left_key="post_id", right_key="fid",
                       left_time="at", right_time="at", **options)


def test_table_retention_is_part_of_the_definition():
    def join(**kept):
        return TableTableJoin(POSTS, FOLLOWS, (["author"], ["followee"]), left_key="post_id", right_key="fid",
                              left_time="at", right_time="at", **kept)
    plain, kept = join(), join(retention=dt.timedelta(days=7), expire_rows=True)
    assert "retention" not in plain.left_stage.definition()
    assert kept.left_stage.definition()["retention"] == {"retention_us": 7 * 86_400_000_000, "expire_rows": True}
    assert kept.left_stage.inputs[0].time == "at" and plain.left_stage.inputs[0].time is None
