"""One version of one partition of the table join stage, column-wise (:mod:`streamjoin.table.stage`
states what it computes; this module how).

Every change of both sides gets a **group** (its join key, numbered by Arrow's dictionary
encoding). Per side, the rows read from state form one flat list of *before* rows (group,
primary key, row, state key): a side's whole group where the other side changed in it (one
batched seek per side), else only the changed keys' rows (one ``multi_get`` for both sides); a
direct side's (primary key = join key) one row per group is read by key. The *after* rows are the
before rows the changes leave alone plus the upserts. The view rows of each state are then
built for all groups at once: pairs are a cross product within each group (numpy ``repeat``
over group offsets) of a changed row with every row of the other side, plus an unchanged row
with the other side's changed rows; padded rows where the other side's group is empty. The diff
of the two states, keyed by (group, left primary key, right primary key), gives the view changes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changes import DELETE, OP
from streamjoin.errors import JoinError
from streamjoin.kit import normal_keys
from streamjoin.runtime.operator import REASON_COLUMN, StepInput, StepResult, conform
from streamjoin.statestore.base import KeyValue, Store
from streamjoin.statestore.codecs import pack, unpack
from streamjoin.table.spec import TableSide
from streamjoin.table.state import HELD, SIDE

if TYPE_CHECKING:
    from streamjoin.table.stage import TableJoinStage

__all__ = ["JoinStep"]

_INSERT, _DELETE = ("insert", 1), ("delete", 0)
_PRE, _POST = ("update_preimage", 0), ("update_postimage", 1)
_SIDES = ("left", "right")


@dataclass
class _Changes:
    """One side's routed changes of the version (those the stage keeps), one entry per change."""

    pk: list[bytes]
    row: list[bytes | None]     # None: a delete
    key: list[bytes]            # the state key (side | join key | primary key)
    gid: np.ndarray             # the change's group


