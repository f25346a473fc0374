"""Starting the table-table join from state rows (:mod:`streamjoin.runtime.initial_state`): the
rows ``read_state`` shows of its stages (:mod:`streamjoin.table.views`) made back into the state
entries the stages write.

A view shows keys and rows as JSON arrays of the stored values
(:func:`streamjoin.runtime.views.json_text`: bytes as hex, a decimal as its text, a timestamp,
date, time or duration as its integer; a list, struct or map as its structure of those,
:func:`streamjoin.kit.nested.plain_nested`); :func:`parse_values` reads them back in the types of the
side's columns, and :func:`decode_keys` / :func:`decode_rows` read a side's rows whole. From them
(every key encoded as the stages encode it, floating-point keys normalised):

* a key stage's ``keys`` (:func:`key_entries`): per primary key,
  ``K | pack(primary key) -> pack(change time, sequence, has row, *join key)`` (a deleted key's
  join key only when the stage is routed by join key, :class:`streamjoin.table.rekey.TableRekey`),
  and, with a retention, the expiry-index entry of every key that can expire
  (:mod:`streamjoin.table.retention`); with a retention, the largest change time is the
  progress the first version starts from (:func:`key_summary`);
* a join stage's ``left`` / ``right`` (:func:`row_entries`): ``L`` / ``R`` ``| pack(join key,
  primary key) -> the row`` in the side's current layout (:mod:`streamjoin.table.layouts`), and
  the rows held per side (:func:`held_entry`).

A key row is routed by its primary key, or by its join key in a stage routed by join key
(:func:`key_route`); a row by its join key (:func:`row_route`). Rows that cannot be the state
the stages write are refused with a :class:`JoinDefinitionError` naming the side and the row: a
value that does not read in its column's type, a key given twice, a row whose own key columns
are not its ``join_key`` / ``primary_key``, a key holding a row without its join key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.keys import normal_keys
from streamjoin.kit.nested import from_plain, is_nested
from streamjoin.kit.typenames import type_name
from streamjoin.runtime.areas import Area
from streamjoin.runtime.checkpoint.initial import PROGRESS
from streamjoin.statestore.base import KeyValue
from streamjoin.statestore.binary_concat import concat_binary
from streamjoin.statestore.packed_columns import pack_array
from streamjoin.table.layouts import LayoutCodec
from streamjoin.table.retention import index_key, time_scale
from streamjoin.table.rows import RowCodec, physical_type
from streamjoin.table.spec import How, TableSide
from streamjoin.table.state import HELD, SIDE

if TYPE_CHECKING:
    from streamjoin.table.rekey import TableRekey
    from streamjoin.table.stage import TableJoinStage

__all__ = ["parse_values", "Keys", "decode_keys", "key_route", "key_entries", "key_summary", "Rows",
           "decode_rows", "row_route", "row_entries", "held_entry", "join_entries"]


# -- JSON values ---------------------------------------------------------------------------------


def _convert(physical: pa.DataType) -> Callable[[Any], Any]:
    """The Python value of a JSON value of a column whose physical type is ``physical`` (raises
    TypeError or ValueError for one of another kind)."""
    def need(kinds: type | tuple[type, ...], what: str) -> Callable[[Any], Any]:
        def check(value: Any) -> Any:
            if not isinstance(value, kinds) or (isinstance(value, bool) and kinds is not bool):
                raise TypeError(f"{value!r} is not {what}")
            return value
        return check

    if pa.types.is_binary(physical) or pa.types.is_large_binary(physical) or pa.types.is_fixed_size_binary(physical):
        text = need(str, "bytes as hex text")
        return lambda value: bytes.fromhex(text(value))
    if pa.types.is_string(physical) or pa.types.is_large_string(physical):
        return need(str, "a string")
    if pa.types.is_boolean(physical):
        return need(bool, "true or false")
    if pa.types.is_integer(physical):
        return need(int, "an integer")
    if pa.types.is_floating(physical):
        number = need((int, float), "a number")
        return lambda value: float(number(value))
    return need(type(None), "null")


def parse_values(texts: pa.Array | pa.ChunkedArray, fields: Sequence[pa.Field], what: str,
                 empty: np.ndarray | None = None) -> tuple[list[pa.Array], np.ndarray]:
    """The columns of ``texts`` (JSON arrays of the stored values of ``fields``, one a row) as
    arrays of the fields' types, and where a row's array was empty (``[]``: null in every
    column); an empty array is accepted only where ``empty`` (a mask) allows it. Raises
    :class:`JoinDefinitionError` naming ``what`` and the row for a null, malformed or short
    array, or a value that does not read in its column's type."""
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    width, n = len(fields), len(texts)
    rows: list[list[Any]] = []
    blank = np.zeros(n, bool)
    for i, text in enumerate(texts.to_pylist()):
        try:
            values = json.loads(text) if text is not None else None
        except ValueError as exc:
            raise JoinDefinitionError(f"{what} of row {i} is not a JSON array ({exc}): {text!r}") from None
        if values == [] and empty is not None and empty[i]:
            blank[i] = True
            values = [None] * width
        if not isinstance(values, list) or len(values) != width:
            raise JoinDefinitionError(
                f"{what} of row {i} is {text!r}, not a JSON array of {width} values (of "
                f"{[f.name for f in fields]}), as read_state shows them")
        rows.append(values)
    columns = []
    for j, field in enumerate(fields):
        physical = physical_type(field.type)
        convert = _convert(physical)
        values = [row[j] for row in rows]
        try:
            if is_nested(field.type):   # (shown as its structure: plain_nested)
                columns.append(from_plain(values, field.type))
                continue
            array = pa.array([None if v is None else convert(v) for v in values], physical)
            columns.append(array if array.type == field.type else array.cast(field.type))
        except (TypeError, ValueError, OverflowError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            bad = next((i for i, v in enumerate(values) if not _reads(v, convert, physical, field.type)), None)
            at = "" if bad is None else f" of row {bad} ({values[bad]!r})"
            raise JoinDefinitionError(f"{what}: the value{at} of column {field.name!r} does not read as "
                                      f"{type_name(field.type)}: {exc}") from None
    return columns, blank


def _reads(value: Any, convert: Callable[[Any], Any], physical: pa.DataType, kind: pa.DataType) -> bool:
    """Whether one value reads in ``kind`` (to name the row of a column that does not)."""
    try:
        if is_nested(kind):
            from_plain([value], kind)
            return True
        pa.array([None if value is None else convert(value)], physical).cast(kind)
    except (TypeError, ValueError, OverflowError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _fields(side: TableSide, names: Sequence[str]) -> list[pa.Field]:
    """The row's fields ``names`` (join-key columns in the join's key types)."""
    schema = side.row_schema
    return [schema.field(name) for name in names]


def _table(fields: Sequence[pa.Field], arrays: Sequence[pa.Array]) -> pa.Table:
    return pa.Table.from_arrays(list(arrays), schema=pa.schema(list(fields)))


def _column(rows: pa.Table, name: str, what: str) -> pa.Array:
    """Column ``name`` of ``rows`` without nulls, or :class:`JoinDefinitionError`."""
    column = rows.column(name).combine_chunks()
    if column.null_count:
        first = int(np.flatnonzero(~np.asarray(column.is_valid()))[0])
        raise JoinDefinitionError(f"{what}: column {name!r} of row {first} is null; every state row has one")
    return column


def _refuse_twice(keys: pa.Array, what: str) -> None:
    """Raise :class:`JoinDefinitionError` when a state key is given twice."""
    if len(keys) < 2 or pc.count_distinct(keys).as_py() == len(keys):
        return
    seen: dict[bytes, int] = {}
    for i, key in enumerate(keys.to_pylist()):
        if key in seen:
            raise JoinDefinitionError(f"{what}: rows {seen[key]} and {i} are the state of one key; give each "
                                      "key once, as read_state shows it")
        seen[key] = i


def _encode(codec: RowCodec, table: pa.Table, names: Sequence[str]) -> pa.Array:
    """``pack`` of columns ``names`` of ``table``, as the stages encode keys (normalised)."""
    return codec.encode_array(normal_keys(table, names), names)


# -- a key stage's keys ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Keys:
    """A key stage's state rows, read: per key, its primary key and join key (the row's columns
    in their types; ``has_jk`` False: the key holds none, its join-key columns null), its last
    change's time (µs) and sequence, and whether it holds a row."""

    pk: pa.Table
    jk: pa.Table
    has_jk: np.ndarray
    time: pa.Array
    seq: pa.Array
    has_row: pa.Array


def decode_keys(stage: TableRekey, rows: pa.Table, what: str) -> Keys:
    """``rows`` (the ``keys`` view's columns) read in ``stage``'s types. A deleted key holds no
    join key in a stage routed by primary key (one given is dropped, as the stage drops it); in
    one routed by join key it holds one, taken from its primary key when the join-key columns
    are among the primary key's."""
    side = stage.side
    time = _column(rows, "_change_time", what).cast(pa.int64())
    has_row = _column(rows, "_has_row", what)
    seq = rows.column("_sequence").combine_chunks().cast(pa.int64())
    pk_fields, jk_fields = _fields(side, side.key), _fields(side, side.on)
    pk, _ = parse_values(_column(rows, "primary_key", what), pk_fields, f"{what} primary_key")
    pk_table = _table(pk_fields, pk)
    row = has_row.to_numpy(zero_copy_only=False)
    jk, blank = parse_values(_column(rows, "join_key", what), jk_fields, f"{what} join_key", empty=~row)
    if stage.by_join_key and blank.any():   # a deleted key read from a stage routed by primary key
        if not set(side.on) <= set(side.key):
            first = int(np.flatnonzero(blank)[0])
            raise JoinDefinitionError(
                f"{what}: the deleted key of row {first} has no join key, and this side's keys are kept by join "
                "key (its key step runs in the join stage): give it its join key, or leave deleted keys "
                "(_has_row false) out, which forgets their last change")
        taken = pa.array(blank)   # its join-key columns are among its primary key's
        jk = [pc.if_else(taken, pk_table.column(f.name).cast(f.type), a) for f, a in zip(jk_fields, jk)]
        blank[:] = False
    has_jk = ~blank if stage.by_join_key else ~blank & row
    keys = Keys(pk_table, _table(jk_fields, jk), has_jk, time, seq, has_row)
    _refuse_twice(_encode(stage.codec, keys.pk, side.key), what)
    return keys


def key_route(stage: TableRekey, keys: Keys) -> list[pa.Array]:
    """The key each key row is routed by: its join key (its columns in order) in a stage routed by
    join key, else its primary key's (which in a fused stage routed by primary key is its join
    key, column for column)."""
    table, names = (keys.jk, stage.side.on) if stage.by_join_key else (keys.pk, stage.side.key)
    return [table.column(name).combine_chunks() for name in names]


def key_entries(stage: TableRekey, keys: Keys) -> list[KeyValue]:
    """The stage's entries holding ``keys`` (see module)."""
    side, n = stage.side, keys.pk.num_rows
    if not n:
        return []
    pks = _encode(stage.codec, keys.pk, side.key)
    jks = pc.if_else(pa.array(keys.has_jk), _encode(stage.codec, keys.jk, side.on), pa.nulls(n, pa.binary()))
    heads = pack_array([keys.time, keys.seq, keys.has_row], n)
    # (a stage that holds its side's rows: the head, the row put after it by the fused join stage)
    values = heads if stage.holds_rows else \
        pc.if_else(pa.array(keys.has_jk), concat_binary(heads, jks), heads)
    entries = list(zip(stage.layout["keys"].key_column(pks).to_pylist(), values.to_pylist()))
    if stage.retention is not None:
        retention, expiry = stage.retention, stage.layout["expiry"]
        entries += [(index_key(expiry, time, pk), b"") for pk, time, row in
                    zip(pks.to_pylist(), keys.time.to_pylist(), keys.has_row.to_pylist()) if retention.indexed(row)]
    return entries


def key_summary(stage: TableRekey, rows: pa.Table, input_name: str) -> dict[str, int]:
    """With a retention, the largest change time of ``rows`` as the progress of the stage's input
    ``input_name`` (in the unit the runtime keeps it: µs for a timestamp column, else the
    column's), so the first version's horizon is the one the run that held them had (a run's
    progress is at least it: heartbeats and rows set aside may have moved it further)."""
    if stage.retention is None or not rows.num_rows:
        return {}
    found = pc.max(rows.column("_change_time").cast(pa.int64())).as_py()
    if found is None:
        return {}
    return {PROGRESS + input_name: int(found) // time_scale(stage.side.schema, stage.side.changes)}


# -- a join stage's rows ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Rows:
    """A join stage side's state rows, read: their join keys and the rows (the row's columns)."""

    jk: pa.Table
    row: pa.Table


def decode_rows(side: TableSide, rows: pa.Table, what: str) -> Rows:
    """``rows`` (the ``left`` / ``right`` view's columns) read in ``side``'s types; a row's key
    columns must be its ``join_key`` and ``primary_key`` (as keys compare), and each (join key,
    primary key) is given once."""
    codec = RowCodec(side.row_schema)
    jk_fields, pk_fields = _fields(side, side.on), _fields(side, side.key)
    jk, _ = parse_values(_column(rows, "join_key", what), jk_fields, f"{what} join_key")
    pk, _ = parse_values(_column(rows, "primary_key", what), pk_fields, f"{what} primary_key")
    values, _ = parse_values(_column(rows, "row", what), list(side.row_schema), f"{what} row")
    row = _table(list(side.row_schema), values)
    for name, fields, given in (("join_key", jk_fields, jk), ("primary_key", pk_fields, pk)):
        names = [f.name for f in fields]
        same = pc.equal(_encode(codec, _table(fields, given), names), _encode(codec, row, names))
        if not pc.all(same).as_py():
            first = int(np.flatnonzero(~same.to_numpy(zero_copy_only=False))[0])
            found = row.select(names).slice(first, 1).to_pylist()[0]
            raise JoinDefinitionError(
                f"{what}: row {first} holds a row whose {names} are {found}, not its {name}; a row is held at "
                "its own key: change both, or neither")
    _refuse_twice(_encode(codec, row, [*side.on, *side.key]), what)
    return Rows(_table(jk_fields, jk), row)


def row_route(side: TableSide, rows: Rows) -> list[pa.Array]:
    """The key each row is routed by: its join key (the join stage's inputs' key order)."""
    return [rows.jk.column(name).combine_chunks() for name in side.on]


def row_entries(side: TableSide, codec: LayoutCodec, how: How, rows: Rows, area: Area | None = None) -> list[KeyValue]:
    """The join stage's entries holding ``side``'s ``rows``, in ``codec``'s current layout; a row
    with a null in its join key only where ``how`` preserves the side (the stage keeps no other).
    ``area``: the keys area of the fused key step that holds the side's rows (keyed by primary
    key; the values are the rows alone, for the stage to put after the key step's heads)."""
    row = rows.row
    if not how.preserves(side.name) and row.num_rows:
        null = reduce(np.logical_or, [row.column(c).is_null().to_numpy(zero_copy_only=False) for c in side.on])
        row = row.filter(pa.array(~null))
    if not row.num_rows:
        return []
    if area is not None:   # held by a fused key step, by primary key
        keys = area.key_column(_encode(codec, row, side.key))
    else:
        keys = SIDE[side.name].key_column(_encode(codec, row, side.on), _encode(codec, row, side.key))
    return list(zip(keys.to_pylist(), codec.encode_array(row).to_pylist()))


def held_entry(left: int, right: int) -> KeyValue:
    """The join stage's count of rows held per side."""
    return HELD.put((left, right))


def join_entries(stage: TableJoinStage, rows: Mapping[str, pa.Table]) -> list[KeyValue]:
    """The join stage's entries holding ``rows`` (by side, ``left`` / ``right``; a side may be
    missing), and the count of rows it holds per side; the rows of a side a fused key step
    holds (``stage.rows_in``) under that step's keys (:func:`row_entries`)."""
    entries: list[KeyValue] = []
    held = {}
    for name in ("left", "right"):
        side = stage.spec.side(name)
        table = rows.get(name)
        found = [] if table is None else row_entries(side, stage.codecs[name], stage.spec.how,
                                                     decode_rows(side, table, f"initial_state[{name!r}]"),
                                                     stage.rows_in.get(name))
        held[name] = len(found)
        entries += found
    return [held_entry(held["left"], held["right"]), *entries]
