"""Stage 1 of the table-table join: a side's changes, by primary key, turned into routed changes.

    stage = TableRekey(posts.schema, ChangeFormat.plain("post_id", time="at"), "author_id", "left")

One input, ``changes`` (a ``plain`` or ``delta`` change table, :mod:`streamjoin.changes`), routed by
the table's **primary key**. A plain upsert carries no before-image, so this stage remembers, per
primary key, the order of the last change applied and the join key of the current row, and
outputs **routed changes** (:mod:`streamjoin.table.spec`) for stage 2, which is routed by join key:

* the key's final state is a row: UPSERT of it at its join key; if a row existed before at
  another join key (nulls equal nulls), also DELETE at the old join key;
* the key's final state is deleted and a row existed: DELETE at the old join key;
* otherwise nothing.

**Order** of a key's changes: (change time, sequence; a null sequence first). A change not newer
than the last one applied (in an earlier batch, or earlier in this one) is *stale*: ignored and
counted (``stale_changes``); ties within a batch go to the first in canonical row order (op, then
the row's other columns, nulls first). A delete applied while the key has no row is harmless and
counted (``unknown_deletes``). A deleted key keeps its last order (a tombstone), so an older change
arriving later is still recognised as stale. Rows with an unknown op, a null change time or a null
primary key are set aside with their reason; heartbeats are counted and ignored. No change is late:
this stage applies no watermark. A null join key is allowed (the row matches nothing).

State, declared as :data:`LAYOUT` (:mod:`streamjoin.runtime.areas`)::

    b"K" | pack(primary key)   ->   pack(change time, sequence, has row, *join key)
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changes import DELETE, HEARTBEAT, OP, SEQ, TIME, UPSERT, ChangeFormat, normalise
from streamjoin.kit.keys import normal_keys
from streamjoin.kit.order import canonical_sort_keys, sort_canonically
from streamjoin.runtime.areas import PACKED, PACKED_VALUE, Area, StateLayout
from streamjoin.runtime.operator import InputSpec, Operator, StepInput, StepResult, conform
from streamjoin.statestore.base import KeyValue, Store
from streamjoin.statestore.codecs import unpack, unpack_head
from streamjoin.table.rows import RowCodec, pack_columns
from streamjoin.table.spec import TableSide, build_side

if TYPE_CHECKING:
    from streamjoin.runtime.regroup import Ownership

__all__ = ["TableRekey", "LAYOUT"]

#: Stage 1's state (see module); its version is the definition's ``layout``.
LAYOUT = StateLayout("table join keys", 1, (
    Area("keys", b"K", (("primary key", PACKED),), PACKED_VALUE),
))
_KEYS = LAYOUT["keys"]


def _order(time: int, seq: int | None) -> tuple[int, bool, int]:
    """A change's place in its key's history: (time, sequence) with a null sequence first."""
    return (time, seq is not None, 0 if seq is None else seq)


class TableRekey(Operator):
    """Stage 1 (see module): one side's changes by primary key -> routed changes by join key."""

    kind = "table_join_keys"

    def __init__(self, schema: pa.Schema, changes: ChangeFormat, on: str | Sequence[str], side: str,
                 *, key_types: Sequence[pa.DataType] | None = None) -> None:
        """Validate; raise :class:`JoinDefinitionError` naming the problem. ``key_types``: the
        join's common join-key types (default: the ``on`` columns' own types)."""
        self.side: TableSide = build_side(side, schema, changes, on, key_types)
        self.codec = RowCodec(self.side.row_schema)
        self._inputs = (InputSpec("changes", schema, changes.key, None),)
        row = self.side.row_schema.names
        self._pk_at = [row.index(k) for k in changes.key]
        self._on_at = [row.index(k) for k in self.side.on]
        self._width = len(row)

    @property
    def inputs(self) -> tuple[InputSpec, ...]:
        return self._inputs

    @property
    def output_schema(self) -> pa.Schema:
        """The routed-change schema: the row's columns, then ``__sj_op``."""
        return self.side.routed

    def definition(self) -> dict[str, Any]:
        return {"kind": self.kind, "layout": LAYOUT.version, **self.side.definition()}

    def __repr__(self) -> str:
        s = self.side
        return f"TableRekey(on={list(s.on)!r}, side={s.name!r}, changes={s.changes!r})"

    def regroup(self, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
        """Split state by key group after a change of partition count (:mod:`streamjoin.table.regroup`)."""
        from streamjoin.table.regroup import regroup_keys

        return regroup_keys(LAYOUT, len(self._inputs[0].key), sources, owned)

    def step(self, state: Store, batch: StepInput) -> StepResult:
        """Collapse each key's changes of this version into routed changes (see module)."""
        if len(batch.rows) != 1:
            raise ValueError("a table-join key stage takes exactly one input (changes)")
        side, metrics = self.side, Counter()
        table = normal_keys(conform(batch.rows[0], side.schema, f"{side.name} changes"), [*side.key, *side.on])
        parsed = normalise(table, side.changes)
        metrics.update({f"changes_{k}": v for k, v in parsed.counts.items()})
        changes = parsed.changes
        beat = changes.column(OP).to_numpy() == HEARTBEAT
        metrics["heartbeats"] = int(beat.sum())
        changes = self._canonical(changes.filter(pa.array(~beat)))
        puts, upserts, deletes = self._collapse(state, changes, metrics)
        output = self._output(changes, upserts, deletes)
        metrics["routed_upserts"], metrics["routed_deletes"] = len(upserts), len(deletes)
        return StepResult(output, (parsed.aside,), puts, metrics=dict(metrics))

    def _canonical(self, changes: pa.Table) -> pa.Table:
        """Changes sorted by key, order, op, then the other columns (nulls first)."""
        return sort_canonically(changes, canonical_sort_keys(changes.schema, [*self.side.key, TIME, SEQ, OP]))

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
                  ) -> tuple[list[KeyValue], list[int], list[tuple]]:
        """Walk each key's changes in order against its state; return the state writes, the rows
        to upsert (indices) and the deletes (physical routed rows), in key order."""
        n = changes.num_rows
        starts = self._starts(changes)
        pks = self.codec.encode_columns(changes, self.side.key)
        keys = _KEYS.keys(pks[i] for i in starts)
        before = state.multi_get(keys)
        ops = changes.column(OP).to_pylist()
        times, seqs = changes.column(TIME).to_pylist(), changes.column(SEQ).to_pylist()
        orders = list(map(_order, times, seqs))
        lasts: list[int] = []
        has_rows: list[bool] = []
        put_keys: list[bytes] = []
        upserts: list[int] = []
        deletes: list[tuple] = []
        moved: list[tuple[int, int, bytes]] = []  # (index in deletes, last change, old join key bytes)
        for k, (start, key, stored) in enumerate(zip(starts, keys, before)):
            end = starts[k + 1] if k + 1 < len(starts) else n
            held = None if stored is None else _held(stored)
            order = None if held is None else _order(held[0], held[1])
            had_row = held is not None and held[2]
            has_row, last = had_row, None
            for i in range(start, end):
                if order is not None and orders[i] <= order:
                    metrics["stale_changes"] += 1
                    continue
                if ops[i] == DELETE and not has_row:
                    metrics["unknown_deletes"] += 1
                order, has_row, last = orders[i], ops[i] == UPSERT, i
            if last is None:
                continue
            put_keys.append(key)
            lasts.append(last)
            has_rows.append(has_row)
            if has_row:
                upserts.append(last)
            if had_row:
                old_jk = held[3]
                if has_row:
                    moved.append((len(deletes), last, old_jk))
                deletes.append(self._delete_row(unpack(pks[start]), unpack(old_jk)))
        # the state values: pack(change time, sequence, has row, *join key) of each key's last change
        take = pa.array(lasts, pa.int64())
        heads = pack_columns([changes.column(TIME).take(take), changes.column(SEQ).take(take),
                              pa.array(has_rows, pa.bool_())], len(lasts))
        jks = self.codec.encode_columns(changes.take(pa.array(upserts, pa.int64())), self.side.on) if upserts else []
        new_jk = dict(zip(upserts, jks))
        puts = [(key, head + new_jk[last] if row else head)
                for key, head, last, row in zip(put_keys, heads, lasts, has_rows)]
        # an upsert at its old join key (nulls equal nulls) deletes nothing
        same = {d for d, last, old in moved if old == new_jk[last]}
        if same:
            deletes = [row for d, row in enumerate(deletes) if d not in same]
        return puts, upserts, deletes
    def _delete_row(self, pk: tuple, jk: tuple) -> tuple:
        """A routed delete: the primary key and the join key it is deleted at, other columns null."""
        row: list = [None] * self._width
        for i, value in zip(self._on_at, jk):
            row[i] = value
        for i, value in zip(self._pk_at, pk):
            row[i] = value
        return tuple(row)

    def _output(self, changes: pa.Table, upserts: list[int], deletes: list[tuple]) -> pa.Table:
        """The routed changes: the upserted rows (taken from ``changes``), then the deletes."""
        schema = self.side.row_schema
        taken = changes.take(pa.array(upserts, pa.int64()))
        columns = []
        for i, field in enumerate(schema):
            column = self.codec.physical_array(taken.column(field.name), i)
            columns.append(column if column.type == field.type else column.cast(field.type))
        table = pa.Table.from_arrays(columns, schema=schema)
        if deletes:
            table = pa.concat_tables([table, self.codec.table(deletes)])
        table = table.combine_chunks()
        ops = np.r_[np.full(len(upserts), UPSERT), np.full(len(deletes), DELETE)].astype(np.int8)
        return table.append_column(self.side.routed.field(OP), pa.array(ops, pa.int8()))


def _held(stored: bytes) -> tuple[int, int | None, bool, bytes]:
    """A state value ``pack(change time, sequence, has row, *join key)`` as (change time,
    sequence, has row, the join key's bytes: ``pack(*join key)``)."""
    head, jk = unpack_head(stored, 3)
    return (*head, jk)  # type: ignore[return-value]