@dataclass
class _Rows:
    """One side's rows of one state (before or after the version), in the groups it touches."""

    gid: np.ndarray
    pk: list[bytes]
    row: list[bytes]
    changed: np.ndarray         # bool: the row's primary key changed in this version

    def take(self, at: np.ndarray) -> tuple[np.ndarray, list[bytes], list[bytes]]:
        return self.gid[at], [self.pk[i] for i in at], [self.row[i] for i in at]


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
        self.keep = {name: self.spec.how.preserves(name) for name in _SIDES}
        self.same_order = {name: at is not None and at == list(range(len(at))) for name, at in self.direct.items()}
        self.metrics: Counter[str] = Counter()
        self.held = dict(zip(_SIDES, HELD.get(state) or (0, 0)))
        self.tables: dict[str, pa.Table] = {}
        self.fresh: dict[str, tuple[pa.Array, np.ndarray]] = {}
        encoded = [self._encode(self.spec.side(name), table) for name, table in zip(_SIDES, batch.rows)]
        self._group(encoded)

    # -- reading the changes -----------------------------------------------------------------------

    def _encode(self, side: TableSide, table: pa.Table) -> tuple[list[bytes], list[bytes], list[bytes | None], np.ndarray]:
        """``side``'s changes as (join key bytes, primary key bytes, row bytes or None, null join key)."""
        table = normal_keys(conform(table, side.routed, side.name), [*side.on, *side.key])
        codec = self.codecs[side.name]
        self.tables[side.name] = table.select(side.row_schema.names)
        rows = codec.encode_columns(table)
        jks, pks = codec.encode_columns(table, side.on), codec.encode_columns(table, side.key)
        delete = table.column(OP).to_numpy() == DELETE
        null = reduce(np.logical_or, [table.column(c).is_null().to_numpy(zero_copy_only=False) for c in side.on],
                      np.zeros(table.num_rows, bool))
        # the upserted rows' bytes and where they are (output rows of this version are taken from it)
        upserts = np.flatnonzero(~delete)
        self.fresh[side.name] = (pa.array(rows, pa.binary()).take(pa.array(upserts, pa.int64())), upserts)
        if delete.any():
            rows = [None if d else r for r, d in zip(rows, delete.tolist())]
        return jks, pks, rows, null

    def _group(self, encoded: list) -> None:
        """Number the join keys (groups) and file each side's changes under them."""
        jks = encoded[0][0] + encoded[1][0]
        dictionary = pa.array(jks, pa.binary()).dictionary_encode()
        gids = dictionary.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        self.group_jk: list[bytes] = dictionary.dictionary.to_pylist()
        self.groups = len(self.group_jk)
        self.keyed = np.ones(self.groups, bool)
        self.changes: dict[str, _Changes] = {}
        at = 0
        for name, (side_jks, pks, rows, null) in zip(_SIDES, encoded):
            gid = gids[at:at + len(side_jks)]
            at += len(side_jks)
            self.keyed[gid[null]] = False
            if not self.keep[name] and null.any():   # unkeyed rows of a side only ever padded are not kept
                kept = np.flatnonzero(~null)
                gid, side_jks = gid[kept], [side_jks[i] for i in kept]
                pks, rows = [pks[i] for i in kept], [rows[i] for i in kept]
            keys = SIDE[name].keys(map(bytes.__add__, side_jks, pks))
            if len(set(keys)) != len(keys):
                self._twice(name, side_jks, pks, keys)
            self.changes[name] = _Changes(pks, rows, keys, gid)
        self.changed = {name: np.bincount(c.gid, minlength=self.groups) > 0 for name, c in self.changes.items()}

    def _twice(self, name: str, jks: list[bytes], pks: list[bytes], keys: list[bytes]) -> None:
        key = next(k for k, n in Counter(keys).items() if n > 1)
        i = keys.index(key)
        raise JoinError(
            f"the {name} input of a table join stage has two changes of primary key {unpack(pks[i])} at "
            f"join key {unpack(jks[i])} in version {self.version}; its rows must come from a TableRekey stage")

    # -- reading the state -------------------------------------------------------------------------

    def _direct_pk(self, side: str, jk: bytes) -> bytes:
        """The primary key bytes of the one row a direct side can hold at join key ``jk``."""
        at = self.direct[side]
        if self.same_order[side]:
            return jk
        values = unpack(jk)
        return pack(*(values[i] for i in at))

    def _read_state(self) -> dict[str, _Rows]:
        """Each side's before rows (see module): one ``multi_get`` and one batched seek per side."""
        by_key: list[bytes] = []
        plan = {}
        for name, other in (("left", "right"), ("right", "left")):
            c, area = self.changes[name], SIDE[name]
            if self.direct[name] is not None:
                direct = np.flatnonzero(self.keyed)
                pks = [self._direct_pk(name, self.group_jk[g]) for g in direct.tolist()]
                keys = area.keys(self.group_jk[g] + pk for g, pk in zip(direct.tolist(), pks))
                single = np.flatnonzero(~self.keyed[c.gid])
                whole = np.zeros(0, np.int64)
                plan[name] = (direct, pks, keys, single)
            else:
                whole = np.flatnonzero(self.keyed & self.changed[other])
                single = np.flatnonzero(~(self.keyed & self.changed[other])[c.gid])
                plan[name] = (whole, None, None, single)
                keys = []
            by_key += keys
            by_key += [c.key[i] for i in single.tolist()]
        by_key = sorted(set(by_key))
        found = {k: v for k, v in zip(by_key, self.state.multi_get(by_key)) if v is not None}
        before = {}
        for name in _SIDES:
            groups, pks, keys, single = plan[name]
            c, area = self.changes[name], SIDE[name]
            gid: list[int] = []
            pk_out: list[bytes] = []
            rows: list[bytes] = []
            if pks is None:
                jks = [self.group_jk[g] for g in groups.tolist()]
                for g, entries in zip(groups.tolist(), area.scan_under_many(self.state, area.keys(jks))):
                    gid += [g] * len(entries)
                    pk_out += entries.keys()
                    rows += entries.values()
            else:
                for g, pk, key in zip(groups.tolist(), pks, keys):
                    row = found.get(key)
                    if row is not None:
                        gid.append(g)
                        pk_out.append(pk)
                        rows.append(row)
            for i in single.tolist():
                row = found.get(c.key[i])
                if row is not None:
                    gid.append(int(c.gid[i]))
                    pk_out.append(c.pk[i])
                    rows.append(row)
            gids = np.array(gid, np.int64)
            mine = set(zip(c.gid.tolist(), c.pk))
            changed = np.fromiter(((g, p) in mine for g, p in zip(gid, pk_out)), bool, len(gid))
            before[name] = _Rows(gids, pk_out, rows, changed)
        self.found = found
        return before

    def _apply(self, name: str, before: _Rows) -> tuple[_Rows, list[KeyValue], list[bytes]]:
        """The after rows of ``name`` and the writes of its changes; held counts and metrics."""
        c = self.changes[name]
        held = set(zip(before.gid[before.changed].tolist(), (before.pk[i] for i in np.flatnonzero(before.changed))))
        puts, deletes = [], []
        up_gid, up_pk, up_row = [], [], []
        inconsistent = 0
        for g, pk, row, key in zip(c.gid.tolist(), c.pk, c.row, c.key):
            existed = (g, pk) in held
            if row is None:
                if existed:
                    deletes.append(key)
                    self.held[name] -= 1
                else:
                    inconsistent += 1
            else:
                puts.append((key, row))
                self.held[name] += not existed
                up_gid.append(g)
                up_pk.append(pk)
                up_row.append(row)
        self.metrics["inconsistent_deletes"] += inconsistent
        kept = np.flatnonzero(~before.changed)
        gid, pks, rows = before.take(kept)
        after = _Rows(np.concatenate([gid, np.array(up_gid, np.int64)]), pks + up_pk, rows + up_row,
                      np.concatenate([np.zeros(len(kept), bool), np.ones(len(up_gid), bool)]))
        return after, puts, deletes

    def _nonempty(self, side: str, g: int, changes: dict[bytes, bytes | None]) -> tuple[bool, bool]:
        """Whether a (not direct) side held rows at group ``g`` before and after ``changes``,
        reading at most ``len(changes) + 1`` entries (up to the first row the changes leave alone)."""
        before = after = False
        for pk, _ in SIDE[side].scan_under(self.state, SIDE[side].join(self.group_jk[g])):
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
                for g, pk, row in zip(c.gid.tolist(), c.pk, c.row):
                    if g in wanted:
                        by_group.setdefault(g, {})[pk] = row
                for g in scan.tolist():
                    ne[:, g] = self._nonempty(name, g, by_group[g])
        ne[:, ~self.keyed] = False
        return ne

    # -- the view rows -----------------------------------------------------------------------------

    def _view(self, left: _Rows, right: _Rows, ne: dict[str, np.ndarray], flips: dict[str, np.ndarray],
              state: int) -> dict[tuple, tuple]:
        """The view rows of one state that this version can affect: (group, left pk, right pk) ->
        (left row, right row); ``b""`` and None for a padded side."""
        keyed = self.keyed
        out: dict[tuple, tuple] = {}
        lk = np.flatnonzero(keyed[left.gid])
        for a_rows, b_rows, a_sel, b_sel in ((left, right, left.changed, None), (left, right, ~left.changed, right.changed)):
            a = lk[a_sel[lk]]
            b = np.flatnonzero(keyed[right.gid] if b_sel is None else keyed[right.gid] & b_sel)
            ia, ib = _cross(a_rows.gid[a], b_rows.gid[b], self.groups)
            if len(ia):
                ia, ib = a[ia].tolist(), b[ib].tolist()
                g = left.gid[ia].tolist()
                lpk, lrow = left.pk, left.row
                rpk, rrow = right.pk, right.row
                out.update(zip(zip(g, [lpk[i] for i in ia], [rpk[j] for j in ib]),
                               zip([lrow[i] for i in ia], [rrow[j] for j in ib])))
        for name, rows, other in (("left", left, "right"), ("right", right, "left")):
            if not self.keep[name]:
                continue
            g = rows.gid
            pick = np.flatnonzero(~ne[other][state][g] & (flips[other][g] | rows.changed))
            gids, pks, values = rows.take(pick)
            if name == "left":
                out.update(zip(zip(gids.tolist(), pks, [b""] * len(pks)), zip(values, [None] * len(pks))))
            else:
                out.update(zip(zip(gids.tolist(), [b""] * len(pks), pks), zip([None] * len(pks), values)))
        return out

    def run(self) -> StepResult:
        before = self._read_state()
        puts: list[KeyValue] = []
        deletes: list[bytes] = []
        after = {}
        for name in _SIDES:
            after[name], p, d = self._apply(name, before[name])
            puts += p
            deletes += d
        ne = {"left": self._emptiness("left", "right", before["left"], after["left"]),
              "right": self._emptiness("right", "left", before["right"], after["right"])}
        flips = {name: ne[name][0] != ne[name][1] for name in _SIDES}
        old = self._view(before["left"], before["right"], ne, flips, 0)
        new = self._view(after["left"], after["right"], ne, flips, 1)
        out = self._diff(old, new)
        puts.append(HELD.put((self.held["left"], self.held["right"])))
        puts.sort()
        deletes.sort()
        self.metrics.update(view_changes=len(out), rows_held_left=self.held["left"],
                            rows_held_right=self.held["right"])
        return StepResult(self._output(out), (self._aside("left"), self._aside("right")), puts, deletes,
                          metrics=dict(self.metrics))

    @staticmethod
    def _diff(old: dict[tuple, tuple], new: dict[tuple, tuple]) -> list[tuple]:
        """The minimal changes turning view rows ``old`` into ``new``: (left pk, right pk, seq,
        change type, left row, right row)."""
        out = []
        for key, was in old.items():
            now = new.get(key)
            if now is None:
                out.append((key[1], key[2], _DELETE[1], _DELETE[0], *was))
            elif now != was:
                out.append((key[1], key[2], _PRE[1], _PRE[0], *was))
                out.append((key[1], key[2], _POST[1], _POST[0], *now))
        out += [(key[1], key[2], _INSERT[1], _INSERT[0], *now) for key, now in new.items() if key not in old]
        return out

    def _aside(self, name: str) -> pa.Table:
        schema = self.spec.side(name).routed
        return schema.append(pa.field(REASON_COLUMN, pa.string())).empty_table()

    # -- output ------------------------------------------------------------------------------------

    def _output(self, out: list[tuple]) -> pa.Table:
        """The view changes sorted by view key then ``_seq``; each distinct row decoded once."""
        out.sort(key=lambda o: o[:3])
        n = len(out)
        arrays = [*self._side_columns("left", [o[4] for o in out]),
                  *self._side_columns("right", [o[5] for o in out]),
                  pa.array([o[3] for o in out], pa.string()), pa.array([self.version] * n, pa.int64()),
                  pa.array([o[2] for o in out], pa.int64())]
        return pa.Table.from_arrays(arrays, schema=self.spec.output_schema)

    def _side_columns(self, side: str, rows: list[bytes | None]) -> list[pa.Array]:
        """One side's output columns for ``rows`` (encoded; None: null-padded): each distinct row
        taken from this version's input when it is there, else decoded from its bytes (once)."""
        encoded = pa.array(rows, pa.binary()).dictionary_encode()
        distinct = encoded.dictionary
        fresh_rows, fresh_at = self.fresh[side]
        pos = pc.fill_null(pc.index_in(distinct, value_set=fresh_rows), -1).to_numpy(zero_copy_only=False)
        taken, decoded = np.flatnonzero(pos >= 0), np.flatnonzero(pos < 0)
        schema = self.codecs[side].schema
        parts = []
        if len(taken):
            rows_in = self.tables[side].take(pa.array(fresh_at[pos[taken]], pa.int64()))
            parts.append(pa.Table.from_arrays(rows_in.columns, schema=schema))
        if len(decoded) or not len(taken):
            parts.append(self.codecs[side].decode_table(distinct.take(pa.array(decoded, pa.int64())).to_pylist()))
        table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        # distinct row d is at place[d] of ``table``: the taken ones first, then the decoded ones
        place = np.empty(len(distinct), np.int64)
        place[taken] = np.arange(len(taken))
        place[decoded] = len(taken) + np.arange(len(decoded))
        indices = encoded.indices
        at = place[indices.fill_null(0).to_numpy(zero_copy_only=False)] if len(place) else np.zeros(len(rows), np.int64)
        take = pa.array(at, pa.int64(), mask=indices.is_null().to_numpy(zero_copy_only=False))
        return [column.take(take) for column in table.columns]
