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
are encoded column-wise (:func:`streamjoin.statestore.packed_columns.pack_columns`, the bytes of ``pack``); output
rows of this version's input are taken from it, rows read from state decoded column-wise. Per view key (left primary key, right primary
key; a padded side's is null) the diff is minimal: a row that changed -> ``update_preimage``
(``_seq`` 0) and ``update_postimage`` (``_seq`` 1); a row gone -> ``delete`` (0); a new row ->
``insert`` (1). A view row whose two sides both move to another join key in one version is deleted
at the old key's partition and inserted at the new one's; applying every retraction of a version
(``_seq`` 0) before its insertions keeps the view exact. Output rows are sorted by view key bytes.

A version is computed for all its join keys at once, column-wise (:class:`streamjoin.table.step.JoinStep`):
grouping, cross products, emptiness, the view rows of both states and their diff are numpy/Arrow
operations; Python only lists the rows read (and, for a full join, scans a group only the
padding needs).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pyarrow as pa

from streamjoin.runtime.areas import Area
from streamjoin.runtime.evolution import SchemaPlace
from streamjoin.runtime.operator import InputSpec, SpecOperator, StepInput, StepResult
from streamjoin.statestore.base import KeyValue, Store
from streamjoin.table import load
from streamjoin.table.layouts import LayoutCodec
from streamjoin.table.spec import How, TableJoinSpec, TableSide, build_join, side_of
from streamjoin.table.state import LAYOUT
from streamjoin.table.step import JoinStep
from streamjoin.table.views import ROW_VIEWS

if TYPE_CHECKING:
    from streamjoin.runtime.regroup import Ownership

__all__ = ["TableJoinStage", "LAYOUT"]



class TableJoinStage(SpecOperator):
    """Stage 2 (see module): routed changes of two sides -> the view's change stream."""

    kind = "table_join"
    set_aside_inputs = ("left", "right")
    state_views = ROW_VIEWS

    def __init__(self, left: TableSide, right: TableSide, how: str | How = "inner") -> None:
        """``left``/``right``: the sides of the stage-1 operators (``TableRekey(...).side``)."""
        self.spec: TableJoinSpec = build_join(left, right, how)
        # rows in the layout of their columns' history (:mod:`streamjoin.table.layouts`; one layout
        # until the columns change, whose rows are RowCodec's)
        self.codecs = {s.name: LayoutCodec([s.row_schema]) for s in (left, right)}
        # a side whose join key is its primary key holds at most one row per join key, under a
        # store key the join key determines: its reads are point reads (None: a group needs a scan)
        self.direct = {s.name: _direct(s) for s in (left, right)}
        #: sides whose rows a fused key step holds in its own keys' values, by its keys area
        #: (:meth:`with_rows_in`); the others' rows are in this stage's areas
        self.rows_in: dict[str, Area] = {}
        self._inputs = (InputSpec("left", left.routed, left.on, None), InputSpec("right", right.routed, right.on, None))

    def __repr__(self) -> str:
        return f"TableJoinStage(left={self.spec.left!r}, right={self.spec.right!r}, how={self.spec.how.value!r})"

    def schema_places(self) -> tuple[SchemaPlace, ...]:
        return self.spec.left.schema_place("left"), self.spec.right.schema_place("right")

    def with_schema_history(self, definitions: Sequence[Mapping[str, Any]]) -> TableJoinStage:
        """This stage with each side's rows stored in the layouts of its columns' history
        (``definitions``: this stage's, oldest first)."""
        evolved = copy.copy(self)
        evolved.codecs = {name: LayoutCodec([side_of(d[name]).row_schema for d in definitions]) for name in self.codecs}
        return evolved

    def with_rows_in(self, areas: Mapping[str, Area]) -> TableJoinStage:
        """This stage with the rows of the sides of ``areas`` (direct sides: primary key = join
        key) read from a fused key step's keys area (``pack(change time, sequence, has row)``
        then the row) and not written by its step: the step gives their upserts instead
        (:mod:`streamjoin.table.fused`). The definition does not change."""
        for name in areas:
            if self.direct.get(name) is None:
                raise ValueError(f"only a side keyed by its join key can have its rows in its key step's area, not {name!r}")
        held = copy.copy(self)
        held.rows_in = dict(areas)
        return held

    def regroup(self, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
        """Split state by key group after a change of partition count (:mod:`streamjoin.table.regroup`)."""
        from streamjoin.table.regroup import regroup_stage

        return regroup_stage(LAYOUT, len(self._inputs[0].key), sources, owned)

    @property
    def waits_for_watermark(self) -> bool:
        """The view changes of a version follow from its routed changes alone."""
        return False

    def state_key(self, side: str, rows: pa.Table) -> list[pa.Array]:
        """A row's routing key: its join key (:mod:`streamjoin.table.load`)."""
        spec = self.spec.side(side)
        return load.row_route(spec, load.decode_rows(spec, rows, f"initial_state[{side!r}]"))

    def load_state(self, rows: Mapping[str, pa.Table], summary: Mapping[str, int], version: int) -> list[KeyValue]:
        """Each side's rows of ``rows`` and the count held (:func:`load.join_entries`)."""
        return sorted(load.join_entries(self, rows))

    def step(self, state: Store, batch: StepInput) -> StepResult:
        """Apply one version's routed changes and output the view changes they cause."""
        if len(batch.rows) != 2:
            raise ValueError("a table join stage takes exactly two inputs (left, right)")
        return JoinStep(self, state, batch).run()


def _direct(side: TableSide) -> list[int] | None:
    """Where a side's primary-key values are in its join key (None: the key is not the join key)."""
    if sorted(side.key) != sorted(side.on):
        return None
    return [side.on.index(k) for k in side.key]
