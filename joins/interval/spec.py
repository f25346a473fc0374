"""The definition of an interval join: validated arguments, the column plan and the output schema.

:func:`build_spec` checks every argument once, before any row is read, and raises
:class:`streamjoin.errors.JoinDefinitionError` with what to change. The result, :class:`IntervalSpec`,
is everything the operator needs: bounds in microseconds, the key columns and their common type,
which columns each side keeps in state, and where every output column comes from.

Output columns: the key columns once (named by the left names, typed by the common key type), then
the left non-key columns, then the right non-key columns, each in its input's order. ``left_semi``
and ``left_anti`` output the left columns only, as they are. **Clashing names**: a non-key name on
both sides becomes ``<name>_left`` and ``<name>_right``; a right non-key column named like an
output key column becomes ``<name>_right``. If a name still appears twice after that (say the left
side already has ``x_left``), the definition is refused: rename a column before joining.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence

import pyarrow as pa

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.arrivals import check_heartbeats
from streamjoin.kit.how import How, parse_how
from streamjoin.kit.keys import common_key_type
from streamjoin.kit.names import (
    check_output_names,
    check_present,
    check_reserved,
    check_schema,
    clashes,
    suffixed,
)
from streamjoin.kit.on import On, parse_on
from streamjoin.kit.order import SortKeys, canonical_sort_keys
from streamjoin.kit.times import Duration, parse_duration
from streamjoin.kit.typenames import type_name
from streamjoin.kit.watermark import combine_watermark, idle_inputs, input_delays, parse_idle_timeout, parse_policy
from streamjoin.runtime.defaults import column_entries
from streamjoin.runtime.evolution import SchemaPlace
from streamjoin.runtime.operator import REASON_COLUMN

__all__ = ["How", "HOWS", "SidePlan", "OutputColumn", "IntervalSpec", "build_spec", "ROW_ID", "On", "Duration"]

#: Column holding a row's id (unique per side and partition) in state blobs.
ROW_ID = "__sj_row_id"

#: The join kinds an interval join supports: all of them.
HOWS = tuple(How)

_TIME_UNITS = ("s", "ms", "us")
_COMPRESSIONS = (None, "lz4", "zstd")


@dataclass(frozen=True)
class SidePlan:
    """One input: its schema, key and time columns, the columns kept in state (input order), and
    its canonical row order (time, key, then every other column whose type Arrow can sort)."""

    name: str
    schema: pa.Schema
    key: tuple[str, ...]
    time: str
    stored: tuple[str, ...]
    sort_keys: SortKeys

    @cached_property
    def stored_schema(self) -> pa.Schema:
        """The columns of the rows held in state: the stored ones, then :data:`ROW_ID`."""
        return pa.schema([self.schema.field(n) for n in self.stored] + [pa.field(ROW_ID, pa.int64())])

    def schema_place(self) -> SchemaPlace:
        """Where the definition lists this side's columns; its key and time keep their types,
        and the stored columns follow the columns (:mod:`streamjoin.runtime.evolution`)."""
        return SchemaPlace(self.name, (self.name, "columns"), (*self.key, self.time), ((self.name, "stored"),))


@dataclass(frozen=True)
class OutputColumn:
    """Output column ``name`` comes from column ``source`` of ``side`` ("key", "left", "right")."""

    name: str
    side: str
    source: str


@dataclass(frozen=True)
class IntervalSpec:
    """A validated interval join (see module docstring); times and durations in microseconds."""

    left: SidePlan
    right: SidePlan
    key_types: tuple[pa.DataType, ...]
    lower: int
    upper: int
    delay: int
    how: How
    bucket: int
    blob_rows: int
    group_rows: int
    compression: str | None
    output: tuple[OutputColumn, ...]
    output_schema: pa.Schema
    delays: tuple[int, int] = (0, 0)
    policy: str = "min"
    #: Whether a row whose only non-null column is its event time is a heartbeat (progress only).
    heartbeats: bool = False
    idle_timeout: int | None = None

    def side(self, name: str) -> SidePlan:
        return self.left if name == "left" else self.right

    def expiry_offset(self, side: str) -> int:
        """A row of ``side`` at time t stays in state while ``t + offset >= watermark``."""
        return self.upper if side == "left" else -self.lower

    def definition(self) -> dict[str, Any]:
        """What this join computes and how its state is laid out (JSON-serialisable)."""
        return {
            "kind": "interval_join",
            "layout": 1,
            "how": self.how.value,
            "lower_us": self.lower,
            "upper_us": self.upper,
            "delay_us": self.delay,
            "bucket_us": self.bucket,
            "left": _side_definition(self.left),
            "right": _side_definition(self.right),
            **self._time_definition(),
            # absent when off, so definitions written before heartbeats existed stay identical
            **({"heartbeats": True} if self.heartbeats else {}),
        }

    def _time_definition(self) -> dict[str, Any]:
        # Only what differs from one delay under "min", so definitions written before these
        # options existed stay byte-identical (and their checkpoints accepted).
        extra: dict[str, Any] = {}
        if self.delays != (self.delay, self.delay):
            extra["delays_us"] = list(self.delays)
        if self.policy != "min":
            extra["watermark_policy"] = self.policy
        if self.idle_timeout is not None:
            extra["idle_timeout_us"] = self.idle_timeout
        return extra

    def watermark(self, max_times: tuple[int | None, ...], floor: int, processing_time: int | None = None,
                  advanced_at: tuple[int | None, ...] = ()) -> int:
        """The join's watermark from the inputs' largest times, leaving out the inputs idle at
        ``processing_time`` (with an ``idle_timeout``; :mod:`streamjoin.kit.watermark`)."""
        idle = idle_inputs(advanced_at, processing_time, self.idle_timeout)
        return combine_watermark(max_times, self.delays, self.policy, floor, idle)


def _side_definition(side: SidePlan) -> dict[str, Any]:
    return {
        "key": list(side.key),
        "time": side.time,
        "columns": column_entries(side.schema),
        "stored": list(side.stored),
    }


def build_spec(
    left: pa.Schema,
    right: pa.Schema,
    on: On,
    *,
    left_time: str,
    right_time: str,
    lower: Duration,
    upper: Duration,
    delay: Duration,
    how: str | How = How.INNER,
    bucket: Duration | None = None,
    blob_rows: int = 65536,
    group_rows: int = 1_000_000,
    compression: str | None = None,
    left_delay: Duration | None = None,
    right_delay: Duration | None = None,
    watermark_policy: str = "min",
    heartbeats: bool = False,
    idle_timeout: Duration | None = None,
) -> IntervalSpec:
    """Validate the arguments of an interval join; raise JoinDefinitionError naming the problem."""
    how = parse_how(how, HOWS)
    left_key, right_key = parse_on(on)
    _check_schema("left", left, left_key, left_time)
    _check_schema("right", right, right_key, right_time)
    key_types = tuple(
        common_key_type(ln, left.field(ln).type, rn, right.field(rn).type)
        for ln, rn in zip(left_key, right_key)
    )
    lo, hi, wait = parse_duration("lower", lower), parse_duration("upper", upper), parse_duration("delay", delay)
    if lo > hi:
        raise JoinDefinitionError(f"lower ({lower}) must be <= upper ({upper}): the window would be empty")
    if wait < 0:
        raise JoinDefinitionError(f"delay ({delay}) must be >= 0")
    delays = input_delays(delay, [("left_delay", left_delay), ("right_delay", right_delay)])
    policy = parse_policy(watermark_policy)
    check_heartbeats(heartbeats)
    idle = parse_idle_timeout(idle_timeout)
    width = _bucket_width(bucket, hi - lo)
    _check_tuning(blob_rows, group_rows, compression)
    left_plan = _side_plan("left", left, left_key, left_time, left.names)
    right_stored = right.names if how.pairs else [c for c in right.names if c in right_key or c == right_time]
    right_plan = _side_plan("right", right, right_key, right_time, right_stored)
    output, schema = _output_plan(left_plan, right_plan, key_types, how)
    return IntervalSpec(
        left_plan, right_plan, key_types, lo, hi, wait, how, width, blob_rows, group_rows,
        compression, output, schema, (delays[0], delays[1]), policy, heartbeats, idle,
    )


def _side_plan(name: str, schema: pa.Schema, key: tuple[str, ...], time: str, stored: list[str]) -> SidePlan:
    return SidePlan(name, schema, key, time, tuple(stored), canonical_sort_keys(schema, [time, *key]))


def _check_schema(side: str, schema: pa.Schema, key: Sequence[str], time: str) -> None:
    check_schema(schema, side)
    check_reserved(schema.names, (REASON_COLUMN, ROW_ID), f"the {side} input")
    check_present(schema.names, [*key, time], f"the {side} input")
    kind = schema.field(time).type
    if not pa.types.is_timestamp(kind) or kind.unit not in _TIME_UNITS:
        raise JoinDefinitionError(
            f"the {side} time column {time!r} must be a timestamp (unit s, ms or us, any time zone), "
            f"not {type_name(kind)}; cast it first"
        )


def _bucket_width(bucket: Duration | None, window: int) -> int:
    """State time-bucket width: a quarter of the window, between 1 second and 1 hour, unless given."""
    if bucket is None:
        return min(max(window // 4, 1_000_000), 3_600_000_000)
    width = parse_duration("bucket", bucket)
    if width <= 0:
        raise JoinDefinitionError(f"bucket must be a positive duration, not {bucket}")
    return width


def _check_tuning(blob_rows: int, group_rows: int, compression: str | None) -> None:
    for name, value in (("blob_rows", blob_rows), ("group_rows", group_rows)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise JoinDefinitionError(f"{name} must be a positive int, not {value!r}")
    if compression not in _COMPRESSIONS:
        raise JoinDefinitionError(f"compression must be one of {_COMPRESSIONS}, not {compression!r}")


def _output_plan(
    left: SidePlan, right: SidePlan, key_types: tuple[pa.DataType, ...], how: How
) -> tuple[tuple[OutputColumn, ...], pa.Schema]:
    """Where each output column comes from, and the output schema (see the module's clash rule)."""
    if not how.pairs:
        return tuple(OutputColumn(n, "left", n) for n in left.schema.names), left.schema
    left_rest = [c for c in left.schema.names if c not in left.key]
    right_rest = [c for c in right.schema.names if c not in right.key]
    clash = clashes(left_rest, right_rest)
    columns = [OutputColumn(n, "key", n) for n in left.key]
    columns += [OutputColumn(n, "left", c) for n, c in zip(suffixed(left_rest, clash, "_left"), left_rest)]
    right_names = suffixed(right_rest, clash | set(left.key), "_right")
    columns += [OutputColumn(n, "right", c) for n, c in zip(right_names, right_rest)]
    names = [c.name for c in columns]
    check_output_names(names, "_left/_right")
    fields = []
    for column, name in zip(columns, names):
        if column.side == "key":
            source = left.schema.field(column.source)
            fields.append(pa.field(name, key_types[left.key.index(column.source)], True, source.metadata))
        else:
            source = left.schema.field(column.source) if column.side == "left" else right.schema.field(column.source)
            fields.append(pa.field(name, source.type, True, source.metadata))
    return tuple(columns), pa.schema(fields)
