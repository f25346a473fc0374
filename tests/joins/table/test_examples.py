"""Worked examples of the table-table join (streamjoin.table.operator): a timeline of posts joined with
follows. Each reads as a script: add changes to either table, check the view changes that come
out and the view they maintain."""

from __future__ import annotations

import shutil
import tempfile
import zlib

import pyarrow as pa
import pytest

from streamjoin.changes import PLAIN_COLUMNS, ChangeFormat, normalise, to_plain
from streamjoin.errors import JoinError
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.statestore import destroy_store, open_store
from streamjoin.statestore.codecs import pack
from streamjoin.table.operator import TableTableJoin
from streamjoin.view import MaterializedView
from tests.joins.drivers import InProcess
from tests.joins.table.cases import COMPOSITE, Run, TableCase, output_rows, when

POSTS = pa.schema([("post_id", pa.int64()), ("author", pa.int64()), ("text", pa.string()), ("op", pa.string()),
                   ("at", pa.int64())])
FOLLOWS = pa.schema([("fid", pa.int64()), ("follower", pa.string()), ("followee", pa.int64()), ("op", pa.string()),
                     ("at", pa.int64())])


class Timeline:
    """Posts (left) joined with follows (right) on author = followee, run through the runtime."""

    def __init__(self, how: str = "inner", partitions: int = 1, **kept) -> None:
        self.join = TableTableJoin(POSTS, FOLLOWS, (["author"], ["followee"]), left_key="post_id", right_key="fid",
                                   how=how, left_time="at", right_time="at", **kept)
        self.driver = InProcess(self.join, partitions=partitions)
        self.runner = self.driver.runner
        self.view = MaterializedView(open_store("memory", f"{self.driver.root}/view"), *self.join.view_key,
                                     self.join.output_schema)
        self.outputs: list[pa.Table] = []

    def run(self, posts=(), follows=(), final: bool = False) -> list[tuple]:
        """posts: (post_id, author, text, op, at); follows: (fid, follower, followee, op, at).
        Returns the view changes as (change type, post_id, follower, seq), sorted. ``final``:
        the version closes the inputs (as a streaming run's closing version does)."""
        p = pa.Table.from_pylist([dict(zip(POSTS.names, r)) for r in posts], schema=POSTS)
        f = pa.Table.from_pylist([dict(zip(FOLLOWS.names, r)) for r in follows], schema=FOLLOWS)
        out = self.runner.run(p, f, final=final)
        self.outputs.append(out)
        self.view.apply(out)
        return sorted(((r["_change_type"], r["post_id"], r["follower"], r["_seq"]) for r in out.to_pylist()), key=repr)

    def timeline(self) -> list[tuple]:
        """The view as (post_id, text, follower) rows."""
        return sorted(((r["post_id"], r["text"], r["follower"]) for r in self.view.rows().to_pylist()),
                      key=repr)

    def metric(self, name: str) -> int:
        return self.runner.metric(name)

    def close(self) -> None:
        self.view.store.close()
        destroy_store("memory", f"{self.driver.root}/view")
        self.driver.close()


def _partition(value, partitions: int) -> int:
    return zlib.crc32(pack(value)) % partitions


def test_table_join_post_reassigned_to_another_author_moves_between_partitions(timeline):
    assert _partition(1, 3) != _partition(2, 3)          # the old and new join keys' partitions differ
    t = timeline(partitions=3)
    t.run(posts=[(10, 1, "hello", "upsert", 1)], follows=[(1, "ann", 1, "upsert", 1), (2, "bob", 2, "upsert", 1)])
    assert t.timeline() == [(10, "hello", "ann")]
    assert t.run(posts=[(10, 2, "hello", "update", 2)]) == [("delete", 10, "ann", 0), ("insert", 10, "bob", 1)]
    assert t.timeline() == [(10, "hello", "bob")]
    by_partition = [m["output_rows"] for m in t.runner.metrics("join")[-3:]]
    assert by_partition[_partition(1, 3)] == 1 and by_partition[_partition(2, 3)] == 1


