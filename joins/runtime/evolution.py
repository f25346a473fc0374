"""Schema evolution of a join's inputs: which column changes a checkpoint's state can follow, and
reading rows stored before them.

A join's definition lists each input's columns as ``[[name, type], ...]`` (types as pyarrow
writes them, e.g. ``int64``, ``decimal128(10, 2)``); :class:`SchemaPlace` says where, and which
columns keep their type whatever happens (join keys, event and change times). Restarting a query
on its checkpoint with other columns is accepted when the definitions differ only there, and
each column change is one of:

* **added**: rows already in state read it as null, or as its default where the column carries
  one (Spark's ``EXISTS_DEFAULT``, :mod:`streamjoin.runtime.defaults`), which is fixed from then on;
* **dropped**: state keeps working and the column leaves the output;
* **widened**, as Delta's type widening allows (:func:`widens`): ``int8 -> int16 -> int32 ->
  int64`` (and the unsigned ones into wider types), ``float -> double``, a decimal's precision
  and scale where no integer digit is lost, ``date32 -> timestamp`` without a time zone
  (Spark's ``TIMESTAMP_NTZ``); old values are widened when read.

Options that may change on a checkpoint are each an :class:`OptionRule`: a delay, a table's TTL or
a retention may grow (what the state holds or waits for is only ever extended, going forward),
never shrink. Anything else is refused by :func:`schema_evolution` with :class:`CheckpointMismatchError` naming
the input, the column, the old and new types and what to do: a narrowed or otherwise changed
type, a type change of a fixed column, and a column that disappears where another of the same
type appears at the same position, with nothing else added or dropped (a rename, which the
state has no mapping for).
:func:`as_schema` reads a table stored under an earlier schema in the current one. Nothing here
rewrites state: rows are conformed as they are read, and written back in the current schema
whenever a version writes them anyway.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pyarrow as pa

from streamjoin.errors import CheckpointMismatchError, JoinDefinitionError
from streamjoin.kit.times import describe_durations
from streamjoin.runtime.defaults import entry_defaults, entry_pairs, fill
from streamjoin.runtime.views import arrow_type

__all__ = ["SchemaPlace", "OptionRule", "ColumnChanges", "OptionChange", "schema_evolution", "widens", "as_schema"]

Path = tuple[str, ...]


@dataclass(frozen=True)
class SchemaPlace:
    """Where a definition lists input ``input``'s columns (``path``: keys from the definition's
    top to a ``[[name, type], ...]`` list), the columns whose type may never change (``fixed``),
    and the other entries (``derived``, paths) that follow the columns, such as a list of the
    columns a join keeps."""

    input: str
    path: Path
    fixed: tuple[str, ...] = ()
    derived: tuple[Path, ...] = ()


@dataclass(frozen=True)
class OptionRule:
    """An option at ``path`` of a definition (a number of µs, a list of them, or a record whose
    ``field`` is one) that a checkpoint accepts a larger value of; ``name`` is the argument users
    give; with ``absent_is_most`` the option left out means no bound (a TTL or retention of
    forever), the largest value."""

    path: Path
    name: str
    field: str | None = None
    absent_is_most: bool = False

    def grows(self, old: Any, new: Any) -> bool | None:
        """Whether ``new`` is at least ``old`` (None: the two are not comparable)."""
        def measure(value: Any) -> Any:
            if value is None:
                return float("inf") if self.absent_is_most else None
            if self.field is not None:
                return value.get(self.field) if isinstance(value, Mapping) else None
            return value
        a, b = measure(old), measure(new)
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            return all(isinstance(x, (int, float)) and isinstance(y, (int, float)) and y >= x for x, y in zip(a, b))
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return None
        if self.field is not None and isinstance(old, Mapping) and isinstance(new, Mapping):
            rest = {k: v for k, v in old.items() if k != self.field}
            if rest != {k: v for k, v in new.items() if k != self.field}:
                return None
        return b >= a

    def line(self, old: Any, new: Any) -> str:
        def text(value: Any) -> str:
            if value is None:
                return "none (forever)" if self.absent_is_most else "(none)"
            return describe_durations(value.get(self.field) if self.field is not None and isinstance(value, Mapping)
                                      else value)
        return f"{self.name}: {text(old)} -> {text(new)}"


@dataclass(frozen=True)
class ColumnChanges:
    """What changed in one input's columns: added ``(name, type)``, dropped names, widened
    ``(name, old type, new type)``."""

    input: str
    added: tuple[tuple[str, str], ...] = ()
    dropped: tuple[str, ...] = ()
    widened: tuple[tuple[str, str, str], ...] = ()

    def lines(self) -> list[str]:
        """One line per change, as ``checkpoint describe`` and the logs show them."""
        return ([f"{self.input}: added {name} ({kind})" for name, kind in self.added]
                + [f"{self.input}: dropped {name}" for name in self.dropped]
                + [f"{self.input}: widened {name} {old} -> {new}" for name, old, new in self.widened])


def _get(definition: Mapping[str, Any], path: Path) -> Any:
    value: Any = definition
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def _set(definition: dict[str, Any], path: Path, value: Any, create: bool = False) -> None:
    target: Any = definition
    for key in path[:-1]:
        if isinstance(target, dict) and key not in target and create and value is not None:
            target[key] = {}
        if not isinstance(target, dict) or key not in target:
            return
        target = target[key]
    if isinstance(target, dict):
        if value is None:
            target.pop(path[-1], None)
        else:
            target[path[-1]] = value


def _columns(value: Any) -> list[tuple[str, str]] | None:
    if not isinstance(value, list) or not all(isinstance(c, list) and len(c) in (2, 3) for c in value):
        return None
    return entry_pairs(value)


def schema_evolution(
    old: Mapping[str, Any], new: Mapping[str, Any], places: Sequence[SchemaPlace], *, where: str,
    options: Sequence[OptionRule] = (),
) -> list[ColumnChanges | OptionChange] | None:
    """The changes that turn definition ``old`` into ``new``: one :class:`ColumnChanges` per input
    whose columns changed, one :class:`OptionChange` per option of ``options`` that grew; None
    when the two differ in more than those, which the caller refuses as another definition.

    Raises :class:`CheckpointMismatchError` (``where`` names the checkpoint) for a column
    change the state cannot follow, and for an option of ``options`` that shrank (see module)."""
    if not places and not options:
        return None
    moved = copy.deepcopy(dict(old))
    for place in places:
        for path in (place.path, *place.derived):
            _set(moved, path, copy.deepcopy(_get(new, path)))
    grown: list[ColumnChanges | OptionChange] = []
    for rule in options:
        before, after = _get(old, rule.path), _get(new, rule.path)
        if before == after:
            continue
        grows = rule.grows(before, after)
        if grows is None:
            return None
        if not grows:
            raise CheckpointMismatchError(
                f"checkpoint {where}: {rule.line(before, after)} shrinks what the join's state holds or waits "
                f"for, and the state already follows the longer one; a checkpoint only takes a longer "
                f"{rule.name}. Give the value as before (or longer), or start the join from a new checkpoint location")
        _set(moved, rule.path, copy.deepcopy(after), create=True)
        grown.append(OptionChange(rule.line(before, after)))
    if moved != dict(new):
        return None
    out: list[ColumnChanges | OptionChange] = list(grown)
    for place in places:
        old_entries, new_entries = _get(old, place.path), _get(new, place.path)
        before, after = _columns(old_entries), _columns(new_entries)
        if before is None or after is None:
            return None
        defaults = entry_defaults(new_entries)
        _check_defaults(place, entry_defaults(old_entries), defaults,
                        {name for name, _ in before} & {name for name, _ in after}, where)
        found = _changes(place, before, after, where, defaults)
        if found.added or found.dropped or found.widened:
            out.append(found)
    return out


@dataclass(frozen=True)
class OptionChange:
    """An option that grew (its line, e.g. ``delay: 10 seconds -> 20 seconds``)."""

    text: str

    def lines(self) -> list[str]:
        return [self.text]


def _check_defaults(place: SchemaPlace, old: Mapping[str, str], new: Mapping[str, str], kept: set[str],
                    where: str) -> None:
    """Refuse a default (``EXISTS_DEFAULT``) that changed, appeared or went away on a column kept
    (``kept``: in both definitions): rows stored before it was added read the one it was added
    with. A column dropped takes its default with it; added again, it may have another."""
    for name in sorted(kept):
        if old.get(name) == new.get(name):
            continue
        raise CheckpointMismatchError(
            f"checkpoint {where}: column {name!r} of the {place.input} input has default (EXISTS_DEFAULT) "
            f"{new.get(name, 'none')} where the checkpoint recorded {old.get(name, 'none')}: a column's default is "
            "fixed when it is added (rows held from before read it), as in Spark. Give the column the default it "
            f"had ({old.get(name, 'none')}), or start the join from a new checkpoint location")


def _changes(place: SchemaPlace, before: list[tuple[str, str]], after: list[tuple[str, str]],
             where: str, defaults: Mapping[str, str]) -> ColumnChanges:
    """The changes from ``before`` to ``after`` (an added column named with its default, of
    ``defaults``), or :class:`CheckpointMismatchError` for one the state cannot follow."""
    old, new = dict(before), dict(after)
    widened = []
    for name, kind in after:
        if name not in old or old[name] == kind:
            continue
        if name in place.fixed:
            raise CheckpointMismatchError(
                f"checkpoint {where}: column {name!r} of the {place.input} input changed type {old[name]} -> "
                f"{kind}, and it is a key or time column, whose type the state is kept by. Give the column "
                f"its type as before ({old[name]}), or start the join from a new checkpoint location")
        if not widens(old[name], kind):
            raise CheckpointMismatchError(
                f"checkpoint {where}: column {name!r} of the {place.input} input changed type {old[name]} -> "
                f"{kind}, which the rows already in state cannot be read as (a type may only widen: "
                "int8 -> int16 -> int32 -> int64, float -> double, a decimal's precision and scale without "
                "losing integer digits, date -> timestamp without a time zone). Cast the column back to "
                f"{old[name]} (or to a wider type), or start the join from a new checkpoint location")
        widened.append((name, old[name], kind))
    dropped = [name for name, _ in before if name not in new]
    added = [(name, kind) for name, kind in after if name not in old]
    if len(dropped) == 1 and len(added) == 1:   # one column out and one in, in its place: a rename?
        name = dropped[0]
        at = [n for n, _ in before].index(name)
        kind, twin = old[name], after[at] if at < len(after) else None
        if twin == added[0] and twin[1] == kind:
            raise CheckpointMismatchError(
                f"checkpoint {where}: column {name!r} of the {place.input} input is gone and {twin[0]!r}, of "
                f"the same type ({kind}), is new in its place: that reads as a rename, which the state has "
                f"no mapping for (its rows would lose the values of {name!r}). Keep the old name (e.g. "
                f"select {twin[0]!r} as {name!r}), or, to drop one column and add another, restart once "
                f"without {name!r} first and then with {twin[0]!r}")
    named = tuple((name, f"{kind}, default {defaults[name]}" if name in defaults else kind) for name, kind in added)
    return ColumnChanges(place.input, named, tuple(dropped), tuple(widened))


def widens(old: str | pa.DataType, new: str | pa.DataType) -> bool:
    """Whether a column of type ``old`` (a type, or as pyarrow writes it in a definition) may
    become ``new`` with every old value kept exactly (see module)."""
    if old == new:
        return True
    try:
        a, b = (arrow_type(t) if isinstance(t, str) else t for t in (old, new))
    except JoinDefinitionError:   # a type no definition of a column here names
        return False
    if pa.types.is_integer(a) and pa.types.is_integer(b):   # unsigned into any wider integer, signed into signed
        return b.bit_width > a.bit_width and (pa.types.is_signed_integer(b) or not pa.types.is_signed_integer(a))
    if pa.types.is_floating(a) and pa.types.is_floating(b):
        return b.bit_width > a.bit_width
    if pa.types.is_decimal(a) and pa.types.is_decimal(b):   # no integer digit or fraction digit lost
        return b.bit_width >= a.bit_width and b.scale >= a.scale and b.precision - b.scale >= a.precision - a.scale
    return pa.types.is_date32(a) and pa.types.is_timestamp(b) and b.tz is None


def as_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` (rows stored under an earlier schema of an input, or under ``schema`` itself) as
    columns of ``schema``: a column it lacks as its default (:func:`streamjoin.runtime.defaults.fill`)
    or nulls, one ``schema`` lacks left out, a narrower type widened (:func:`widens`); a column of a
    type that does not widen to the new one (a column dropped, then added again with another type)
    as a new column. ``table`` itself when
    it already has ``schema``'s columns (their names and types, in order: what every read of
    current state finds, at the cost of a compare)."""
    if table.schema.names == schema.names and all(a.type == b.type for a, b in zip(table.schema, schema)):
        return table
    columns = []
    for target in schema:
        at = table.schema.get_field_index(target.name)
        if at < 0:
            columns.append(fill(target, table.num_rows))   # its default (EXISTS_DEFAULT), or nulls
            continue
        column = table.column(at)
        if column.type != target.type:
            column = column.cast(target.type) if widens(column.type, target.type) else fill(target, table.num_rows)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)

