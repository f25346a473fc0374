"""The definition of a stream-table enrichment join: validated arguments and the output schema.

:func:`build_spec` checks every argument once, before any row is read, and raises
:class:`streamjoin.errors.JoinDefinitionError` saying what to change.

**Output columns**: every event column, as it is, then the table's value columns (the row's
columns but the key; see :mod:`streamjoin.changes` for what each vocabulary counts as the row), in the
table's order. **Clashing names**: a table value column named like an event column becomes
``<name>_table``; if a name still appears twice, the definition is refused.

**Keys**: ``on`` names the event's (foreign) key columns, ``table_key`` the table's primary key
columns, pairwise (same count). Each pair must both be integers (compared as int64; an unsigned
value above the int64 range fails the batch), strings, binary or booleans, and values are
compared as values (an int32 ``1`` equals an int64 ``1``).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import Any, Literal, Sequence

import pyarrow as pa

from streamjoin.changes import OP, SEQ, TIME, ChangeFormat
from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.arrivals import check_heartbeats
from streamjoin.kit.how import How, parse_how
from streamjoin.kit.keys import family_key_type
from streamjoin.kit.names import check_output_names, check_present, check_reserved, check_schema, suffixed
from streamjoin.kit.on import column_names
from streamjoin.kit.order import SortKeys, canonical_sort_keys
from streamjoin.kit.times import parse_duration
from streamjoin.kit.typenames import type_name
from streamjoin.kit.watermark import input_delays
from streamjoin.runtime.defaults import column_entries, with_defaults
from streamjoin.runtime.evolution import SchemaPlace
from streamjoin.runtime.operator import REASON_COLUMN

__all__ = ["Mode", "ModeName", "LayoutName", "LAYOUTS", "DEFAULT_LAYOUT", "How", "HOWS", "EnrichmentSpec", "build_spec"]

#: The join kinds an enrichment join supports.
HOWS = (How.INNER, How.LEFT)


#: ``mode=`` as the public signatures admit it (for type checkers).
ModeName = Literal["as_of", "latest"]

#: ``layout=``: how a partition holds its table versions (see :class:`EnrichmentSpec`).
LayoutName = Literal["buckets", "runs"]
LAYOUTS: tuple[LayoutName, ...] = ("buckets", "runs")
#: The layout of a new checkpoint's state when none is asked for.
DEFAULT_LAYOUT: LayoutName = "runs"


class Mode(str, Enum):
    """``as_of``: the version current at the event's time; ``latest``: the newest version."""

    AS_OF = "as_of"
    LATEST = "latest"


