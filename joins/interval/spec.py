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

import datetime
from dataclasses import dataclass
from enum import Enum
from typing import Any, Sequence, Union

import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit import parse_duration, parse_how
from streamjoin.runtime.operator import REASON_COLUMN

__all__ = ["How", "SidePlan", "OutputColumn", "IntervalSpec", "build_spec", "ROW_ID", "On", "Duration"]

#: Column holding a row's id (unique per side and partition) in state blobs.
ROW_ID = "__sj_row_id"

On = Union[str, Sequence[str], tuple[Sequence[str], Sequence[str]]]

#: A duration: a timedelta or a Spark interval string such as ``"10 minutes"``.
Duration = Union[datetime.timedelta, str]

_TIME_UNITS = ("s", "ms", "us")
_COMPRESSIONS = (None, "lz4", "zstd")


class How(str, Enum):
    """The join type, and what it implies for each side."""

    INNER = "inner"
    LEFT = "left"
    RIGHT = "right"
    FULL = "full"
    LEFT_SEMI = "left_semi"
    LEFT_ANTI = "left_anti"

    @property
    def pairs(self) -> bool:
        """Whether matched pairs are output (not semi/anti)."""
        return self not in (How.LEFT_SEMI, How.LEFT_ANTI)

    def emits_unmatched(self, side: str) -> bool:
        """Whether rows of ``side`` that never matched are output once their window closes."""
        if side == "left":
            return self in (How.LEFT, How.FULL, How.LEFT_ANTI)
        return self in (How.RIGHT, How.FULL)

    def marks(self, side: str) -> bool:
        """Whether ``side`` must remember which of its rows matched."""
        return self.emits_unmatched(side) or (side == "left" and self is How.LEFT_SEMI)


@dataclass(frozen=True)
class SidePlan:
    """One input: its schema, key and time columns, the columns kept in state (input order), and
    its canonical row order (time, key, then every other column whose type Arrow can sort)."""

    name: str
    schema: pa.Schema
    key: tuple[str, ...]
    time: str
    stored: tuple[str, ...]
    sort_keys: tuple[tuple[str, str], ...]


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
        }


def _side_definition(side: SidePlan) -> dict[str, Any]:
    return {
        "key": list(side.key),
        "time": side.time,
        "columns": [[f.name, str(f.type)] for f in side.schema],
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
) -> IntervalSpec:
    """Validate the arguments of an interval join; raise JoinDefinitionError naming the problem."""
    how = _how(how)
    left_key, right_key = _parse_on(on)
    _check_schema("left", left, left_key, left_time)
    _check_schema("right", right, right_key, right_time)
    key_types = tuple(
        _common_key_type(ln, left.field(ln).type, rn, right.field(rn).type)
        for ln, rn in zip(left_key, right_key)
    )
    lo, hi, wait = _micros("lower", lower), _micros("upper", upper), _micros("delay", delay)
    if lo > hi:
        raise JoinDefinitionError(f"lower ({lower}) must be <= upper ({upper}): the window would be empty")
    if wait < 0:
        raise JoinDefinitionError(f"delay ({delay}) must be >= 0")
    width = _bucket_width(bucket, hi - lo)
    _check_tuning(blob_rows, group_rows, compression)
    left_plan = _side_plan("left", left, left_key, left_time, left.names)
    right_stored = right.names if how.pairs else [c for c in right.names if c in right_key or c == right_time]
    right_plan = _side_plan("right", right, right_key, right_time, right_stored)
    output, schema = _output_plan(left_plan, right_plan, key_types, how)
    return IntervalSpec(
        left_plan, right_plan, key_types, lo, hi, wait, how, width, blob_rows, group_rows,
        compression, output, schema,
    )


def _side_plan(name: str, schema: pa.Schema, key: tuple[str, ...], time: str, stored: list[str]) -> SidePlan:
    first = [time, *key]
    rest = [n for n in schema.names if n not in first and _sortable(schema.field(n).type)]
    sort_keys = tuple((n, "ascending") for n in first + rest)
    return SidePlan(name, schema, key, time, tuple(stored), sort_keys)


def _sortable(kind: pa.DataType) -> bool:
    """Whether Arrow sorts tables by a column of ``kind`` (dictionaries: by their values)."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    probe = pa.table({"c": pa.nulls(2, kind), "d": pa.array([1, 0])})
    try:
        pc.sort_indices(probe, sort_keys=[("c", "ascending"), ("d", "ascending")])
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return False
    return True


def _how(how: str | How) -> How:
    return How(parse_how(how, [h.value for h in How]))


def _parse_on(on: On) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A name, a list of names, or a pair (left names, right names) -> (left names, right names)."""
    if isinstance(on, str):
        left = right = (on,)
    elif (
        isinstance(on, (list, tuple)) and len(on) == 2
        and all(isinstance(part, (list, tuple)) for part in on)
    ):
        left, right = tuple(on[0]), tuple(on[1])
    elif isinstance(on, (list, tuple)):
        left = right = tuple(on)
    else:
        raise JoinDefinitionError(f"on must be a column name, a list of names or a pair of lists, not {on!r}")
    for side, names in (("left", left), ("right", right)):
        if not names or not all(isinstance(n, str) for n in names):
            raise JoinDefinitionError(f"on: the {side} key must be one or more column names, got {names!r}")
        if len(set(names)) != len(names):
            raise JoinDefinitionError(f"on: the {side} key names a column twice: {list(names)}")
    if len(left) != len(right):
        raise JoinDefinitionError(
            f"on: the left key has {len(left)} columns {list(left)}, the right key {len(right)} {list(right)}"
        )
    return left, right


