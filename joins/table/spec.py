"""The definition of a table-table join: validated sides, the routed-change schema, the output.

:func:`build_side` and :func:`build_join` check every argument once, before any row is read, and
raise :class:`streamjoin.errors.JoinDefinitionError` saying what to change; :func:`detect_format`
tells a change table's vocabulary from its columns when none is given.

**Row**: a side's row is its change table's row columns (:meth:`ChangeFormat.row_fields`: for a
plain table every column but the op, for a Delta change data feed every column but
``_change_type``, ``_commit_version`` and ``_commit_timestamp``), in the table's order, kept in
their stored types (:mod:`streamjoin.table.rows`); the join-key columns are kept in the join's common
key types (equal, or a lossless widening of both sides' types).

**Routed changes** (stage 1's output, stage 2's input; one schema per side): the row's columns,
then ``__sj_time`` (int64 µs, the change's time; null for a timeless bootstrap row) and ``__sj_op``
(int8, :data:`streamjoin.changes.UPSERT`, :data:`FRESH` or :data:`~streamjoin.changes.DELETE`). A
delete carries the primary key and the join key it is deleted at, and the time of the change that
removed the row there; its other columns are null. :data:`FRESH` is an upsert of a row that its
primary key did not hold at this join key before the version: the key stage knows it from its own
state, and the join stage then reads nothing for it (an insert, or a row moved from another join
key, needs no before row).

**Output** (the view's change stream, the ``streamjoin`` vocabulary of
:mod:`streamjoin.changes.streamjoin`, a Delta change data feed with the join's bookkeeping): the
left row's columns, then the right row's columns (a name on both sides becomes ``<name>_left`` and
``<name>_right``), then ``_change_type`` (string), ``_commit_version`` (int64, the batch id),
``_seq`` (int64) and ``_change_timestamp`` (timestamp µs UTC, the time of the input change that
caused the view change). A name that still appears twice is refused. The next join reads this
stream as it comes: its bookkeeping columns are the vocabulary's, not row columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pyarrow as pa

from streamjoin.changes import OP, TIME, ChangeFormat, resolve_format
from streamjoin.changes.streamjoin import CHANGE_TIME, CHANGE_TYPE, COMMIT_VERSION, SEQ_COLUMN
from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.how import How, parse_how
from streamjoin.kit.keys import common_key_type
from streamjoin.kit.names import (
    check_output_names,
    check_present,
    check_reserved,
    clashes,
    duplicates,
    suffixed,
)
from streamjoin.kit.nested import is_nested
from streamjoin.kit.on import column_names, parse_on
from streamjoin.kit.typenames import type_name
from streamjoin.runtime.defaults import column_entries, entries_schema, with_defaults
from streamjoin.runtime.evolution import SchemaPlace
from streamjoin.table.rows import stored_type

__all__ = ["FRESH", "How", "HOWS", "TableSide", "TableJoinSpec", "build_side", "build_join", "detect_format", "parse_on",
           "common_key_types", "CHANGE_TYPE", "COMMIT_VERSION", "SEQ_COLUMN", "CHANGE_TIME", "CDF_COLUMNS",
           "ORDER_COLUMNS"]

#: The join kinds a table-table join supports: ``left`` keeps unmatched left rows null-padded,
#: ``full`` both sides' (:meth:`How.preserves`).
HOWS = (How.INNER, How.LEFT, How.FULL)

#: The routed op of an upsert whose primary key held no row at its join key before the version (see
#: module): an upsert the join stage need not look for in its state.
FRESH = 4

#: The output's bookkeeping columns (never view columns), and those a change stream needs to be applied.
CDF_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, SEQ_COLUMN, CHANGE_TIME)
ORDER_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, SEQ_COLUMN)


@dataclass(frozen=True)
class TableSide:
    """One side of a table-table join: its change table, primary key, join key and routed schema."""

    name: str
    schema: pa.Schema
    changes: ChangeFormat
    on: tuple[str, ...]
    key_types: tuple[pa.DataType, ...]
    routed: pa.Schema

    @property
    def key(self) -> tuple[str, ...]:
        """The primary-key columns."""
        return self.changes.key

    @property
    def row_schema(self) -> pa.Schema:
        """The row's columns (the routed schema without the time and op columns), with the
        defaults their change table's columns have (:mod:`streamjoin.runtime.defaults`)."""
        return with_defaults(pa.schema([f for f in self.routed if f.name not in (TIME, OP)]), self.schema)

    def schema_place(self, *at: str, input: str | None = None) -> SchemaPlace:
        """Where a definition holding this side's (under the keys ``at``) lists its change table's
        columns; the primary and join keys and the change columns keep their types
        (:mod:`streamjoin.runtime.evolution`)."""
        fmt = self.changes
        changed = [c for c in (fmt.time, fmt.op, fmt.sequence, fmt.column) if c]
        return SchemaPlace(input or self.name, (*at, "schema"), (*dict.fromkeys([*fmt.key, *self.on]), *changed))

    def definition(self) -> dict[str, Any]:
        return {"side": self.name, "changes": self.changes.definition(), "on": list(self.on),
                "key_types": [str(t) for t in self.key_types],
                "schema": column_entries(self.schema)}