@dataclass(frozen=True)
class EnrichmentSpec:
    """A validated enrichment join; times and durations in microseconds (``grace``, ``ttl`` None: none)."""

    stream: pa.Schema
    stream_key: tuple[str, ...]
    key_types: tuple[pa.DataType, ...]
    stream_time: str
    table: pa.Schema
    changes: ChangeFormat
    internal: pa.Schema
    values: tuple[str, ...]
    mode: Mode
    how: How
    delay: int
    grace: int | None
    buckets: int
    event_bucket: int
    output_schema: pa.Schema
    event_sort: SortKeys
    #: ``table_ttl`` in µs (None: table keys never expire); see :mod:`streamjoin.enrichment.operator`.
    ttl: int | None = None
    #: Tuning of the versions' state (no effect on results, nor on how state is read, so not part
    #: of the definition): a key bucket folds its deltas into a new base once they, with the
    #: versions seen to be no longer needed, exceed ``fold_fraction`` x its base rows, or once it
    #: has more than ``fold_deltas`` + (bucket % ``fold_deltas``) deltas (0: fold every time).
    fold_fraction: float = 0.5
    fold_deltas: int = 16
    #: Per input (stream, table) delay in µs: ``stream_delay`` / ``table_delay``, default ``delay``.
    delays: tuple[int, int] | None = None
    #: Whether an event whose only non-null column is its event time is a heartbeat (progress only).
    heartbeats: bool = False
    #: How the versions are held: ``"buckets"`` (state layout 2, :mod:`streamjoin.enrichment.state`)
    #: or ``"runs"`` (layout 3, :mod:`streamjoin.enrichment.runs`); part of the definition.
    layout: LayoutName = DEFAULT_LAYOUT

    @property
    def stream_delay(self) -> int:
        return self.delay if self.delays is None else self.delays[0]

    @property
    def table_delay(self) -> int:
        return self.delay if self.delays is None else self.delays[1]

    @property
    def keys(self) -> list[str]:
        """Names of the join key columns (in ``key_types``) in events and versions held in state."""
        return [f"__sj_k{i}" for i in range(len(self.stream_key))]

    @cached_property
    def versions_schema(self) -> pa.Schema:
        """The columns of the table versions held in state: the key columns (``keys``, in
        ``key_types``), op, change time, sequence and the value columns."""
        keys = [pa.field(n, t) for n, t in zip(self.keys, self.key_types)]
        # (a value column keeps the default it has in the table, read by versions from before it)
        return with_defaults(pa.schema(keys + [self.internal.field(n) for n in (OP, TIME, SEQ, *self.values)]),
                             self.table)

    def schema_places(self) -> tuple[SchemaPlace, ...]:
        """The stream's and the table's columns in :meth:`definition`; the keys, the event time and
        the change columns keep their types (:mod:`streamjoin.runtime.evolution`)."""
        fmt = self.changes
        changed = [c for c in (fmt.time, fmt.op, fmt.sequence, fmt.column) if c]
        return (SchemaPlace("stream", ("stream",), (*self.stream_key, self.stream_time)),
                SchemaPlace("table", ("table",), (*fmt.key, *changed)))

    def definition(self) -> dict[str, Any]:
        """What this join computes and how its state is laid out (JSON-serialisable)."""
        layout: dict[str, Any] = {"layout": 3} if self.layout == "runs" else {"layout": 2, "buckets": self.buckets}
        if self.layout != "runs":   # (the tuning of the buckets layout; the runs layout has none)
            layout["event_bucket_us"] = self.event_bucket
        return {
            "kind": "enrichment_join", **layout, "mode": self.mode.value, "how": self.how.value,
            "delay_us": self.delay, "grace_us": self.grace, "stream_key": list(self.stream_key),
            "stream_time": self.stream_time, "changes": self.changes.definition(),
            "stream": column_entries(self.stream),
            "table": column_entries(self.table),
        } | ({} if self.ttl is None else {"table_ttl_us": self.ttl}) | self._delays_definition() \
            | ({"heartbeats": True} if self.heartbeats else {})   # absent when off: older definitions stay identical

    def _delays_definition(self) -> dict[str, Any]:
        # Absent when both inputs use ``delay``: definitions from before per-input delays stay identical.
        if (self.stream_delay, self.table_delay) == (self.delay, self.delay):
            return {}
        return {"delays_us": [self.stream_delay, self.table_delay]}