def test_table_join_follow_edited_retracts_old_posts_and_inserts_new_ones(timeline):
    t = timeline(partitions=3)
    t.run(posts=[(10, 1, "a", "upsert", 1), (11, 1, "b", "upsert", 1), (12, 5, "c", "upsert", 1)],
          follows=[(1, "ann", 1, "upsert", 1)])
    assert t.timeline() == [(10, "a", "ann"), (11, "b", "ann")]
    assert t.run(follows=[(1, "ann", 5, "update", 2)]) == [
        ("delete", 10, "ann", 0), ("delete", 11, "ann", 0), ("insert", 12, "ann", 1)]
    assert t.timeline() == [(12, "c", "ann")]


def test_table_join_edit_in_place_is_an_update_pair(timeline):
    t = timeline()
    t.run(posts=[(10, 1, "draft", "upsert", 1)], follows=[(1, "ann", 1, "upsert", 1), (2, "bob", 1, "upsert", 1)])
    assert t.run(posts=[(10, 1, "final", "upsert", 2)]) == [
        ("update_postimage", 10, "ann", 1), ("update_postimage", 10, "bob", 1),
        ("update_preimage", 10, "ann", 0), ("update_preimage", 10, "bob", 0)]
    assert t.timeline() == [(10, "final", "ann"), (10, "final", "bob")]
    assert t.run(posts=[(10, 1, "final", "upsert", 2)]) == []      # stale duplicate: no change


def test_table_join_same_row_again_changes_nothing():
    delta = pa.schema([("fid", pa.int64()), ("followee", pa.int64()), ("follower", pa.string()),
                       ("_change_type", pa.string()), ("_commit_version", pa.int64()),
                       ("_commit_timestamp", pa.timestamp("us", "UTC"))])
    join = TableTableJoin(POSTS, delta, (["author"], ["followee"]), left_key="post_id", right_key="fid",
                          how="full", left_time="at")
    root = tempfile.mkdtemp()
    try:
        runner = PlanRunner(join.plan, f"{root}/cp", config=StateConfig(store="memory", local_dir=f"{root}/l"))

        def follow(version: int, follower: str, kind: str = "insert") -> pa.Table:
            return pa.Table.from_pylist([{"fid": 1, "followee": 1, "follower": follower, "_change_type": kind,
                                          "_commit_version": version, "_commit_timestamp": when(version, True)}],
                                        schema=delta)
        assert runner.run(POSTS.empty_table(), follow(1, "ann")).num_rows == 1
        assert runner.run(POSTS.empty_table(), follow(2, "ann", "update_postimage")).num_rows == 0
        assert runner.run(POSTS.empty_table(), follow(3, "bob", "update_postimage")).column(
            "_change_type").to_pylist() == ["update_preimage", "update_postimage"]
        runner.lose_local_state()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_table_join_delete_of_unknown_key_is_harmless_and_counted(timeline):
    t = timeline()
    assert t.run(posts=[(10, 1, "x", "delete", 1)], follows=[(7, "ann", 1, "delete", 1)]) == []
    assert t.metric("unknown_deletes") == 2
    t.run(posts=[(10, 1, "x", "upsert", 2)], follows=[(7, "ann", 1, "upsert", 2)])
    assert t.timeline() == [(10, "x", "ann")]


def test_table_join_stale_change_is_ignored_and_counted(timeline):
    t = timeline()
    t.run(posts=[(10, 1, "new", "upsert", 5)], follows=[(1, "ann", 1, "upsert", 1)])
    assert t.run(posts=[(10, 2, "old", "upsert", 4)]) == []               # older than the row applied
    assert t.run(posts=[(10, 1, "tie", "upsert", 5)]) == []               # same order: first one wins
    assert t.metric("stale_changes") == 2
    t.run(posts=[(10, 1, "gone", "delete", 6)])
    assert t.run(posts=[(10, 1, "zombie", "upsert", 6)]) == []            # a tombstone keeps its order
    assert t.timeline() == [] and t.metric("stale_changes") == 3


