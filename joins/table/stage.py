"""Stage 2 of the table-table join: routed changes of both sides, by join key, to view changes.

Inputs ``left`` and ``right``: the routed changes of each side's :class:`streamjoin.table.rekey.TableRekey`
(:mod:`streamjoin.table.spec`), routed by their **join-key** columns (``TableSide.on``), so every row of
one join key, on both sides, is held by one partition. A (join key, primary key) of a side appears
at most once per version in them.

**State**: per side, the current row of every (join key, primary key), declared as the areas of
:data:`LAYOUT` (:mod:`streamjoin.runtime.areas`)::

    b"L" | b"R"  |  pack(join key)  |  pack(primary key)   ->   pack(row)
    b"\\x00meta"                                           ->   pack(left rows held, right rows held)

(``pack(join key) | pack(primary key)`` is ``pack(*join key, *primary key)``), so a scan of the key
prefix ``side | pack(join key)`` lists a join key's rows. A side's rows with a null in the
join key are kept only when ``how`` preserves that side (they can only appear null-padded).

**View changes**: for each join key touched in a version, the view rows it can affect, before and
after: pairs with a changed row on either side, and null-padded rows of a changed row or of a side
whose padding flips because the other side's group went empty <-> non-empty. Only the groups
those rows need are read (a side's whole group only when the other side changed in it), so the
cost follows the affected view rows, not the state. **Reads**: one ``multi_get`` per version for
every row read by key (the changed primary keys' rows, and, for a side whose primary key is its
join key, the one row it can hold at each touched join key, so a foreign-key join's key side is
never scanned); one batched seek per side and version (``Store.scan_prefixes``) for every
group a side reads whole. Keys and rows
are encoded column-wise (:func:`streamjoin.table.rows.pack_columns`, the bytes of ``pack``); output
rows of this version's input are taken from it, rows read from state decoded column-wise. Per view key (left primary key, right primary
key; a padded side's is null) the diff is minimal: a row that changed -> ``update_preimage``
(``_seq`` 0) and ``update_postimage`` (``_seq`` 1); a row gone -> ``delete`` (0); a new row ->
``insert`` (1). A view row whose two sides both move to another join key in one version is deleted
at the old key's partition and inserted at the new one's; applying every retraction of a version
(``_seq`` 0) before its insertions keeps the view exact. Output rows are sorted by view key bytes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pyarrow as pa

from streamjoin.changes import DELETE, OP
from streamjoin.errors import JoinError
from streamjoin.kit import normal_keys
from streamjoin.runtime.areas import PACKED, PACKED_VALUE, Area, StateLayout
from streamjoin.runtime.operator import REASON_COLUMN, InputSpec, SpecOperator, StepInput, StepResult, conform
from streamjoin.statestore.base import KeyValue, Store
from streamjoin.statestore.codecs import pack, unpack
from streamjoin.table.rows import RowCodec
from streamjoin.table.spec import How, TableJoinSpec, TableSide, build_join

if TYPE_CHECKING:
    from streamjoin.runtime.regroup import Ownership

__all__ = ["TableJoinStage", "LAYOUT"]

#: Stage 2's state (see module); its version is the definition's ``layout``.
LAYOUT = StateLayout("table join stage", 1, (
    Area("held", b"\x00meta", (), PACKED_VALUE),
    Area("left", b"L", (("join key, primary key", PACKED),), PACKED_VALUE),
    Area("right", b"R", (("join key, primary key", PACKED),), PACKED_VALUE),
))
_HELD = LAYOUT["held"]
_SIDE = {"left": LAYOUT["left"], "right": LAYOUT["right"]}
_INSERT, _DELETE = ("insert", 1), ("delete", 0)
_PRE, _POST = ("update_preimage", 0), ("update_postimage", 1)


class TableJoinStage(SpecOperator):
    """Stage 2 (see module): routed changes of two sides -> the view's change stream."""

    kind = "table_join"

    def __init__(self, left: TableSide, right: TableSide, how: str | How = "inner") -> None:
        """``left``/``right``: the sides of the stage-1 operators (``TableRekey(...).side``)."""
        self.spec: TableJoinSpec = build_join(left, right, how)
        self.codecs = {s.name: RowCodec(s.row_schema) for s in (left, right)}
        # a side whose join key is its primary key holds at most one row per join key, under a
        # store key the join key determines: its reads are point reads (None: a group needs a scan)
        self.direct = {s.name: _direct(s) for s in (left, right)}
        self._inputs = (InputSpec("left", left.routed, left.on, None), InputSpec("right", right.routed, right.on, None))

    def __repr__(self) -> str:
        return f"TableJoinStage(left={self.spec.left!r}, right={self.spec.right!r}, how={self.spec.how.value!r})"

    def regroup(self, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
        """Split state by key group after a change of partition count (:mod:`streamjoin.table.regroup`)."""
        from streamjoin.table.regroup import regroup_stage

        return regroup_stage(LAYOUT, len(self._inputs[0].key), sources, owned)

    def step(self, state: Store, batch: StepInput) -> StepResult:
        """Apply one version's routed changes and output the view changes they cause."""
        if len(batch.rows) != 2:
            raise ValueError("a table join stage takes exactly two inputs (left, right)")
        return _Step(self, state, batch).run()


def _direct(side: TableSide) -> list[int] | None:
    """Where a side's primary-key values are in its join key (None: the key is not the join key)."""
    if sorted(side.key) != sorted(side.on):
        return None
    return [side.on.index(k) for k in side.key]


@dataclass(slots=True)
class _Change:
    """One routed change of a side: its primary key bytes, its row (None: delete) and its state key."""

    pk: bytes
    row: bytes | None
    key: bytes


class _Step:
    """One version of one partition: groups changes by join key, diffs each group's view rows."""

    def __init__(self, op: TableJoinStage, state: Store, batch: StepInput) -> None:
        self.spec, self.codecs, self.state, self.version = op.spec, op.codecs, state, batch.version
        self.metrics: Counter[str] = Counter()
        self.puts: list[KeyValue] = []
        self.deletes: list[bytes] = []
        self.out: list[tuple[bytes, bytes, int, str, bytes | None, bytes | None]] = []
        self.held = dict(zip(("left", "right"), _HELD.get(state) or (0, 0)))
        self.groups: dict[bytes, dict[str, dict[bytes, _Change]]] = {}
        self.keyed: dict[bytes, bool] = {}
        self.direct = op.direct
        self.keep = {name: self.spec.how.preserves(name) for name in ("left", "right")}
        self.same_order = {name: at is not None and at == list(range(len(at))) for name, at in self.direct.items()}
        # this version's rows (row columns), and the first index of each upserted row's bytes
        self.tables: dict[str, pa.Table] = {}
        self.fresh: dict[str, dict[bytes, int]] = {"left": {}, "right": {}}
        for name, table in zip(("left", "right"), batch.rows):
            self._read(self.spec.side(name), table)
        self.held_rows = self._prefetch()
        self.whole = self._read_groups()

    def _read(self, side: TableSide, table: pa.Table) -> None:
        """File ``side``'s routed changes by join key bytes."""
        table = normal_keys(conform(table, side.routed, side.name), [*side.on, *side.key])
        codec = self.codecs[side.name]
        self.tables[side.name] = table.select(side.row_schema.names)
        # keys and rows encoded column-wise: the bytes of pack(*values), per row
        rows = codec.encode_columns(table)
        jks, pks = codec.encode_columns(table, side.on), codec.encode_columns(table, side.key)
        deletes = (table.column(OP).to_numpy() == DELETE).tolist()
        nulls = reduce(np.logical_or, [table.column(c).is_null().to_numpy(zero_copy_only=False) for c in side.on],
                       np.zeros(table.num_rows, bool)).tolist()
        keys = _SIDE[side.name].keys(map(bytes.__add__, jks, pks))
        fresh, groups, keyed = self.fresh[side.name], self.groups, self.keyed
        for i, (jk, pk, row, delete, null, key) in enumerate(zip(jks, pks, rows, deletes, nulls, keys)):
            group = groups.get(jk)
            if group is None:
                group = groups[jk] = {"left": {}, "right": {}}
                keyed[jk] = not null
            group = group[side.name]
            if pk in group:
                raise JoinError(
                    f"the {side.name} input of a table join stage has two changes of primary key {unpack(pk)} at "
                    f"join key {unpack(jk)} in version {self.version}; its rows must come from a TableRekey stage")
            if delete:
                group[pk] = _Change(pk, None, key)
            else:
                group[pk] = _Change(pk, row, key)
                fresh.setdefault(row, i)

    def _prefetch(self) -> dict[bytes, bytes]:
        """Every held row this version reads by key, in one ``multi_get``: the rows of changed
        primary keys, and a direct side's (:func:`_direct`) one row per touched join key."""
        keys: list[bytes] = []
        for jk, group in self.groups.items():
            for name, other in (("left", "right"), ("right", "left")):
                if self.keyed[jk]:
                    if self.direct[name] is not None:
                        keys.append(self._key(name, jk, self._direct_pk(name, jk)))
                    elif not group[other]:
                        keys.extend(c.key for c in group[name].values())
                elif group[name] and self.keep[name]:
                    keys.extend(c.key for c in group[name].values())
        keys = sorted(set(keys))
        return {k: v for k, v in zip(keys, self.state.multi_get(keys)) if v is not None}

    def _read_groups(self) -> dict[str, dict[bytes, dict[bytes, bytes]]]:
        """The whole groups this version reads, per side and join key, by primary key bytes: a
        side's rows at every keyed join key where the other side changed (not a direct side's,
        whose one row is prefetched). One batched seek per side reads them all."""
        whole: dict[str, dict[bytes, dict[bytes, bytes]]] = {}
        for name, other in (("left", "right"), ("right", "left")):
            if self.direct[name] is not None:
                continue
            jks = sorted(jk for jk, group in self.groups.items() if group[other] and self.keyed[jk])
            area = _SIDE[name]
            whole[name] = dict(zip(jks, area.scan_under_many(self.state, area.keys(jks))))
        return whole

    def _direct_pk(self, side: str, jk: bytes) -> bytes:
        """The primary key bytes of the one row a direct side can hold at join key ``jk``."""
        at = self.direct[side]
        if self.same_order[side]:
            return jk
        values = unpack(jk)
        return pack(*(values[i] for i in at))

    def run(self) -> StepResult:
        for jk in sorted(self.groups):
            if self.keyed[jk]:
                self._group(jk, self.groups[jk])
            else:
                for name in ("left", "right"):
                    self._unkeyed(name, jk, self.groups[jk][name])
        self.puts.append(_HELD.put((self.held["left"], self.held["right"])))
        self.puts.sort()
        self.deletes.sort()
        self.metrics.update(view_changes=len(self.out), rows_held_left=self.held["left"],
                            rows_held_right=self.held["right"])
        return StepResult(self._output(), (self._aside("left"), self._aside("right")), self.puts, self.deletes,
                          metrics=dict(self.metrics))

    def _aside(self, name: str) -> pa.Table:
        schema = self.spec.side(name).routed
        return schema.append(pa.field(REASON_COLUMN, pa.string())).empty_table()

    # -- state -------------------------------------------------------------------------------------

    def _key(self, side: str, jk: bytes, pk: bytes) -> bytes:
        return _SIDE[side].join(jk, pk)

    def _scan(self, side: str, jk: bytes) -> dict[bytes, bytes]:
        """Every row of ``side`` held at join key ``jk``, by primary key bytes."""
        if self.direct[side] is not None:
            pk = self._direct_pk(side, jk)
            row = self.held_rows.get(self._key(side, jk, pk))
            return {} if row is None else {pk: row}
        return self.whole[side][jk]  # read only: _apply copies it

    def _changed_before(self, side: str, jk: bytes, changes: dict[bytes, _Change]) -> dict[bytes, bytes]:
        """The rows ``changes`` replace or delete, by primary key bytes (absent: none held)."""
        held = self.held_rows
        return {pk: held[c.key] for pk, c in changes.items() if c.key in held}

    def _nonempty(self, side: str, jk: bytes, changes: dict[bytes, _Change]) -> tuple[bool, bool]:
        """Whether ``side`` held rows at ``jk`` before and after ``changes``, reading at most
        ``len(changes) + 1`` entries (up to the first row the changes leave alone)."""
        if self.direct[side] is not None:
            pk = self._direct_pk(side, jk)
            before = self._key(side, jk, pk) in self.held_rows
            return before, (before and pk not in changes) or any(c.row is not None for c in changes.values())
        before = after = False
        for pk, _ in _SIDE[side].scan_under(self.state, _SIDE[side].join(jk)):
            before = True
            if pk not in changes:
                after = True
                break
        return before, after or any(c.row is not None for c in changes.values())

    def _apply(self, side: str, jk: bytes, changes: dict[bytes, _Change], before: dict[bytes, bytes]) -> dict[bytes, bytes]:
        """Write ``changes`` (``before``: their rows held) and return the rows after them."""
        after = dict(before)
        for pk, change in changes.items():
            key = change.key
            if change.row is None:
                if pk in before:
                    self.deletes.append(key)
                    self.held[side] -= 1
                    del after[pk]
                else:
                    self.metrics["inconsistent_deletes"] += 1
            else:
                self.puts.append((key, change.row))
                self.held[side] += pk not in before
                after[pk] = change.row
        return after

    # -- view rows ---------------------------------------------------------------------------------

    def _group(self, jk: bytes, group: dict[str, dict[bytes, _Change]]) -> None:
        """Diff the view rows of one (non-null) join key that this version's changes can affect."""
        cl, cr = group["left"], group["right"]
        # a side's whole group is read only when the other side changed in it (pairs, padding flips)
        left = self._scan("left", jk) if cr else self._changed_before("left", jk, cl)
        right = self._scan("right", jk) if cl else self._changed_before("right", jk, cr)
        left_after = self._apply("left", jk, cl, left)
        right_after = self._apply("right", jk, cr, right)
        # whether each side's group is non-empty (before, after): right padding depends on the left
        # group, left padding on the right one; (True, True) where nothing reads it
        ne_left = ((bool(left), bool(left_after)) if cr else
                   self._nonempty("left", jk, cl) if self.keep["right"] else (True, True))
        ne_right = ((bool(right), bool(right_after)) if cl else
                    self._nonempty("right", jk, cr) if self.keep["left"] else (True, True))
        flips = (ne_left[0] != ne_left[1], ne_right[0] != ne_right[1])
        old = self._view(cl, cr, left, right, ne_left[0], ne_right[0], flips)
        new = self._view(cl, cr, left_after, right_after, ne_left[1], ne_right[1], flips)
        self._diff(old, new)

    def _view(self, cl: dict, cr: dict, left: dict[bytes, bytes], right: dict[bytes, bytes], left_ne: bool,
              right_ne: bool, flips: tuple[bool, bool]) -> dict[tuple[bytes, bytes], tuple[bytes | None, bytes | None]]:
        """The view rows of one join key whose left key changed (in ``cl``) or right key changed, and
        the padded rows of a side whose padding flips. ``left``/``right`` are the rows held (whole
        groups where the other side changed, else just the changed keys'). Keys: (left pk, right pk),
        ``b""`` for a padded side."""
        out = {}
        if cl and right_ne:
            for lpk in cl:
                if lpk in left:
                    for rpk, rrow in right.items():
                        out[(lpk, rpk)] = (left[lpk], rrow)
        if cr and left_ne:
            for rpk in cr:
                if rpk in right:
                    for lpk, lrow in left.items():
                        out[(lpk, rpk)] = (lrow, right[rpk])
        if self.keep["left"] and not right_ne:
            for lpk in (left if flips[1] else cl):
                if lpk in left:
                    out[(lpk, b"")] = (left[lpk], None)
        if self.keep["right"] and not left_ne:
            for rpk in (right if flips[0] else cr):
                if rpk in right:
                    out[(b"", rpk)] = (None, right[rpk])
        return out

    def _unkeyed(self, side: str, jk: bytes, changes: dict[bytes, _Change]) -> None:
        """Rows with a null in the join key: only null-padded, and only kept when ``side`` is preserved."""
        if not changes or not self.keep[side]:
            return
        before = self._changed_before(side, jk, changes)
        after = self._apply(side, jk, changes, before)

        def padded(rows: dict[bytes, bytes]) -> dict:
            return {((pk, b"") if side == "left" else (b"", pk)): ((row, None) if side == "left" else (None, row))
                    for pk, row in rows.items()}
        self._diff(padded(before), padded(after))

    def _diff(self, old: dict, new: dict) -> None:
        """The minimal changes turning view rows ``old`` into ``new`` (same key set predicate)."""
        for key in old.keys() | new.keys():
            was, now = old.get(key), new.get(key)
            if was == now:
                continue
            if was is not None and now is not None:
                self._emit(key, _PRE, was)
                self._emit(key, _POST, now)
            elif was is not None:
                self._emit(key, _DELETE, was)
            else:
                self._emit(key, _INSERT, now)

    def _emit(self, key: tuple[bytes, bytes], kind: tuple[str, int], rows: tuple[bytes | None, bytes | None]) -> None:
        self.out.append((key[0], key[1], kind[1], kind[0], rows[0], rows[1]))

    def _output(self) -> pa.Table:
        """The view changes sorted by view key then ``_seq``; each distinct row decoded once."""
        self.out.sort(key=lambda o: o[:3])
        spec, n = self.spec, len(self.out)
        arrays = [*self._side_columns("left", [o[4] for o in self.out]),
                  *self._side_columns("right", [o[5] for o in self.out]),
                  pa.array([o[3] for o in self.out], pa.string()), pa.array([self.version] * n, pa.int64()),
                  pa.array([o[2] for o in self.out], pa.int64())]
        return pa.Table.from_arrays(arrays, schema=spec.output_schema)

    def _side_columns(self, side: str, rows: list[bytes | None]) -> list[pa.Array]:
        """One side's output columns for ``rows`` (encoded; None: null-padded)."""
        distinct: dict[bytes, int] = {}
        index = [None if r is None else distinct.setdefault(r, len(distinct)) for r in rows]
        # a row of this version's input is taken from it; only rows read from state are decoded
        fresh = self.fresh[side]
        taken = [fresh[r] for r in distinct if r in fresh]
        decoded = [r for r in distinct if r not in fresh]
        if taken and decoded:
            # distinct rows are numbered taken first, then decoded (in ``distinct`` order)
            at, t, d = {}, 0, len(taken)
            for r in distinct:
                if r in fresh:
                    at[r], t = t, t + 1
                else:
                    at[r], d = d, d + 1
            index = [None if r is None else at[r] for r in rows]
        schema = self.codecs[side].schema
        parts = []
        if taken:
            rows_in = self.tables[side].take(pa.array(taken, pa.int64()))
            parts.append(pa.Table.from_arrays(rows_in.columns, schema=schema))
        if decoded or not taken:
            parts.append(self.codecs[side].decode_table(decoded))
        table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        take = pa.array(index, pa.int64())
        return [column.take(take) for column in table.columns]
