"""Properties of the enrichment join (docs/design/semantics.md "Enrichment") run through the runtime (the in-process runner), checked
against the references of :mod:`streamjoin.testing.enrichment`.

A case is a random change history and event stream (two schema variants: a plain change table
with an integer key and a sequence column, and a Delta change data feed with a string key; with
or without a table TTL),
split into micro-batches with times drifting forward and some disorder, so watermarks advance
and some rows are late.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.statestore import backend_names
from streamjoin.testing.enrichment import is_heartbeat_event, late_flags, reference_as_of, reference_latest
from tests.examples import scaled
from tests.joins.drivers import DISTURBANCES, InProcess, StepDriver, replay_disturbed

SECOND = 1_000_000
EPOCH = dt.datetime(1970, 1, 1)
BACKENDS = backend_names()


def when(micros: int, tz: bool = False) -> dt.datetime:
    value = EPOCH + dt.timedelta(microseconds=micros)
    return value.replace(tzinfo=dt.timezone.utc) if tz else value


@dataclass(frozen=True)
class Variant:
    """Schemas of one stream and one change table, and how abstract rows are spelled in them."""

    stream: pa.Schema
    table: pa.Schema
    on: str
    changes: ChangeFormat
    keys: tuple
    event_row: Callable[[Any, int, Any], dict]
    change_rows: Callable[[Any, str, int, Any, Any, bool], list[dict]]
    values: Callable[[int, Any, Any], tuple]
    width: int


def _plain_change(key, op, time, seq, payload, _extra):
    return [{"user": key, "op": op, "at": when(time), "rev": seq, "plan": payload}]


def _delta_change(key, op, time, seq, payload, preimage):
    kind = {"upsert": "update_postimage" if preimage else "insert", "delete": "delete", "heartbeat": "heartbeat"}[op]
    row = {"name": key, "tier": payload, "_change_type": kind, "_commit_version": seq, "_commit_timestamp": when(time, True)}
    return [row] + ([{**row, "tier": "old", "_change_type": "update_preimage"}] if preimage and op == "upsert" else [])


PLAIN = Variant(
    pa.schema([("user", pa.int64()), ("ts", pa.timestamp("us")), ("what", pa.string())]),
    pa.schema([("user", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("rev", pa.int64()),
               ("plan", pa.string())]),
    "user", ChangeFormat.plain("user", time="at", sequence="rev"), (0, 1, 2, 3),
    lambda key, time, payload: {"user": key, "ts": when(time), "what": payload},
    _plain_change, lambda time, seq, payload: (when(time), seq, payload), 3,
)
DELTA = Variant(
    pa.schema([("customer", pa.string()), ("ts", pa.timestamp("us", "UTC")), ("amount", pa.float64())]),
    pa.schema([("name", pa.string()), ("tier", pa.string()), ("_change_type", pa.string()),
               ("_commit_version", pa.int64()), ("_commit_timestamp", pa.timestamp("us", "UTC"))]),
    "customer", ChangeFormat.delta("name"), ("a", "b", "c", "d"),
    lambda key, time, payload: {"customer": key, "ts": when(time, True), "amount": payload},
    _delta_change, lambda time, seq, payload: (payload,), 1,
)


@dataclass
class Case:
    """A random scenario; ``batches`` hold abstract rows: events (key, time, payload) and changes
    (key, op, time, seq, payload, preimage)."""

    variant: Variant
    delay: int | tuple[int, int]  # one delay, or (stream_delay, table_delay)
    batches: list[tuple[list[tuple], list[tuple]]]
    partitions: int
    how: str = "left"
    extra: dict = field(default_factory=dict)
    ttl: int | None = None
    #: the join's ``heartbeats`` option: events with only a time (``time_only``) are heartbeats
    heartbeats: bool = False

    def operator(self, mode: str, **options: Any) -> EnrichmentJoin:
        v = self.variant
        ttl = None if self.ttl is None else dt.timedelta(microseconds=self.ttl)
        if isinstance(self.delay, tuple):
            micros = dt.timedelta(microseconds=self.delay[0])
            delays = dict(delay=dt.timedelta(0), stream_delay=micros,
                          table_delay=dt.timedelta(microseconds=self.delay[1]))
        else:
            delays = dict(delay=dt.timedelta(microseconds=self.delay))
        return EnrichmentJoin(v.stream, v.table, v.on, stream_time="ts", changes=v.changes, mode=mode,
                              how=self.how, table_ttl=ttl, **delays, **{"heartbeats": self.heartbeats, **options})

    def tables(self, index: int) -> tuple[pa.Table, pa.Table]:
        v = self.variant
        events, changes = self.batches[index]
        rows = [r for c in changes for r in v.change_rows(*c)]
        return (pa.Table.from_pylist([v.event_row(*e) for e in events], schema=v.stream),
                pa.Table.from_pylist(rows, schema=v.table))

    def abstract(self) -> list[tuple[list[dict], list[dict]]]:
        """The batches as the reference reads them."""
        v = self.variant
        out = []
        for events, changes in self.batches:
            out.append((
                [{"key": (k,), "time": t, "row": tuple(v.event_row(k, t, p).values())} for k, t, p in events],
                [{"key": (k,), "op": op, "time": t, "seq": s, "row": v.values(t, s, p)}
                 for k, op, t, s, p, _ in changes],
            ))
        return out

    def expected(self, mode: str) -> Counter:
        reference = reference_as_of if mode == "as_of" else reference_latest
        return Counter(reference(self.abstract(), how=self.how, delay=self.delay, width=self.variant.width,
                                 ttl=self.ttl, heartbeats=self.heartbeats))

    def late_counts(self) -> tuple[int, int]:
        flags = late_flags(self.abstract(), self.delay, self.heartbeats)
        return sum(sum(e) for e, _ in flags), sum(sum(c) for _, c in flags)


@st.composite
def cases(draw, *, max_rows: int = 12, max_partitions: int = 3, time_only: bool = False) -> Case:
    """A random :class:`Case`; (key, time, seq) of changes are unique (ties are worked examples).
    ``time_only``: some events have only a time, and the join's ``heartbeats`` option is drawn."""
    variant = draw(st.sampled_from([PLAIN, DELTA]))
    n_batches = draw(st.integers(1, 5))
    batches: list[tuple[list, list]] = [([], []) for _ in range(n_batches)]

    def slot(seconds: int) -> int:
        at = (seconds + 10) * n_batches // 31 + draw(st.sampled_from([0, 0, 0, 1, -1, 2]))
        return min(max(at, 0), n_batches - 1)

    seen = set()
    for _ in range(draw(st.integers(0, max_rows))):
        seconds = draw(st.integers(-10, 20))
        time = seconds * SECOND + draw(st.sampled_from([0, 0, 1, -1]))
        op = draw(st.sampled_from(["upsert", "upsert", "upsert", "delete", "heartbeat"]))
        key = None if op == "heartbeat" else draw(st.sampled_from(variant.keys))
        seq = draw(st.sampled_from([None, 0, 1, 2])) if variant is PLAIN else draw(st.integers(0, 2))
        if op != "heartbeat" and (key, time, seq) in seen:
            continue
        seen.add((key, time, seq))
        payload = draw(st.sampled_from(["free", "pro", None]))
        batches[slot(seconds)][1].append((key, op, time, seq, payload, draw(st.booleans())))
    for _ in range(draw(st.integers(0, max_rows))):
        seconds = draw(st.integers(-10, 20))
        time = seconds * SECOND + draw(st.sampled_from([0, 0, 1, -1]))
        payload = draw(st.sampled_from(["x", "y"])) if variant is PLAIN else draw(st.sampled_from([0.5, 2.0]))
        if time_only and draw(st.integers(0, 3)) == 0:
            batches[slot(seconds)][0].append((None, time, None))
            continue
        batches[slot(seconds)][0].append((draw(st.sampled_from(variant.keys)), time, payload))
    delay = draw(st.sampled_from([0, 1, 3])) * SECOND
    if draw(st.booleans()):  # per-input delays: stream_delay, table_delay
        delay = (delay, draw(st.sampled_from([0, 1, 3, 10])) * SECOND)
    ttl = draw(st.sampled_from([None, None, 2 * SECOND, 5 * SECOND + 1]))
    return Case(variant, delay, batches, draw(st.integers(1, max_partitions)), draw(st.sampled_from(["inner", "left"])),
                ttl=ttl, heartbeats=time_only and draw(st.booleans()))