def test_table_join_changes_of_one_key_in_a_batch_apply_in_change_time_order(timeline):
    t = timeline(partitions=2)
    t.run(follows=[(1, "ann", 1, "upsert", 1), (2, "bob", 2, "upsert", 1)])
    out = t.run(posts=[(10, 2, "late", "upsert", 9), (10, 1, "early", "upsert", 3), (10, 1, "x", "delete", 5)])
    assert out == [("insert", 10, "bob", 1)] and t.timeline() == [(10, "late", "bob")]


def test_table_join_left_padding_comes_and_goes_with_matches(timeline):
    t = timeline(how="left", partitions=2)
    assert t.run(posts=[(10, 1, "x", "upsert", 1)]) == [("insert", 10, None, 1)]
    assert t.run(follows=[(1, "ann", 1, "upsert", 1)]) == [("delete", 10, None, 0), ("insert", 10, "ann", 1)]
    assert t.run(follows=[(2, "bob", 1, "upsert", 1)]) == [("insert", 10, "bob", 1)]
    assert t.run(follows=[(1, "ann", 1, "delete", 2)]) == [("delete", 10, "ann", 0)]
    assert t.run(follows=[(2, "bob", 4, "update", 2)]) == [("delete", 10, "bob", 0), ("insert", 10, None, 1)]
    assert t.timeline() == [(10, "x", None)]
    assert t.run(posts=[(10, 1, "y", "upsert", 2)]) == [("update_postimage", 10, None, 1),
                                                        ("update_preimage", 10, None, 0)]


def test_table_join_full_join_pads_both_sides(timeline):
    t = timeline(how="full")
    assert t.run(follows=[(1, "ann", 1, "upsert", 1)]) == [("insert", None, "ann", 1)]
    assert t.run(posts=[(10, 1, "x", "upsert", 1), (11, 1, "y", "upsert", 1)]) == [
        ("delete", None, "ann", 0), ("insert", 10, "ann", 1), ("insert", 11, "ann", 1)]
    assert t.run(posts=[(10, 1, "x", "delete", 2)]) == [("delete", 10, "ann", 0)]
    assert t.run(posts=[(11, 1, "x", "delete", 2)]) == [("delete", 11, "ann", 0), ("insert", None, "ann", 1)]


def test_table_join_null_join_key_never_matches(timeline):
    for how, expected in (("inner", []), ("left", [(10, "x", None)]), ("full", [(10, "x", None), (None, None, "ann")])):
        t = timeline(how=how, partitions=2)
        t.run(posts=[(10, None, "x", "upsert", 1)], follows=[(1, "ann", None, "upsert", 1)])
        assert t.timeline() == sorted(expected, key=repr), how
        t.run(posts=[(10, 1, "x", "upsert", 2)], follows=[(1, "ann", 1, "upsert", 2)])
        assert t.timeline() == [(10, "x", "ann")], how
        t.run(posts=[(10, None, "x", "upsert", 3)])
        assert t.timeline() == ([] if how == "inner" else [(10, "x", None)] if how == "left"
                                else sorted([(10, "x", None), (None, None, "ann")], key=repr)), how
        assert t.metric("inconsistent_deletes") == 0


def test_table_join_both_sides_move_in_one_batch(timeline):
    t = timeline(how="left", partitions=3)
    t.run(posts=[(10, 1, "x", "upsert", 1)], follows=[(1, "ann", 1, "upsert", 1)])
    # the view key (10, ann) moves from author 1's partition to author 5's: delete there, insert here
    assert t.run(posts=[(10, 5, "x", "upsert", 2)], follows=[(1, "ann", 5, "upsert", 2)]) == [
        ("delete", 10, "ann", 0), ("insert", 10, "ann", 1)]
    assert t.timeline() == [(10, "x", "ann")]


