"""Obviously-correct reference of the table-table join (docs/design/semantics.md "Table-table join"), for the tests to compare with.

Rows are Python dicts (column -> value) of a side's row columns, in row order. A change is a
:class:`Change`: primary key (a tuple), op (``"upsert"`` or ``"delete"``), change time, sequence
(or None) and, for an upsert, the row.

    ReferenceTable            a side's rows by primary key, with the stale rule
    reference_view(...)       the relational join of two tables: view key -> output row tuple
    reference_changes(...)    the minimal change stream turning one view into another

**Stale rule**: within a batch, a key's changes apply in (time, sequence with None first) order,
ties broken by op (upsert first) then the row's other columns in order (None first, inside lists,
maps and structs too); a change not newer than the last applied for its key (in any batch,
deletes included) is ignored.

**Retention** (``retention`` µs, :mod:`streamjoin.table.retention`): the horizon of a batch is the
largest change time of every earlier batch (heartbeats included) minus ``retention``; a change
below it is late (counted, not applied); after the batch, a deleted key's last order is forgotten
once its time is below the horizon, and with ``expire_rows`` so is a row whose last change is.
Each table has its own: a join's ``left_delay`` / ``right_delay`` is that table's ``retention``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from streamjoin.testing.interval import join_key

__all__ = ["Change", "ReferenceTable", "reference_view", "reference_changes"]

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Change:
    pk: tuple
    op: str
    time: int
    seq: int | None
    row: Row | None = None


def _nulls_first(value: Any) -> tuple:
    """A sort key of ``value`` with None first, inside nested values too (a list, a map's entries
    or a struct's fields as a tuple: element by element, a shorter one before one it begins)."""
    if isinstance(value, (tuple, list)):
        return (True, tuple(map(_nulls_first, value)))
    if isinstance(value, dict):
        return (True, tuple((name, _nulls_first(v)) for name, v in value.items()))
    return (value is not None, value if value is not None else 0)


class ReferenceTable:
    """A table as it stands after the changes applied so far."""

    def __init__(self, key: Sequence[str], retention: int | None = None, expire_rows: bool = False) -> None:
        self.key = tuple(key)
        self.rows: dict[tuple, Row] = {}
        self.last: dict[tuple, tuple] = {}
        self.stale = 0
        self.unknown_deletes = 0
        self.retention, self.expire_rows = retention, expire_rows
        self.max_time: int | None = None
        self.late = self.tombstones_expired = self.rows_expired = 0

    def _rank(self, change: Change) -> tuple:
        values = [] if change.row is None else [v for k, v in change.row.items() if k not in self.key]
        return ((change.time, _nulls_first(change.seq)), change.op != "upsert", tuple(map(_nulls_first, values)))

    def horizon(self) -> int | None:
        """The current batch's horizon (None: no retention, or no change time seen yet)."""
        if self.retention is None or self.max_time is None:
            return None
        return self.max_time - self.retention

    def apply(self, changes: Sequence[Change], heartbeats: Sequence[int] = ()) -> None:
        """Apply one batch of changes (see the stale rule and retention); ``heartbeats``: the
        batch's heartbeat times (they move the horizon only)."""
        horizon = self.horizon()
        if horizon is not None:
            self.late += sum(c.time < horizon for c in changes)
            fresh = [c for c in changes if c.time >= horizon]
        else:
            fresh = list(changes)
        self._apply(fresh)
        if horizon is not None:
            for pk, order in list(self.last.items()):
                if order[0] < horizon and (pk not in self.rows or self.expire_rows):
                    del self.last[pk]
                    if self.rows.pop(pk, None) is None:
                        self.tombstones_expired += 1
                    else:
                        self.rows_expired += 1
        for time in [*(c.time for c in changes), *heartbeats]:
            self.max_time = time if self.max_time is None else max(self.max_time, time)

    def _apply(self, changes: Sequence[Change]) -> None:
        for change in sorted(changes, key=self._rank):   # each key's changes in order (keys need not be orderable)
            order = self._rank(change)[0]
            if change.pk in self.last and order <= self.last[change.pk]:
                self.stale += 1
                continue
            self.last[change.pk] = order
            if change.op == "upsert":
                self.rows[change.pk] = dict(change.row or {})
            elif self.rows.pop(change.pk, None) is None:
                self.unknown_deletes += 1


def reference_view(left: Mapping[tuple, Row], right: Mapping[tuple, Row], *, left_on: Sequence[str],
                   right_on: Sequence[str], how: str, left_columns: Sequence[str], right_columns: Sequence[str],
                   ) -> dict[tuple, tuple]:
    """The join of two tables (primary key -> row): view key (left pk, right pk; None for a padded
    side) -> output row (left values in ``left_columns`` order, then right values; None-padded).

    A pair matches when every join-key value is equal (:func:`streamjoin.testing.interval.join_key`: ``-0.0``
    is ``0.0``, NaN equals NaN) and none is None; ``left`` and ``full`` add
    each unmatched left row padded, ``full`` each unmatched right row too.
    """
    def jk(row: Row, on: Sequence[str]) -> tuple:
        return tuple(join_key(row[c]) for c in on)

    view: dict[tuple, tuple] = {}
    matched_right: set = set()
    for lpk, l in left.items():
        matched = False
        for rpk, r in right.items():
            if None not in jk(l, left_on) and jk(l, left_on) == jk(r, right_on):
                view[(lpk, rpk)] = tuple(l[c] for c in left_columns) + tuple(r[c] for c in right_columns)
                matched = True
                matched_right.add(rpk)
        if not matched and how in ("left", "full"):
            view[(lpk, None)] = tuple(l[c] for c in left_columns) + (None,) * len(right_columns)
    if how == "full":
        for rpk, r in right.items():
            if rpk not in matched_right:
                view[(None, rpk)] = (None,) * len(left_columns) + tuple(r[c] for c in right_columns)
    return view


def reference_changes(before: Mapping[tuple, tuple], after: Mapping[tuple, tuple], version: int) -> list[tuple]:
    """The minimal change stream from view ``before`` to ``after``: rows (output row, change type,
    version, seq): a changed row -> update_preimage (seq 0) and update_postimage (seq 1); a row
    gone -> delete (0); a new row -> insert (1)."""
    out: list[tuple] = []
    for key in set(before) | set(after):
        was, now = before.get(key), after.get(key)
        if was == now:
            continue
        if was is not None and now is not None:
            out += [(*was, "update_preimage", version, 0), (*now, "update_postimage", version, 1)]
        elif was is not None:
            out.append((*was, "delete", version, 0))
        elif now is not None:
            out.append((*now, "insert", version, 1))
    return out