class Run(InProcess):
    """A case run by the in-process runner over a fresh temporary checkpoint (:class:`InProcess`)."""

    def __init__(self, case: Case, mode: str, store: str = "memory", **options: Any) -> None:
        super().__init__(case.operator(mode, **options), case.tables, partitions=case.partitions, store=store)
        self.case = case

    def all(self) -> Counter:
        """The output of every batch and the final version."""
        return sum((rows_of(self.run(index)) for index in [*range(len(self.case.batches)), None]), Counter())


def rows_of(table: pa.Table) -> Counter:
    """A table's rows as a multiset of tuples (in column order)."""
    return Counter(tuple(r.values()) for r in table.to_pylist())


def drive(case: Case, mode: str, **options: Any) -> tuple[Counter, Counter]:
    """Run ``case`` in process (steps against open stores), then an empty final version; return
    the output and the reasons of the rows set aside."""
    return drive_with_metrics(case, mode, **options)[:2]


def drive_with_metrics(case: Case, mode: str, **options: Any) -> tuple[Counter, Counter, Counter]:
    """:func:`drive`, also returning the metrics summed over every partition and version."""
    driver = StepDriver(case.operator(mode, **options), case.partitions)
    v = case.variant
    try:
        output, reasons = Counter(), Counter()
        for index in [*range(len(case.batches)), None]:
            final = index is None
            tables = (v.stream.empty_table(), v.table.empty_table()) if final else case.tables(index)
            out, asides = driver.run(*tables, final=final)
            output += rows_of(out)
            for aside in asides:
                reasons += Counter(aside.column("_reason").to_pylist())
        metrics = Counter()
        for step in driver.recorded:
            metrics.update({k: v for k, v in step.items() if "watermark" not in k})
        return output, reasons, metrics
    finally:
        driver.close()


