"""The stream-stream interval join operator (docs/design/semantics.md "Interval join"), engine-free.

    op = IntervalJoin(searches.schema, clicks.schema, "session", left_time="ts", right_time="ts",
                      lower=timedelta(0), upper=timedelta(minutes=30), delay=timedelta(minutes=5),
                      how="left")

**Match**: equal keys (a null in any key column never matches) and
``l.t + lower <= r.t <= l.t + upper``, both bounds inclusive. **Emission**, per version ``v`` with
watermark ``w`` (docs/design/semantics.md "Time"; +infinity after the rows of a ``final`` version): a pair in the version
in which its second row arrives; an unmatched left row (left, full: null-padded; left_anti: as
itself) in the first version with ``w > l.t + upper``; an unmatched right row (right, full) in the
first version with ``w > r.t - lower``; a left_semi row once, in the version of its first match.
**Heartbeats** (``heartbeats=True``): a row whose only non-null column is its event time counts
as its input's progress and is otherwise dropped, counted (never joined, stored, output or set
aside, late or not). **Rows not joined**: a null event time is set aside (``"null event time"``), then an event time
``< w`` is late (``"late"``), then a null key is set aside (``"null key"``) on a side whose
unmatched rows are not output, and is output at once (it can never match) on a side whose
unmatched rows are output (left of left/full/left_anti, right of right/full).
**State**: a left row while ``l.t + upper >= w``, a right row while ``r.t - lower >= w``; see
:mod:`streamjoin.interval.state` for the layout. Output and state do not depend on the order of rows
in a batch: rows are put in a canonical order first (:class:`streamjoin.interval.spec.SidePlan`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pyarrow as pa

from streamjoin.interval import load
from streamjoin.interval import rows as rows
from streamjoin.interval.spec import ROW_ID, Duration, How, IntervalSpec, On, build_spec
from streamjoin.interval.state import (
    BucketRange,
    bucket_start,
    eviction_range,
    marks_put,
    read_watermark,
    rows_puts,
    scan_groups,
    watermark_put,
)
from streamjoin.interval.views import VIEWS
from streamjoin.kit.watermark import WatermarkPolicy
from streamjoin.runtime.evolution import OptionRule, SchemaPlace
from streamjoin.runtime.operator import NEG_INF, POS_INF, InputSpec, SpecOperator, StepInput, StepResult
from streamjoin.statestore.base import KeyValue, Store

if TYPE_CHECKING:
    from streamjoin.runtime.regroup import Ownership

__all__ = ["IntervalJoin", "How", "watermark"]

_SIDES = ("left", "right")
_OTHER = {"left": "right", "right": "left"}


def watermark(max_times: tuple[int | None, ...], delay: int) -> int:
    """``min_i(max_times) - delay``, or NEG_INF while an input has seen no row (docs/design/semantics.md "Time")."""
    seen = [t for t in max_times if t is not None]
    if not seen or len(seen) < len(max_times):
        return NEG_INF
    return max(min(seen) - delay, NEG_INF)


class IntervalJoin(SpecOperator):
    """Joins a left and a right event stream on key equality within a time window (see module)."""

    kind = "interval_join"
    set_aside_inputs = ("left", "right")
    metric_merges = {"pairs": "sum", "watermark": "max", "heartbeat_rows_left": "sum", "heartbeat_rows_right": "sum"}
    time_metrics = frozenset({"watermark"})
    state_views = VIEWS

    def __init__(
        self,
        left: pa.Schema,
        right: pa.Schema,
        on: On,
        *,
        left_time: str,
        right_time: str,
        lower: Duration,
        upper: Duration,
        delay: Duration,
        how: str | How = "inner",
        bucket: Duration | None = None,
        blob_rows: int = 65536,
        group_rows: int = 1_000_000,
        compression: str | None = None,
        left_delay: Duration | None = None,
        right_delay: Duration | None = None,
        watermark_policy: WatermarkPolicy = "min",
        heartbeats: bool = False,
        idle_timeout: Duration | None = None,
    ) -> None:
        """Validate the join; raise :class:`streamjoin.errors.JoinDefinitionError` naming any problem.

        ``how`` and the durations are read by :mod:`streamjoin.kit`: Spark's spellings of the join kind
        (``left_outer``, ``full_outer``, ``semi``, ...) and Spark interval strings (``"10 minutes"``)
        are accepted as well as the canonical names and ``timedelta``.

        Tuning (no effect on results): ``bucket`` is the width of the state's time buckets (default
        a quarter of ``upper - lower``, within 1 s..1 h; part of the definition); ``blob_rows`` caps
        the rows of one state value; ``group_rows`` caps the state rows held in memory at once;
        ``compression`` (None, "lz4", "zstd") compresses state blobs.

        ``heartbeats``: a row whose every column but its event time is null is a heartbeat: its
        time moves its input's progress (and so the watermark of later versions), and it is
        never joined, stored, output or set aside (counted as ``heartbeat_rows_<side>``).

        ``idle_timeout`` (None: off): an input whose progress has not advanced for that long in
        processing time (``StepInput.processing_time``) is left out of the watermark
        (:mod:`streamjoin.kit.watermark`); results then depend on processing time.
        """
        self.spec: IntervalSpec = build_spec(
            left, right, on, left_time=left_time, right_time=right_time, lower=lower, upper=upper,
            delay=delay, how=how, bucket=bucket, blob_rows=blob_rows, group_rows=group_rows,
            compression=compression, left_delay=left_delay, right_delay=right_delay,
            watermark_policy=watermark_policy, heartbeats=heartbeats,
            idle_timeout=idle_timeout,
        )
        self._inputs = (
            InputSpec("left", left, self.spec.left.key, left_time),
            InputSpec("right", right, self.spec.right.key, right_time),
        )

    @property
    def uses_processing_time(self) -> bool:
        """With an ``idle_timeout``: which inputs count in the watermark depends on processing time."""
        return self.spec.idle_timeout is not None

    @property
    def waits_for_watermark(self) -> bool:
        """Outer and anti joins emit a row that never matched once the watermark closes its
        window; inner and semi joins emit only on a match."""
        return self.spec.how.emits_unmatched("left") or self.spec.how.emits_unmatched("right")

    def step(self, state: Store, batch: StepInput) -> StepResult:
        """Join one version's rows of one partition against its state (as of ``version - 1``)."""
        if len(batch.rows) != 2 or len(batch.max_times) != 2:
            raise ValueError("an interval join step takes exactly two inputs (left, right)")
        return _Step(self.spec, state, batch).run()

    def schema_places(self) -> tuple[SchemaPlace, ...]:
        return self.spec.left.schema_place(), self.spec.right.schema_place()

    def option_rules(self) -> tuple[OptionRule, ...]:
        """A longer delay (the watermark held further back: rows wait longer, none is released
        twice: the stored watermark never moves back)."""
        return OptionRule(("delay_us",), "delay"), OptionRule(("delays_us",), "left_delay/right_delay")

    def regroup(self, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
        """Split state by key group after a change of partition count (:mod:`streamjoin.interval.regroup`)."""
        from streamjoin.interval.regroup import regroup

        return regroup(self.spec, sources, owned)

    def state_key(self, side: str, rows: pa.Table) -> list[pa.Array]:
        """A state row's key columns (:mod:`streamjoin.interval.load`)."""
        return load.key_arrays(self.spec, side, rows)

    def state_summary(self, side: str, rows: pa.Table) -> dict[str, int]:
        """The watermark the state rows were read at."""
        return load.summary(rows)

    def load_state(self, rows: Mapping[str, pa.Table], summary: Mapping[str, int], version: int) -> list[KeyValue]:
        """The state holding ``rows`` before ``version`` (:mod:`streamjoin.interval.load`)."""
        return load.entries(self.spec, rows, summary, version)

    def __repr__(self) -> str:
        s = self.spec
        return (
            f"IntervalJoin(on=({list(s.left.key)!r}, {list(s.right.key)!r}), left_time={s.left.time!r}, "
            f"right_time={s.right.time!r}, lower=timedelta(microseconds={s.lower}), "
            f"upper=timedelta(microseconds={s.upper}), delay=timedelta(microseconds={s.delay}), "
            f"how={s.how.value!r})"
        )


class _Step:
    """One version of one partition: reads state, collects output and the writes to return."""

    def __init__(self, spec: IntervalSpec, state: Store, batch: StepInput) -> None:
        self.spec, self.state, self.version = spec, state, batch.version
        self.before = read_watermark(state)
        now = max(spec.watermark(batch.max_times, NEG_INF, batch.processing_time, batch.advanced_at), self.before)
        self.after = POS_INF if batch.final else now
        self.new = {
            side: rows.arrive(spec, spec.side(side), table, batch.version, now)
            for side, table in zip(_SIDES, batch.rows)
        }
        self.narrow = {
            side: rows.narrow(spec, spec.side(side), self.new[side].rows, self.new[side].times)
            for side in _SIDES
        }
        self.output: list[pa.Table] = []
        self.puts: list[KeyValue] = []
        self.marks: dict[tuple[str, int], list[np.ndarray]] = defaultdict(list)
        self.metrics: Counter[str] = Counter()

    def run(self) -> StepResult:
        self._unkeyed()
        li, ri = rows.match(self.spec, self.narrow["left"], self.narrow["right"])
        self._matched(self.new["left"].rows, li, self.new["right"].rows, ri)
        self.new["left"].matched[li] = True
        self.new["right"].matched[ri] = True
        for side in _SIDES:
            self._state_side(side)
        for side in _SIDES:
            self._settle_arrivals(side)
        for (side, start), ids in sorted(self.marks.items()):
            self.puts.append(marks_put(side, start, self.version, np.concatenate(ids)))
        if self.after != self.before:
            self.puts.append(watermark_put(self.after))
        output = pa.concat_tables(self.output) if self.output else self.spec.output_schema.empty_table()
        return StepResult(
            output=output,
            set_aside=(self.new["left"].aside, self.new["right"].aside),
            puts=self.puts,
            delete_ranges=self._evictions(),
            metrics=self._metrics(output),
        )

    def _unkeyed(self) -> None:
        """Rows with a null key on a preserved side: output now, as unmatched rows."""
        for side in _SIDES:
            if self.new[side].unkeyed.num_rows:
                self._unmatched(side, self.new[side].unkeyed, None)

    def _matched(self, left: pa.Table, li: np.ndarray, right: pa.Table, ri: np.ndarray) -> None:
        if self.spec.how.pairs and li.size:
            self.output.append(rows.pairs(self.spec, left, li, right, ri))
        self.metrics["pairs"] += int(li.size)

    def _unmatched(self, side: str, table: pa.Table, index: np.ndarray | None) -> None:
        if side == "right":
            piece = rows.right_padded(self.spec, table, index)
        elif self.spec.how is How.LEFT_ANTI:
            piece = rows.left_rows(self.spec, table, index)
        else:
            piece = rows.left_padded(self.spec, table, index)
        self.output.append(piece)
        self.metrics[f"unmatched_{side}"] += piece.num_rows

    # -- state ---------------------------------------------------------------------------------

    def _state_side(self, side: str) -> None:
        """Match the other side's new rows with this side's state; emit its expired rows."""
        ranges = self._ranges(side)
        if ranges:
            for group in scan_groups(self.state, side, ranges, self.spec.group_rows, self.spec.side(side).stored_schema):
                self._state_group(side, pa.concat_tables(group.tables), group.marks)

    def _ranges(self, side: str) -> list[BucketRange]:
        """Buckets of ``side`` to read: those the other side's new rows may match, and (outer
        sides) those holding rows whose window closes in this version."""
        width, window = self.spec.bucket, self.spec.upper - self.spec.lower
        ranges: list[BucketRange] = []
        times = self.new[_OTHER[side]].times
        if times.size:
            # a new row at t matches rows of the other side with expiry in [t, t + window]
            first = _distinct_sorted(times // width)   # arrivals are sorted by time
            span = (width - 1 + window) // width
            breaks = np.flatnonzero(first[1:] > first[:-1] + span + 1)
            for lo, hi in zip(np.r_[0, breaks + 1], np.r_[breaks, first.size - 1]):
                ranges.append((int(first[lo]) * width, (int(first[hi]) + span) * width))
        if self.spec.how.emits_unmatched(side) and self.after > self.before:
            lo = None if self.before == NEG_INF else bucket_start(self.before, width)
            hi = None if self.after == POS_INF else bucket_start(self.after - 1, width)
            ranges.append((lo, hi))
        return _merge(ranges, width)

    def _state_group(self, side: str, table: pa.Table, marked: list[np.ndarray]) -> None:
        spec = self.spec
        plan = spec.side(side)
        times = rows.times_of(table, plan.time)
        ids = table.column(ROW_ID).to_numpy()
        self.metrics["state_rows_read"] += table.num_rows
        matched = np.zeros(table.num_rows, dtype=bool)
        other = _OTHER[side]
        if self.new[other].rows.num_rows:
            mine = rows.narrow(spec, plan, table, times)
            if side == "left":
                si, oi = rows.match(spec, mine, self.narrow["right"])
                self._matched(table, si, self.new["right"].rows, oi)
            else:
                oi, si = rows.match(spec, self.narrow["left"], mine)
                self._matched(self.new["left"].rows, oi, table, si)
            matched[si] = True
            self.new[other].matched[oi] = True
        before = _member(ids, marked)
        expiry = times + spec.expiry_offset(side)
        # rows whose window closed before this version were output then
        due = ~matched & ~before & (expiry >= self.before)
        self._settle(side, table, expiry, ids, matched & ~before, due)

    def _settle(
        self, side: str, table: pa.Table, expiry: np.ndarray, ids: np.ndarray,
        first_match: np.ndarray, unmatched: np.ndarray,
    ) -> None:
        """Mark rows matched for the first time (emitting them for left_semi), and emit the
        never-matched rows whose window has closed."""
        how = self.spec.how
        if how.marks(side) and first_match.any():
            self._mark(side, expiry[first_match], ids[first_match])
            if how is How.LEFT_SEMI:
                self.output.append(rows.left_rows(self.spec, table, np.flatnonzero(first_match)))
        if how.emits_unmatched(side):
            due = unmatched & (expiry < self.after)
            if due.any():
                self._unmatched(side, table, np.flatnonzero(due))

    def _mark(self, side: str, expiry: np.ndarray, ids: np.ndarray) -> None:
        """Record that rows ``ids`` matched (unless every row is evicted in this version)."""
        keep = expiry >= self.after
        if not keep.any():
            return
        starts = (expiry[keep] // self.spec.bucket) * self.spec.bucket   # ascending: rows are
        ids = ids[keep]                                                  # in bucket order
        bounds = np.r_[0, np.flatnonzero(np.diff(starts)) + 1, starts.size]
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            self.marks[(side, int(starts[lo]))].append(ids[lo:hi])

    def _settle_arrivals(self, side: str) -> None:
        """Emit or mark this version's own rows, and store those whose window is still open."""
        new = self.new[side]
        expiry = new.times + self.spec.expiry_offset(side)
        ids = new.rows.column(ROW_ID).to_numpy()
        self._settle(side, new.rows, expiry, ids, new.matched, ~new.matched)
        stays = int(np.searchsorted(expiry, self.after, side="left"))  # rows sorted by time
        stored, expiry = new.rows.slice(stays), expiry[stays:]
        starts = (expiry // self.spec.bucket) * self.spec.bucket
        bounds = np.r_[0, np.flatnonzero(np.diff(starts)) + 1, starts.size]
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            if hi > lo:
                self.puts.extend(rows_puts(
                    side, int(starts[lo]), self.version, stored.slice(lo, hi - lo),
                    self.spec.blob_rows, self.spec.compression,
                ))
                self.metrics["rows_stored"] += int(hi - lo)

    def _evictions(self) -> list[tuple[bytes, bytes]]:
        """Range deletes of the buckets whose every row's window has closed."""
        if self.after == POS_INF:
            return [eviction_range(side, None) for side in _SIDES]
        if self.after == NEG_INF:
            return []
        below = bucket_start(self.after, self.spec.bucket)
        if self.before != NEG_INF and bucket_start(self.before, self.spec.bucket) == below:
            return []
        return [eviction_range(side, below) for side in _SIDES]

    def _metrics(self, output: pa.Table) -> dict[str, int]:
        metrics = dict(self.metrics)
        for side in _SIDES:
            for name, count in self.new[side].counts.items():
                metrics[f"{name}_rows_{side}"] = count
        metrics["watermark"] = self.after
        return metrics


def _distinct_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values of an ascending array."""
    return values[np.r_[True, values[1:] != values[:-1]]] if values.size else values


def _member(ids: np.ndarray, marked: list[np.ndarray]) -> np.ndarray:
    """Whether each of ``ids`` is among the ``marked`` ids."""
    if not marked:
        return np.zeros(ids.size, dtype=bool)
    known = np.sort(np.concatenate(marked))
    if known.size == 0:
        return np.zeros(ids.size, dtype=bool)
    at = np.minimum(np.searchsorted(known, ids), known.size - 1)
    return known[at] == ids


def _merge(ranges: list[BucketRange], width: int) -> list[BucketRange]:
    """Sorted, disjoint union of inclusive bucket ranges (None: unbounded)."""
    ordered = sorted(ranges, key=lambda r: NEG_INF if r[0] is None else r[0])
    merged: list[BucketRange] = []
    for lo, hi in ordered:
        if merged:
            last_lo, last_hi = merged[-1]
            if last_hi is None or (lo is not None and lo <= last_hi + width):
                merged[-1] = (last_lo, None if hi is None or last_hi is None else max(last_hi, hi))
                continue
        merged.append((lo, hi))
    return merged
