"""A table-table join started from its state rows (``initial_state``, :mod:`streamjoin.table.load`):
every stage's state, read as ``read_state`` shows it (:func:`streamjoin.runtime.state_rows.state_rows`),
starts a new checkpoint whose versions give the output the join it was read from gives, at another
partition count too, from the entries the stages themselves hold; the three-stage plan and the fused
one (a key step routed by primary key, one routed by join key, a side declared with an immutable
join key); with a retention the expiry index is made again and the horizon is the old run's (from
the keys' change times, or the progress given); rows that cannot be the join's state are refused
before anything is written; a loaded checkpoint recovers, rescales and executes its first version
again as any other."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import pyarrow as pa
import pytest

from streamjoin.changelog import Changelog, restore
from streamjoin.changes import ChangeFormat
from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.initial_state import state_progress
from streamjoin.runtime.plan import JoinPlan
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.runtime.rescale import changelog_uri, epochs, state_epoch
from streamjoin.runtime.state_rows import state_rows
from streamjoin.statestore import destroy_store, open_store
from streamjoin.table.operator import TableTableJoin
from tests.joins.drivers import InProcess
from tests.joins.table.cases import freeze

T0 = dt.datetime(2026, 1, 1)
UTC = dt.timezone.utc
SECOND = 1_000_000


# -- tables: how an abstract change (primary key, join key, payload, second, sequence) is spelled ----

@dataclass(frozen=True)
class Table:
    """One change table of a scenario: its schema and change format, how a change is spelled,
    its primary and join keys (indexes into ``pks`` / ``jks``), and, for a table whose join key
    never moves, the join key of each primary key."""

    schema: pa.Schema
    changes: ChangeFormat
    row: Callable[[int, int, int, int, int], dict]
    pks: int
    jks: int
    jk_of: Callable[[int], int] | None = None
    sequenced: bool = False

    def spell(self, pk: int, jk: int, payload: int, second: int, seq: int, op: str) -> dict:
        return {**self.row(pk, jk, payload, second, seq), "op": op}


# posts: composite primary key (int32, date32), join key (float64, binary) that moves, many types,
# ordered by change time then ``rev``
_JK_VALUES = [(1.0, b"a"), (-0.0, b"b"), (2.5, b"\x00\xff"), (None, b"a"), (1.0, b"c")]


def _post(pk: int, jk: int, payload: int, second: int, seq: int) -> dict:
    g, h = _JK_VALUES[jk]
    return {"id": pk % 7, "day": dt.date(2024, 1, 1) + dt.timedelta(days=pk // 7), "g": g, "h": h,
            "amt": decimal.Decimal(payload) / 8, "note": f"note {payload}" if payload % 3 else None,
            "score": payload / 4, "ok": payload % 2 == 0, "seen": dt.datetime(2024, 5, 1, 12, tzinfo=UTC)
            + dt.timedelta(milliseconds=payload), "at": T0 + dt.timedelta(seconds=second), "rev": seq}


POSTS = Table(pa.schema([("id", pa.int32()), ("day", pa.date32()), ("g", pa.float64()), ("h", pa.binary()),
                         ("amt", pa.decimal128(12, 3)), ("note", pa.large_string()), ("score", pa.float32()),
                         ("ok", pa.bool_()), ("seen", pa.timestamp("ms", "UTC")), ("at", pa.timestamp("us")),
                         ("rev", pa.int64()), ("op", pa.string())]),
              ChangeFormat.plain(["id", "day"], time="at", sequence="rev"), _post, 21, len(_JK_VALUES),
              sequenced=True)


# follows: a string primary key, join key (float32, large_binary) that moves, an integer change
# time in milliseconds
def _follow(pk: int, jk: int, payload: int, second: int, seq: int) -> dict:
    g, h = _JK_VALUES[jk]
    return {"fid": f"f{pk}", "g": g, "h": h, "dur": dt.timedelta(seconds=payload),
            "t": dt.time(payload % 24, 30), "ms": second * 1000 + 7,
            "meta": None if payload % 5 == 0 else {"n": payload, "when": [dt.datetime(2024, 5, 1, tzinfo=UTC), None][:payload % 3],
                                                   "price": decimal.Decimal(payload) / 4}}


_META = pa.struct([("n", pa.int64()), ("when", pa.list_(pa.timestamp("us", "UTC"))), ("price", pa.decimal128(9, 2))])
FOLLOWS = Table(pa.schema([("fid", pa.string()), ("g", pa.float32()), ("h", pa.large_binary()),
                           ("dur", pa.duration("s")), ("t", pa.time64("us")), ("ms", pa.int64()), ("meta", _META),
                           ("op", pa.string())]),
                ChangeFormat.plain("fid", time="ms", time_unit="ms"), _follow, 20, len(_JK_VALUES))


# orders of customers: the customers' primary key is their join key (their key step fuses,
# routed by primary key); orders move between customers
def _order(pk: int, jk: int, payload: int, second: int, seq: int) -> dict:
    return {"order_id": pk, "customer": f"c{jk}", "amount": decimal.Decimal(payload) / 4,
            "at": T0 + dt.timedelta(seconds=second)}


def _customer(pk: int, jk: int, payload: int, second: int, seq: int) -> dict:
    return {"customer": f"c{pk}", "name": f"name {payload}", "blob": bytes([payload % 256, 7]),
            "tags": {"k": [bytes([payload % 256]), None]} if payload % 2 else {},
            "at": (T0 + dt.timedelta(seconds=second)).replace(tzinfo=UTC)}


ORDERS = Table(pa.schema([("order_id", pa.int64()), ("customer", pa.string()), ("amount", pa.decimal128(9, 2)),
                          ("at", pa.timestamp("us")), ("op", pa.string())]),
               ChangeFormat.plain("order_id", time="at"), _order, 25, 5)
CUSTOMERS = Table(pa.schema([("customer", pa.string()), ("name", pa.string()), ("blob", pa.binary()),
                             ("tags", pa.map_(pa.string(), pa.list_(pa.binary()))),
                             ("at", pa.timestamp("us", "UTC")), ("op", pa.string())]),
                  ChangeFormat.plain("customer", time="at"), _customer, 6, 6, jk_of=lambda pk: pk)


# order lines keyed by (order, line), joined on the order (a key step routed by join key: its join
# key is part of its primary key), with the orders keyed by their join key
def _line(pk: int, jk: int, payload: int, second: int, seq: int) -> dict:
    return {"o": pk // 3, "n": pk % 3, "qty": payload, "at": T0 + dt.timedelta(seconds=second)}


def _head(pk: int, jk: int, payload: int, second: int, seq: int) -> dict:
    return {"o": pk, "state": f"s{payload}", "at": T0 + dt.timedelta(seconds=second)}


LINES = Table(pa.schema([("o", pa.int64()), ("n", pa.int32()), ("qty", pa.int64()), ("at", pa.timestamp("us")),
                         ("op", pa.string())]),
              ChangeFormat.plain(["o", "n"], time="at"), _line, 30, 10, jk_of=lambda pk: pk // 3)
HEADS = Table(pa.schema([("o", pa.int64()), ("state", pa.string()), ("at", pa.timestamp("us")), ("op", pa.string())]),
              ChangeFormat.plain("o", time="at"), _head, 10, 10, jk_of=lambda pk: pk)


# posts declared with an immutable author (a key step routed by join key whose join key is not in
# its primary key: deleted keys keep their join key), with authors keyed by their join key
def _fixed_post(pk: int, jk: int, payload: int, second: int, seq: int) -> dict:
    return {"post_id": pk, "author": jk, "text": f"t{payload}", "at": T0 + dt.timedelta(seconds=second)}


def _author(pk: int, jk: int, payload: int, second: int, seq: int) -> dict:
    return {"author": pk, "handle": f"@{payload}", "at": T0 + dt.timedelta(seconds=second)}


FIXED_POSTS = Table(pa.schema([("post_id", pa.int64()), ("author", pa.int64()), ("text", pa.string()),
                               ("at", pa.timestamp("us")), ("op", pa.string())]),
                    ChangeFormat.plain("post_id", time="at"), _fixed_post, 25, 4, jk_of=lambda pk: pk % 4)
AUTHORS = Table(pa.schema([("author", pa.int64()), ("handle", pa.string()), ("at", pa.timestamp("us")),
                           ("op", pa.string())]),
                ChangeFormat.plain("author", time="at"), _author, 4, 4, jk_of=lambda pk: pk)


@dataclass(frozen=True)
class Scenario:
    """A join of two tables: ``on``, ``how``, its other arguments (``options``: ``fuse_key_stages``...)
    and the stages its plan has."""

    name: str
    left: Table
    right: Table
    on: Any
    how: str
    stages: tuple[str, ...]
    options: dict = field(default_factory=dict)

    def join(self, **options: Any) -> TableTableJoin:
        join = TableTableJoin(self.left.schema, self.right.schema, self.on, left_key=list(self.left.changes.key),
                              right_key=list(self.right.changes.key), how=self.how, left_changes=self.left.changes,
                              right_changes=self.right.changes, **{**self.options, **options})
        assert "fuse_key_stages" in options or join.plan.names == self.stages
        return join


TYPED = Scenario("three stages", POSTS, FOLLOWS, ["g", "h"], "full", ("left_keys", "right_keys", "join"))
FOREIGN = Scenario("fused by primary key", ORDERS, CUSTOMERS, "customer", "left", ("left_keys", "join"),
                   {"fuse_key_stages": True})
ORDER_LINES = Scenario("fused by join key", LINES, HEADS, "o", "full", ("",), {"fuse_key_stages": True})
DECLARED = Scenario("fused, declared immutable", FIXED_POSTS, AUTHORS, "author", "inner", ("",),
                    {"fuse_key_stages": True, "left_immutable_join_key": True})
SCENARIOS = (TYPED, FOREIGN, ORDER_LINES, DECLARED)


# -- histories -------------------------------------------------------------------------------------

@dataclass
class History:
    """Random changes of one table, version by version, that keep track of its rows: inserts,
    updates, join-key moves, deletes, primary-key changes (a delete and an insert of another key
    with the row) and stale changes (older than the key's last one, ignored)."""

    table: Table
    rng: random.Random
    live: dict[int, tuple[int, int]] = field(default_factory=dict)     # pk -> (join key, payload)
    last: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # pk -> (second, seq, join key)
    payloads: int = 0

    def version(self, second: int, changes: int, late: int | None = None) -> pa.Table:
        """``changes`` changes at ``second`` (and after); ``late``: one more at that (older) second."""
        t, rows, used = self.table, [], set()
        for i in range(changes):
            at = second + i % 3
            kind = self.rng.choice(["insert", "insert", "update", "move", "delete", "pk", "stale"])
            free = [pk for pk in range(t.pks) if pk not in self.live and pk not in used]
            fresh = [pk for pk in free if pk not in self.last]   # a deleted key stays deleted a while
            held = [pk for pk in self.live if pk not in used]
            if kind == "move" and t.jk_of is not None:
                kind = "update"
            if kind in ("update", "move", "delete", "pk") and not held:
                kind = "insert"
            if kind == "stale" and not [pk for pk in self.last if pk not in used]:
                kind = "insert"
            if kind == "insert" and not free:
                continue
            if kind == "insert":
                pk = self.rng.choice(fresh or free)
                rows.append(self._upsert(pk, self._jk(pk), at))
            elif kind == "update":
                pk = self.rng.choice(held)
                rows.append(self._upsert(pk, self.live[pk][0], at))
            elif kind == "move":
                pk = self.rng.choice(held)
                rows.append(self._upsert(pk, self.rng.choice([j for j in range(t.jks) if j != self.live[pk][0]]), at))
            elif kind == "delete":
                pk = self.rng.choice(held)
                rows.append(self._delete(pk, at))
            elif kind == "pk":
                pk = self.rng.choice(held)
                same = [p for p in free if t.jk_of is None or t.jk_of(p) == t.jk_of(pk)]   # (the row keeps its join key)
                if not same:
                    continue
                other = self.rng.choice([p for p in same if p in fresh] or same)
                jk, payload = self.live[pk]
                rows.append(self._delete(pk, at))
                rows.append(self._upsert(other, jk, at, payload))
                used.add(other)
            else:   # older than the key's last change: stale, ignored
                pk = self.rng.choice([pk for pk in self.last if pk not in used])
                s, seq, jk = self.last[pk]
                old_at, old_seq = (s, seq - 1) if t.sequenced else (s - 1, 0)
                rows.append(t.spell(pk, jk if t.jk_of is None else t.jk_of(pk), 999, old_at, old_seq, "upsert"))
            used.add(pk)
        if late is not None:
            pk = self.rng.choice([p for p in range(t.pks) if p not in used] or range(t.pks))
            rows.append(t.spell(pk, self._jk(pk), 998, late, 0, "upsert"))
        return pa.Table.from_pylist(rows, schema=t.schema)

    def _jk(self, pk: int) -> int:
        return self.table.jk_of(pk) if self.table.jk_of is not None else self.rng.randrange(self.table.jks)

    def _upsert(self, pk: int, jk: int, second: int, payload: int | None = None) -> dict:
        if payload is None:
            self.payloads += 1
            payload = self.payloads
        seq = self.rng.randrange(1, 5)
        self.live[pk] = (jk, payload)
        self.last[pk] = (second, seq, jk)
        return self.table.spell(pk, jk, payload, second, seq, "upsert")

    def _delete(self, pk: int, second: int) -> dict:
        jk, payload = self.live.pop(pk)
        seq = self.rng.randrange(1, 5)
        self.last[pk] = (second, seq, jk)
        return self.table.spell(pk, jk, payload, second, seq, "delete")


def histories(scenario: Scenario, versions: int, seed: int, changes: int = 6,
              late: dict[int, int] | None = None) -> list[tuple[pa.Table, pa.Table]]:
    """Each version's changes of both tables (version ``v`` at second ``10 * (v + 1)``; ``late``:
    by version, the second of one more change of each table)."""
    rng = random.Random(seed)
    left, right = History(scenario.left, rng), History(scenario.right, rng)
    out = []
    for v in range(versions):
        at = (late or {}).get(v)
        out.append((left.version(10 * (v + 1), changes, at), right.version(10 * (v + 1), changes, at)))
    return out


# -- reading state and output ----------------------------------------------------------------------

def read_state(plan: JoinPlan, checkpoint: str) -> dict[str, pa.Table]:
    """Every stage's state rows, by the join's side names (``initial_state``'s): a key stage's by
    its name, a join stage's by side (a fused stage's keys of a side that kept its key stage,
    always empty, left out)."""
    out: dict[str, pa.Table] = {}
    for stage in plan.stages:
        views = stage.operator.state_views
        for side in views:
            name = stage.name if len(views) == 1 else side
            table = state_rows(plan.location(checkpoint, stage), side)
            if name not in out or table.num_rows:
                out[name] = table
    return out


def state_of(rows: dict[str, pa.Table], placed: bool = False) -> dict[str, Counter]:
    """State rows as multisets of rows by side, without ``_version`` and (unless ``placed``)
    ``_partition``."""
    dropped = ("_version",) if placed else ("_partition", "_version")
    return {name: Counter(tuple(map(freeze, r.values())) for r in
                          table.drop_columns([c for c in dropped if c in table.column_names]).to_pylist())
            for name, table in rows.items()}


def output_of(table: pa.Table) -> Counter:
    """A version's output as a multiset of rows, without ``_commit_version`` (a new checkpoint
    numbers its versions from 0)."""
    return Counter(tuple(map(freeze, r.values())) for r in table.drop_columns(["_commit_version"]).to_pylist())


@pytest.fixture
def runs() -> Iterator[Callable[..., InProcess]]:
    """``runs(join, partitions=...)``: an in-process run of ``join`` over a fresh checkpoint, closed after the test."""
    made: list[InProcess] = []

    def make(join: TableTableJoin, partitions: int) -> InProcess:
        made.append(InProcess(join, partitions=partitions))
        return made[-1]

    yield make
    for run in made:
        run.close()


def started(runs: Callable[..., InProcess], join: TableTableJoin, batches: list, read_at: int,
            partitions: int) -> tuple[InProcess, InProcess, dict[str, pa.Table]]:
    """The join run over ``batches[:read_at]`` at 2 partitions, its state rows, and a new run of
    ``partitions`` partitions started from them."""
    old = runs(join, 2)
    for tables in batches[:read_at]:
        old.runner.run(*tables)
    given = read_state(join.plan, old.runner.checkpoint_dir)
    new = runs(join, partitions)
    new.runner.set_initial_state(given)
    return old, new, given


def held(run: InProcess) -> tuple[int, int]:
    """The rows the join stage holds per side after the last version (its metrics)."""
    last = run.runner.metrics(run.runner.plan.output.name)[-run.runner.partitions:]
    return sum(m["rows_held_left"] for m in last), sum(m["rows_held_right"] for m in last)


def continues_alike(old: InProcess, new: InProcess, plan: JoinPlan, batches: list) -> None:
    """Each of ``batches`` gives the same output in both runs, and the same state after it."""
    for version, tables in enumerate(batches):
        expected, got = output_of(old.runner.run(*tables)), output_of(new.runner.run(*tables))
        assert got == expected, f"version {version} after the load"
        assert held(new) == held(old), f"rows held after version {version} after the load"
        assert state_of(read_state(plan, new.runner.checkpoint_dir)) == \
            state_of(read_state(plan, old.runner.checkpoint_dir)), f"state after version {version} after the load"


# -- tests -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("partitions", [3, 1])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_table_initial_state_continues_as_the_join_it_was_read_from(runs, scenario, partitions):
    join = scenario.join()
    batches = histories(scenario, 9, seed=len(scenario.name) * 31 + partitions)
    old, new, given = started(runs, join, batches, 5, partitions)
    assert set(given) == {"left", "right", "left_keys", "right_keys"}
    assert sum(t.num_rows for t in given.values()) > 10
    assert False in given["left_keys"].column("_has_row").to_pylist() + \
        given["right_keys"].column("_has_row").to_pylist(), "a deleted key"
    continues_alike(old, new, join.plan, batches[5:])
    assert new.runner.metric("stale_changes") > 0


def entries_of(checkpoint: str, partition: int) -> list[tuple[bytes, bytes]]:
    """A stage checkpoint's partition's state entries, restored from its changelog."""
    cp = Checkpoint(checkpoint)
    epoch = state_epoch(cp, epochs(cp, cp.binding.root()))
    name = f"sj-initial-state-test-{partition}"
    store = open_store("memory", name)
    try:
        restore(Changelog(changelog_uri(cp, epoch, partition)), store)
        return list(store.scan())
    finally:
        store.close()
        destroy_store("memory", name)


@pytest.mark.parametrize("retention", [None, dt.timedelta(seconds=25)], ids=["", "retention"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_table_initial_state_loads_the_entries_each_stage_holds(runs, scenario, retention):
    # partition by partition, the entries made of a stage's state rows are the stage's own, byte for byte
    join = scenario.join(**({} if retention is None else {"retention": retention}))
    old = runs(join, 2)
    for tables in histories(scenario, 5, seed=17):
        old.runner.run(*tables)
    checked = 0
    for stage in join.plan.stages:
        location = join.plan.location(old.runner.checkpoint_dir, stage)
        rows = {side: state_rows(location, side) for side in stage.operator.state_views}
        for partition in range(2):
            mine = {side: table.filter(pa.array([p == partition for p in table.column("_partition").to_pylist()],
                                                pa.bool_())) for side, table in rows.items()}
            loaded = stage.operator.load_state(mine, {}, 5)
            assert loaded == sorted(loaded)
            assert loaded == entries_of(location, partition), (stage.name, partition)
            checked += len(loaded)
    assert checked > 20


@pytest.mark.parametrize("partitions", [2, 3])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_table_initial_state_read_back_equals_the_rows_given(runs, scenario, partitions):
    join = scenario.join()
    batches = histories(scenario, 4, seed=7)
    old, new, given = started(runs, join, batches, 4, partitions)
    empty = [t.schema.empty_table() for t in batches[0]]
    assert new.runner.run(*empty).num_rows == 0      # the first version loads the rows, and changes nothing
    back = read_state(join.plan, new.runner.checkpoint_dir)
    # at the partition count they were read at, each row is where the join itself put it
    assert state_of(back, placed=partitions == 2) == state_of(given, placed=partitions == 2)
    assert {p for t in back.values() for p in t.column("_partition").to_pylist()} == set(range(partitions))


@pytest.mark.parametrize("scenario", [TYPED, FOREIGN, DECLARED], ids=[TYPED.name, FOREIGN.name, DECLARED.name])
def test_table_initial_state_with_retention_makes_the_expiry_index_again(runs, scenario):
    join = scenario.join(retention=dt.timedelta(seconds=25), expire_rows=True)
    # version 5, the first after the load, has a change of each table older than the horizon (late):
    # the new run's horizon is the old one's from its first version (the progress the keys were
    # read at, their largest change time: streamjoin.table.load.key_summary)
    batches = histories(scenario, 10, seed=3, changes=4, late={5: 20})
    old, new, given = started(runs, join, batches, 5, 3)
    counted = ("late_changes", "rows_expired", "tombstones_expired")
    before = {name: old.runner.metric(name) for name in counted}
    continues_alike(old, new, join.plan, batches[5:])
    for name in counted:
        assert new.runner.metric(name) == old.runner.metric(name) - before[name] > 0, name


@pytest.mark.parametrize("scenario", [TYPED, DECLARED], ids=[TYPED.name, DECLARED.name])
def test_table_initial_state_with_retention_starts_from_the_progress_given(runs, scenario):
    # heartbeats moved each table's progress past every key's change time: only the progress read
    # from the checkpoint (state_progress) gives the new run the old one's horizon
    join = scenario.join(retention=dt.timedelta(seconds=25), expire_rows=True)
    batches = histories(scenario, 9, seed=3, changes=4, late={5: 70})
    beats = [table.spell(0, 0, 0, 100, 0, "heartbeat") for table in (scenario.left, scenario.right)]
    batches[4] = tuple(pa.concat_tables([t, pa.Table.from_pylist([beat], schema=t.schema)])
                       for t, beat in zip(batches[4], beats))
    old = runs(join, 2)
    for tables in batches[:5]:
        old.runner.run(*tables)
    new = runs(join, 3)
    new.runner.set_initial_state(read_state(join.plan, old.runner.checkpoint_dir),
                                 state_progress(old.runner.checkpoint_dir))
    before = old.runner.metric("late_changes")
    continues_alike(old, new, join.plan, batches[5:])
    assert new.runner.metric("late_changes") == old.runner.metric("late_changes") - before >= 2


def _nothing_written(runner: PlanRunner) -> bool:
    return all(not r.checkpoint.initial.files.exists("initial") for r in runner.runners.values())


@pytest.mark.parametrize("scenario", [TYPED, DECLARED], ids=[TYPED.name, DECLARED.name])
def test_table_initial_state_refuses_rows_that_are_not_the_join_state(runs, scenario):
    join = scenario.join()
    _, _, given = started(runs, join, histories(scenario, 3, seed=5), 3, 1)
    rows = given["left"]

    def refused(sides: dict[str, pa.Table], message: str) -> None:
        new = runs(join, 3)
        with pytest.raises(JoinDefinitionError, match=message):
            new.runner.set_initial_state(sides)
        assert _nothing_written(new.runner)

    refused({"left": rows.drop_columns(["row"])}, r"initial_state\['left'\] has no column 'row'")
    refused({"middle": rows}, r"initial_state: this join has no state side 'middle'; its sides are \[")
    short = rows.set_column(rows.schema.get_field_index("row"), "row", pa.array(["[1, 2]"] * rows.num_rows))
    refused({"left": short}, r"initial_state\['left'\] row of row 0 is '\[1, 2\]', not a JSON array of \d+ values")
    keys = rows.column("join_key").to_pylist()
    other = next(key for key in keys if key != keys[0])
    moved = rows.set_column(rows.schema.get_field_index("join_key"), "join_key", pa.array([other] + keys[1:]))
    refused({"left": moved}, r"initial_state\['left'\]: row 0 holds a row whose .* not its join_key")
    refused({"left": pa.concat_tables([rows, rows.slice(0, 1)])}, r"rows 0 and \d+ are the state of one key")
    refused({"keys": given["left_keys"]}, r"this join has no state side 'keys'")   # (a stage's side: its stage names it)
    bad = given["left_keys"]
    width = len(json.loads(bad.column("primary_key")[0].as_py()))
    wrong = pa.array([json.dumps(["x", *[1] * (width - 1)])] * bad.num_rows)
    refused({"left_keys": bad.set_column(bad.schema.get_field_index("primary_key"), "primary_key", wrong)},
            r"initial_state\['left_keys'\] primary_key: the value of row 0 \('x'\) of column .* does not read as")
    # one stage's rows refused: no other stage's are written either
    refused({**given, "right": moved}, r"initial_state\['right'\]|no column|holds a row")


def test_table_initial_state_refuses_a_deleted_key_without_its_join_key_where_keys_are_kept_by_it(runs):
    join = DECLARED.join()
    _, _, given = started(runs, join, histories(DECLARED, 4, seed=5), 4, 1)
    keys = given["left_keys"]
    assert not all(keys.column("_has_row").to_pylist())
    # as the three-stage join's key stage keeps a deleted key: without its join key
    bare = keys.set_column(keys.schema.get_field_index("join_key"), "join_key",
                           pa.array([jk if row else "[]" for jk, row in zip(keys.column("join_key").to_pylist(),
                                                                         keys.column("_has_row").to_pylist())]))
    new = runs(join, 2)
    with pytest.raises(JoinDefinitionError, match="has no join key, and this side's keys are kept by join key"):
        new.runner.set_initial_state({"left_keys": bare})
    assert _nothing_written(new.runner)


def test_table_initial_state_from_the_three_stages_into_the_fused_join(runs):
    # order lines' key stage keeps deleted keys without their join key; fused, by join key, the
    # join key is read from the primary key (the order of an order line): the state is the one
    # the fused join makes of the same changes
    three, fused = ORDER_LINES.join(fuse_key_stages=False), ORDER_LINES.join()
    assert three.plan.names == ("left_keys", "right_keys", "join")
    batches = histories(ORDER_LINES, 9, seed=11)
    old, reference = runs(three, 2), runs(fused, 2)
    for tables in batches[:5]:
        old.runner.run(*tables)
        reference.runner.run(*tables)
    given = read_state(three.plan, old.runner.checkpoint_dir)
    assert "[]" in given["left_keys"].column("join_key").to_pylist()
    new = runs(fused, 3)
    new.runner.set_initial_state(given)
    continues_alike(reference, new, fused.plan, batches[5:7])
    new.restart(2)
    continues_alike(reference, new, fused.plan, batches[7:])
    assert state_of(read_state(fused.plan, new.runner.checkpoint_dir), placed=True) == \
        state_of(read_state(fused.plan, reference.runner.checkpoint_dir), placed=True)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_table_initial_state_survives_lost_state_a_retried_first_version_and_a_rescale(runs, scenario):
    join = scenario.join()
    batches = histories(scenario, 10, seed=13)
    old, new, _ = started(runs, join, batches, 4, 3)
    expected = [output_of(old.runner.run(*tables)) for tables in batches[4:]]
    assert output_of(new.runner.run(*batches[4])) == expected[0]
    new.runner.lose_local_state()
    assert output_of(new.runner.run(*batches[4], version=0)) == expected[0]   # executed again: loads again
    assert output_of(new.runner.run(*batches[4], version=0)) == expected[0]   # and again, on its local state
    assert output_of(new.runner.run(*batches[5])) == expected[1]
    new.runner.lose_local_state(1)
    assert output_of(new.runner.run(*batches[6])) == expected[2]
    new.restart(2)                                                         # a rescale: 3 -> 2 partitions
    assert output_of(new.runner.run(*batches[7])) == expected[3]
    new.runner.lose_local_state()
    for version, tables in enumerate(batches[8:], start=4):
        assert output_of(new.runner.run(*tables)) == expected[version]
    assert state_of(read_state(join.plan, new.runner.checkpoint_dir)) == \
        state_of(read_state(join.plan, old.runner.checkpoint_dir))