def run_all(case: Case, mode: str, store: str = "memory", **options: Any) -> tuple[Counter, Run]:
    run = Run(case, mode, store, **options)
    try:
        return run.all(), run
    finally:
        run.close()


@given(case=cases())
def test_enrichment_as_of_equals_reference_whatever_the_batches_and_partitions(case):
    output, reasons = drive(case, "as_of")
    assert output == case.expected("as_of")
    assert (reasons["late"], reasons["late change"]) == case.late_counts()
    assert sum(reasons.values()) == sum(case.late_counts())


@given(case=cases())
def test_enrichment_latest_equals_reference_given_the_batch_boundaries(case):
    output, reasons = drive(case, "latest")
    assert output == case.expected("latest")
    assert (reasons["late"], reasons["late change"]) == case.late_counts()


@given(case=cases(time_only=True), mode=st.sampled_from(["as_of", "latest"]))
def test_enrichment_with_events_of_only_a_time_equals_reference_with_and_without_heartbeats(case, mode):
    beats = sum(case.heartbeats and is_heartbeat_event(e) for events, _ in case.abstract() for e in events)
    event(f"heartbeats={case.heartbeats}, heartbeat events: {beats > 0}")
    output, reasons, metrics = drive_with_metrics(case, mode)
    assert output == case.expected(mode)
    assert (reasons["late"], reasons["late change"]) == case.late_counts()
    assert metrics["heartbeat_events"] == beats
    if case.heartbeats:
        assert reasons["null key"] == 0


@given(case=cases(), grace=st.sampled_from([0, 1, 4]))
def test_enrichment_as_of_with_grace_differs_from_reference_only_by_events_released_by_grace(case, grace):
    output, _, metrics = drive_with_metrics(case, "as_of", grace=dt.timedelta(seconds=grace))
    event(f"released by grace: {metrics['released_by_grace'] > 0}")
    expected = case.expected("as_of")
    assert sum(output.values()) <= sum(expected.values()) + metrics["released_by_grace"]
    assert sum((expected - output).values()) <= metrics["released_by_grace"]
    if metrics["released_by_grace"] == 0:
        assert output == expected


@pytest.mark.parametrize("store", BACKENDS)
@settings(max_examples=scaled(15))
@given(case=cases(max_rows=8), mode=st.sampled_from(["as_of", "latest"]))
def test_enrichment_equals_reference_on_every_backend(store, case, mode):
    output, _ = run_all(case, mode, store)
    assert output == case.expected(mode)


@given(case=cases(), buckets=st.sampled_from([1, 3]), width=st.sampled_from([1, 7 * SECOND]))
def test_enrichment_tuning_does_not_change_the_output(case, buckets, width):
    output, _ = drive(case, "as_of", buckets=buckets, event_bucket=dt.timedelta(microseconds=width))
    assert output == case.expected("as_of")


_ACTIONS = DISTURBANCES


@settings(max_examples=scaled(25))
@given(case=cases(max_rows=8), mode=st.sampled_from(["as_of", "latest"]), data=st.data())
def test_enrichment_crash_and_restore_equals_uninterrupted_run(case, mode, data):
    versions = [*range(len(case.batches)), None]
    plain, chaos = Run(case, mode), Run(case, mode, data.draw(st.sampled_from(BACKENDS)))
    try:
        expected = [rows_of(plain.run(index)) for index in versions]
        replay_disturbed(chaos, lambda index, version: rows_of(chaos.run(index, version=version)), versions,
                         expected, data, _ACTIONS)
    finally:
        plain.close()
        chaos.close()