def test_table_join_dead_letters_carry_their_reasons(timeline):
    t = timeline()
    t.run(posts=[(None, 1, "no key", "upsert", 1), (10, 1, "no time", "upsert", None), (11, 1, "?", "merge", 1),
                 (None, None, None, "heartbeat", 3), (12, 1, "ok", "upsert", 1)])
    letters = t.runner.set_aside("changes", "left_keys")
    assert sorted(zip(letters.column("text").to_pylist(), letters.column("_reason").to_pylist())) == [
        ("?", "unknown op"), ("no key", "null key"), ("no time", "null change time")]
    assert t.runner.set_aside("changes", "right_keys") is None
    assert t.metric("heartbeats") == 1 and t.metric("changes_null_key") == 1
    t.run(follows=[(1, "ann", 1, "upsert", 1)])
    assert t.timeline() == [(12, "ok", "ann")]


def test_table_join_multi_column_keys():
    case = TableCase(COMPOSITE, "full", [
        ([((0, "x"), "upsert", 1, None, (1, "u"), "p"), ((1, "x"), "upsert", 1, None, (1, "v"), "q")],
         [((0,), "upsert", 1, None, (1, "u"), "r")]),
        ([((0, "x"), "upsert", 2, None, (1, "v"), "p")], [((1,), "upsert", 2, None, (1, "v"), "s")]),
        ([], [((1,), "delete", 3, None, (1, "v"), None)]),
    ], partitions=3)
    run = Run(case)
    try:
        for index, (view, changes) in enumerate(case.expected()):
            assert output_rows(run.run(index)) == changes
            assert run.view_rows() == view
        assert run.view.get((1, "x"), None)["x"] == "q"
        assert run.view.get((0, "x"), None)["a"] == 1
        assert run.view.get(None, 0)["y"] == "r"
        assert run.join.output_schema.names[:6] == ["p", "q", "a", "b", "x", "ts_left"]
    finally:
        run.close()


def test_table_join_debezium_changes_join_through_the_plain_form(timeline):
    row = pa.struct([("post_id", pa.int64()), ("author", pa.int64()), ("text", pa.string())])
    raw = pa.table({"op": ["c", "u"], "ts_ms": [1, 2], "before": pa.array([None, None], row),
                    "after": pa.array([{"post_id": 10, "author": 1, "text": "a"},
                                       {"post_id": 10, "author": 2, "text": "b"}], row)})
    plain = to_plain(normalise(raw, ChangeFormat.debezium("post_id")).changes, ["post_id"])
    join = TableTableJoin(plain.schema, FOLLOWS, (["author"], ["followee"]), left_key="post_id", right_key="fid",
                          right_time="at")
    assert join.left_stage.side.changes == ChangeFormat.plain("post_id", **PLAIN_COLUMNS)
    root = tempfile.mkdtemp()
    try:
        runner = PlanRunner(join.plan, f"{root}/cp", partitions=2,
                                       config=StateConfig(store="memory", local_dir=f"{root}/local"))
        follows = pa.Table.from_pylist([{"fid": 1, "follower": "ann", "followee": 2, "op": "upsert", "at": 1}],
                                       schema=FOLLOWS)
        out = runner.run(plain, follows)
        assert [(r["text"], r["follower"], r["_change_type"]) for r in out.to_pylist()] == [("b", "ann", "insert")]
        runner.lose_local_state()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_table_join_stage_refuses_two_changes_of_one_row():
    join = TableTableJoin(POSTS, FOLLOWS, (["author"], ["followee"]), left_key="post_id", right_key="fid",
                          left_time="at", right_time="at")
    from streamjoin.runtime.operator import StepInput

    routed = join.left_stage.output_schema
    rows = pa.Table.from_pylist([{"post_id": 1, "author": 1, "__sj_op": 0}] * 2, schema=routed)
    store = open_store("memory", "sj-table-refuse")
    try:
        with pytest.raises(JoinError, match="TableRekey"):
            join.join_stage.step(store, StepInput(0, 0, (rows, join.right_stage.output_schema.empty_table()), (None, None)))
    finally:
        store.close()
        destroy_store("memory", "sj-table-refuse")


