"""Stage 1 of the table-table join: a side's changes, by primary key, turned into routed changes.

    stage = TableRekey(posts.schema, ChangeFormat.plain("post_id", time="at"), "author_id", "left")

One input, ``changes`` (a ``plain`` or ``delta`` change table, :mod:`streamjoin.changes`), routed by
the table's **primary key**. A plain upsert carries no before-image, so this stage remembers, per
primary key, the order of the last change applied and the join key of the current row, and
outputs **routed changes** (:mod:`streamjoin.table.spec`) for stage 2, which is routed by join key:

* the key's final state is a row: UPSERT of it at its join key (as
  :data:`~streamjoin.table.spec.FRESH` when the key held no row at that join key before: stage 2
  then reads nothing for it); if a row existed before at another join key (nulls equal nulls),
  also DELETE at the old join key;
* the key's final state is deleted and a row existed: DELETE at the old join key;
* otherwise nothing.

Each routed change carries the time of the change it comes from (``__sj_time``; for a DELETE at
an old join key, the time of the change that moved or deleted the row).

**Order** of a key's changes: (change time, sequence; a null sequence first); for a vocabulary
:attr:`~streamjoin.changes.ChangeVocabulary.ordered_by_sequence` (a view's change stream) the
sequence alone (its change times are carried, kept in state as 0). A change not newer
than the last one applied (in an earlier batch, or earlier in this one) is *stale*: ignored and
counted (``stale_changes``); ties within a batch go to the first in canonical row order (op, then
the row's other columns, nulls first). A delete applied while the key has no row is harmless and
counted (``unknown_deletes``). A deleted key keeps its last order (a tombstone), so an older change
arriving later is still recognised as stale. Two snapshot rows (a bootstrap's) of one key at the
same order are not a tie but a table with two rows of one key: the first in canonical order is
applied and the others are set aside with their reason and counted (``duplicate_snapshot_rows``).
Rows with an unknown op, a null change time or a null primary key are set aside with their reason; heartbeats are counted and ignored. Without a
retention no change is late; with one (:mod:`streamjoin.table.retention`) a change older than the
horizon is set aside as late, tombstones (and, with ``expire_rows``, rows: a DELETE at their join
key) older than it are dropped. A null join key is allowed (the row matches nothing).

State, declared as :data:`LAYOUT` (:mod:`streamjoin.runtime.areas`)::

    b"K" | pack(primary key)   ->   pack(change time, sequence, has row, *join key)
    b"T" | encode_timestamp(change time) | pack(primary key)   ->   b""   (with a retention only)

Fused into the join stage for a side keyed by its join key (``holds_rows``), a key's value is
``pack(change time, sequence, has row)`` and then the row the join stage stores for it
(:mod:`streamjoin.table.fused`).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changes import DELETE, HEARTBEAT, OP, SEQ, TIME, UPSERT, ChangeFormat, normalise
from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.arrivals import set_aside
from streamjoin.kit.keys import normal_keys
from streamjoin.kit.order import canonical_order, canonical_sort_keys
from streamjoin.kit.times import Duration
from streamjoin.runtime.areas import PACKED, PACKED_VALUE, RAW, TIMESTAMP, Area, StateLayout
from streamjoin.runtime.evolution import OptionRule, SchemaPlace
from streamjoin.runtime.operator import NEG_INF, InputSpec, Operator, StepInput, StepResult, conform
from streamjoin.statestore.base import KeyValue, Store
from streamjoin.statestore.binary_concat import concat_binary
from streamjoin.statestore.codecs import unpack, unpack_head
from streamjoin.statestore.columns import ColumnWrite
from streamjoin.statestore.packed_columns import pack_array, unpack_columns
from streamjoin.table import load
from streamjoin.table.held import Held, decode_held
from streamjoin.table.retention import LATE_REASON, due, index_key, parse_retention, time_scale
from streamjoin.table.rows import RowCodec
from streamjoin.table.spec import FRESH, TableSide, build_side
from streamjoin.table.views import KEY_VIEWS

if TYPE_CHECKING:
    from streamjoin.runtime.regroup import Ownership

__all__ = ["TableRekey", "LAYOUT", "DUPLICATE_REASON", "MOVED_REASON", "carries_pre_images"]

#: Stage 1's state (see module); its version is the definition's ``layout`` (2: the expiry index).
#: The reason a bootstrap row is set aside when another row of its key at the same order was applied.
DUPLICATE_REASON = "duplicate key in snapshot: another row of this key at the same change time was applied"
#: The reason the changes of a key are set aside when they would move its row to another join key on
#: a side declared with an immutable join key (``immutable``).
MOVED_REASON = ("join key changed: this side is declared with an immutable join key (<side>_immutable_join_key), "
                "but this change gives a row another join key than the one it is held at; the row keeps its "
                "join key; declare the side without it, or send the move as a delete and an insert of a new "
                "primary key")

LAYOUT = StateLayout("table join keys", 2, (
    Area("keys", b"K", (("primary key", PACKED),), PACKED_VALUE),
    Area("expiry", b"T", (("change time", TIMESTAMP), ("primary key", PACKED)), RAW),
))
_NO_BYTES = pa.array([], pa.binary())
#: The change times a version's changes carry to stage 2, beside the order they are applied in.
_CARRIED = "__sj_carried_time"
#: The input row each change came from (to set a moved key's changes aside: ``immutable`` only).
_ROW = "__sj_input_row"
#: The routing options (flags) a key step records in its definition when set.
_ROUTING = ("by_join_key", "immutable", "before_images", "holds_rows")
#: A view's change type that holds a row as it was before an update.
_PRE_IMAGE = "update_preimage"


def carries_pre_images(changes: ChangeFormat) -> bool:
    """Whether a side's changes carry their pre-images faithfully: a view's change stream (the
    ``streamjoin`` vocabulary), whose every update holds the row at its old join key."""
    return changes.vocabulary.name == "streamjoin"


class TableRekey(Operator):
    """Stage 1 (see module): one side's changes by primary key -> routed changes by join key."""

    kind = "table_join_keys"
    #: ``changes_source``: change rows the Spark layer refuses before routing
    set_aside_inputs = ("changes", "changes_source")
    state_views = KEY_VIEWS

    def __init__(self, schema: pa.Schema, changes: ChangeFormat, on: str | Sequence[str], side: str,
                 *, key_types: Sequence[pa.DataType] | None = None, retention: Duration | None = None,
                 expire_rows: bool = False, area_prefix: bytes = b"", by_join_key: bool = False,
                 immutable: bool = False, before_images: bool = False, holds_rows: bool = False) -> None:
        """Validate; raise :class:`JoinDefinitionError` naming the problem. ``key_types``: the
        join's common join-key types (default: the ``on`` columns' own types). ``retention``,
        ``expire_rows``: see :mod:`streamjoin.table.retention` (None: keep every key forever).
        ``area_prefix``: put before the prefixes of :data:`LAYOUT` (its state beside another
        operator's in one store: :mod:`streamjoin.table.fused`). ``by_join_key``: the changes are
        routed by join key, not primary key (the side's join key never changes for a primary key:
        :func:`streamjoin.table.fused.fusable`): a deleted key's value keeps its join key, and
        the state is split by it when partitions change. ``immutable`` (the side is declared with
        an immutable join key; with ``by_join_key``): the changes of a key that would give its row
        another join key are set aside (:data:`MOVED_REASON`, counted as ``moved_join_keys``).
        ``before_images`` (a view's change stream, whose updates carry their pre-images; with
        ``by_join_key``): a pre-image is the row's retraction at its old join key, applied as a
        delete there, so a row moved to a join key of another partition leaves its old one.
        ``holds_rows`` (a side keyed by its join key, fused into the join stage: ``area_prefix``
        given, not ``by_join_key``): a key's value is ``pack(change time, sequence, has row)``
        followed by the join stage's bytes of the row it holds (none for a deleted key); this
        step writes the head, and :class:`streamjoin.table.fused.FusedTableJoinStage` puts the
        join step's row after it (the join stage then holds no row of this side in its own area:
        :mod:`streamjoin.table.fused`)."""
        self.layout = LAYOUT.prefixed(area_prefix) if area_prefix else LAYOUT
        self._keys, self._expiry = self.layout["keys"], self.layout["expiry"]
        self.side: TableSide = build_side(side, schema, changes, on, key_types)
        self.codec = RowCodec(self.side.row_schema)
        self.retention = parse_retention(retention, expire_rows)
        if self.retention is not None and changes.vocabulary.ordered_by_sequence:
            raise JoinDefinitionError(
                f"the {side} input is a view's change stream ({changes.vocabulary.name} changes), ordered by "
                "version, not by change time, so a retention horizon cannot be applied to it: leave retention "
                f"out, or give {side}_delay only for the other table")
        # with a retention the runtime keeps the change time's maximum (the horizon's input)
        timed = self.retention is not None
        self._scale = time_scale(schema, changes) if timed else 1
        self._inputs = (InputSpec("changes", schema, changes.key, changes.time if timed else None),)
        row = self.side.row_schema.names
        self._pk_at = [row.index(k) for k in changes.key]
        self._on_at = [row.index(k) for k in self.side.on]
        self._width = len(row)
        self._on_is_key = list(self.side.key) == list(self.side.on)
        self.by_join_key = bool(by_join_key)
        self.immutable, self.before_images = bool(immutable), bool(before_images)
        if (self.immutable or self.before_images) and not self.by_join_key:
            raise ValueError("a key stage with immutable or before_images is routed by join key (by_join_key)")
        self.holds_rows = bool(holds_rows)
        if self.holds_rows and (self.by_join_key or not area_prefix or not self._on_is_key):
            raise ValueError("a key stage that holds rows is fused (area_prefix), keyed by its join key column for "
                             "column and not routed by join key")
        if self.before_images and not carries_pre_images(changes):
            raise ValueError(f"before_images takes a view's change stream, not {changes.vocabulary.name} changes")

    @property
    def inputs(self) -> tuple[InputSpec, ...]:
        return self._inputs

    @property
    def waits_for_watermark(self) -> bool:
        """With ``expire_rows``, a row leaves the view (a DELETE) once the horizon passes its time."""
        return self.retention is not None and self.retention.expire_rows

    @property
    def output_schema(self) -> pa.Schema:
        """The routed-change schema: the row's columns, then ``__sj_op``."""
        return self.side.routed

    def option_rules(self) -> tuple[OptionRule, ...]:
        """A longer retention (or none): tombstones and rows already dropped stay gone, the
        others are kept longer from now on."""
        return (OptionRule(("retention",), "retention (or this table's delay)", "retention_us", absent_is_most=True),)

    def schema_places(self) -> tuple[SchemaPlace, ...]:
        """Its change table's columns: a key stage holds no rows, only keys and times, so any
        change the evolution rules accept needs nothing of its state."""
        return (self.side.schema_place(),)

    def definition(self) -> dict[str, Any]:
        kept = {} if self.retention is None else {"retention": self.retention.definition()}
        routed = {name: True for name in _ROUTING if getattr(self, name)}
        return {"kind": self.kind, "layout": LAYOUT.version, **self.side.definition(), **kept, **routed}

    def __repr__(self) -> str:
        s = self.side
        kept = "" if self.retention is None else (
            f", retention='{self.retention.retention_us} us', expire_rows={self.retention.expire_rows!r}")
        routed = "".join(f", {name}=True" for name in _ROUTING if getattr(self, name))
        return f"TableRekey(on={list(s.on)!r}, side={s.name!r}, changes={s.changes!r}{kept}{routed})"

    def regroup(self, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
        """Split state by key group after a change of partition count (:mod:`streamjoin.table.regroup`)."""
        from streamjoin.table.regroup import regroup_keys, regroup_keys_by_join_key

        if self.by_join_key:
            return regroup_keys_by_join_key(self.layout, sources, owned)
        return regroup_keys(self.layout, len(self._inputs[0].key), sources, owned)

    # -- starting from state rows (streamjoin.table.load) ------------------------------------------

    def _state_label(self) -> str:
        """How an error names this stage's keys: as the join names them (``initial_state[...]``)."""
        return f"initial_state[{self.side.name + '_keys'!r}]"

    def state_key(self, side: str, rows: pa.Table) -> list[pa.Array]:
        """A key row's routing key: its primary key, or its join key when the changes are routed by it."""
        return load.key_route(self, load.decode_keys(self, rows, self._state_label()))

    def state_summary(self, side: str, rows: pa.Table) -> dict[str, int]:
        """With a retention, the progress of the change times the keys were read at (:func:`load.key_summary`)."""
        return load.key_summary(self, rows, self._inputs[0].name)

    def load_state(self, rows: Mapping[str, pa.Table], summary: Mapping[str, int], version: int) -> list[KeyValue]:
        """The keys of ``rows["keys"]`` and their expiry-index entries (:mod:`streamjoin.table.load`)."""
        table = rows.get("keys")
        if table is None:
            return []
        return sorted(load.key_entries(self, load.decode_keys(self, table, self._state_label())))

    def step(self, state: Store, batch: StepInput) -> StepResult:
        """Collapse each key's changes of this version into routed changes (see module)."""
        if len(batch.rows) != 1:
            raise ValueError("a table-join key stage takes exactly one input (changes)")
        side = self.side
        metrics: Counter[str] = Counter()
        table = conform(batch.rows[0], side.schema, f"{side.name} changes")
        parsed = normalise(self._pre_images_as_deletes(table) if self.before_images else table, side.changes)
        metrics.update({f"changes_{k}": v for k, v in parsed.counts.items()})
        changes, aside = parsed.changes, parsed.aside
        beat = changes.column(OP).to_numpy() == HEARTBEAT
        metrics["heartbeats"] = int(beat.sum())
        keep = ~beat
        horizon = NEG_INF if self.retention is None else self.retention.horizon(batch.max_times[0], self._scale)
        if horizon != NEG_INF:
            late = keep & (changes.column(TIME).to_numpy() < horizon)
            metrics["late_changes"] = int(late.sum())
            if late.any():
                rows = table.take(pa.array(parsed.index[late], pa.int64()))
                aside = pa.concat_tables([aside, set_aside(rows, [(np.ones(rows.num_rows, bool), LATE_REASON)])])
                keep &= ~late
        changes = changes.append_column(_CARRIED, changes.column(TIME))
        if side.changes.vocabulary.ordered_by_sequence:
            at = changes.schema.get_field_index(TIME)
            changes = changes.set_column(at, TIME, pa.array(np.zeros(changes.num_rows, np.int64)))
        kept, at, twins, rows_of = self._without_twin_snapshots(parsed.snapshot, parsed.index, keep, changes)
        # (the columns the walk reads, in canonical order; the rows themselves are taken once, for the upserts)
        changes = kept.select(list(dict.fromkeys([*side.key, *side.on, TIME, SEQ, OP, _CARRIED])))
        changes = changes if _identity(at, kept.num_rows) else changes.take(pa.array(at, pa.int64()))
        if self.immutable:   # (after the canonical sort, whose ties the other columns break: the input row must not)
            changes = changes.append_column(_ROW, pa.array(rows_of, pa.int64()))
        metrics["duplicate_snapshot_rows"] = len(twins)
        if len(twins):
            rows = table.take(pa.array(twins, pa.int64()))
            aside = pa.concat_tables([aside, set_aside(rows, [(np.ones(len(twins), bool), DUPLICATE_REASON)])])
        write, upserts, fresh, deletes, gone, moved = self._collapse(state, changes, metrics)
        if len(moved):
            metrics["moved_join_keys"] += len(moved)
            rows = table.take(pa.array(moved, pa.int64()))
            aside = pa.concat_tables([aside, set_aside(rows, [(np.ones(len(moved), bool), MOVED_REASON)])])
        if horizon != NEG_INF:
            written = set(write.put_keys.to_pylist())
            deletes += self._expire(state, horizon, written, gone, metrics)
            gone = [key for key in set(gone) if key not in written]
            write = ColumnWrite(write.put_keys, write.put_values, pa.array(gone, pa.binary()))
        output = self._output(kept, at[upserts], fresh, deletes)
        metrics["routed_upserts"], metrics["routed_deletes"] = len(upserts), len(deletes)
        return StepResult(output, (aside,), writes=write.sorted(), metrics=dict(metrics))

    def _pre_images_as_deletes(self, table: pa.Table) -> pa.Table:
        """``table`` (a view's change stream) with each ``update_preimage`` read as a ``delete``:
        the row's retraction at the join key it held, routed to that join key's partition. Its
        ``_seq`` (0) orders it before the post-image (1) of the same version."""
        at = table.schema.get_field_index(self.side.changes.op)
        ops = table.column(at)
        pre = pc.equal(ops, pa.scalar(_PRE_IMAGE, ops.type))
        return table.set_column(at, table.field(at), pc.if_else(pre, pa.scalar("delete", ops.type), ops))

    def _expire(self, state: Store, horizon: int, changed: set[bytes], gone: list[bytes], metrics: Counter
                ) -> list[tuple[bytes, bytes, int]]:
        """Drop the keys whose last change is below ``horizon`` and that this version did not change
        (their state keys and index entries go to ``gone``); return the routed deletes of the
        rows among them (:mod:`streamjoin.table.retention`)."""
        entries = [(ik, pk) for ik, pk in due(self._expiry, state, horizon) if self._keys.join(pk) not in changed]
        keys = self._keys.keys(pk for _, pk in entries)
        deletes = []
        for (ik, pk), key, stored in zip(entries, keys, state.multi_get(keys)):
            gone += (ik, key)
            if stored is None:
                continue
            held = _held(stored)
            if held[2]:
                metrics["rows_expired"] += 1
                deletes.append((pk, pk if self.holds_rows else held[3], held[0]))
            else:
                metrics["tombstones_expired"] += 1
        return deletes

    def _canonical_order(self, changes: pa.Table) -> pa.Array:
        """The indices sorting changes by key, order, op, then the other columns (nulls first)."""
        return canonical_order(changes, canonical_sort_keys(changes.schema, [*self.side.key, TIME, SEQ, OP]))

    def _without_twin_snapshots(self, snapshot: np.ndarray | None, index: np.ndarray, keep: np.ndarray,
                                changes: pa.Table) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray]:
        """The kept ``changes`` (as they came), the positions in them of the changes to apply in
        canonical order (without the *twin snapshot rows*), the input rows of those twins, and the
        input row of each change to apply: a twin is a snapshot row (a
        bootstrap's) of a key that an earlier snapshot row of this batch has at the same order
        (time and sequence). A table has one row per key, so two are ambiguous: the first in
        canonical order is applied, as a tie between changes is, and each other is set aside
        (:data:`DUPLICATE_REASON`) rather than dropped as stale."""
        kept = changes if keep.all() else changes.filter(pa.array(keep))
        at = self._canonical_order(kept).to_numpy().astype(np.int64, copy=False)
        rows_of = index[keep][at]
        if snapshot is None or not snapshot.any() or kept.num_rows < 2:
            return kept, at, np.zeros(0, np.int64), rows_of
        snap = snapshot[keep][at]
        ordered = kept.select(list(dict.fromkeys([*self.side.key, TIME, SEQ]))).take(pa.array(at, pa.int64()))
        starts = np.array(self._starts(ordered), np.int64)
        times = ordered.column(TIME).to_numpy()
        seq = ordered.column(SEQ)
        has_seq = seq.is_valid().to_numpy(zero_copy_only=False)
        seqs = seq.fill_null(0).to_numpy()
        twin = np.zeros(kept.num_rows, bool)
        twin[1:] = (times[1:] == times[:-1]) & (has_seq[1:] == has_seq[:-1]) & (seqs[1:] == seqs[:-1]) \
            & snap[1:] & snap[:-1]
        twin[starts] = False
        return kept, at[~twin], rows_of[twin], rows_of[~twin]

    def _starts(self, changes: pa.Table) -> list[int]:
        """Where each primary key's run of changes starts (``changes`` sorted by key); keys are
        equal as join keys are (nulls equal nulls, NaN equals NaN, -0.0 equals 0.0)."""
        n = changes.num_rows
        if n == 0:
            return []
        new = np.zeros(n - 1, bool)
        for name, at in zip(self.side.key, self._pk_at):
            column = self.codec.physical_array(changes.column(name), at)
            column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
            cur, prev = column.slice(1), column.slice(0, n - 1)
            if pa.types.is_null(column.type):
                continue
            differs = pc.fill_null(pc.not_equal(cur, prev), True)
            differs = pc.and_not(differs, pc.and_(cur.is_null(), prev.is_null()))
            if pa.types.is_floating(column.type):
                differs = pc.and_not(differs, pc.fill_null(pc.and_(pc.is_nan(cur), pc.is_nan(prev)), False))
            new |= differs.to_numpy(zero_copy_only=False)
        return [0, *(np.flatnonzero(new) + 1).tolist()]

    def _collapse(self, state: Store, changes: pa.Table, metrics: Counter
                  ) -> tuple[ColumnWrite, np.ndarray, np.ndarray, list[tuple], list[bytes], np.ndarray]:
        """Apply each key's changes in order against its state (:meth:`_walk`); return the state
        writes (as columns), the rows to upsert (indices), whether each upsert is
        :data:`~streamjoin.table.spec.FRESH` (its key held no row at that join key), the deletes ((primary key, join key)
        bytes and the removing change's carried time), in key order, the state keys to delete
        (expiry-index entries a change moves), and the input rows set aside because they would
        move a row to another join key (``immutable`` only)."""
        starts = np.array(self._starts(changes), np.int64)
        # (the key columns alone: the routed rows keep their own values)
        keyed = normal_keys(changes.select(list(dict.fromkeys([*self.side.key, *self.side.on]))),
                            [*self.side.key, *self.side.on])
        pks = self.codec.encode_array(keyed.take(pa.array(starts, pa.int64())), self.side.key)
        keys = self._keys.key_column(pks)
        stored = decode_held(state.multi_get_column(keys))
        applied, last, row_before = self._walk(changes, starts, stored)
        ops = changes.column(OP).to_numpy()
        # the keys with an applied change, their last one and whether it leaves a row
        runs = np.flatnonzero(last >= starts)
        lasts = last[runs]
        has_rows = ops[lasts] == UPSERT
        # (a side keyed by its join key column for column: the join key's bytes are the primary key's)
        jks = pks.take(pa.array(runs, pa.int64())) if self._on_is_key else \
            self.codec.encode_array(keyed.take(pa.array(lasts, pa.int64())), self.side.on)
        # a row held before leaves its old join key, unless it is upserted at the same one (nulls equal nulls);
        # a key that holds its row holds it at its own join key, the primary key's bytes (its value's tail is the row)
        held_jk = jks if self.holds_rows else stored.jk.take(pa.array(runs, pa.int64()))
        same = pc.fill_null(pc.equal(held_jk, jks), False).to_numpy(zero_copy_only=False)
        moved = np.zeros(0, np.int64)
        if self.immutable:
            moving = stored.row[runs] & has_rows & ~same
            if moving.any():   # the key's changes are set aside and its state stays as it was
                ends = np.append(starts[1:], len(ops))
                bad = runs[moving]
                within = np.concatenate([np.arange(starts[r], ends[r]) for r in bad.tolist()])
                moved = np.sort(changes.column(_ROW).to_numpy()[within])
                applied[within] = True   # (not stale: set aside)
                keep = ~moving
                runs, lasts, has_rows, same = runs[keep], lasts[keep], has_rows[keep], same[keep]
                jks, held_jk = jks.filter(pa.array(keep)), held_jk.filter(pa.array(keep))
                row_before[within] = True   # (not an unknown delete: set aside)
        metrics["stale_changes"] += int(changes.num_rows - applied.sum())
        metrics["unknown_deletes"] += int((applied & (ops == DELETE) & ~row_before).sum())
        upserts = lasts[has_rows]
        fresh = ~(stored.row[runs] & same)[has_rows]
        # the state values: pack(change time, sequence, has row, *join key) of each key's last change
        # (a deleted key keeps its join key too when the changes are routed by it); the head alone
        # where the key holds its row (the fused stage puts the row after it)
        take = pa.array(lasts, pa.int64())
        row_mask = pa.array(has_rows, pa.bool_())
        heads = pack_array([changes.column(TIME).take(take), changes.column(SEQ).take(take), row_mask], len(lasts))
        if self.holds_rows:
            values = heads
        else:
            with_jk = concat_binary(heads, jks)
            values = with_jk if self.by_join_key else pc.if_else(row_mask, with_jk, heads)
        at = pa.array(runs, pa.int64())
        run_pks = pks.take(at)
        write = ColumnWrite(keys.take(at), values, _NO_BYTES)
        leaves = np.flatnonzero(stored.row[runs] & ~(has_rows & same))
        leaving = pa.array(leaves, pa.int64())
        carried = changes.column(_CARRIED).take(pa.array(lasts[leaves], pa.int64())).cast(pa.int64()).to_pylist()
        deletes = list(zip(run_pks.take(leaving).to_pylist(), held_jk.take(leaving).to_pylist(), carried))
        gone: list[bytes] = []
        if self.retention is not None:
            retention, times = self.retention, changes.column(TIME).to_numpy()
            exists, held_time, held_row = stored.exists.tolist(), stored.time.tolist(), stored.row.tolist()
            indexed: list[KeyValue] = []
            for r, i, row, pk in zip(runs.tolist(), lasts.tolist(), has_rows.tolist(), run_pks.to_pylist()):
                if exists[r] and retention.indexed(held_row[r]):
                    gone.append(index_key(self._expiry, held_time[r], pk))
                if retention.indexed(row):
                    indexed.append((index_key(self._expiry, int(times[i]), pk), b""))
            write = write.plus(ColumnWrite.of_lists(indexed))
        return write, upserts, fresh, deletes, gone, moved

    @staticmethod
    def _walk(changes: pa.Table, starts: np.ndarray, stored: Held) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each key's run of changes (canonically sorted, runs from ``starts``) against its state
        ``stored``, column-wise: whether each change applies (newer than the state and than the
        change before it: the runs are in ascending order, so only a tie with the previous change
        or an order not above the state's is stale), each run's last applied change (below its
        start: none), and whether the key held a row just before each change."""
        n = changes.num_rows
        sizes = np.diff(np.append(starts, n))
        run_of = np.repeat(np.arange(len(starts)), sizes)
        times = changes.column(TIME).to_numpy()
        seq = changes.column(SEQ)
        has_seq = seq.is_valid().to_numpy(zero_copy_only=False)
        seqs = seq.fill_null(0).to_numpy()
        exists = stored.exists
        s_time, s_has, s_seq, s_row = (stored.time[run_of], stored.has_seq[run_of], stored.seq[run_of],
                                       stored.row[run_of])
        newer = ~exists[run_of] | (times > s_time) | ((times == s_time) & (
            (has_seq > s_has) | ((has_seq == s_has) & (seqs > s_seq))))
        tie = np.zeros(n, bool)
        tie[1:] = (times[1:] == times[:-1]) & (has_seq[1:] == has_seq[:-1]) & (seqs[1:] == seqs[:-1])
        tie[starts] = False
        applied = newer & ~tie
        latest = np.maximum.accumulate(np.where(applied, np.arange(n), -1)) if n else np.zeros(0, np.int64)
        previous = np.append(-1, latest[:-1]) if n else latest
        ops = changes.column(OP).to_numpy()
        in_run = previous >= starts[run_of]
        row_before = np.where(in_run, ops[np.maximum(previous, 0)] == UPSERT, s_row) if n else np.zeros(0, bool)
        last = latest[np.append(starts[1:], n) - 1] if len(starts) else np.zeros(0, np.int64)
        return applied, last, row_before

    def _delete_rows(self, deletes: list[tuple[bytes, bytes, int]]) -> pa.Table:
        """Routed deletes, from (``pack`` of the primary key, ``pack`` of the join key it is deleted
        at): those columns set, the others null; decoded column-wise."""
        schema, physical = self.side.row_schema, self.codec.physical
        parts: dict[int, pa.Array] = {}
        for at, data in ((self._on_at, [jk for _, jk, _ in deletes]), (self._pk_at, [pk for pk, _, _ in deletes])):
            kinds = [physical[i] for i in at]
            arrays = unpack_columns(data, kinds)
            if arrays is None:   # bytes the column-wise decoder does not take: row by row (raises)
                values = [unpack(d) for d in data]
                arrays = [pa.array([v[j] for v in values], kind) for j, kind in enumerate(kinds)]
            parts.update(zip(at, arrays))   # the primary key last: its columns win
        columns = []
        for i, field in enumerate(schema):
            column = parts.get(i, pa.nulls(len(deletes), field.type))
            columns.append(column if column.type == field.type else column.cast(field.type))
        return pa.Table.from_arrays(columns, schema=schema)

    def _output(self, changes: pa.Table, upserts: np.ndarray, fresh: np.ndarray,
                deletes: list[tuple[bytes, bytes, int]]) -> pa.Table:
        """The routed changes: the upserted rows (``changes`` at positions ``upserts``; ``fresh`` ones as
        :data:`~streamjoin.table.spec.FRESH`), then the deletes; each with its carried change time."""
        schema = self.side.row_schema
        taken = changes if _identity(upserts, changes.num_rows) else changes.take(pa.array(upserts, pa.int64()))
        columns = []
        for i, field in enumerate(schema):
            columns.append(self.codec.stored_array(taken.column(field.name), i))
        table = pa.Table.from_arrays(columns, schema=schema)
        if deletes:
            table = pa.concat_tables([table, self._delete_rows(deletes)])
        table = table.combine_chunks()
        times = pa.concat_arrays([taken.column(_CARRIED).combine_chunks().cast(pa.int64()),
                                  pa.array([t for _, _, t in deletes], pa.int64())])
        ops = np.r_[np.where(fresh, FRESH, UPSERT), np.full(len(deletes), DELETE)].astype(np.int8)
        table = table.append_column(self.side.routed.field(TIME), times)
        return table.append_column(self.side.routed.field(OP), pa.array(ops, pa.int8()))


def _identity(at: np.ndarray, n: int | None = None) -> bool:
    """Whether positions ``at`` are ``0, 1, ...`` (of all ``n`` rows, when given): a take of them
    would copy a table as it is."""
    return (n is None or len(at) == n) and bool((at == np.arange(len(at))).all())


def _held(stored: bytes) -> tuple[int, int | None, bool, bytes]:
    """A state value ``pack(change time, sequence, has row, *join key)`` as (change time,
    sequence, has row, the join key's bytes: ``pack(*join key)``)."""
    head, jk = unpack_head(stored, 3)
    return (*head, jk)  # type: ignore[return-value]
