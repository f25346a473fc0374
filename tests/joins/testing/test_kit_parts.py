"""Parts of the kit: the error when Hypothesis is missing, LocalJoins over Debezium change streams."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import tempfile
import textwrap

import pyarrow as pa
from hypothesis import strategies as st

from streamjoin.testing import LocalJoins, assert_deterministic, rows_of, view_rows
from streamjoin.testing.strategies import change_streams, event_streams
from tests.joins.testing.pipelines import EVENTS, PROFILE, UTC_US, at, count_per_plan

WITHOUT_HYPOTHESIS = textwrap.dedent("""
    import importlib.abc, sys

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "hypothesis" or name.startswith("hypothesis."):
                raise ImportError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, Blocker())
    import streamjoin.testing as kit                # needs no Hypothesis
    for attempt in (lambda: kit.assert_deterministic(lambda t: t, [], max_examples=1),
                    lambda: __import__("streamjoin.testing.strategies")):
        try:
            attempt()
        except ImportError as exc:
            print("ImportError:", exc)
        else:
            print("no error")
""")


def test_kit_without_hypothesis_imports_and_says_how_to_install_it():
    done = subprocess.run([sys.executable, "-c", WITHOUT_HYPOTHESIS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("ImportError: streamjoin.testing's strategies") for line in lines)
    assert all('pip install "/path/to/streamjoin[testing]"' in line for line in lines)


EVENT_ROWS = pa.table({"user_id": [1, 2, 1, 2], "ts": pa.array([at(s) for s in (1, 4, 12, 30)], UTC_US),
                       "action": ["buy"] * 4})
PLAIN = pa.table({"user_id": [1, 2, 1, 2], "plan": ["free", "pro", "pro", None],
                  "op": ["upsert", "upsert", "upsert", "delete"],
                  "changed_at": pa.array([at(s) for s in (0, 3, 10, 20)], UTC_US)})
ROW = pa.struct([("user_id", pa.int64()), ("plan", pa.string())])
DEBEZIUM = pa.table({"op": ["c", "c", "u", "d"],
                     "before": pa.array([None, None, {"user_id": 1, "plan": "free"}, {"user_id": 2, "plan": "pro"}],
                                        ROW),
                     "after": pa.array([{"user_id": 1, "plan": "free"}, {"user_id": 2, "plan": "pro"},
                                        {"user_id": 1, "plan": "pro"}, None], ROW),
                     "ts_ms": [int(at(s).timestamp() * 1000) for s in (0, 3, 10, 20)]})


def _enrich(changes: pa.Table, version: int, joins: LocalJoins, events: pa.Table, time: str | None) -> pa.Table:
    joins.begin(version, final=version == 1)
    return joins.stream_table_join(events, changes, "user_id", stream_time="ts", table_key="user_id",
                                   table_time=time, delay=dt.timedelta(0))


def test_local_joins_read_debezium_changes_as_the_plain_ones():
    outputs = {}
    for name, changes, time in (("plain", PLAIN, "changed_at"), ("debezium", DEBEZIUM, None)):
        with tempfile.TemporaryDirectory() as root:
            joins = LocalJoins(root, partitions=2)
            first = _enrich(changes.slice(0, 2), 0, joins, EVENT_ROWS.slice(0, 2), time)
            last = _enrich(changes.slice(2), 1, joins, EVENT_ROWS.slice(2), time)
            out = pa.concat_tables([first, last])
        outputs[name] = rows_of(out.select(["user_id", "ts", "action", "plan"]))
    assert outputs["debezium"] == outputs["plain"]
    assert sorted(outputs["plain"].counts) == [(1, at(1), "buy", "free"), (1, at(12), "buy", "pro"),
                                               (2, at(4), "buy", "pro"), (2, at(30), "buy", None)]


def test_assert_deterministic_passes_enrichment_over_debezium_change_streams():
    events = event_streams(EVENTS, time="ts", key="user_id", max_rows=8, disorder=dt.timedelta(0))
    changes = change_streams(PROFILE, key="user_id", vocabulary="debezium", heartbeats=True, stale=True,
                             duplicates=True, max_changes=8)
    report = assert_deterministic(purchases_per_plan_debezium, st.tuples(events, changes), finish=count_per_plan,
                                  max_examples=15)
    assert report.examples == 15


def purchases_per_plan_debezium(events: pa.Table, changes: pa.Table, joins, checkpoint: str) -> pa.Table:
    assert changes.column_names == ["op", "before", "after", "ts_ms"]
    return joins.stream_table_join(events, changes, "user_id", stream_time="ts", table_key="user_id",
                                   delay=dt.timedelta(0), checkpoint=f"{checkpoint}/enrich")


POSTS = pa.schema([("post_id", pa.int64()), ("author_id", pa.int64())])
FOLLOWS = pa.schema([("follow_id", pa.int64()), ("followee_id", pa.int64())])


def debezium_timeline(posts: pa.Table, follows: pa.Table, joins) -> pa.Table:
    return joins.table_table_join(posts, follows, (["author_id"], ["followee_id"]), left_key="post_id",
                                  right_key="follow_id")


def test_assert_deterministic_passes_a_table_table_join_of_debezium_change_streams():
    posts = change_streams(POSTS, key="post_id", keys=(1, 2, 3), vocabulary="debezium", max_changes=6)
    follows = change_streams(FOLLOWS, key="follow_id", keys=(1, 2), vocabulary="debezium", max_changes=6)
    assert_deterministic(debezium_timeline, st.tuples(posts, follows), max_examples=5,
                         finish=lambda t: view_rows(t, left_key="post_id", right_key="follow_id"))


def test_testing_plugin_loads_without_importing_the_kit():
    """pytest loads the plugin in every run of a project that installs streamjoin: it stays light."""
    import subprocess
    import sys

    code = ("import sys, streamjoin.testing.plugin\n"
            "heavy = [m for m in ('pyarrow', 'pyspark', 'hypothesis', 'streamjoin.testing.local',\n"
            "                     'streamjoin.testing.determinism') if m in sys.modules]\n"
            "print(heavy); sys.exit(1 if heavy else 0)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    from streamjoin import testing

    assert callable(testing.assert_deterministic) and set(testing.__all__) <= set(dir(testing))


def test_rows_of_compares_lists_structs_and_maps_as_values():
    kind = pa.struct([("tags", pa.map_(pa.string(), pa.list_(pa.int64()))), ("seen", pa.list_(pa.string()))])
    values = [{"tags": [("k", [1, None])], "seen": ["a"]}, None, {"tags": [], "seen": []}]
    a = pa.table({"v": pa.array(values, kind)})
    b = pa.table({"v": pa.array(list(reversed(values)), kind)})
    assert rows_of(a) == rows_of(b)
    assert rows_of(a) != rows_of(pa.table({"v": pa.array([values[0], None, None], kind)}))