def build_spec(
    stream: pa.Schema, table: pa.Schema, on: str | Sequence[str], *, stream_time: str,
    changes: ChangeFormat, mode: str | Mode, how: str | How, delay: datetime.timedelta | str,
    grace: datetime.timedelta | str | None, buckets: int, event_bucket: datetime.timedelta | str,
    table_ttl: datetime.timedelta | str | None = None,
    stream_delay: datetime.timedelta | str | None = None, table_delay: datetime.timedelta | str | None = None,
    heartbeats: bool = False, layout: LayoutName = DEFAULT_LAYOUT,
) -> EnrichmentSpec:
    """Validate an enrichment join's arguments; raise JoinDefinitionError naming the problem."""
    if layout not in LAYOUTS:
        raise JoinDefinitionError(f"unknown layout={layout!r}; use one of {list(LAYOUTS)}")
    for name, schema in (("stream", stream), ("table", table)):
        check_schema(schema, name)
    if not isinstance(changes, ChangeFormat):
        raise JoinDefinitionError(f"changes must be a streamjoin.changes.ChangeFormat, not {changes!r}")
    if changes.vocabulary.needs_pre_stage:
        raise JoinDefinitionError(
            f"the table input must be routable by top-level key columns: {changes.vocabulary.name} changes "
            "go through streamjoin.changes.pre_stage first (normalise, then to_plain), then are read with "
            "streamjoin.changes.routable_format(changes)"
        )
    internal = changes.internal_schema(table)
    if not pa.types.is_timestamp(table.field(changes.time).type):
        raise JoinDefinitionError(f"the table's change time {changes.time!r} must be a timestamp column here")
    stream_key = _stream_key(on, stream, stream_time)
    key_types = _key_types(stream, stream_key, internal, changes.key)
    chosen: Mode = _enum(Mode, mode, "mode")
    how = parse_how(how, HOWS)
    wait, width = parse_duration("delay", delay), parse_duration("event_bucket", event_bucket)
    window = None if grace is None else parse_duration("grace", grace)
    if wait < 0 or (window is not None and window < 0) or width <= 0:
        raise JoinDefinitionError("delay and grace must be >= 0 and event_bucket > 0")
    delays = input_delays(delay, [("stream_delay", stream_delay), ("table_delay", table_delay)])
    check_heartbeats(heartbeats)
    ttl = None if table_ttl is None else parse_duration("table_ttl", table_ttl)
    if ttl is not None and ttl <= 0:
        raise JoinDefinitionError(f"table_ttl must be > 0 (None: table keys never expire), not {table_ttl!r}")
    if not isinstance(buckets, int) or isinstance(buckets, bool) or not 1 <= buckets <= 1 << 20:
        raise JoinDefinitionError(f"buckets must be an int in 1..{1 << 20}, not {buckets!r}")
    values = tuple(n for n in internal.names[len(changes.key) + 3:])
    output = _output_schema(stream, internal, values)
    return EnrichmentSpec(stream, stream_key, key_types, stream_time, table, changes, internal, values, chosen, how, wait,
                          window, buckets, width, output, canonical_sort_keys(stream, [stream_time, *stream_key]),
                          ttl=ttl, delays=(delays[0], delays[1]), heartbeats=heartbeats, layout=layout)


def _stream_key(on: str | Sequence[str], stream: pa.Schema, time: str) -> tuple[str, ...]:
    names = column_names(on, "on (the event key columns)")
    check_reserved(stream.names, (REASON_COLUMN, *(f"__sj_k{i}" for i in range(len(names)))), "the stream")
    check_present(stream.names, [*names, time], "the stream")
    kind = stream.field(time).type
    if not pa.types.is_timestamp(kind):
        raise JoinDefinitionError(
            f"the stream time column {time!r} must be a timestamp, not {type_name(kind)}; cast it first")
    return names


def _key_types(
    stream: pa.Schema, on: tuple[str, ...], internal: pa.Schema, table_key: tuple[str, ...]
) -> tuple[pa.DataType, ...]:
    if len(on) != len(table_key):
        raise JoinDefinitionError(
            f"on names {len(on)} event columns {list(on)} but the table key has {len(table_key)} {list(table_key)}"
        )
    return tuple(family_key_type(e, stream.field(e).type, t, internal.field(t).type) for e, t in zip(on, table_key))


def _enum(kind, value, name: str):
    try:
        return kind(value)
    except ValueError:
        raise JoinDefinitionError(f"unknown {name}={value!r}; use one of {[k.value for k in kind]}") from None


def _output_schema(stream: pa.Schema, internal: pa.Schema, values: tuple[str, ...]) -> pa.Schema:
    fields = list(stream)
    for name, out in zip(values, suffixed(values, set(stream.names), "_table")):
        source = internal.field(name)
        fields.append(pa.field(out, source.type, True, source.metadata))
    check_output_names([f.name for f in fields], "_table")
    return pa.schema(fields)