def _check_schema(side: str, schema: pa.Schema, key: Sequence[str], time: str) -> None:
    if not isinstance(schema, pa.Schema):
        raise JoinDefinitionError(f"the {side} schema must be a pyarrow.Schema, not {type(schema).__name__}")
    names = schema.names
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise JoinDefinitionError(f"the {side} input has duplicate column names {duplicates}")
    for reserved in (REASON_COLUMN, ROW_ID):
        if reserved in names:
            raise JoinDefinitionError(f"the {side} input has a column {reserved!r}, a name streamjoin reserves; rename it")
    for column in [*key, time]:
        if column not in names:
            raise JoinDefinitionError(f"the {side} input has no column {column!r}; its columns are {names}")
    kind = schema.field(time).type
    if not pa.types.is_timestamp(kind) or kind.unit not in _TIME_UNITS:
        raise JoinDefinitionError(
            f"the {side} time column {time!r} must be a timestamp (unit s, ms or us, any time zone), "
            f"not {kind}; cast it first"
        )


def _common_key_type(left_name: str, left: pa.DataType, right_name: str, right: pa.DataType) -> pa.DataType:
    """The type both sides' key values are compared in: equal, or a lossless widening of both
    (dictionary-encoded keys are compared, and output, as their values)."""
    problem = f"key columns left {left_name!r} ({left}) and right {right_name!r} ({right})"
    left, right = (t.value_type if pa.types.is_dictionary(t) else t for t in (left, right))
    common = left if left == right else _widening(left, right)
    if common is None:
        raise JoinDefinitionError(f"{problem} have incompatible types; cast one side to the other's type")
    empty = pa.table({"k": pa.array([], common)})
    try:
        empty.join(empty, "k", join_type="inner", use_threads=False)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        raise JoinDefinitionError(f"{problem}: {common} cannot be a join key; use a scalar type") from None
    return common


def _widening(left: pa.DataType, right: pa.DataType) -> pa.DataType | None:
    families = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal,
                lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
                lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t))
    if not any(f(left) and f(right) for f in families):
        return None
    schemas = [pa.schema([pa.field("k", left)]), pa.schema([pa.field("k", right)])]
    try:
        common = pa.unify_schemas(schemas, promote_options="permissive").field("k").type
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return None
    if pa.types.is_integer(common):
        for kind in (left, right):
            try:
                pa.array(_integer_bounds(kind), kind).cast(common, safe=True)
            except (pa.ArrowInvalid, OverflowError):
                return None
    return common


def _integer_bounds(kind: pa.DataType) -> list[int]:
    bits = kind.bit_width
    if pa.types.is_signed_integer(kind):
        return [-(1 << (bits - 1)), (1 << (bits - 1)) - 1]
    return [0, (1 << bits) - 1]


def _micros(name: str, value: Duration) -> int:
    return parse_duration(name, value)


def _bucket_width(bucket: Duration | None, window: int) -> int:
    """State time-bucket width: a quarter of the window, between 1 second and 1 hour, unless given."""
    if bucket is None:
        return min(max(window // 4, 1_000_000), 3_600_000_000)
    width = _micros("bucket", bucket)
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
    clash = set(left_rest) & set(right_rest)
    columns = [OutputColumn(n, "key", n) for n in left.key]
    columns += [OutputColumn(f"{c}_left" if c in clash else c, "left", c) for c in left_rest]
    columns += [
        OutputColumn(f"{c}_right" if c in clash or c in left.key else c, "right", c) for c in right_rest
    ]
    names = [c.name for c in columns]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise JoinDefinitionError(
            f"output column names {duplicates} appear twice even after adding _left/_right to clashing "
            "names; rename those columns in one input before joining"
        )
    fields = []
    for column, name in zip(columns, names):
        if column.side == "key":
            source = left.schema.field(column.source)
            fields.append(pa.field(name, key_types[left.key.index(column.source)], True, source.metadata))
        else:
            source = left.schema.field(column.source) if column.side == "left" else right.schema.field(column.source)
            fields.append(pa.field(name, source.type, True, source.metadata))
    return tuple(columns), pa.schema(fields)
