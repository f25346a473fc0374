"""Hypothesis strategies and scenarios of the interval join tests.

``JoinCase`` is one random scenario: a join definition (one of a few schema variants, bounds,
delay, how), micro-batches of left and right rows (Python dicts, time roughly increasing across
batches with some disorder, so watermarks advance and some rows are late), and a partition count.
``drive`` runs one with :class:`tests.joins.drivers.StepDriver` (the operator's steps), ``Local``
with :class:`tests.joins.drivers.InProcess` (the runtime).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import pyarrow as pa
from hypothesis import strategies as st

from streamjoin.interval.operator import IntervalJoin
from streamjoin.interval.state import LAYOUT
from streamjoin.runtime.operator import NEG_INF, REASON_COLUMN
from streamjoin.statestore.codecs import decode_int
from streamjoin.testing.interval import interval_late_rows, is_heartbeat, reference_interval_join
from tests.joins.drivers import InProcess, StepDriver

HOWS = ("inner", "left", "right", "full", "left_semi", "left_anti")
SECOND = 1_000_000
EPOCH = dt.datetime(1970, 1, 1)


@dataclass(frozen=True)
class Variant:
    """A pair of input schemas and how they are joined."""

    left: pa.Schema
    right: pa.Schema
    on: Any
    left_key: tuple[str, ...]
    right_key: tuple[str, ...]
    left_time: str
    right_time: str


SIMPLE = Variant(
    pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("v", pa.string())]),
    pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("v", pa.string()), ("w", pa.int64())]),
    "k", ("k",), ("k",), "ts", "ts",
)
COMPOSITE = Variant(
    pa.schema([("a", pa.int64()), ("b", pa.string()), ("lt", pa.timestamp("us", "UTC")), ("x", pa.float64())]),
    pa.schema([("c", pa.int32()), ("rt", pa.timestamp("ms", "UTC")), ("d", pa.large_string()),
               ("a", pa.int64()), ("y", pa.string())]),
    (["a", "b"], ["c", "d"]), ("a", "b"), ("c", "d"), "lt", "rt",
)
VARIANTS = (SIMPLE, COMPOSITE)


@dataclass
class JoinCase:
    """One scenario (see module docstring). Times in rows are Python datetimes."""

    variant: Variant
    how: str
    lower: dt.timedelta
    upper: dt.timedelta
    delay: dt.timedelta
    batches: list[tuple[list[dict], list[dict]]]
    partitions: int = 1
    bucket: dt.timedelta | None = None
    extra: dict = field(default_factory=dict)
    left_delay: dt.timedelta | None = None
    right_delay: dt.timedelta | None = None
    watermark_policy: str = "min"
    #: the join's ``heartbeats`` option: rows with only a time (drawn with ``time_only``) are heartbeats
    heartbeats: bool = False

    @property
    def times(self) -> dict[str, Any]:
        """The per-input lateness options, as keyword arguments."""
        return dict(left_delay=self.left_delay, right_delay=self.right_delay, watermark_policy=self.watermark_policy)

    def operator(self, **options: Any) -> IntervalJoin:
        v = self.variant
        return IntervalJoin(
            v.left, v.right, v.on, left_time=v.left_time, right_time=v.right_time, lower=self.lower,
            upper=self.upper, delay=self.delay, how=self.how, bucket=self.bucket,
            **{**self.times, "heartbeats": self.heartbeats, **options},
        )

    def tables(self, index: int) -> tuple[pa.Table, pa.Table]:
        left, right = self.batches[index]
        return (pa.Table.from_pylist(left, schema=self.variant.left),
                pa.Table.from_pylist(right, schema=self.variant.right))

    def late(self) -> list[tuple[list[bool], list[bool]]]:
        v = self.variant
        return interval_late_rows(self.batches, left_time=v.left_time, right_time=v.right_time, delay=self.delay,
                                  heartbeats=self.heartbeats, **self.times)

    def without_late_rows(self) -> "JoinCase":
        """The same case with its late rows removed (which changes no watermark under ``"min"``:
        a late row is older than its input's largest time; under ``"max"`` it may not be)."""
        kept = [
            ([r for r, x in zip(left, ll) if not x], [r for r, x in zip(right, rl) if not x])
            for (left, right), (ll, rl) in zip(self.batches, self.late())
        ]
        return JoinCase(self.variant, self.how, self.lower, self.upper, self.delay, kept,
                        self.partitions, self.bucket, left_delay=self.left_delay, right_delay=self.right_delay,
                        watermark_policy=self.watermark_policy)

    def expected(self) -> Counter:
        """The reference result over the rows that are not late."""
        v = self.variant
        left = [r for (rows, _), (late, _) in zip(self.batches, self.late()) for r, x in zip(rows, late) if not x]
        right = [r for (_, rows), (_, late) in zip(self.batches, self.late()) for r, x in zip(rows, late) if not x]
        return Counter(reference_interval_join(
            left, right, left_key=v.left_key, right_key=v.right_key, left_time=v.left_time,
            right_time=v.right_time, lower=self.lower, upper=self.upper, how=self.how,
            left_columns=v.left.names, right_columns=v.right.names, heartbeats=self.heartbeats,
        ))

    def expected_aside(self) -> tuple[Counter, Counter]:
        """Rows set aside per side, as (row tuple, reason): null time, late, unpreserved null key."""
        v = self.variant
        preserved = {"left": self.how in ("left", "full", "left_anti"), "right": self.how in ("right", "full")}
        out = (Counter(), Counter())
        for batch, lates in zip(self.batches, self.late()):
            for i, (side, keys, time) in enumerate((("left", v.left_key, v.left_time),
                                                    ("right", v.right_key, v.right_time))):
                for row, late in zip(batch[i], lates[i]):
                    if self.heartbeats and is_heartbeat(row, time):
                        continue
                    reason = ("null event time" if row[time] is None else "late" if late else
                              "null key" if any(row[k] is None for k in keys) and not preserved[side] else None)
                    if reason:
                        out[i][(tuple(row.values()), reason)] += 1
        return out


def rows_of(table: pa.Table) -> Counter:
    """A table's rows as a multiset of tuples (in column order)."""
    return Counter(tuple(r.values()) for r in table.to_pylist())


def aside_of(table: pa.Table) -> Counter:
    return Counter((tuple(r.values())[:-1], r[REASON_COLUMN]) for r in table.to_pylist())


# -- strategies ----------------------------------------------------------------------------------

_BASES = (0, -40 * 365 * 86_400 * SECOND, 1_600_000_000 * SECOND)  # 1970, ~1930, 2020
_JITTER = (0, 0, 0, 0, 1, -1, SECOND // 2)


def _time(draw, base: int, null_rate: bool) -> tuple[int | None, int]:
    if null_rate and draw(st.integers(0, 19)) == 0:
        return None, 0
    seconds = draw(st.integers(-20, 20))
    return base + seconds * SECOND + draw(st.sampled_from(_JITTER)), seconds


def _row(draw, variant: Variant, side: str, base: int, nulls: bool, time_only: bool = False) -> tuple[dict, int]:
    micros, seconds = _time(draw, base, nulls and not time_only)
    when = None if micros is None else EPOCH + dt.timedelta(microseconds=micros)
    if variant is COMPOSITE and when is not None:
        when = when.replace(tzinfo=dt.timezone.utc)
        if side == "right":
            when = when.replace(microsecond=when.microsecond // 1000 * 1000)  # a timestamp[ms] column
    key = draw(st.sampled_from([0, 1, 1, 2, 2, 3] + ([None] if nulls else [])))
    text = draw(st.sampled_from(["p", "q", None]))
    if variant is SIMPLE:
        row = {"k": key, "ts": when, "v": text} if side == "left" else {
            "k": key, "ts": when, "v": text, "w": draw(st.integers(-3, 3))}
    elif side == "left":
        row = {"a": key, "b": draw(st.sampled_from(["x", "y"])), "lt": when, "x": draw(st.sampled_from([0.5, -1.0]))}
    else:
        row = {"c": key, "rt": when, "d": draw(st.sampled_from(["x", "y"])), "a": draw(st.integers(0, 2)), "y": text}
    if time_only:   # a heartbeat (or, without the option, a row whose key and values are null)
        time = variant.left_time if side == "left" else variant.right_time
        row = {name: (value if name == time else None) for name, value in row.items()}
    return row, seconds


@st.composite
def join_cases(draw, *, hows: Sequence[str] = HOWS, nulls: bool = True, max_partitions: int = 4,
               max_rows: int = 14, times: bool = False, heartbeats: bool = False) -> JoinCase:
    """A random :class:`JoinCase`; rows drift forward in time across batches, some out of order.
    ``heartbeats``: some rows have only a time, and the join's ``heartbeats`` option is drawn."""
    variant = draw(st.sampled_from(VARIANTS))
    base = draw(st.sampled_from(_BASES))
    lower_s, upper_s = sorted(draw(st.lists(st.integers(-6, 6), min_size=2, max_size=2)))
    lower = dt.timedelta(seconds=lower_s, microseconds=draw(st.sampled_from([0, 0, 1])))
    upper = max(lower, dt.timedelta(seconds=upper_s, microseconds=-draw(st.sampled_from([0, 0, 1]))))
    delay = dt.timedelta(seconds=draw(st.sampled_from([0, 1, 3, 10])))
    n_batches = draw(st.integers(1, 5))
    batches: list[tuple[list[dict], list[dict]]] = [([], []) for _ in range(n_batches)]
    for side_index, side in enumerate(("left", "right")):
        for _ in range(draw(st.integers(0, max_rows))):
            time_only = heartbeats and draw(st.integers(0, 3)) == 0
            row, seconds = _row(draw, variant, side, base, nulls, time_only)
            slot = (seconds + 20) * n_batches // 41 + draw(st.sampled_from([0, 0, 0, 1, 2, -1]))
            batches[min(max(slot, 0), n_batches - 1)][side_index].append(row)
    bucket = draw(st.sampled_from([None, dt.timedelta(seconds=1), dt.timedelta(microseconds=700_001)]))
    case = JoinCase(variant, draw(st.sampled_from(hows)), lower, upper, delay, batches,
                    draw(st.integers(1, max_partitions)), bucket)
    if times:  # per-input delays and the watermark policy drawn too
        delays = st.one_of(st.none(), st.sampled_from([0, 1, 3, 10]).map(lambda s: dt.timedelta(seconds=s)))
        case.left_delay, case.right_delay = draw(delays), draw(delays)
        case.watermark_policy = draw(st.sampled_from(["min", "max"]))
    if heartbeats:
        case.heartbeats = draw(st.booleans())
    return case


# -- driving an operator in process (tests.joins.drivers) -------------------------------------

def expired_buckets(driver: StepDriver) -> list[bytes]:
    """State keys of buckets lying wholly below their partition's watermark (eviction missed them)."""
    width = driver.operator.spec.bucket
    missed = []
    watermark_key = LAYOUT["watermark"].key()
    for entries in map(dict, driver.state()):
        mark = entries.get(watermark_key)
        watermark = NEG_INF if mark is None else decode_int(mark)
        missed += [k for k in entries
                   if k != watermark_key and LAYOUT.area_of(k).decode(k)[0] + width <= watermark]
    return missed


def drive(case: JoinCase, *, store: str = "memory", final_alone: bool = True, metrics: dict | None = None,
          **options: Any):
    """Run ``case`` batch by batch, then an empty final version; return (output, asides) multisets
    (and into ``metrics``, if given, the operator's metrics summed over every step)."""
    driver = StepDriver(case.operator(**options), case.partitions, store)
    try:
        output, left_aside, right_aside = Counter(), Counter(), Counter()
        for index in range(len(case.batches)):
            out, (la, ra) = driver.run(*case.tables(index))
            assert expired_buckets(driver) == []
            output += rows_of(out)
            left_aside += aside_of(la)
            right_aside += aside_of(ra)
        out, _ = driver.run(case.variant.left.empty_table(), case.variant.right.empty_table(), final=True)
        output += rows_of(out)
        if metrics is not None:
            for step in driver.recorded:
                for name, value in step.items():
                    metrics[name] = metrics.get(name, 0) + value
        return output, (left_aside, right_aside)
    finally:
        driver.close()


# -- driving an operator through the runtime (changelogs, checkpoints) -----------------------------

class Local(InProcess):
    """A case run by the in-process runner over a fresh temporary checkpoint (:class:`InProcess`)."""

    def __init__(self, case: JoinCase, store: str = "memory", **options: Any) -> None:
        super().__init__(case.operator(**options), case.tables, partitions=case.partitions, store=store)
        self.case = case

    def asides(self) -> tuple[Counter, Counter]:
        """Every row set aside so far, per input."""
        left, right = (self.set_aside(name) for name in ("left", "right"))
        return (Counter() if left is None else aside_of(left)), (Counter() if right is None else aside_of(right))
