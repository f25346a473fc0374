"""Worked examples of the enrichment join (streamjoin.enrichment.operator): boundaries, waiting and release,
grace, late and stale rows, bootstrap, definition errors. Each reads as a script: add events and
changes, check what comes out."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.changes import PLAIN_COLUMNS, ChangeFormat, normalise, to_plain
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.errors import JoinDefinitionError
from tests.joins.drivers import StepDriver
from tests.joins.enrichment.test_properties import DELTA, PLAIN, SECOND, Case, cases, drive, when

EVENTS = pa.schema([("user", pa.int64()), ("ts", pa.timestamp("us")), ("what", pa.string())])
TABLE = pa.schema([("user", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("plan", pa.string())])
PLAIN_FORMAT = ChangeFormat.plain("user", time="at")


class Script:
    """Drives one enrichment join version by version, in process, over ``partitions``."""

    def __init__(self, partitions: int = 1, **options) -> None:
        options.setdefault("delay", dt.timedelta(0))
        self.driver = StepDriver(EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=PLAIN_FORMAT,
                                                **options), partitions)
        self.asides: list[tuple[pa.Table, pa.Table]] = []

    def run(self, events=(), changes=(), final: bool = False) -> list[tuple]:
        """events: (user, second, what); changes: (user, op, second, plan). Output (user, s, what, plan)."""
        e = pa.Table.from_pylist([{"user": u, "ts": when(s * SECOND), "what": w} for u, s, w in events], schema=EVENTS)
        c = pa.Table.from_pylist([{"user": u, "op": o, "at": when(s * SECOND), "plan": p} for u, o, s, p in changes],
                                 schema=TABLE)
        out, asides = self.driver.run(e, c, final=final)
        self.asides.append(asides)
        return sorted((r["user"], r["ts"].second, r["what"], r["plan"]) for r in out.to_pylist())

    def reasons(self) -> tuple[list[str], list[str]]:
        return tuple(sorted(r for a in self.asides for r in a[i].column("_reason").to_pylist()) for i in (0, 1))

    def metric(self, name: str) -> int:
        """A metric summed over every step so far."""
        return self.driver.metric(name)

    def last(self, name: str) -> int:
        """A metric of the last step (one partition)."""
        return self.driver.recorded[-1][name]

    def close(self) -> None:
        self.driver.close()


def test_enrichment_change_at_the_event_time_joins_that_change(script):
    s = script()
    assert s.run([(1, 5, "e")], [(1, "upsert", 4, "free"), (1, "upsert", 5, "pro"), (1, "upsert", 6, "max")]) == []
    assert s.run() == [(1, 5, "e", "pro")]      # table watermark 6 > 5: released


def test_enrichment_event_waits_until_the_table_watermark_passes_its_time(script):
    s = script()
    assert s.run([(1, 10, "e")], [(1, "upsert", 1, "free")]) == []
    assert s.run([], [(1, "upsert", 8, "pro")]) == []                    # watermark 1
    assert s.run([], [(1, "upsert", 10, "max")]) == []                   # watermark 8
    assert s.run([], [(1, "upsert", 11, "late for e")]) == []            # watermark 10: not yet
    assert s.run() == [(1, 10, "e", "max")]                              # watermark 11 > 10
    assert s.driver.recorded[-2]["events_waiting"] == 1


def test_enrichment_heartbeat_advances_a_quiet_table(script):
    s = script()
    assert s.run([(1, 10, "e")], [(1, "upsert", 1, "free")]) == []
    assert s.run([], [(None, "heartbeat", 30, None)]) == []
    assert s.run() == [(1, 10, "e", "free")]
    assert s.metric("changes_heartbeats") == 1


def test_enrichment_delay_lets_changes_arrive_behind_the_table(script):
    s = script(delay=dt.timedelta(seconds=5))
    assert s.run([(1, 10, "e")], [(1, "upsert", 12, "pro")]) == []
    assert s.run([], [(1, "upsert", 8, "free")]) == []        # 8 >= 12 - 5: not late
    assert s.run([], [(1, "upsert", 16, "max")]) == []        # watermark 7: e waits
    assert s.run() == [(1, 10, "e", "free")]                  # watermark 11 > 10
    assert s.reasons() == ([], [])


def test_enrichment_grace_releases_with_the_version_known_then(script):
    s = script(grace=dt.timedelta(seconds=2))
    assert s.run([(1, 10, "e")], [(1, "upsert", 1, "free")]) == []
    assert s.run([(1, 12, "f")]) == []                         # event watermark 10
    assert s.run([(1, 13, "g")]) == []                         # 12: 10 + 2 not passed
    assert s.run() == [(1, 10, "e", "free")]                   # 13 > 12: released
    assert s.metric("released_by_grace") == 1
    assert s.run([], [(1, "upsert", 9, "pro")]) == []          # not late (table watermark 1); e is out
    assert s.run([], [], final=True) == [(1, 12, "f", "pro"), (1, 13, "g", "pro")]


def test_enrichment_late_rows_are_set_aside_and_counted(script):
    s = script()
    s.run([(1, 10, "e")], [(1, "upsert", 10, "pro")])
    s.run([(1, 9, "late")], [(1, "upsert", 9, "late change"), (None, "heartbeat", 3, None)])
    assert s.reasons() == (["late"], ["late change"])
    assert (s.metric("late_events"), s.metric("late_changes")) == (1, 1)
    assert s.run(final=True) == [(1, 10, "e", "pro")]


def test_enrichment_bad_change_rows_are_set_aside_with_their_reason(script):
    s = script()
    s.run([], [(1, "truncate", 1, "x"), (None, "upsert", 1, "x")])
    assert s.reasons() == ([], ["null key", "unknown op"])


def test_enrichment_delete_means_no_row(script):
    inner, left = script(how="inner"), script(how="left")
    for s in (inner, left):
        s.run([(1, 5, "e"), (1, 7, "f")], [(1, "upsert", 1, "free"), (1, "delete", 6, None), (1, "upsert", 8, "pro")])
    assert inner.run() == [(1, 5, "e", "free")]
    assert left.run() == [(1, 5, "e", "free"), (1, 7, "f", None)]


def test_enrichment_null_key_event_left_outputs_at_once_inner_sets_aside(script):
    inner, left = script(how="inner"), script(how="left")
    assert left.run([(None, 5, "e")]) == [(None, 5, "e", None)]
    assert inner.run([(None, 5, "e")]) == []
    assert inner.reasons() == (["null key"], [])


def test_enrichment_duplicates_and_older_changes_are_stale(script):
    s = script(mode="latest", delay=dt.timedelta(seconds=5))             # so 4 is not late
    s.run([], [(1, "upsert", 5, "first"), (1, "upsert", 5, "second")])    # canonical order: "first" wins
    assert s.run([(1, 9, "e")], [(1, "upsert", 5, "again"), (1, "upsert", 4, "older")]) == [(1, 9, "e", "first")]
    assert s.metric("stale_changes") == 3 and s.reasons() == ([], [])


def test_enrichment_tie_of_rows_that_differ_only_in_a_list_goes_the_same_way_in_any_order():
    # two changes of one key at one time, equal but for a list column: the canonical order (the
    # list's values) picks the same one whichever arrives first in the batch
    table = pa.schema([("user", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")),
                       ("tags", pa.list_(pa.string()))])
    picked = []
    for tags in ([["b"], ["a", "z"]], [["a", "z"], ["b"]]):
        driver = StepDriver(EnrichmentJoin(EVENTS, table, "user", stream_time="ts", delay=dt.timedelta(0),
                                           changes=PLAIN_FORMAT))
        try:
            changes = pa.Table.from_pylist([{"user": 1, "op": "upsert", "at": when(5 * SECOND), "tags": t} for t in tags]
                                           + [{"user": 2, "op": "upsert", "at": when(60 * SECOND), "tags": None}],
                                           schema=table)
            events = pa.Table.from_pylist([{"user": 1, "ts": when(9 * SECOND), "what": "e"}], schema=EVENTS)
            driver.run(events, changes)
            out, _ = driver.run(events.slice(0, 0), changes.slice(0, 0))   # (the table's watermark has passed 9 s)
            picked.append(out.column("tags").to_pylist())
        finally:
            driver.close()
    assert picked == [[["a", "z"]], [["a", "z"]]]


def test_enrichment_sequence_breaks_ties_in_change_time():
    table = TABLE.append(pa.field("seq", pa.int64()))
    op = EnrichmentJoin(EVENTS, table, "user", stream_time="ts", delay=dt.timedelta(0),
                        changes=ChangeFormat.plain("user", time="at", sequence="seq"))
    driver = StepDriver(op)
    try:
        rows = [(2, "b"), (None, "null first"), (1, "a")]
        changes = pa.Table.from_pylist([{"user": 1, "op": "upsert", "at": when(5), "plan": p, "seq": q} for q, p in rows],
                                       schema=table)
        events = pa.Table.from_pylist([{"user": 1, "ts": when(5), "what": "e"}], schema=EVENTS)
        out, _ = driver.run(events, changes, final=True)
        assert out.column("plan").to_pylist() == ["b"]
    finally:
        driver.close()


def test_enrichment_latest_joins_the_newest_version_with_this_batch_applied(script):
    s = script(mode="latest")
    assert s.run([(1, 5, "e")], [(1, "upsert", 9, "pro"), (1, "upsert", 1, "free")]) == [(1, 5, "e", "pro")]
    assert s.run([(1, 6, "f")], [(1, "delete", 10, None)]) == [(1, 6, "f", None)]


def test_enrichment_versions_no_event_can_need_are_dropped(script):
    s = script(layout="buckets")
    s.run([(1, 0, "e")], [(1, "upsert", t, str(t)) for t in range(0, 20)])
    s.run([(1, 15, "f")], [(2, "upsert", 20, "x")])          # event watermark 0: keep 0 and later
    s.run([(1, 30, "g")], [(1, "upsert", 21, "y")])          # event watermark 15: keep 15 and later
    assert s.last("versions_held") == 1 + 5 + 1     # key 2; key 1: 15..19, 21
    s.run([(2, 35, "h")], [(1, "delete", 40, None), (2, "delete", 40, None)])
    s.run(final=True)                # pruning is lazy: only buckets a version touches are pruned
    assert s.last("versions_held") == 0


def test_enrichment_sweep_drops_old_versions_of_keys_nothing_touches(script):
    s = script(buckets=4, layout="buckets")
    s.run([(9, 0, "e")], [(k, "upsert", t, str(t)) for k in range(6) for t in (1, 2, 3)])
    for second in range(10, 15):
        s.run([(9, second, "e")], [(None, "heartbeat", second, None)])
    assert s.last("versions_held") == 6        # one version per key: the newest, all <= watermark


def test_enrichment_foreign_key_with_other_names_and_types():
    events = pa.schema([("buyer", pa.int32()), ("ts", pa.timestamp("ms")), ("plan", pa.string())])
    table = pa.schema([("id", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("plan", pa.string())])
    op = EnrichmentJoin(events, table, "buyer", stream_time="ts", changes=ChangeFormat.plain("id", time="at"),
                        how="inner")
    assert op.output_schema.names == ["buyer", "ts", "plan", "at", "plan_table"]
    driver = StepDriver(op, 3)
    try:
        e = pa.Table.from_pylist([{"buyer": 7, "ts": when(1000), "plan": "own"}], schema=events)
        c = pa.Table.from_pylist([{"id": 7, "op": "upsert", "at": when(0), "plan": "pro"}], schema=table)
        out, _ = driver.run(e, c, final=True)
        assert [(r["buyer"], r["plan"], r["plan_table"]) for r in out.to_pylist()] == [(7, "own", "pro")]
    finally:
        driver.close()


@pytest.mark.parametrize("change, message", [
    (dict(on=["user", "what"]), "table key has 1"),
    (dict(on="what"), "must both be integers"),
    (dict(on="nope"), "no column 'nope'"),
    (dict(stream_time="what"), "must be a timestamp"),
    (dict(mode="eventually"), "unknown mode"),
    (dict(how="full"), "how='full' is a full join, which this join does not support; use one of inner, left"),
    (dict(delay=dt.timedelta(seconds=-1)), "delay and grace must be >= 0"),
    (dict(delay=5), "must be a datetime.timedelta"),
    (dict(changes=ChangeFormat.debezium("user")), "to_plain"),
    (dict(changes=ChangeFormat.plain("user", time="at", op="nope")), "no column 'nope'"),
    (dict(buckets=0), "buckets must be"),
])
def test_enrichment_bad_definitions_are_refused(change, message):
    args = dict(on="user", stream_time="ts", changes=PLAIN_FORMAT, delay=dt.timedelta(0))
    with pytest.raises(JoinDefinitionError, match=message):
        EnrichmentJoin(EVENTS, TABLE, **{**args, **change})


def test_enrichment_output_names_still_clashing_are_refused():
    events = EVENTS.append(pa.field("plan_table", pa.string())).append(pa.field("plan", pa.string()))
    with pytest.raises(JoinDefinitionError, match="appear twice"):
        EnrichmentJoin(events, TABLE, "user", stream_time="ts", changes=PLAIN_FORMAT)


@given(case=cases(max_partitions=2), data=st.data())
def test_enrichment_output_and_state_do_not_depend_on_row_order(case, data):
    check_row_order_free(case, data)


def check_row_order_free(case: Case, data: st.DataObject, **options) -> None:
    """``case`` and the same case with the rows of each batch shuffled give equal output and
    equal stored state after every batch (the join built with ``options``)."""
    shuffled = Case(case.variant, case.delay,
                    [(data.draw(st.permutations(e)), data.draw(st.permutations(c))) for e, c in case.batches],
                    case.partitions, case.how, ttl=case.ttl)
    drivers = [StepDriver(c.operator("as_of", **options), c.partitions) for c in (case, shuffled)]
    try:
        for index in range(len(case.batches)):
            (a, _), (b, _) = (d.run(*c.tables(index)) for d, c in zip(drivers, (case, shuffled)))
            assert a.equals(b)
            assert drivers[0].state() == drivers[1].state()
    finally:
        for driver in drivers:
            driver.close()


@given(case=cases())
def test_enrichment_batch_run_equals_reference(case):
    everything = [([e for events, _ in case.batches for e in events],
                   [c for _, changes in case.batches for c in changes])]
    batch = Case(case.variant, case.delay, everything, case.partitions, case.how, ttl=case.ttl)
    for mode in ("as_of", "latest"):
        output, reasons = drive(batch, mode)
        assert output == batch.expected(mode) and not reasons


def _snapshot(case: Case, history: list[tuple]) -> pa.Table:
    """The table as it stands after ``history`` (its row columns)."""
    current: dict = {}
    for change in history:
        key, op, time, seq, payload, _ = change
        order = (time, -1 if seq is None else seq)
        if op != "heartbeat" and (key not in current or order > current[key][0]):
            current[key] = (order, change)
    rows = []
    for key, (_, (_, op, time, seq, payload, _)) in sorted(current.items()):
        if op == "upsert":
            rows.append({"user": key, "at": when(time), "rev": seq, "plan": payload} if case.variant is PLAIN
                        else {"name": key, "tier": payload})
    schema = (pa.schema([f for f in PLAIN.table if f.name != "op"]) if case.variant is PLAIN
              else pa.schema([DELTA.table.field("name"), DELTA.table.field("tier")]))
    return pa.Table.from_pylist(rows, schema=schema)


@st.composite
def histories(draw, variant) -> list[tuple]:
    """Changes (key, op, time, seq, payload, preimage) at 0..10 s, unique (key, time, seq)."""
    out, seen = [], set()
    for _ in range(draw(st.integers(0, 10))):
        change = (draw(st.sampled_from(variant.keys)), draw(st.sampled_from(["upsert", "upsert", "delete"])),
                  draw(st.integers(0, 10)) * SECOND, draw(st.integers(0, 2)), draw(st.sampled_from(["free", "pro"])),
                  draw(st.booleans()))
        if (change[0], change[2], change[3]) not in seen:
            seen.add((change[0], change[2], change[3]))
            out.append(change)
    return out


def _bootstrap_and_replay(case: Case, past: list[tuple], mode: str) -> tuple[Counter, Counter]:
    """(output of bootstrapping the table as it stands after ``past``, then running ``case``'s
    batches 31 s later; output of replaying ``past`` as changes, then the same batches)."""
    shift = 31 * SECOND          # every later change and event comes after the whole history
    later = [([(k, t + shift, p) for k, t, p in e], [(k, o, t + shift, s, p, x) for k, o, t, s, p, x in c])
             for e, c in case.batches]
    # a TTL ages a snapshot row from its change time: only the plain snapshot keeps one
    ttl = case.ttl if case.variant is PLAIN else None
    replay = Case(case.variant, case.delay, [([], past)] + later, case.partitions, case.how, ttl=ttl)
    boot = Case(case.variant, case.delay, [([], [])] + later, case.partitions, case.how, ttl=ttl)
    operator = boot.operator(mode)
    driver = StepDriver(operator, boot.partitions)
    v = case.variant
    # the snapshot is taken at the history's last change: a heartbeat then gives the table watermark
    # the replay reaches (the snapshot's rows alone do not: a delete leaves no row, nor its time)
    end = v.change_rows(None, "heartbeat", max(c[2] for c in past), None, None, False) if past else []
    snapshot = pa.concat_tables([operator.bootstrap_changes(_snapshot(case, past)),
                                 pa.Table.from_pylist(end, schema=v.table)])
    try:
        output = Counter()
        for index in [*range(len(boot.batches)), None]:
            tables = ((v.stream.empty_table(), snapshot) if index == 0 else
                      (v.stream.empty_table(), v.table.empty_table()) if index is None else boot.tables(index))
            out, asides = driver.run(*tables, final=index is None)
            output += Counter(tuple(r.values()) for r in out.to_pylist())
    finally:
        driver.close()
    return output, drive(replay, mode)[0]


@given(case=cases(), data=st.data(), mode=st.sampled_from(["as_of", "latest"]))
def test_enrichment_bootstrap_plus_later_changes_equals_replaying_the_history(case, data, mode):
    boot, replay = _bootstrap_and_replay(case, data.draw(histories(case.variant)), mode)
    assert boot == replay


def test_enrichment_bootstrap_of_a_history_ending_in_a_delete_expires_as_replaying_it():
    # latest, TTL 2 s: after the history (user 0 at 0 s, user 1 deleted at 3 s) the table watermark
    # is 3 s, so user 0's row (older than 3 s - 2 s) has expired for the next event
    case = Case(PLAIN, 0, [([(0, 1 * SECOND, "x")], [])], 1, "left", ttl=2 * SECOND)
    past = [(0, "upsert", 0, None, "free", False), (1, "delete", 3 * SECOND, None, "free", False)]
    boot, replay = _bootstrap_and_replay(case, past, "latest")
    assert boot == replay == Counter({(0, when(32 * SECOND), "x", None, None, None): 1})


def test_enrichment_debezium_json_changes_join_through_the_plain_form():
    row = pa.schema([("user", pa.int64()), ("plan", pa.string())])
    envelopes = [{"op": "r", "after": {"user": 1, "plan": "free"}, "ts_ms": 1000},
                 {"payload": {"op": "u", "before": {"user": 1, "plan": "free"}, "after": {"user": 1, "plan": "pro"},
                              "ts_ms": 5000}},
                 {"op": "d", "before": {"user": 1, "plan": "pro"}, "ts_ms": 9000}]
    raw = pa.table({"value": [json.dumps(e) for e in envelopes] + [None]})
    fmt = ChangeFormat.debezium_json("user", row)
    plain = to_plain(normalise(raw, fmt).changes, ["user"])
    op = EnrichmentJoin(EVENTS, plain.schema, "user", stream_time="ts", changes=ChangeFormat.plain("user", **PLAIN_COLUMNS))
    events = pa.Table.from_pylist([{"user": 1, "ts": when(s * SECOND), "what": str(s)} for s in (0, 1, 4, 5, 8, 9)],
                                  schema=EVENTS)
    driver = StepDriver(op)
    try:
        out, _ = driver.run(events, plain, final=True)
        assert [(r["what"], r["plan"]) for r in out.to_pylist()] == [
            ("0", None), ("1", "free"), ("4", "free"), ("5", "pro"), ("8", "pro"), ("9", None)]
    finally:
        driver.close()


YEAR_ONE = dt.datetime(1, 1, 1)


def _bootstrap_then(changes: list[dict], events: list[dict]) -> tuple[list[dict], pa.Table]:
    """Version 0: a bootstrap snapshot without change times (users 1 and 2); version 1: ``changes``
    and ``events``; then a final version. Returns the output rows and the bootstrap changes."""
    op = EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=PLAIN_FORMAT)
    boot = op.bootstrap_changes(pa.table({"user": [1, 2], "plan": ["free", "basic"]}))
    driver = StepDriver(op)
    try:
        rows = []
        for e, c, final in (([], boot, False), (events, changes, False), ([], [], True)):
            e = e if isinstance(e, pa.Table) else pa.Table.from_pylist(e, schema=EVENTS)
            c = c if isinstance(c, pa.Table) else pa.Table.from_pylist(c, schema=TABLE)
            rows += driver.run(e, c, final=final)[0].to_pylist()
    finally:
        driver.close()
    return sorted(rows, key=lambda r: r["user"]), boot


def test_enrichment_bootstrap_rows_carry_no_change_time():
    events = [{"user": u, "ts": when(5 * SECOND), "what": "e"} for u in (1, 2)]
    rows, boot = _bootstrap_then([], events)
    assert boot.column("at").null_count == boot.num_rows
    assert [(r["user"], r["plan"], r["at"]) for r in rows] == [(1, "free", None), (2, "basic", None)]


def test_enrichment_change_at_year_one_is_applied_after_a_bootstrap_row():
    changes = [{"user": 1, "op": "upsert", "at": YEAR_ONE, "plan": "pro"}]
    events = [{"user": u, "ts": YEAR_ONE + dt.timedelta(seconds=1), "what": "e"} for u in (1, 2)]
    rows, _ = _bootstrap_then(changes, events)
    assert [(r["user"], r["plan"], r["at"]) for r in rows] == [(1, "pro", YEAR_ONE), (2, "basic", None)]


def test_enrichment_timeless_snapshot_row_after_the_first_version_is_late():
    op = EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=PLAIN_FORMAT)
    driver = StepDriver(op)
    try:
        driver.run(EVENTS.empty_table(), pa.Table.from_pylist(
            [{"user": 1, "op": "upsert", "at": when(SECOND), "plan": "free"}], schema=TABLE))
        _, (_, aside) = driver.run(EVENTS.empty_table(), op.bootstrap_changes(pa.table({"user": [2], "plan": ["pro"]})))
    finally:
        driver.close()
    assert aside.column("_reason").to_pylist() == ["late change"]


def test_enrichment_change_without_time_is_set_aside_unless_a_snapshot_row():
    op = EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=PLAIN_FORMAT)
    driver = StepDriver(op)
    try:
        _, (_, aside) = driver.run(EVENTS.empty_table(), pa.Table.from_pylist(
            [{"user": 1, "op": "upsert", "at": None, "plan": "free"}], schema=TABLE))
    finally:
        driver.close()
    assert aside.column("_reason").to_pylist() == ["null change time"]


def test_enrichment_delta_feed_joins_as_of_its_business_time():
    table = pa.schema([("user", pa.int64()), ("plan", pa.string()), ("valid_from", pa.timestamp("us")),
                       ("_change_type", pa.string()), ("_commit_version", pa.int64()),
                       ("_commit_timestamp", pa.timestamp("us"))])
    op = EnrichmentJoin(EVENTS, table, "user", stream_time="ts", changes=ChangeFormat.delta("user", time="valid_from"))
    commit = when(100 * SECOND)                      # both versions committed together, long after the events
    changes = pa.Table.from_pylist([
        {"user": 1, "plan": p, "valid_from": when(s * SECOND), "_change_type": "insert", "_commit_version": 1,
         "_commit_timestamp": commit} for p, s in (("free", 1), ("pro", 5))], schema=table)
    events = pa.Table.from_pylist([{"user": 1, "ts": when(s * SECOND), "what": str(s)} for s in (2, 6)], schema=EVENTS)
    driver = StepDriver(op)
    try:
        out = driver.run(events, changes)[0].to_pylist() + driver.run(EVENTS.empty_table(), table.empty_table(),
                                                                    final=True)[0].to_pylist()
    finally:
        driver.close()
    assert sorted((r["what"], r["plan"]) for r in out) == [("2", "free"), ("6", "pro")]


def test_enrichment_delta_update_that_moves_a_primary_key_ends_the_old_key():
    # UPDATE profiles SET user = 5 WHERE user = 3 at 2 s: an event of 3 after it finds no row, one
    # before it the row; a pre-image whose post-image comes a micro-batch later ends nothing
    table = pa.schema([("user", pa.int64()), ("plan", pa.string()), ("_change_type", pa.string()),
                       ("_commit_version", pa.int64()), ("_commit_timestamp", pa.timestamp("us", "UTC"))])
    driver = StepDriver(EnrichmentJoin(EVENTS, table, "user", stream_time="ts", delay=dt.timedelta(0),
                                       changes=ChangeFormat.delta("user")))

    def run(changes: list[tuple], events: list[tuple] = ()) -> list[tuple]:
        c = pa.Table.from_pylist([dict(zip(table.names, (*r[:-1], when(r[-1] * SECOND, True)))) for r in changes],
                                 schema=table)
        e = pa.Table.from_pylist([{"user": u, "ts": when(s * SECOND), "what": w} for u, s, w in events], schema=EVENTS)
        out, _ = driver.run(e, c)
        return sorted((r["what"], r["plan"]) for r in out.to_pylist())

    try:
        out = run([(3, "pro", "insert", 0, 1), (7, "free", "insert", 0, 1)])
        out += run([(3, "pro", "update_preimage", 1, 2), (5, "pro", "update_postimage", 1, 2),
                    (7, "free", "update_preimage", 2, 4)],
                   [(3, 1, "3 before"), (3, 3, "3 after"), (5, 3, "5 after")])
        out += run([(7, "gold", "update_postimage", 2, 4)], [(7, 5, "7 after")])
        out += run([(9, None, "heartbeat", 3, 60)])
        out += run([])   # (the heartbeat's watermark releases the last event)
        assert sorted(out) == [("3 after", None), ("3 before", "pro"), ("5 after", "pro"), ("7 after", "gold")]
    finally:
        driver.close()
