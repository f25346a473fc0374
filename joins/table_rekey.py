"""Stage 1 of the table-table join: a side's changes, by primary key, turned into routed changes.

    stage = TableRekey(posts.schema, ChangeFormat.plain("post_id", time="at"), "author_id", "left")

One input, ``changes`` (a ``plain`` or ``delta`` change table, :mod:`joins.changes`), routed by
the table's **primary key**. A plain upsert carries no before-image, so this stage remembers, per
primary key, the order of the last change applied and the join key of the current row, and
outputs **routed changes** (:mod:`joins.table_spec`) for stage 2, which is routed by join key:

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

State: ``b"K" | pack(primary key)`` -> ``pack(change time, sequence, has row, *join key)``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from joins.changes import DELETE, HEARTBEAT, OP, SEQ, TIME, UPSERT, ChangeFormat, normalise
from joins.interval_spec import _sortable
from joins.operator import InputSpec, Operator, StepInput, StepResult
from joins.table_rows import RowCodec, conform
from joins.table_spec import TableSide, build_side
from statestore.base import KeyValue, Store
from statestore.codecs import pack, unpack

__all__ = ["TableRekey"]

_PREFIX = b"K"


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

    @property
    def inputs(self) -> tuple[InputSpec, ...]:
        return self._inputs

    @property
    def output_schema(self) -> pa.Schema:
        """The routed-change schema: the row's columns, then ``__sj_op``."""
        return self.side.routed

    def definition(self) -> dict[str, Any]:
        return {"kind": self.kind, "layout": 1, **self.side.definition()}

    def __repr__(self) -> str:
        s = self.side
        return f"TableRekey(on={list(s.on)!r}, side={s.name!r}, changes={s.changes!r})"

    def step(self, state: Store, batch: StepInput) -> StepResult:
        """Collapse each key's changes of this version into routed changes (see module)."""
        if len(batch.rows) != 1:
            raise ValueError("a table-join key stage takes exactly one input (changes)")
        side, metrics = self.side, Counter()
        table = conform(batch.rows[0], side.schema, f"{side.name} changes")
        parsed = normalise(table, side.changes)
        metrics.update({f"changes_{k}": v for k, v in parsed.counts.items()})
        changes = parsed.changes
        beat = changes.column(OP).to_numpy() == HEARTBEAT
        metrics["heartbeats"] = int(beat.sum())
        changes = self._canonical(changes.filter(pa.array(~beat)))
        rows = self.codec.rows(changes)
        ops = changes.column(OP).to_pylist()
        orders = [_order(t, s) for t, s in zip(changes.column(TIME).to_pylist(), changes.column(SEQ).to_pylist())]
        puts, upserts, deletes = self._collapse(state, rows, ops, orders, metrics)
        output = self._output(rows, upserts, deletes)
        metrics["routed_upserts"], metrics["routed_deletes"] = len(upserts), len(deletes)
        return StepResult(output, (parsed.aside,), puts, metrics=dict(metrics))

    def _canonical(self, changes: pa.Table) -> pa.Table:
        """Changes sorted by key, order, op, then the other columns (nulls first)."""
        first = [*self.side.key, TIME, SEQ, OP]
        rest = [n for n in changes.column_names if n not in first and _sortable(changes.schema.field(n).type)]
        return changes.take(pc.sort_indices(changes, sort_keys=[(n, "ascending", "at_start") for n in first + rest]))

    def _collapse(self, state: Store, rows: list[tuple], ops: list[int], orders: list[tuple], metrics: Counter
                  ) -> tuple[list[KeyValue], list[int], list[tuple]]:
        """Walk each key's changes in order against its state; return the state writes, the rows
        to upsert (indices) and the deletes (physical routed rows), in key order."""
        pks = [tuple(r[i] for i in self._pk_at) for r in rows]
        starts = [i for i in range(len(rows)) if i == 0 or pks[i] != pks[i - 1]]
        keys = [_PREFIX + pack(*pks[i]) for i in starts]
        before = state.multi_get(keys)
        puts: list[KeyValue] = []
        upserts: list[int] = []
        deletes: list[tuple] = []
        for n, (start, key, stored) in enumerate(zip(starts, keys, before)):
            end = starts[n + 1] if n + 1 < len(starts) else len(rows)
            held = None if stored is None else unpack(stored)
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
            old_jk = tuple(held[3:]) if had_row else None
            new_jk = tuple(rows[last][i] for i in self._on_at) if has_row else ()
            seq = None if order[1] is False else order[2]
            puts.append((key, pack(order[0], seq, has_row, *new_jk)))
            if has_row:
                upserts.append(last)
            if had_row and (not has_row or pack(*old_jk) != pack(*new_jk)):
                deletes.append(self._delete_row(pks[start], old_jk))
        return puts, upserts, deletes

    def _delete_row(self, pk: tuple, jk: tuple) -> tuple:
        """A routed delete: the primary key and the join key it is deleted at, other columns null."""
        row: list = [None] * len(self.side.row_schema)
        for i, value in zip(self._on_at, jk):
            row[i] = value
        for i, value in zip(self._pk_at, pk):
            row[i] = value
        return tuple(row)

    def _output(self, rows: list[tuple], upserts: list[int], deletes: list[tuple]) -> pa.Table:
        table = self.codec.table([rows[i] for i in upserts] + deletes)
        ops = np.r_[np.full(len(upserts), UPSERT), np.full(len(deletes), DELETE)].astype(np.int8)
        return table.append_column(self.side.routed.field(OP), pa.array(ops, pa.int8()))
