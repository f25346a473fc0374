"""One version of one partition of the table join stage, column-wise (:mod:`streamjoin.table.stage`
states what it computes; this module how).

Every change of both sides gets a **group** (its join key, numbered by
:func:`streamjoin.statestore.keysort.group_ids`). Per side, the rows read from state form the
*before* rows, kept as columns (group numbers and row sources in numpy, primary keys as Arrow
binary arrays): a side's whole group where the other side changed in it (one batched seek per side,
its entries flattened in C), else only the changed keys' rows; a direct side's (primary key = join
key) one row per group is read by key. A change its key stage marks
:data:`~streamjoin.table.spec.FRESH` (its key held no row at this join key: an insert, or a row
moved here) is not read: it has no before row. Everything read by key, on both sides, is one
``multi_get_column`` (RocksDB reads it in key order). The state keys read tell which before rows a
change replaces, and so which changes find a row (lookups of sorted key codes, no tuple per row).
The *after* rows are the before rows the changes leave alone plus the upserts (Arrow ``take`` and
concatenation of their keys; a row's bytes stay where they are). The view rows of each state are
then built for all groups at once: pairs are a cross product within each group (numpy ``repeat``
over group offsets) of a changed row with every row of the other side, plus an unchanged row with
the other side's changed rows; padded rows where the other side's group is empty. A view row is
identified by its group and its **view key**, one binary value per (left primary key, right primary
key) whose byte order is the pair's (:func:`_view_key`). The diff of the two states is a match of
those identities (:func:`streamjoin.statestore.keysort.index_in`) and a comparison of the row bytes
of the matched ones whose sides' rows came from different sources; the changes are sorted by view
key, then ``_seq`` (:func:`streamjoin.statestore.keysort.sort_order`). Every row carries its
*source* (:func:`_source`): an upserted row is a row of the version's input table, and its output
columns are taken from it as they came; a row read from state is decoded column-wise, each once.
Python touches each row only in C-level passes (``map``, ``compress``, comprehensions over the read
entries).

**Change time** of a view change: the latest time of this version's changes to the view row's own
sides (a row a change replaced or removed, or an upserted one); for a null-padded row that
appears or goes because the other side's group filled or emptied, the latest change time of the
group. Times ride with the rows as int64 µs (:data:`_NO_TIME`: no change of this version).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changes import DELETE, OP, TIME
from streamjoin.errors import JoinError
from streamjoin.kit import normal_keys
from streamjoin.runtime.areas import Area
from streamjoin.runtime.operator import REASON_COLUMN, StepInput, StepResult, conform
from streamjoin.statestore.base import Store
from streamjoin.statestore.binary_concat import concat_binary, matrix_rows
from streamjoin.statestore.codecs import pack, unpack
from streamjoin.statestore.columns import ColumnWrite, binary_suffixes
from streamjoin.statestore.keysort import group_ids, index_in, sort_order
from streamjoin.table.held import held_rows
from streamjoin.table.spec import FRESH, TableSide
from streamjoin.table.state import HELD, SIDE

if TYPE_CHECKING:
    from streamjoin.table.stage import TableJoinStage

__all__ = ["JoinStep"]

_INSERT, _DELETE = ("insert", 1), ("delete", 0)
_PRE, _POST = ("update_preimage", 0), ("update_postimage", 1)
_SIDES = ("left", "right")
#: The change time of a row no change of this version touched (and of a timeless bootstrap row).
_NO_TIME = np.iinfo(np.int64).min


@dataclass
class _Changes:
    """One side's routed changes of the version (those the stage keeps), one entry per change,
    as columns."""

    pk: pa.Array                # binary: pack(primary key)
    row: pa.Array               # binary: pack(row); null: a delete
    key: pa.Array               # binary: the state key (side | join key | primary key)
    gid: np.ndarray             # the change's group
    delete: np.ndarray          # bool
    time: np.ndarray            # the change's time (int64 µs; _NO_TIME: none)
    order: np.ndarray           # the changes in the order of their state keys
    src: np.ndarray             # the change's row in the version's input table (:data:`_PADDED_ROW` none)
    fresh: np.ndarray           # bool: an upsert of a key that held no row here (:data:`~streamjoin.table.spec.FRESH`)


@dataclass
class _Rows:
    """One side's rows of one state (before or after the version), in the groups it touches."""

    gid: np.ndarray
    pk: pa.Array                # binary
    changed: np.ndarray         # bool: the row's primary key changed in this version
    time: np.ndarray            # the time of that change (int64 µs; _NO_TIME: unchanged)
    src: np.ndarray             # where the row's columns are (:func:`_source`)


