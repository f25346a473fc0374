"""A table-table join's bootstrap (a table's rows before its first change) in process: a table has
one row per key, so two bootstrap rows of one key at one change time are not a tie to settle
silently but rows set aside with their reason and counted."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from streamjoin.changes import ChangeFormat
from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.table.bootstrap import bootstrap_changes
from streamjoin.table.operator import TableTableJoin
from streamjoin.table.rekey import DUPLICATE_REASON

UTC = pa.timestamp("us", "UTC")
POSTS = pa.schema([("post_id", pa.int64()), ("op", pa.string()), ("at", UTC), ("author_id", pa.int64()),
                   ("text", pa.string())])
AUTHORS = pa.schema([("author_id", pa.int64()), ("op", pa.string()), ("at", UTC), ("name", pa.string())])
AT = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("timed", [False, True], ids=["no change time", "equal change times"])
def test_table_bootstrap_sets_aside_a_second_row_of_one_key(tmp_path, timed):
    posts_fmt = ChangeFormat.plain("post_id", time="at")
    join = TableTableJoin(POSTS, AUTHORS, (["author_id"], ["author_id"]), left_key="post_id", right_key="author_id",
                          how="inner", left_changes=posts_fmt, right_changes=ChangeFormat.plain("author_id", time="at"))
    runner = PlanRunner(join.plan, str(tmp_path / "ck"), partitions=2, config=StateConfig(store="memory"))
    rows = {"post_id": [1, 1, 2], "author_id": [7, 8, 7], "text": ["first", "second", "other"]}
    if timed:
        rows["at"] = pa.array([AT] * 3, UTC)
    runner.set_initial(0, bootstrap_changes(pa.table(rows), POSTS, posts_fmt, "left_bootstrap", False))
    authors = pa.Table.from_pylist([{"author_id": a, "op": "upsert", "at": AT, "name": f"a{a}"} for a in (7, 8)],
                                   schema=AUTHORS)
    out = runner.run(POSTS.empty_table(), authors)
    assert out.num_rows == 2     # post 2, and one row of post 1 (the first in canonical order)
    keys = runner.runners["left_keys"]
    assert sum(m.get("duplicate_snapshot_rows", 0) for m in keys.metrics) == 1
    assert sum(m["set_aside_rows_changes"] for m in keys.metrics) == 1
    [aside] = [pq.read_table(p) for p in (tmp_path / "ck" / "left_keys" / "set_aside").rglob("v=*/p=*.parquet")]
    assert aside.column("post_id").to_pylist() == [1]
    assert aside.column("_reason").to_pylist() == [DUPLICATE_REASON]
    assert pc.sum(pc.equal(out.column("post_id"), 1)).as_py() == 1


def test_table_bootstrap_rows_of_one_key_at_different_times_keep_the_newest(tmp_path):
    posts_fmt = ChangeFormat.plain("post_id", time="at")
    join = TableTableJoin(POSTS, AUTHORS, (["author_id"], ["author_id"]), left_key="post_id", right_key="author_id",
                          how="inner", left_changes=posts_fmt, right_changes=ChangeFormat.plain("author_id", time="at"))
    runner = PlanRunner(join.plan, str(tmp_path / "ck"), config=StateConfig(store="memory"))
    rows = pa.table({"post_id": [1, 1], "author_id": [7, 8], "text": ["old", "new"],
                     "at": pa.array([AT, AT + dt.timedelta(seconds=1)], UTC)})
    runner.set_initial(0, bootstrap_changes(rows, POSTS, posts_fmt, "left_bootstrap", False))
    authors = pa.Table.from_pylist([{"author_id": a, "op": "upsert", "at": AT, "name": f"a{a}"} for a in (7, 8)],
                                   schema=AUTHORS)
    out = runner.run(POSTS.empty_table(), authors)
    assert out.column("text").to_pylist() == ["new"]
    assert sum(m.get("duplicate_snapshot_rows", 0) for m in runner.runners["left_keys"].metrics) == 0


def test_table_bootstrap_value_that_does_not_cast_names_its_column_and_value():
    rows = pa.table({"post_id": [1, 2], "author_id": ["7", "seven"]})
    with pytest.raises(JoinDefinitionError, match=r"column 'author_id' of left_bootstrap .* is declared bigint but "
                       r"holds string; 'seven' does not convert: cast it to bigint"):
        bootstrap_changes(rows, POSTS, ChangeFormat.plain("post_id", time="at"), "left_bootstrap", False)


def test_enrichment_bootstrap_value_that_does_not_cast_names_its_column_and_value():
    from streamjoin.enrichment.operator import EnrichmentJoin

    events = pa.schema([("author_id", pa.int64()), ("ts", pa.timestamp("us"))])
    join = EnrichmentJoin(events, AUTHORS, "author_id", stream_time="ts",
                          changes=ChangeFormat.plain("author_id", time="at"))
    with pytest.raises(JoinDefinitionError, match=r"column 'author_id' of bootstrap .*'x1' does not convert"):
        join.bootstrap_changes(pa.table({"author_id": ["1", "x1"], "name": ["a", "b"]}))
