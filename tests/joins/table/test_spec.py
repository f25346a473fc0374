"""Definition errors of the table-table join: every bad argument fails before any row is read,
with a message that says what to do."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamjoin.changes import ChangeFormat
from streamjoin.errors import JoinDefinitionError
from streamjoin.table.operator import TableTableJoin
from streamjoin.table.rekey import TableRekey
from streamjoin.table.stage import TableJoinStage

POSTS = pa.schema([("post_id", pa.int64()), ("author", pa.int64()), ("text", pa.string()), ("op", pa.string()),
                   ("at", pa.timestamp("us"))])
FOLLOWS = pa.schema([("fid", pa.int64()), ("followee", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us"))])
DELTA = pa.schema([("fid", pa.int64()), ("followee", pa.int64()), ("_change_type", pa.string()),
                   ("_commit_version", pa.int64()), ("_commit_timestamp", pa.timestamp("us", "UTC"))])


def make(left=POSTS, right=FOLLOWS, on=(["author"], ["followee"]), **options):
    options = {"left_key": "post_id", "right_key": "fid", "left_time": "at", "right_time": "at", **options}
    return TableTableJoin(left, right, on, **options)


def test_table_join_spec_detects_the_change_vocabularies():
    join = make(right=DELTA, right_time=None)
    assert join.left_stage.side.changes == ChangeFormat.plain("post_id", time="at")
    assert join.right_stage.side.changes == ChangeFormat.delta("fid")
    assert join.definition()["how"] == "inner"
    assert "TableTableJoin(" in repr(join)


@pytest.mark.parametrize("options, message", [
    ({"how": "right"}, "how='right' is a right join, which this join does not support; use one of inner, left, full"),
    ({"on": "author"}, "right row has no column 'author'"),
    ({"on": (["author", "text"], ["followee"])}, "left key has 2 columns"),
    ({"on": 3}, "on must be a column name"),
    ({"left_key": "nope"}, "no key column 'nope'"),
    ({"left_key": []}, "left_key must be one or more distinct column names"),
    ({"left_time": None}, "pass left_time="),
    ({"right_time": "when"}, "no column 'when'"),
    ({"left_changes": ChangeFormat.plain("author", time="at")}, "left_key is ['post_id'] but left_changes has key"),
    ({"left_changes": ChangeFormat.plain("post_id", time="at"), "left_time": "text"}, "leave left_time out"),
    ({"left_changes": ChangeFormat.debezium("post_id"), "left_time": None}, "pre_stage first"),
    ({"left_changes": "plain"}, "must be a streamjoin.changes.ChangeFormat"),
    ({"right": DELTA, "right_time": "at"}, "no column 'at'"),
    ({"right": pa.schema([("fid", pa.int64()), ("followee", pa.int64())])}, "cannot tell the vocabulary of the right change table"),
    ({"right": pa.schema([("fid", pa.int64()), ("followee", pa.string()), ("op", pa.string()), ("at", pa.int64())])},
     "incompatible types; cast one side"),
    ({"right": pa.schema([("fid", pa.int64()), ("followee", pa.int64()), ("tags", pa.list_(pa.float16())),
                          ("op", pa.string()), ("at", pa.int64())])}, "'tags' has type array<halffloat>"),
    ({"right": pa.schema([("fid", pa.list_(pa.int64())), ("followee", pa.int64()), ("op", pa.string()),
                          ("at", pa.int64())])}, "primary-key column 'fid' has type array<bigint>, which cannot be a key"),
    ({"right": pa.schema([("fid", pa.int64()), ("followee", pa.int64()), ("_seq", pa.int64()), ("op", pa.string()),
                          ("at", pa.int64())])}, "'_seq', a name the join's output uses"),
    ({"right": pa.schema([("fid", pa.int64()), ("followee", pa.int64()), ("text_left", pa.string()),
                          ("text", pa.string()), ("op", pa.string()), ("at", pa.int64())])}, "appear twice"),
    ({"right": pa.schema([("fid", pa.int64()), ("fid", pa.int64()), ("op", pa.string())])}, "duplicate column names"),
    ({"left": "posts"}, "must be a pyarrow.Schema"),
])
def test_table_join_spec_refuses_bad_arguments(options, message):
    with pytest.raises(JoinDefinitionError, match=_escape(message)):
        make(**options)


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def test_table_join_spec_stage_refuses_sides_in_different_key_types():
    left = TableRekey(POSTS, ChangeFormat.plain("post_id", time="at"), "author", "left")
    narrow = pa.schema([("fid", pa.int64()), ("followee", pa.int32()), ("op", pa.string()), ("at", pa.int64())])
    right = TableRekey(narrow, ChangeFormat.plain("fid", time="at"), "followee", "right")
    with pytest.raises(JoinDefinitionError, match="kept in different types"):
        TableJoinStage(left.side, right.side)
    with pytest.raises(JoinDefinitionError, match="a side is 'left' or 'right'"):
        TableRekey(POSTS, ChangeFormat.plain("post_id", time="at"), "author", "middle")
