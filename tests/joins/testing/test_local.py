"""LocalJoins, the joins over Arrow tables in process: the PySpark joins' arguments, and what the
arguments the in-process joins once lacked do (formats and sequences, retention, bootstrap, state_dir)."""

from __future__ import annotations

import datetime as dt
import inspect
import os
import tempfile

import pyarrow as pa
import pytest

import streamjoin.spark.enrichment
import streamjoin.spark.interval
import streamjoin.spark.table
from streamjoin.errors import JoinDefinitionError
from streamjoin.testing import LocalJoins
from tests.joins.testing.pipelines import UTC_US, at

SPARK_JOINS = [streamjoin.spark.interval.interval_join, streamjoin.spark.enrichment.stream_table_join,
               streamjoin.spark.table.table_table_join]


def _parameters(function) -> list[tuple[str, inspect._ParameterKind, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values() if p.name != "self"]


@pytest.mark.parametrize("spark_join", SPARK_JOINS, ids=lambda f: f.__name__)
def test_local_joins_take_the_pyspark_joins_arguments(spark_join):
    # the same names, defaults, order and keyword-only-ness (annotations differ: Arrow tables, not DataFrames)
    assert _parameters(getattr(LocalJoins, spark_join.__name__)) == _parameters(spark_join)


POSTS = pa.table({"post_id": [1, 2], "author_id": [1, 2], "op": ["upsert", "upsert"],
                  "changed_at": pa.array([at(0), at(100)], UTC_US), "seq": [0, 0]})
FOLLOWS = pa.table({"follow_id": [1], "followee_id": [1], "op": ["upsert"], "changed_at": pa.array([at(0)], UTC_US),
                    "seq": [0]})


def _view_changes(**arguments) -> list[str]:
    """The view's change types over four versions: post 1 and its follower, post 2 much later, then
    none (the horizon of a version comes from the change times of the versions before it)."""
    none = FOLLOWS.slice(0, 0)
    with tempfile.TemporaryDirectory() as root:
        joins, out = LocalJoins(root), []
        for version, (posts, follows) in enumerate([(POSTS.slice(0, 1), FOLLOWS), (POSTS.slice(1), none),
                                                    (POSTS.slice(0, 0), none), (POSTS.slice(0, 0), none)]):
            joins.begin(version, final=version == 3)
            out += joins.table_table_join(posts, follows, (["author_id"], ["followee_id"]), left_key="post_id",
                                          right_key="follow_id", left_time="changed_at", right_time="changed_at",
                                          left_format="plain", right_format="plain", left_sequence="seq",
                                          right_sequence="seq", **arguments).column("_change_type").to_pylist()
    return out


def test_local_joins_table_table_join_expires_rows_past_retention():
    assert _view_changes() == ["insert"]
    # post 1's last change is 100 s older than its table's newest: past a 10 s retention it leaves the view
    assert _view_changes(retention=dt.timedelta(seconds=10), expire_rows=True) == ["insert", "delete"]


def test_local_joins_table_table_join_takes_per_table_delays():
    # the posts' own delay (10 s) expires post 1; the follows' (none given: the 1 day retention) keeps follow 1
    assert _view_changes(retention="1 day", left_delay="10 seconds", expire_rows=True) == ["insert", "delete"]
    assert _view_changes(retention="10 seconds", left_delay="1 day", expire_rows=True) == ["insert"]


EVENTS = pa.table({"user_id": [1, 2], "ts": pa.array([at(5), at(6)], UTC_US)})
CHANGES = pa.table({"user_id": pa.array([None], pa.int64()), "op": ["heartbeat"], "changed_at": pa.array([at(100)], UTC_US),
                    "plan": pa.array([None], pa.string())})


def test_local_joins_stream_table_join_loads_its_bootstrap_before_the_first_version():
    snapshot = pa.table({"user_id": [1], "plan": ["free"]})
    with tempfile.TemporaryDirectory() as root:
        joins = LocalJoins(root, partitions=2)
        plans = []
        for version, events in enumerate([EVENTS.slice(0, 1), EVENTS.slice(1)]):
            joins.begin(version, final=version == 1)
            out = joins.stream_table_join(events, CHANGES if version == 0 else CHANGES.slice(0, 0), "user_id",
                                          stream_time="ts", table_key="user_id", table_time="changed_at",
                                          delay=dt.timedelta(0), bootstrap=snapshot, checkpoint="enrich")
            plans += list(zip(out.column("user_id").to_pylist(), out.column("plan").to_pylist()))
    assert sorted(plans) == [(1, "free"), (2, None)]  # loaded once, though given in both calls


def test_local_joins_keep_local_stores_under_state_dir():
    with tempfile.TemporaryDirectory() as root:
        joins = LocalJoins(root)
        joins.begin(0, final=True)
        state_dir = os.path.join(root, "mine")
        joins.interval_join(EVENTS, EVENTS, "user_id", left_time="ts", right_time="ts", lower=dt.timedelta(0),
                            upper=dt.timedelta(0), delay=dt.timedelta(0), store="lmdb", state_dir=state_dir)
        assert os.listdir(state_dir) and not os.path.exists(os.path.join(root, "local"))


def test_local_joins_table_table_join_loads_its_bootstraps_before_the_first_version():
    # post 1 and follow 1 exist before their streams; post 2's first change moves post 1 to author 2
    posts = pa.table({"post_id": [1, 2], "author_id": [2, 1], "op": ["upsert", "upsert"],
                      "changed_at": pa.array([at(0), at(0)], UTC_US), "seq": [0, 0]})
    with tempfile.TemporaryDirectory() as root:
        joins, view = LocalJoins(root, partitions=2), []
        for version in range(2):
            joins.begin(version, final=version == 1)
            out = joins.table_table_join(
                posts.slice(0, 0) if version else posts, FOLLOWS.slice(0, 0), (["author_id"], ["followee_id"]),
                left_key="post_id", right_key="follow_id", left_time="changed_at", right_time="changed_at",
                left_format="plain", right_format="plain", left_sequence="seq", right_sequence="seq",
                left_bootstrap=pa.table({"post_id": [1, 3], "author_id": [1, 1]}),
                right_bootstrap=pa.table({"follow_id": [1], "followee_id": [1]}))
            view += [(r["post_id"], r["follow_id"], r["_change_type"]) for r in out.to_pylist()]
        assert sorted(view) == [(2, 1, "insert"), (3, 1, "insert")]
        with pytest.raises(JoinDefinitionError, match="left_bootstrap must have the table's key"):
            LocalJoins(root + "/other").table_table_join(
                posts, FOLLOWS, (["author_id"], ["followee_id"]), left_key="post_id", right_key="follow_id",
                left_time="changed_at", right_time="changed_at", left_bootstrap=pa.table({"author_id": [1]}))


@pytest.mark.parametrize("partitions", [0, -1, True, 1.5])
def test_local_joins_refuse_a_run_partition_count_below_one(tmp_path, partitions):
    with pytest.raises(JoinDefinitionError, match=f"partitions must be an int of at least 1, not {partitions!r}"):
        LocalJoins(str(tmp_path), partitions=partitions)


@pytest.mark.parametrize("arguments, message", [
    ({"partitions": 0}, "partitions must be an int of at least 1, not 0"),
    ({"partitions": 5000}, "partitions must be an int from 1 to 4096 (the join's key groups, max_partitions"),
    ({"partitions": 9, "max_partitions": 8}, "partitions must be an int from 1 to 8 (the join's key groups"),
    ({"max_partitions": 0}, "max_partitions must be an int of at least 1, not 0"),
])
def test_local_joins_interval_join_refuses_a_bad_count_before_writing(tmp_path, arguments, message):
    joins = LocalJoins(str(tmp_path))
    joins.begin(0, final=True)
    with pytest.raises(JoinDefinitionError) as error:
        joins.interval_join(EVENTS, EVENTS, "user_id", left_time="ts", right_time="ts", lower=dt.timedelta(0),
                            upper=dt.timedelta(0), delay=dt.timedelta(0), checkpoint="j", **arguments)
    assert message in str(error.value)
    assert not any(name.endswith("streamjoin.json") for _, _, names in os.walk(tmp_path) for name in names)


def test_local_joins_interval_join_refuses_an_unknown_end_of_run_and_takes_the_known_ones(tmp_path):
    joins = LocalJoins(str(tmp_path))
    joins.begin(0, final=True)
    arguments = dict(left_time="ts", right_time="ts", lower=dt.timedelta(0), upper=dt.timedelta(0),
                     delay=dt.timedelta(0))
    with pytest.raises(JoinDefinitionError, match="end_of_run must be one of 'hold', 'flush', 'release', not 'stop'"):
        joins.interval_join(EVENTS, EVENTS, "user_id", checkpoint="bad", end_of_run="stop", **arguments)
    outputs = [joins.interval_join(EVENTS, EVENTS, "user_id", checkpoint=f"j_{end}", end_of_run=end, **arguments)
               for end in ("hold", "flush", "release")]
    assert outputs[0].num_rows > 0 and all(out.equals(outputs[0]) for out in outputs)


@pytest.mark.parametrize("spark_join", SPARK_JOINS, ids=lambda f: f.__name__)
def test_local_joins_vocabulary_arguments_are_spelled_side_format(spark_join):
    # a side's change vocabulary is <side>_format=, beside <side>_key=, <side>_time=, <side>_sequence=
    names = [p.name for p in inspect.signature(spark_join).parameters.values()]
    vocabulary = [n for n in names if n.endswith("_format") or n == "changes"]
    assert vocabulary == {"interval_join": [], "stream_table_join": ["table_format", "changes"],
                          "table_table_join": ["left_format", "right_format"]}[spark_join.__name__]


def _plans(**arguments) -> list:
    with tempfile.TemporaryDirectory() as root:
        joins = LocalJoins(root)
        joins.begin(0, final=True)
        out = joins.stream_table_join(EVENTS, CHANGES, "user_id", stream_time="ts", table_key="user_id",
                                      table_time="changed_at", delay=dt.timedelta(0),
                                      bootstrap=pa.table({"user_id": [1], "plan": ["free"]}), **arguments)
        return sorted(zip(out.column("user_id").to_pylist(), out.column("plan").to_pylist()))


def test_local_joins_stream_table_join_former_changes_argument_warns_and_works():
    assert _plans(table_format="plain") == [(1, "free"), (2, None)]
    with pytest.warns(DeprecationWarning, match="changes= is deprecated.*table_format="):
        assert _plans(changes="plain") == [(1, "free"), (2, None)]
    with pytest.raises(JoinDefinitionError, match="pass table_format= only"):
        _plans(changes="plain", table_format="plain")


def test_local_joins_table_table_join_reads_another_joins_output_as_it_comes():
    # a view over three tables: posts x follows, then that view x authors (its key the post)
    authors = pa.table({"author_id": [1, 2], "name": ["ann", "bo"], "op": ["upsert", "upsert"],
                        "changed_at": pa.array([at(0), at(0)], UTC_US)})
    with tempfile.TemporaryDirectory() as root:
        joins = LocalJoins(root, partitions=2)
        joins.begin(0, final=True)
        view = joins.table_table_join(POSTS, FOLLOWS, (["author_id"], ["followee_id"]), left_key="post_id",
                                      right_key="follow_id", how="left", left_time="changed_at",
                                      right_time="changed_at", checkpoint="timeline")
        lines = joins.table_table_join(view, authors, "author_id", left_key=["post_id", "follow_id"],
                                       right_key="author_id", right_time="changed_at", checkpoint="named")
    assert sorted(zip(lines.column("post_id").to_pylist(), lines.column("follow_id").to_pylist(),
                      lines.column("name").to_pylist())) == [(1, 1, "ann"), (2, None, "bo")]


def test_local_joins_resolve_change_formats_as_the_pyspark_joins_do(tmp_path):
    # Debezium's ts_us is microseconds in Spark; the kit once read it as milliseconds, so a change
    # at 10 s was dated 10,000 s and an event at 20 s found no row
    row = pa.struct([("k", pa.int64()), ("v", pa.string())])
    changes = pa.table({"op": ["c"], "before": pa.array([None], row), "after": pa.array([{"k": 1, "v": "a"}], row),
                        "ts_us": [10_000_000]})
    events = pa.table({"k": [1], "ts": pa.array([dt.datetime(1970, 1, 1, 0, 0, 20, tzinfo=dt.timezone.utc)], UTC_US),
                       "e": ["e20"]})
    joins = LocalJoins(str(tmp_path))
    joins.begin(0, final=True)
    out = joins.stream_table_join(events, changes, "k", stream_time="ts", table_key="k", table_time="ts_us",
                                  how="left", delay="5 seconds")
    assert out.select(["e", "v"]).to_pylist() == [{"e": "e20", "v": "a"}]
    # a table the registry cannot read gets the Spark layer's error, naming the argument
    with pytest.raises(JoinDefinitionError, match="cannot tell the vocabulary of left_changes"):
        joins.table_table_join(pa.table({"id": [1], "x": [1]}), FOLLOWS, ("id", "follow_id"), left_key="id",
                               right_key="follow_id", right_time="changed_at")


def test_local_joins_as_of_over_a_view_sees_its_history_a_micro_batch_at_a_time_and_notes_it(tmp_path):
    # docs/guides/views.md: a micro-batch writes one change of a view row, so the customer's two
    # changes (at 0 s and 10 s) in one micro-batch leave one version, from 10 s: an event at 5 s
    # finds no row; with the changes in two micro-batches it finds the first. The kit says so.
    from streamjoin.testing.local import VIEW_AS_OF_NOTE

    orders = pa.table({"id": [1], "cid": [7], "op": ["upsert"], "at": pa.array([at(0)], UTC_US)})
    customers = pa.table({"cid": [7, 7], "name": ["old", "new"], "op": ["upsert", "upsert"],
                          "at": pa.array([at(0), at(10)], UTC_US)})
    events = pa.table({"id": [1, 1], "ts": pa.array([at(5), at(15)], UTC_US), "e": ["e5", "e15"]})

    def run(batches, root):
        joins = LocalJoins(str(root), partitions=2)
        out = []
        for version, (o, c, e) in enumerate(batches):
            joins.begin(version, final=version == len(batches) - 1)
            view = joins.table_table_join(o, c, "cid", left_key="id", right_key="cid", how="left", left_time="at",
                                          right_time="at")
            out.append(joins.stream_table_join(e, view, "id", stream_time="ts", table_key="id", how="left",
                                               delay="1 second"))
        return sorted((r["e"], r["name"]) for r in pa.concat_tables(out).to_pylist()), joins.notes

    whole, notes = run([(orders, customers, events)], tmp_path / "one")
    split, _ = run([(orders, customers.slice(0, 1), events.slice(0, 0)),
                    (orders.slice(0, 0), customers.slice(1), events)], tmp_path / "two")
    assert whole == [("e15", "new"), ("e5", None)]
    assert split == [("e15", "new"), ("e5", "old")]
    assert VIEW_AS_OF_NOTE in notes