def test_table_join_key_stage_marks_upserts_fresh_where_no_row_was_at_their_join_key():
    from streamjoin.changes import DELETE, OP, UPSERT
    from streamjoin.runtime.operator import StepInput
    from streamjoin.table.spec import FRESH

    join = TableTableJoin(POSTS, FOLLOWS, (["author"], ["followee"]), left_key="post_id", right_key="fid",
                          left_time="at", right_time="at")
    store = open_store("memory", "sj-table-fresh")

    def routed(version: int, *posts: tuple) -> list[tuple]:
        rows = pa.Table.from_pylist([dict(zip(POSTS.names, r)) for r in posts], schema=POSTS)
        result = join.left_stage.step(store, StepInput(version, 0, (rows,), (None,)))
        store.write_columns(result.writes, version)
        return sorted((r["post_id"], r["author"], r[OP]) for r in result.output.to_pylist())

    try:
        assert routed(0, (1, 1, "a", "upsert", 1), (2, 1, "b", "upsert", 1)) == [(1, 1, FRESH), (2, 1, FRESH)]
        assert routed(1, (1, 1, "a2", "update", 2)) == [(1, 1, UPSERT)]                    # same join key
        assert routed(2, (1, 2, "a3", "update", 3)) == [(1, 1, DELETE), (1, 2, FRESH)]     # moved
        assert routed(3, (2, 1, None, "delete", 4)) == [(2, 1, DELETE)]
        assert routed(4, (2, 1, "b2", "upsert", 5)) == [(2, 1, FRESH)]                     # back after a delete
        assert routed(5, (3, 4, "c", "upsert", 6), (3, 4, "c2", "update", 7)) == [(3, 4, FRESH)]   # twice in a version
    finally:
        store.close()
        destroy_store("memory", "sj-table-fresh")


def test_table_join_stage_reads_nothing_for_fresh_upserts():
    from streamjoin.runtime.operator import StepInput
    from streamjoin.table.spec import FRESH

    class Reads:   # the store, counting the keys read by key
        def __init__(self, store) -> None:
            self.store, self.read = store, 0

        def multi_get_column(self, keys):
            self.read += len(keys)
            return self.store.multi_get_column(keys)

        def __getattr__(self, name):
            return getattr(self.store, name)

    join = TableTableJoin(POSTS, FOLLOWS, (["author"], ["followee"]), left_key="post_id", right_key="fid",
                          left_time="at", right_time="at")
    routed = join.left_stage.output_schema
    rows = pa.Table.from_pylist([{"post_id": 1, "author": 1, "text": "new", "__sj_op": FRESH},
                                 {"post_id": 2, "author": 1, "text": "maybe held", "__sj_op": 0}], schema=routed)
    store = Reads(open_store("memory", "sj-table-fresh-reads"))
    try:
        result = join.join_stage.step(store, StepInput(0, 0, (rows, join.right_stage.output_schema.empty_table()),
                                                       (None, None)))
        assert store.read == 1 and result.metrics["rows_held_left"] == 2
    finally:
        store.store.close()
        destroy_store("memory", "sj-table-fresh-reads")


def test_table_join_stages_route_by_primary_then_join_key():
    join = TableTableJoin(POSTS, FOLLOWS, (["author"], ["followee"]), left_key="post_id", right_key="fid",
                          left_time="at", right_time="at")
    assert [s.key for s in join.left_stage.inputs] == [("post_id",)]
    assert [s.key for s in join.right_stage.inputs] == [("fid",)]
    assert [(s.name, s.key) for s in join.join_stage.inputs] == [("left", ("author",)), ("right", ("followee",))]
    assert join.join_stage.inputs[0].schema == join.left_stage.output_schema
    assert join.view_key == (("post_id",), ("fid",))
    assert join.output_schema.names == ["post_id", "author", "text", "at_left", "fid", "follower", "followee",
                                        "at_right", "_change_type", "_commit_version", "_seq", "_change_timestamp"]


