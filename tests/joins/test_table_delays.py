"""Per-table delays of the table-table join (``left_delay`` / ``right_delay``,
streamjoin.table.retention.side_retentions): each table's horizon is its own newest change time
minus its delay (default ``retention``), for what is late and what expires. Times are integer
microseconds."""

from __future__ import annotations

import datetime as dt

import pytest

from streamjoin.errors import JoinDefinitionError
from streamjoin.table.operator import TableTableJoin
from tests.joins.test_table_join import FOLLOWS, POSTS


def _join(**options) -> TableTableJoin:
    return TableTableJoin(POSTS, FOLLOWS, (["author"], ["followee"]), left_key="post_id", right_key="fid",
                          left_time="at", right_time="at", **options)


def test_table_delays_set_each_tables_late_changes(timeline):
    t = timeline(left_delay="10 microseconds", right_delay="200 microseconds")
    t.run(posts=[(1, 7, "a", "upsert", 500)], follows=[(1, "ann", 7, "upsert", 500)])
    # left horizon 490, right horizon 300: a post 20 µs late is late, a follow 150 µs late is not
    out = t.run(posts=[(2, 7, "late", "upsert", 480)], follows=[(2, "bob", 7, "upsert", 350)])
    assert out == [("insert", 1, "bob", 1)]
    assert t.metric("late_changes") == 1
    assert [r["post_id"] for r in t.runner.set_aside("changes", "left_keys").to_pylist()] == [2]
    assert t.runner.set_aside("changes", "right_keys") is None   # nothing set aside


def test_table_delays_one_table_without_retention_keeps_every_key(timeline):
    t = timeline(left_delay="10 microseconds")       # the follows have no delay and no retention
    t.run(posts=[(1, 7, "a", "upsert", 500)], follows=[(1, "ann", 7, "upsert", 500)])
    assert t.run(posts=[(2, 7, "late", "upsert", 100)], follows=[(2, "bob", 7, "upsert", 1)]) == [
        ("insert", 1, "bob", 1)]
    assert t.metric("late_changes") == 1
    assert t.runner.set_aside("changes", "right_keys") is None   # nothing set aside


def test_table_delays_override_retention_for_expiry(timeline):
    t = timeline(retention="1000 microseconds", left_delay="50 microseconds")
    t.run(posts=[(1, 7, "a", "upsert", 100)], follows=[(1, "ann", 7, "upsert", 100)])
    t.run(posts=[(1, 7, "a", "delete", 110), (9, 1, "x", "upsert", 500)],
          follows=[(1, "ann", 7, "delete", 110), (9, "zed", 1, "upsert", 500)])
    t.run()     # left horizon 450 drops post 1's tombstone; the follows' (500 - 1000) keeps theirs
    assert t.metric("tombstones_expired") == 1


def test_table_delay_equal_to_retention_leaves_the_definition_unchanged():
    week = dt.timedelta(days=7)
    plain = _join(retention=week, expire_rows=True)
    same = _join(retention="7 days", expire_rows=True, left_delay=week, right_delay="168 hours")
    for stage in ("left_stage", "right_stage", "join_stage"):
        assert getattr(same, stage).definition() == getattr(plain, stage).definition()
    assert _join(left_delay=None, right_delay=None).left_stage.definition() == _join().left_stage.definition()


def test_table_delays_are_recorded_per_table():
    join = _join(retention="1 day", left_delay="10 seconds")
    assert join.left_stage.definition()["retention"] == {"retention_us": 10_000_000, "expire_rows": False}
    assert join.right_stage.definition()["retention"] == {"retention_us": 86_400_000_000, "expire_rows": False}
    assert "retention" not in _join(right_delay="1 hour").left_stage.definition()


@pytest.mark.parametrize("options, message", [
    ({"left_delay": "-1 second"}, "left_delay='-1 second' is negative"),
    ({"right_delay": "3 months"}, "months"),
    ({"left_delay": 5}, "timedelta"),
    ({"left_delay": "1 hour", "expire_rows": True}, "right_delay not given and no retention"),
])
def test_table_delays_bad_arguments_are_refused(options, message):
    with pytest.raises(JoinDefinitionError, match=message):
        _join(**options)