@dataclass(frozen=True)
class TableJoinSpec:
    """A validated table-table join: both sides, ``how`` and the output naming."""

    left: TableSide
    right: TableSide
    how: How
    left_names: tuple[str, ...]
    right_names: tuple[str, ...]
    output_schema: pa.Schema

    def side(self, name: str) -> TableSide:
        return self.left if name == "left" else self.right

    @property
    def view_schema(self) -> pa.Schema:
        """The view's columns: the output without the change-feed columns."""
        return pa.schema([f for f in self.output_schema if f.name not in CDF_COLUMNS])

    @property
    def view_key(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The output names of the left and right primary keys (the view key)."""
        def names(side: TableSide, out: tuple[str, ...]) -> tuple[str, ...]:
            row = side.row_schema.names
            return tuple(out[row.index(k)] for k in side.key)
        return names(self.left, self.left_names), names(self.right, self.right_names)

    def definition(self) -> dict[str, Any]:
        return {"kind": "table_join", "layout": 1, "how": self.how.value,
                "left": self.left.definition(), "right": self.right.definition()}


def detect_format(side: str, schema: pa.Schema, key: str | Sequence[str], time: str | None,
                  given: ChangeFormat | None) -> ChangeFormat:
    """The change format of ``side``'s change table: ``given`` (checked), else told from its columns.

    Detection is :func:`streamjoin.changes.resolve_format`'s, the same as the Spark layer's, with
    ``time`` as the change time (a plain table needs it). Only a vocabulary that needs no
    pre-stage can be routed (:func:`common_key_types` refuses the others). Raises
    :class:`JoinDefinitionError` when it cannot tell or the pieces disagree.
    """
    if not isinstance(schema, pa.Schema):
        raise JoinDefinitionError(f"the {side} schema must be a pyarrow.Schema, not {type(schema).__name__}")
    pk = column_names(key, f"{side}_key")
    if given is not None:
        if not isinstance(given, ChangeFormat):
            raise JoinDefinitionError(f"{side}_changes must be a streamjoin.changes.ChangeFormat or None, not {given!r}")
        if given.key != pk:
            raise JoinDefinitionError(
                f"{side}_key is {list(pk)} but {side}_changes has key {list(given.key)}; make them the same")
        if time is not None and time != given.time:
            raise JoinDefinitionError(
                f"{side}_time is {time!r} but {side}_changes reads the change time from {given.time!r}; "
                f"leave {side}_time out when {side}_changes is given")
        return given
    return resolve_format(schema, None, pk, time=time, argument=f"the {side} change table",
                          changes_argument=f"{side}_changes", time_argument=f"{side}_time")


def _row_fields(side: str, schema: pa.Schema, fmt: ChangeFormat) -> list[pa.Field]:
    twice = duplicates(schema.names)
    if twice:
        raise JoinDefinitionError(f"the {side} change table has duplicate column names {twice}")
    if fmt.vocabulary.needs_pre_stage:
        raise JoinDefinitionError(
            f"the {side} changes must be routable by top-level key columns: {fmt.vocabulary.name} changes go "
            "through streamjoin.changes.pre_stage first (normalise, then to_plain), then are read with "
            "streamjoin.changes.routable_format(fmt)")
    fields = fmt.row_fields(schema)
    check_reserved([f.name for f in fields], (*CDF_COLUMNS, OP), f"the {side} row", "a name the join's output uses")
    return fields


def common_key_types(left: pa.Schema, left_changes: ChangeFormat, left_on: Sequence[str], right: pa.Schema,
                     right_changes: ChangeFormat, right_on: Sequence[str]) -> tuple[pa.DataType, ...]:
    """The types both sides' join-key values are compared (and routed) in, pairwise."""
    types = []
    fields = {"left": {f.name: f for f in _row_fields("left", left, left_changes)},
              "right": {f.name: f for f in _row_fields("right", right, right_changes)}}
    for ln, rn in zip(left_on, right_on):
        for side, name in (("left", ln), ("right", rn)):
            check_present(list(fields[side]), [name], f"on: the {side} row", "row columns")
        types.append(common_key_type(ln, fields["left"][ln].type, rn, fields["right"][rn].type))
    return tuple(types)


def side_of(definition: Mapping[str, Any]) -> TableSide:
    """The side a definition entry (:meth:`TableSide.definition`, as a checkpoint recorded it)
    describes: its change table's columns then, for the rows stored under them."""
    from streamjoin.runtime.views import arrow_type

    schema = entries_schema(definition["schema"])
    return build_side(definition["side"], schema, ChangeFormat.from_definition(definition["changes"]),
                      definition["on"], [arrow_type(kind) for kind in definition["key_types"]])


def build_side(name: str, schema: pa.Schema, changes: ChangeFormat, on: str | Sequence[str],
               key_types: Sequence[pa.DataType] | None = None) -> TableSide:
    """Validate one side; ``key_types`` None: the ``on`` columns' own types (dictionaries decoded)."""
    if name not in ("left", "right"):
        raise JoinDefinitionError(f"a side is 'left' or 'right', not {name!r}")
    fields = _row_fields(name, schema, changes)
    on = column_names(on, f"the {name} join key")
    by_name = {f.name: f for f in fields}
    check_present(list(by_name), on, f"on: the {name} row", "row columns")
    for column in changes.key:
        if column in by_name and is_nested(by_name[column].type):
            raise JoinDefinitionError(
                f"the {name} primary-key column {column!r} has type {type_name(by_name[column].type)}, which cannot "
                "be a key; use scalar columns (a list, struct or map can be a row column)")
    if key_types is None:
        key_types = tuple(common_key_type(c, by_name[c].type, c, by_name[c].type) for c in on)
    if len(key_types) != len(on):
        raise JoinDefinitionError(f"{len(on)} join-key columns {list(on)} but {len(key_types)} key types")
    routed = []
    for f in fields:
        kind = key_types[on.index(f.name)] if f.name in on else f.type
        routed.append(pa.field(f.name, stored_type(kind, f"the {name} column {f.name!r}"), True, f.metadata))
    routed += [pa.field(TIME, pa.int64(), True), pa.field(OP, pa.int8(), False)]
    return TableSide(name, schema, changes, on, tuple(key_types), pa.schema(routed))


def build_join(left: TableSide, right: TableSide, how: str | How) -> TableJoinSpec:
    """Validate the join of two sides and name its output columns (see module docstring)."""
    how = parse_how(how, HOWS)
    if len(left.on) != len(right.on):
        raise JoinDefinitionError(
            f"on: the left key has {len(left.on)} columns {list(left.on)}, the right key {len(right.on)} {list(right.on)}")
    for ln, rn, lt, rt in zip(left.on, right.on, left.key_types, right.key_types):
        if lt != rt:
            raise JoinDefinitionError(
                f"join-key columns left {ln!r} ({lt}) and right {rn!r} ({rt}) are kept in different types; "
                "build both sides with common_key_types(...) or cast one side to the other's type")
    lrow, rrow = left.row_schema, right.row_schema
    clash = clashes(lrow.names, rrow.names)
    lnames = tuple(suffixed(lrow.names, clash, "_left"))
    rnames = tuple(suffixed(rrow.names, clash, "_right"))
    check_output_names([*lnames, *rnames, *CDF_COLUMNS], "_left/_right")
    fields = [pa.field(n, f.type, True, f.metadata) for n, f in zip(lnames, lrow)]
    fields += [pa.field(n, f.type, True, f.metadata) for n, f in zip(rnames, rrow)]
    fields += [pa.field(CHANGE_TYPE, pa.string(), False), pa.field(COMMIT_VERSION, pa.int64(), False),
               pa.field(SEQ_COLUMN, pa.int64(), False), pa.field(CHANGE_TIME, pa.timestamp("us", "UTC"), True)]
    return TableJoinSpec(left, right, how, lnames, rnames, pa.schema(fields))