@dataclass
class _View:
    """View rows (of one state) as columns: group, view key (:func:`_view_key`), the time of this
    version's change to the row's sides, and where each side's row is (:func:`_source`; its
    bytes are found from there only where two states' rows are compared)."""

    gid: np.ndarray
    key: pa.Array
    time: np.ndarray
    left_src: np.ndarray
    right_src: np.ndarray

    def matching(self) -> pa.Array:
        """Per row, its group and view key in one binary value (what identifies a view row)."""
        return concat_binary(_be64(self.gid), self.key)


_PRESENT, _PADDED = pa.scalar(b"\x01", pa.binary()), pa.scalar(b"\x00", pa.binary())
_TYPES = pa.array([_INSERT[0], _DELETE[0], _PRE[0], _POST[0]], pa.string())


def _be64(values: np.ndarray) -> pa.Array:
    """Non-negative integers as 8-byte big-endian binaries (their byte order is their order)."""
    return matrix_rows(values.astype(">i8").view(np.uint8).reshape(len(values), 8))


def _view_key(left_pk: pa.Array, right_pk: pa.Array) -> pa.Array:
    """The view key (left primary key, right primary key; null: a padded side) as one binary
    whose byte order is the pair's order (a padded side first): each side ``\\x01 + pk`` or
    ``\\x00``. Primary-key bytes are ``pack`` of a fixed number of values, so neither side's bytes
    are a prefix of another's and the concatenation is unambiguous."""
    tagged = [pc.fill_null(concat_binary(_PRESENT, pk), _PADDED) for pk in (left_pk, right_pk)]
    return concat_binary(*tagged)


_NO_BYTES = pa.array([], pa.binary())
#: The source of a padded side's (absent) row.
_PADDED_ROW = np.iinfo(np.int64).min


def _source(stored: np.ndarray) -> np.ndarray:
    """The sources of rows read from state at positions ``stored`` of the version's stored rows.
    A row's *source* says where its output columns are: ``i >= 0``, row ``i`` of the version's
    input table of its side (taken as it came); ``-1 - j``, stored row ``j`` (decoded from its
    bytes); :data:`_PADDED_ROW`, none (a padded side)."""
    return -1 - stored.astype(np.int64)


def _distinct(values: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for integers in ``[0, bound)``, counted in one
    pass instead of sorted: the distinct values ascending, and each value's position among them."""
    present = np.zeros(bound, bool)
    present[values] = True
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present), rank[values]