def test_table_join_widens_join_key_types_across_sides():
    narrow = pa.schema([("fid", pa.int64()), ("followee", pa.int32()), ("op", pa.string()), ("at", pa.int64())])
    join = TableTableJoin(POSTS, narrow, (["author"], ["followee"]), left_key="post_id", right_key="fid",
                          left_time="at", right_time="at")
    assert join.right_stage.output_schema.field("followee").type == pa.int64()


def test_table_join_output_keeps_timestamps_and_the_batch_id():
    case = TableCase(COMPOSITE, "inner", [([((0, "x"), "upsert", 1, None, (1, "u"), "p")],
                                           [((0,), "upsert", 1, None, (1, "u"), "r")])], 1)
    run = Run(case)
    try:
        row = run.run(0).to_pylist()[0]
        assert row["ts_left"] == when(1, True) and row["_commit_version"] == 0
    finally:
        run.close()


def test_table_join_runner_as_a_streaming_query_keeps_stores_warm_and_the_same_output():
    from streamjoin.statestore.warm import evict_all, parked_paths

    posts = [[(10, 1, "hi", "upsert", 1), (11, 2, "yo", "upsert", 1)], [(10, 2, "moved", "upsert", 2)],
             [(11, 2, None, "delete", 3)]]
    follows = [[(1, "ann", 1, "upsert", 1)], [(2, "bob", 2, "upsert", 2)], []]
    outputs, parked = {}, {}
    root = tempfile.mkdtemp(prefix="sj-warm-")
    evict_all()
    try:
        for query in (None, "q1"):
            join = TableTableJoin(POSTS, FOLLOWS, (["author"], ["followee"]), left_key="post_id", right_key="fid",
                                  how="left", left_time="at", right_time="at")
            runner = PlanRunner(join.plan, f"{root}/{query}/cp", partitions=2, query_id=query,
                                           config=StateConfig(store="rocksdb", local_dir=f"{root}/{query}/l"))
            outputs[query] = [output_rows(runner.run(pa.Table.from_pylist([dict(zip(POSTS.names, r)) for r in p],
                                                                          schema=POSTS),
                                                     pa.Table.from_pylist([dict(zip(FOLLOWS.names, r)) for r in f],
                                                                          schema=FOLLOWS)))
                              for p, f in zip(posts, follows)]
            parked[query] = len(parked_paths())   # each stage's partitions' stores, left open
            evict_all()
    finally:
        evict_all()
        shutil.rmtree(root, ignore_errors=True)
    assert outputs["q1"] == outputs[None] and any(outputs[None])
    assert parked == {None: 0, "q1": 6}


_DELTA_ORDERS = pa.schema([("id", pa.int64()), ("cid", pa.int64()), ("amount", pa.int64()),
                           ("_change_type", pa.string()), ("_commit_version", pa.int64()),
                           ("_commit_timestamp", pa.timestamp("us", "UTC"))])
_DELTA_CUSTOMERS = pa.schema([("cid", pa.int64()), ("name", pa.string()), ("_change_type", pa.string()),
                              ("_commit_version", pa.int64()), ("_commit_timestamp", pa.timestamp("us", "UTC"))])


