"""``table_table_join``'s ``left_bootstrap=`` / ``right_bootstrap=``: a table's rows before its first change."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from streamjoin import table_table_join
from streamjoin.errors import JoinDefinitionError
from streamjoin.statestore import open_store
from streamjoin.view import MaterializedView

pytestmark = pytest.mark.spark

POSTS = "post_id bigint, op string, at timestamp, author_id bigint, text string"
FOLLOWS = "follow_id bigint, op string, at timestamp, follower_id bigint, followee_id bigint"
AT = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
ARGS = dict(left_key="post_id", right_key="follow_id", left_time="at", right_time="at")


def test_table_table_join_bootstrap_rows_come_before_every_change(spark, tmp_path):
    posts = spark.createDataFrame([(2, "upsert", AT, 20, "moved"), (3, "delete", AT, None, None),
                                   (4, "upsert", AT, 10, "new")], POSTS)
    follows = spark.createDataFrame([(101, "upsert", AT, 2, 20)], FOLLOWS)
    post_rows = spark.createDataFrame([(1, 10, "hello"), (2, 10, "again"), (3, 10, "gone")],
                                      "post_id bigint, author_id bigint, text string")
    follow_rows = spark.createDataFrame([(100, 1, 10)], "follow_id bigint, follower_id bigint, followee_id bigint")
    out = table_table_join(posts, follows, (["author_id"], ["followee_id"]), **ARGS, how="inner",
                           left_bootstrap=post_rows, right_bootstrap=follow_rows,
                           checkpoint=str(tmp_path / "ck"), partitions=2)
    changes = pa.Table.from_pylist([r.asDict() for r in out.collect()])
    view = MaterializedView(open_store("memory", str(tmp_path / "view")), "post_id", "follow_id", changes.schema)
    view.apply(changes)
    got = sorted((r["follower_id"], r["post_id"], r["text"]) for r in view.rows().to_pylist())
    assert got == [(1, 1, "hello"), (1, 4, "new"), (2, 2, "moved")]


def test_table_table_join_bad_bootstrap_fails_before_the_query(spark, tmp_path):
    posts = spark.createDataFrame([], POSTS)
    follows = spark.createDataFrame([], FOLLOWS)
    join = dict(on=(["author_id"], ["followee_id"]), **ARGS, checkpoint=str(tmp_path / "ck"))
    rows = spark.createDataFrame([(1, 10, "a")], "post_id bigint, author_id bigint, text string")
    with pytest.raises(JoinDefinitionError, match="left_bootstrap must be a batch DataFrame"):
        table_table_join(posts, follows, left_bootstrap=spark.readStream.format("rate").load(), **join)
    with pytest.raises(JoinDefinitionError, match=r"right_bootstrap must have the table's key \['follow_id'\]"):
        table_table_join(posts, follows, right_bootstrap=rows, **join)
    with pytest.raises(JoinDefinitionError, match="with expire_rows, left_bootstrap's rows age"):
        table_table_join(posts, follows, left_bootstrap=rows, retention="1 day", expire_rows=True, **join)


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
@pytest.mark.parametrize("change_time", ["timestamp", "timestamp_ntz"])
def test_table_table_join_bootstrap_times_keep_their_instants_in_any_session_zone(spark, zone, change_time):
    # a bootstrap's TIMESTAMP for a TIMESTAMP_NTZ change time (or the other way) keeps its
    # microseconds since the epoch
    from streamjoin.spark.changes import change_format
    from streamjoin.spark.table_bootstrap import bootstrap_changes

    other = "timestamp_ntz" if change_time == "timestamp" else "timestamp"
    changes = spark.createDataFrame([], POSTS.replace("at timestamp", f"at {change_time}"))
    fmt = change_format(changes, None, ["post_id"], "at")
    at = int((AT - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) / dt.timedelta(microseconds=1))
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        timed = spark.createDataFrame([(1, AT if other == "timestamp" else AT.replace(tzinfo=None), 10, "a")],
                                      f"post_id bigint, at {other}, author_id bigint, text string")
        got = bootstrap_changes(timed, changes, fmt, "left_bootstrap", False).toArrow()
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert got.column("at").cast(pa.int64()).to_pylist() == [at]


def test_table_table_join_bootstrap_value_that_does_not_cast_names_column_and_value(spark, tmp_path):
    posts = spark.createDataFrame([], POSTS)
    follows = spark.createDataFrame([], FOLLOWS)
    rows = spark.createDataFrame([(1, "10", "a"), (2, "ten", "b")], "post_id bigint, author_id string, text string")
    with pytest.raises(Exception, match=r"left_bootstrap: column 'author_id' \(string\) holds 'ten', which does not "
                       r"cast to bigint.*cast or filter the column in the bootstrap"):
        table_table_join(posts, follows, (["author_id"], ["followee_id"]), **ARGS, left_bootstrap=rows,
                         checkpoint=str(tmp_path / "ck"), partitions=2)