def _cross(a: np.ndarray, b: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i, j) with ``a[i] == b[j]`` (group numbers), as two index arrays."""
    order = np.argsort(b, kind="stable")
    counts = np.bincount(b, minlength=groups)
    starts = np.cumsum(counts) - counts
    n = counts[a]
    total = int(n.sum())
    left = np.repeat(np.arange(len(a)), n)
    within = np.arange(total) - np.repeat(np.cumsum(n) - n, n)
    return left, order[np.repeat(starts[a], n) + within]


class JoinStep:
    """One version of one partition (see module)."""

    def __init__(self, op: "TableJoinStage", state: Store, batch: StepInput) -> None:
        self.spec, self.codecs, self.state, self.version = op.spec, op.codecs, state, batch.version
        self.direct = op.direct
        #: the sides whose rows a fused key step holds in its keys' values (:mod:`streamjoin.table.fused`)
        self.rows_in = op.rows_in
        #: per such side, this version's upserts: their state keys (in key order) and rows
        self.upserted: dict[str, tuple[pa.Array, pa.Array]] = {}
        self.keep = {name: self.spec.how.preserves(name) for name in _SIDES}
        self.same_order = {name: at is not None and at == list(range(len(at))) for name, at in self.direct.items()}
        self.metrics: Counter[str] = Counter()
        self.held = dict(zip(_SIDES, HELD.get(state) or (0, 0)))
        self.tables: dict[str, pa.Table] = {}
        self.stored: dict[str, pa.Array] = {}
        self.input_rows: dict[str, pa.Array] = {}
        self.held_keys: dict[str, set[bytes]] = {}
        encoded = [self._encode(self.spec.side(name), table) for name, table in zip(_SIDES, batch.rows)]
        self._group(encoded)

    # -- reading the changes -----------------------------------------------------------------------

    def _encode(self, side: TableSide, table: pa.Table
                ) -> tuple[pa.Array, pa.Array, pa.Array, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``side``'s changes as columns: join key bytes, primary key bytes, row bytes, whether
        each is a delete, whether its join key is null, its change time, and whether it is
        :data:`~streamjoin.table.spec.FRESH`. Keys in the form they compare in
        (:func:`streamjoin.kit.normal_keys`), rows with the values they came with (a ``-0.0`` or
        a NaN's payload is output as it came)."""
        table = conform(table, side.routed, side.name)
        keyed = normal_keys(table, [*side.on, *side.key])   # keys as Spark compares them; rows keep their own values
        codec = self.codecs[side.name]
        self.tables[side.name] = table.select(side.row_schema.names)
        ops = table.column(OP).to_numpy()
        delete, fresh = ops == DELETE, ops == FRESH
        rows = self._upserted_rows(side, table, delete)
        self.input_rows[side.name] = rows
        jks = codec.encode_array(keyed, side.on)
        pks = jks if list(side.key) == list(side.on) else codec.encode_array(keyed, side.key)   # (the same bytes)
        null = reduce(np.logical_or, [table.column(c).is_null().to_numpy(zero_copy_only=False) for c in side.on],
                      np.zeros(table.num_rows, bool))
        times = table.column(TIME).fill_null(_NO_TIME).to_numpy()
        return jks, pks, rows, delete, null, times, fresh

    def _upserted_rows(self, side: TableSide, table: pa.Table, delete: np.ndarray) -> pa.Array:
        """The row bytes of ``table``'s upserts, null at its deletes (whose other columns are
        null: only their keys are used), so the encoding meets whole rows."""
        codec = self.codecs[side.name]
        if not delete.any():
            return codec.encode_array(table)
        kept = np.flatnonzero(~delete)
        encoded = codec.encode_array(table.take(pa.array(kept, pa.int64())))
        at = np.zeros(len(delete), np.int64)
        at[kept] = np.arange(len(kept))
        return encoded.take(pa.array(at, pa.int64(), mask=delete))

    def _group(self, encoded: list) -> None:
        """Number the join keys (groups) and file each side's changes under them."""
        jks = pa.concat_arrays([e[0] for e in encoded])
        gids, firsts = group_ids(jks)
        self.group_jk: pa.Array = jks.take(pa.array(firsts, pa.int64()))
        self.groups = len(self.group_jk)
        self.keyed = np.ones(self.groups, bool)
        self.changes: dict[str, _Changes] = {}
        at = 0
        for name, (side_jks, pks, rows, delete, null, times, fresh) in zip(_SIDES, encoded):
            gid = gids[at:at + len(side_jks)]
            at += len(side_jks)
            src = np.where(delete, _PADDED_ROW, np.arange(len(side_jks), dtype=np.int64))
            self.keyed[gid[null]] = False
            if not self.keep[name] and null.any():   # unkeyed rows of a side only ever padded are not kept
                kept = np.flatnonzero(~null)
                taken = pa.array(kept, pa.int64())
                gid, delete, times, src, fresh = gid[kept], delete[kept], times[kept], src[kept], fresh[kept]
                side_jks, pks, rows = side_jks.take(taken), pks.take(taken), rows.take(taken)
            keys = self._area(name).key_column(*((pks,) if name in self.rows_in else (side_jks, pks)))
            order = sort_order(keys)   # the writes go in key order, and a key twice is next to itself
            ordered = keys.take(pa.array(order))
            if len(keys) > 1 and pc.any(pc.equal(ordered.slice(1), ordered.slice(0, len(keys) - 1))).as_py():
                self._twice(name, side_jks.to_pylist(), pks.to_pylist(), keys.to_pylist())
            self.changes[name] = _Changes(pks, rows, keys, gid, delete, times, order, src, fresh)
        self.changed = {name: np.bincount(c.gid, minlength=self.groups) > 0 for name, c in self.changes.items()}

    def _twice(self, name: str, jks: list[bytes], pks: list[bytes], keys: list[bytes]) -> None:
        key = next(k for k, n in Counter(keys).items() if n > 1)
        i = keys.index(key)
        raise JoinError(
            f"the {name} input of a table join stage has two changes of primary key {unpack(pks[i])} at "
            f"join key {unpack(jks[i])} in version {self.version}; its rows must come from a TableRekey stage")

    # -- reading the state -------------------------------------------------------------------------

    def _area(self, name: str) -> Area:
        """Where side ``name``'s rows are: its area of the stage, or the keys area of the fused key
        step that holds them (keyed by primary key, which is the join key)."""
        return self.rows_in.get(name) or SIDE[name]

    def _direct_pks(self, side: str, jks: pa.Array) -> pa.Array:
        """The primary key bytes of the one row a direct side can hold at each of join keys ``jks``."""
        at = self.direct[side]
        if self.same_order[side] or at is None:   # (None: not a direct side; never asked)
            return jks
        return pa.array([pack(*(values[i] for i in at)) for values in map(unpack, jks.to_pylist())], pa.binary())

    def _read_state(self) -> dict[str, _Rows]:
        """Each side's before rows (see module): one ``multi_get_column`` for both sides' rows
        read by key, and one batched seek per side for the groups it reads whole."""
        points: dict[str, tuple[np.ndarray, pa.Array, pa.Array]] = {}
        scanned: dict[str, tuple[np.ndarray, pa.Array, pa.Array, pa.Array]] = {}
        for name, other in (("left", "right"), ("right", "left")):
            c, area = self.changes[name], self._area(name)
            if self.direct[name] is not None:   # (a group's one row is not read where it is fresh)
                fresh = np.zeros(self.groups, bool)
                fresh[c.gid[c.fresh]] = True
                direct = np.flatnonzero(self.keyed & ~fresh)
                jks = self.group_jk.take(pa.array(direct, pa.int64()))
                pks = self._direct_pks(name, jks)
                keys = area.key_column(pks) if name in self.rows_in else area.key_column(jks, pks)
                single = np.flatnonzero(~self.keyed[c.gid] & ~c.fresh)
            else:
                direct, pks, keys = np.zeros(0, np.int64), _NO_BYTES, _NO_BYTES
                whole = np.flatnonzero(self.keyed & self.changed[other])
                single = np.flatnonzero(~(self.keyed & self.changed[other])[c.gid] & ~c.fresh)
                scanned[name] = self._scan(name, whole)
            at = pa.array(single, pa.int64())
            points[name] = (np.concatenate([direct, c.gid[single]]), pa.concat_arrays([pks, c.pk.take(at)]),
                            pa.concat_arrays([keys, c.key.take(at)]))
        found = self.state.multi_get_column(pa.concat_arrays([points["left"][2], points["right"][2]]))
        before, at = {}, 0
        for name in _SIDES:
            gid, pks, keys = points[name]
            values = found.slice(at, len(keys))
            at += len(keys)
            if name in self.rows_in:   # a key step's values: its head, then the row where it holds one
                values = held_rows(values)
            hit_mask = values.is_valid()
            hit = hit_mask.to_numpy(zero_copy_only=False)
            parts = [(gid[hit], pks.filter(hit_mask), values.filter(hit_mask), keys.filter(hit_mask))]
            if name in scanned:
                parts.insert(0, scanned[name])
            gid = np.concatenate([p[0] for p in parts])
            pk, rows, keys = (pa.concat_arrays([p[i] for p in parts]) for i in (1, 2, 3))
            rows = self.codecs[name].upgrade(rows)   # a row stored under earlier columns, in the current ones
            c = self.changes[name]
            at_change = index_in(keys, c.key)
            changed = at_change >= 0
            times = np.full(len(keys), _NO_TIME, np.int64)
            times[changed] = c.time[at_change[changed]]
            self.held_keys[name] = keys.filter(pa.array(changed))
            self.stored[name] = rows
            before[name] = _Rows(gid, pk, changed, times, _source(np.arange(len(rows))))
        return before

    def _scan(self, name: str, groups: np.ndarray) -> tuple[np.ndarray, pa.Array, pa.Array, pa.Array]:
        """The rows of side ``name`` in ``groups`` (read whole, one batched seek): group, primary
        key, row and state key of each."""
        area = SIDE[name]
        jks = self.group_jk.take(pa.array(groups, pa.int64()))
        found = self.state.scan_prefixes_columns(area.key_column(jks))
        cuts = np.repeat(len(area.prefix) + pc.binary_length(jks).to_numpy(zero_copy_only=False).astype(np.int64),
                         found.counts)
        return np.repeat(groups, found.counts), binary_suffixes(found.keys, cuts), found.values, found.keys

    def _apply(self, name: str, before: _Rows) -> tuple[_Rows, ColumnWrite]:
        """The after rows of ``name`` and the writes of its changes; held counts and metrics."""
        c = self.changes[name]
        existed = index_in(c.key, self.held_keys[name]) >= 0
        delete = c.delete
        deletes = c.key.take(pa.array(c.order[(delete & existed)[c.order]], pa.int64()))
        upserts = c.order[~delete[c.order]]   # in key order: the write needs no sort
        taken = pa.array(upserts, pa.int64())
        if name in self.rows_in:   # the fused key step writes them, after its heads
            self.upserted[name] = (c.key.take(taken), c.row.take(taken))
            write = ColumnWrite(_NO_BYTES, _NO_BYTES, _NO_BYTES)
        else:
            write = ColumnWrite(c.key.take(taken), c.row.take(taken), deletes)   # upserts carry rows
        self.held[name] += int((~delete & ~existed).sum()) - len(deletes)
        self.metrics["inconsistent_deletes"] += int((delete & ~existed).sum())
        kept = pa.array(np.flatnonzero(~before.changed), pa.int64())
        after = _Rows(np.concatenate([before.gid[~before.changed], c.gid[upserts]]),
                      pa.concat_arrays([before.pk.take(kept), c.pk.take(taken)]),
                      np.concatenate([np.zeros(len(kept), bool), np.ones(len(upserts), bool)]),
                      np.concatenate([before.time[~before.changed], c.time[upserts]]),
                      np.concatenate([before.src[~before.changed], c.src[upserts]]))
        return after, write

    def _nonempty(self, side: str, g: int, changes: dict[bytes, bytes | None]) -> tuple[bool, bool]:
        """Whether a (not direct) side held rows at group ``g`` before and after ``changes``,
        reading at most ``len(changes) + 1`` entries (up to the first row the changes leave alone)."""
        before = after = False
        for pk, _ in SIDE[side].scan_under(self.state, SIDE[side].join(self.group_jk[g].as_py())):
            before = True
            if pk not in changes:
                after = True
                break
        return before, after or any(row is not None for row in changes.values())

    def _emptiness(self, name: str, other: str, before: _Rows, after: _Rows) -> np.ndarray:
        """Per group, whether ``name``'s whole group is non-empty before ([0]) and after ([1]):
        counted where it was read whole, scanned where only the other side's padding needs it,
        else True (nothing reads it). Groups with a null join key: False (they match nothing)."""
        ne = np.ones((2, self.groups), bool)
        whole = self.keyed & (self.changed[other] | (self.direct[name] is not None))
        ne[0, whole] = (np.bincount(before.gid, minlength=self.groups) > 0)[whole]
        ne[1, whole] = (np.bincount(after.gid, minlength=self.groups) > 0)[whole]
        if self.keep[other]:
            scan = np.flatnonzero(self.keyed & ~whole)
            if len(scan):
                c = self.changes[name]
                wanted = set(scan.tolist())
                by_group: dict[int, dict[bytes, bytes | None]] = {}
                for g, pk, row in zip(c.gid.tolist(), c.pk.to_pylist(), c.row.to_pylist()):
                    if g in wanted:
                        by_group.setdefault(g, {})[pk] = row
                for g in scan.tolist():
                    ne[:, g] = self._nonempty(name, g, by_group[g])
        ne[:, ~self.keyed] = False
        return ne

    # -- the view rows -----------------------------------------------------------------------------

    def _view(self, left: _Rows, right: _Rows, ne: dict[str, np.ndarray], flips: dict[str, np.ndarray],
              state: int) -> _View:
        """The view rows of one state that this version can affect, as columns (:class:`_View`)."""
        keyed = self.keyed
        lk = np.flatnonzero(keyed[left.gid])
        pairs = []
        for a_sel, b_sel in ((left.changed, None), (~left.changed, right.changed)):
            a = lk[a_sel[lk]]
            b = np.flatnonzero(keyed[right.gid] if b_sel is None else keyed[right.gid] & b_sel)
            ia, ib = _cross(left.gid[a], right.gid[b], self.groups)
            pairs.append((a[ia], b[ib]))
        ia_np, ib_np = (np.concatenate([p[i] for p in pairs]).astype(np.int64, copy=False) for i in (0, 1))
        ia, ib = pa.array(ia_np, pa.int64()), pa.array(ib_np, pa.int64())
        gid, left_pk, right_pk = [left.gid[ia_np]], [left.pk.take(ia)], [right.pk.take(ib)]
        time = [np.maximum(left.time[ia_np], right.time[ib_np])]
        left_src, right_src = [left.src[ia_np]], [right.src[ib_np]]
        for name, rows, other in (("left", left, "right"), ("right", right, "left")):
            if not self.keep[name]:
                continue
            g = rows.gid
            pick = np.flatnonzero(~ne[other][state][g] & (flips[other][g] | rows.changed))
            at, padded = pa.array(pick, pa.int64()), pa.nulls(len(pick), pa.binary())
            gid.append(g[pick])
            time.append(rows.time[pick])
            pk, src = rows.pk.take(at), rows.src[pick]
            none = np.full(len(pick), _PADDED_ROW, np.int64)
            left_pk.append(pk if name == "left" else padded)
            right_pk.append(padded if name == "left" else pk)
            left_src.append(src if name == "left" else none)
            right_src.append(none if name == "left" else src)
        return _View(np.concatenate(gid), _view_key(pa.concat_arrays(left_pk), pa.concat_arrays(right_pk)),
                     np.concatenate(time), np.concatenate(left_src), np.concatenate(right_src))

    def run(self) -> StepResult:
        before = self._read_state()
        after, writes = {}, []
        for name in _SIDES:
            after[name], write = self._apply(name, before[name])
            writes.append(write)
        ne = {"left": self._emptiness("left", "right", before["left"], after["left"]),
              "right": self._emptiness("right", "left", before["right"], after["right"])}
        flips = {name: ne[name][0] != ne[name][1] for name in _SIDES}
        old = self._view(before["left"], before["right"], ne, flips, 0)
        new = self._view(after["left"], after["right"], ne, flips, 1)
        output = self._output(self._diff(old, new))
        held = ColumnWrite.of_lists([HELD.put((self.held["left"], self.held["right"]))])
        self.metrics.update(view_changes=output.num_rows, rows_held_left=self.held["left"],
                            rows_held_right=self.held["right"])
        return StepResult(output, (self._aside("left"), self._aside("right")),
                          writes=ColumnWrite.concat([held, *writes]).sorted(), metrics=dict(self.metrics))

    def _diff(self, old: _View, new: _View) -> dict[str, np.ndarray]:
        """The minimal changes turning view rows ``old`` into ``new``, sorted by view key then
        ``_seq``: a row gone -> delete (0); a row changed -> update_preimage (0) and
        update_postimage (1); a new row -> insert (1). Columns (numpy): seq, type (index into
        ``_TYPES``), group, change time, and left and right row sources (:func:`_source`). A view
        row of both states changed where a side's row bytes differ: rows of one source are the
        same bytes, so only rows of different sources (an upsert against the row it replaced)
        are compared."""
        old_ids, new_ids = old.matching(), new.matching()
        at = index_in(old_ids, new_ids)
        matched = at >= 0
        gone = np.flatnonzero(~matched)
        was = np.flatnonzero(matched)
        now = at[matched]
        same = np.ones(len(was), bool)
        for side in _SIDES:
            a, b = getattr(old, f"{side}_src")[was], getattr(new, f"{side}_src")[now]
            moved = np.flatnonzero(a != b)   # (a view row's sides are padded in both states or in neither)
            if len(moved):   # both states' rows in one lookup, then compared
                rows = self._row_bytes(side, np.concatenate([a[moved], b[moved]]))
                same[moved] &= pc.equal(rows.slice(0, len(moved)), rows.slice(len(moved))).to_numpy(zero_copy_only=False)
        found = np.zeros(len(new_ids), bool)   # (a state's view rows are distinct: ``now`` are the new rows matched)
        found[now] = True
        fresh = np.flatnonzero(~found)
        parts = [(old, gone, 0, 1), (old, was[~same], 0, 2), (new, now[~same], 1, 3), (new, fresh, 1, 0)]
        seqs = np.concatenate([np.full(len(rows), seq, np.int64) for _, rows, seq, _ in parts])
        keys = pa.concat_arrays([view.key.take(pa.array(rows, pa.int64())) for view, rows, _, _ in parts])
        order = sort_order(keys, then=seqs)
        columns = {"seq": seqs,
                   "type": np.concatenate([np.full(len(rows), kind, np.int64) for _, rows, _, kind in parts])}
        for name in ("gid", "time", "left_src", "right_src"):
            columns[name] = np.concatenate([getattr(view, name)[rows] for view, rows, _, _ in parts])
        return {name: column[order] for name, column in columns.items()}

    def _row_bytes(self, side: str, src: np.ndarray) -> pa.Array:
        """The row bytes of ``side`` at sources ``src`` (:func:`_source`; none padded): a row of
        this version's input as encoded, or a stored row as read (and upgraded)."""
        given = np.flatnonzero(src >= 0)
        stored = np.flatnonzero(src < 0)
        parts = pa.concat_arrays([self.input_rows[side].take(pa.array(src[given], pa.int64())).cast(pa.binary()),
                                  self.stored[side].take(pa.array(-1 - src[stored], pa.int64())).cast(pa.binary())])
        at = np.empty(len(src), np.int64)
        at[given] = np.arange(len(given))
        at[stored] = len(given) + np.arange(len(stored))
        return parts.take(pa.array(at, pa.int64()))

    def _aside(self, name: str) -> pa.Table:
        schema = self.spec.side(name).routed
        return schema.append(pa.field(REASON_COLUMN, pa.string())).empty_table()

    # -- output ------------------------------------------------------------------------------------

    def _output(self, out: dict[str, np.ndarray]) -> pa.Table:
        """The view changes (:meth:`_diff`) as output rows; each distinct row decoded once."""
        n = len(out["seq"])
        arrays = [*self._side_columns("left", out["left_src"]), *self._side_columns("right", out["right_src"]),
                  _TYPES.take(pa.array(out["type"])), pa.array(np.full(n, self.version, np.int64), pa.int64()),
                  pa.array(out["seq"]), self._change_times(out)]
        return pa.Table.from_arrays(arrays, schema=self.spec.output_schema)

    def _change_times(self, out: dict[str, np.ndarray]) -> pa.Array:
        """The change time of each view change (see module): its own sides' change time, else its
        group's latest (null: a timeless bootstrap row's)."""
        latest = np.full(self.groups, _NO_TIME, np.int64)
        for c in self.changes.values():
            np.maximum.at(latest, c.gid, c.time)
        time = out["time"]
        time = np.where(time == _NO_TIME, latest[out["gid"]], time)
        return pa.array(time, pa.int64(), mask=time == _NO_TIME).cast(pa.timestamp("us", "UTC"))

    def _side_columns(self, side: str, src: np.ndarray) -> list[pa.Array]:
        """One side's output columns for the rows of sources ``src`` (:func:`_source`): a row of
        this version's input taken as it came, a stored row decoded from its bytes (each once),
        null for a padded side."""
        padded = src == _PADDED_ROW
        stored = (src < 0) & ~padded
        table = self.tables[side]
        parts = [pa.Table.from_arrays(table.columns, schema=self.codecs[side].schema)]
        at = src.copy()
        if stored.any():
            rows, inverse = _distinct(-1 - src[stored], len(self.stored[side]))
            parts.append(self.codecs[side].decode_table(self.stored[side].take(pa.array(rows, pa.int64()))))
            at[stored] = table.num_rows + inverse
        at[padded] = 0
        source = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        take = pa.array(at, pa.int64(), mask=padded)
        # (a column of several chunks is put together first: a take of one array is the faster)
        return [column.combine_chunks().take(take) for column in source.columns]
