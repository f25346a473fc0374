"""A materialized view kept in a store, maintained by applying a view change stream.

    view = MaterializedView(open_store("arranged", path), join.view_key[0], join.view_key[1], join.output_schema)
    view.apply(changes)                  # a table-table join's output, one or more versions
    view.get(post_id, follow_id)         # one row as a dict, or None
    view.rows()                          # the whole view, in view-key order
    view.write_parquet("timeline.parquet")

A change stream is in the Delta change data feed vocabulary: the view's columns, then
``_change_type`` (``insert``, ``update_preimage``, ``update_postimage``, ``delete``),
``_commit_version`` and ``_seq``. ``MaterializedView.apply`` applies changes in
(``_commit_version``, ``_seq``) order (rows with equal order in any order), and refuses, with
``ViewError`` and nothing written, a stream that does not fit the view: an insertion of a view
key it holds, a retraction of one it does not hold, or a retraction whose row differs from the row
held. The view key is (left primary key, right primary key); a null-padded side's is all null.

State: ``pack(view key)`` -> ``pack(row)`` (``streamjoin.table.rows``); the store's version marker
is the last ``_commit_version`` applied.
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from streamjoin.errors import JoinError
from streamjoin.kit.keys import normal_key_value
from streamjoin.statestore.base import Store
from streamjoin.statestore.codecs import pack
from streamjoin.table.rows import RowCodec, stored_type
from streamjoin.table.spec import CDF_COLUMNS, CHANGE_TYPE, COMMIT_VERSION, ORDER_COLUMNS, SEQ_COLUMN

__all__ = ["MaterializedView", "ViewError"]

_RETRACT = ("delete", "update_preimage")
_INSERT = ("insert", "update_postimage")


class ViewError(JoinError):
    """A change stream does not fit the view it is applied to (see ``streamjoin.view``)."""


class MaterializedView:
    """A view readable by key, kept in ``store`` (see module docstring)."""

    def __init__(self, store: Store, left_key: str | Sequence[str], right_key: str | Sequence[str],
                 schema: pa.Schema) -> None:
        """``schema``: the change stream's or the view's schema; ``*_key``: view-key column names."""
        self.store = store
        fields = [f for f in schema if f.name not in CDF_COLUMNS]
        self.schema = pa.schema([pa.field(f.name, stored_type(f.type, f"view column {f.name!r}"), True) for f in fields])
        self.codec = RowCodec(self.schema)
        self.left_key = (left_key,) if isinstance(left_key, str) else tuple(left_key)
        self.right_key = (right_key,) if isinstance(right_key, str) else tuple(right_key)
        for name in (*self.left_key, *self.right_key):
            if name not in self.schema.names:
                named = [n for n in (f"{name}_left", f"{name}_right") if n in self.schema.names]
                hint = (f" (a name on both sides of the join is suffixed: {' or '.join(map(repr, named))}?)"
                        if named else "")
                raise ViewError(f"the view has no key column {name!r}{hint}; its columns are {self.schema.names}")
        self._key_at = [self.schema.names.index(n) for n in (*self.left_key, *self.right_key)]

    def _key(self, row: tuple) -> bytes:
        """The state key of ``row``: its view key as the join compares keys (``-0.0`` is ``0.0``,
        every NaN one NaN), so a change of a key's zero sign or NaN payload updates its row."""
        return pack(*(normal_key_value(row[i]) for i in self._key_at))

    def apply(self, changes: pa.Table) -> dict[str, int]:
        """Apply a change stream (see module docstring); return counts by change type."""
        missing = [n for n in (*self.schema.names, *ORDER_COLUMNS) if n not in changes.column_names]
        if missing:
            raise ViewError(f"the change stream lacks columns {missing}")
        order = pc.sort_indices(changes, sort_keys=[(COMMIT_VERSION, "ascending"), (SEQ_COLUMN, "ascending")])
        changes = changes.take(order)
        rows = self.codec.rows(changes)
        kinds = changes.column(CHANGE_TYPE).to_pylist()
        versions = changes.column(COMMIT_VERSION).to_pylist()
        keys = [self._key(row) for row in rows]
        distinct = sorted(set(keys))
        # the rows held before these changes, read in one batch (a point read per change costs
        # a search of the store each)
        pending: dict[bytes, bytes | None] = dict(zip(distinct, self.store.multi_get(distinct)))
        counts = dict.fromkeys((*_RETRACT, *_INSERT), 0)
        for row, key, kind, version in zip(rows, keys, kinds, versions):
            held = pending[key]
            where = f"version {version}, view key {self._describe(row)}"
            if kind in _RETRACT:
                if held is None:
                    raise ViewError(f"{where}: {kind} of a row the view does not hold")
                if held != self.codec.encode(row):
                    raise ViewError(f"{where}: the {kind} row differs from the row the view holds")
                pending[key] = None
            elif kind in _INSERT:
                if held is not None:
                    raise ViewError(f"{where}: {kind} of a row the view already holds")
                pending[key] = self.codec.encode(row)
            else:
                raise ViewError(f"{where}: unknown _change_type {kind!r}; expected one of {[*_RETRACT, *_INSERT]}")
            counts[kind] += 1
        puts = sorted((k, v) for k, v in pending.items() if v is not None)
        deletes = sorted(k for k, v in pending.items() if v is None)
        last = max(versions) if versions else None
        self.store.write(puts, deletes, version=last)
        return counts

    def _describe(self, row: tuple) -> str:
        names = (*self.left_key, *self.right_key)
        return ", ".join(f"{n}={row[i]!r}" for n, i in zip(names, self._key_at))

    def get(self, left_pk: Any, right_pk: Any) -> dict[str, Any] | None:
        """The view row of (left primary key, right primary key) as a dict, or None.

        A key of several columns is a tuple; a null-padded side's key is None (or all None).
        """
        values = []
        for names, pk in ((self.left_key, left_pk), (self.right_key, right_pk)):
            pk = (None,) * len(names) if pk is None else pk if isinstance(pk, tuple) else (pk,)
            if len(pk) != len(names):
                raise ViewError(f"a key of columns {list(names)} needs {len(names)} values, got {pk!r}")
            for name, value in zip(names, pk):
                index = self.schema.names.index(name)
                values.append(self.codec.values(pa.array([value], self.schema.field(index).type), index)[0])
        data = self.store.get(pack(*map(normal_key_value, values)))
        if data is None:
            return None
        return self.codec.table([self.codec.decode(data)]).to_pylist()[0]

    def rows(self) -> pa.Table:
        """The whole view, in view-key order (nulls first)."""
        return self.codec.table([self.codec.decode(v) for _, v in self.store.scan()])

    def __len__(self) -> int:
        return sum(1 for _ in self.store.scan())

    def write_parquet(self, path: str, **options: Any) -> None:
        """Write the whole view to one Parquet file (``options`` go to ``pyarrow.parquet.write_table``)."""
        pq.write_table(self.rows(), path, **options)

    def __repr__(self) -> str:
        return f"MaterializedView({self.store!r}, {list(self.left_key)!r}, {list(self.right_key)!r}, <schema>)"