@pytest.mark.parametrize("fused", [False, True])
def test_table_join_delta_update_that_moves_a_primary_key_retracts_the_old_row(fused):
    # Delta writes UPDATE orders SET id = 5 WHERE id = 3 as the pre-image of 3 and the post-image
    # of 5: the view loses 3 and gains 5. A MERGE that moves 4 away and inserts a new 4 in one
    # commit keeps the new 4; a pre-image whose post-image comes a micro-batch later moves nothing.
    join = TableTableJoin(_DELTA_ORDERS, _DELTA_CUSTOMERS, "cid", left_key="id", right_key="cid",
                          left_changes=ChangeFormat.delta("id"), right_changes=ChangeFormat.delta("cid"),
                          fuse_key_stages=fused)
    driver = InProcess(join, partitions=3)
    view = MaterializedView(open_store("memory", f"{driver.root}/view"), *join.view_key, join.output_schema)

    def run(orders: list[tuple], customers: list[tuple] = ()) -> list[tuple]:
        def table(rows, schema):
            return pa.Table.from_pylist([dict(zip(schema.names, (*r[:-1], when(r[-1], tz=True)))) for r in rows],
                                        schema=schema)
        view.apply(driver.runner.run(table(orders, _DELTA_ORDERS), table(customers, _DELTA_CUSTOMERS)))
        return sorted((r["id"], r["amount"], r["name"]) for r in view.rows().to_pylist())

    try:
        assert run([(3, 10, 1, "insert", 0, 1), (4, 10, 2, "insert", 0, 1)],
                   [(10, "ann", "insert", 0, 1)]) == [(3, 1, "ann"), (4, 2, "ann")]
        assert run([(3, 10, 1, "update_preimage", 1, 2), (5, 10, 1, "update_postimage", 1, 2),
                    (4, 10, 2, "update_preimage", 1, 2), (6, 10, 2, "update_postimage", 1, 2),
                    (4, 10, 9, "insert", 1, 2)]) == [(4, 9, "ann"), (5, 1, "ann"), (6, 2, "ann")]
        assert run([(5, 10, 1, "update_preimage", 2, 3)]) == [(4, 9, "ann"), (6, 2, "ann")]
        assert run([(5, 10, 7, "update_postimage", 2, 3)]) == [(4, 9, "ann"), (5, 7, "ann"), (6, 2, "ann")]
        assert driver.runner.metric("changes_key_moves") == 3
    finally:
        view.store.close()
        driver.close()


@pytest.mark.parametrize("split", [False, True])
def test_table_join_debezium_key_move_in_the_transaction_that_created_the_key_retracts_it(split, tmp_path):
    # A join keyed by a unique column (code) other than the database's key: one transaction (one
    # ts_ms) creates code A and updates it to B. The delete of A has the update's order (its LSN),
    # after the create's; it once had a null sequence, ordered before the create, and A stayed.
    from streamjoin.testing import LocalJoins, view_rows

    row = pa.struct([("code", pa.string()), ("cid", pa.int64())])
    schema = pa.schema([("op", pa.string()), ("before", row), ("after", row), ("ts_ms", pa.int64()),
                        ("lsn", pa.int64())])
    feed = pa.Table.from_pylist([
        {"op": "c", "before": None, "after": {"code": "A", "cid": 7}, "ts_ms": 1_000, "lsn": 1},
        {"op": "u", "before": {"code": "A", "cid": 7}, "after": {"code": "B", "cid": 7}, "ts_ms": 1_000, "lsn": 2},
    ], schema=schema)
    customers = pa.table({"cid": [7], "name": ["ann"], "op": ["upsert"], "at": pa.array([0], pa.timestamp("us", "UTC"))})
    batches = [(feed.slice(0, 1), customers), (feed.slice(1), customers.slice(0, 0))] if split else [(feed, customers)]
    joins = LocalJoins(str(tmp_path), partitions=2)
    out = []
    for version, (orders, custs) in enumerate(batches):
        joins.begin(version, final=version == len(batches) - 1)
        out.append(joins.table_table_join(orders, custs, "cid", left_key="code", right_key="cid", right_time="at",
                                          left_sequence="lsn"))
    view = view_rows(pa.concat_tables(out), left_key="code", right_key="cid_right")
    assert sorted((r["code"], r["name"]) for r in view.to_pylist()) == [("B", "ann")]
