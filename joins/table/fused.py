"""The table-table join's stage 2 with the key step of a *direct* side inside it.

A side whose primary key is its join key (the same columns, in the same order: a foreign-key
join's key side, or both sides of a one-to-one join) needs no stage of its own to route its
changes: routed by its primary key, a change already reaches the partition that holds its join
key. :class:`FusedTableJoinStage` runs such a side's :class:`streamjoin.table.rekey.TableRekey`
step and then the :class:`streamjoin.table.stage.TableJoinStage` step in one task, over one store,
so a version of the join runs one stage and one exchange fewer for that side (and, when both sides
are direct, one stage in all). ``TableTableJoin(..., fuse_key_stages=True)`` builds it
(:attr:`streamjoin.table.operator.TableTableJoin.plan`).

Inputs, in this order (the plan puts earlier stages' outputs before a join input): the routed
changes of each side that keeps its key stage (named ``left`` / ``right``, as the join stage's),
then the changes of each direct side (``left_changes`` / ``right_changes``, the key stage's
``changes`` input, routed by its join-key columns). The output, the view changes and the metrics
are the two steps' (a metric both report is summed); rows a direct side's key step sets aside are
that input's.

**State**: the join stage's areas (:data:`streamjoin.table.state.LAYOUT`) and each direct side's
key-stage areas (:data:`streamjoin.table.rekey.LAYOUT`) under the prefix ``l`` or ``r``::

    b"lK" | pack(primary key)  ->  pack(change time, sequence, has row, *join key)   (left direct)
    b"rK" | ...                                                                      (right direct)
    b"L" | b"R" | b"\\x00meta"  ->  the join stage's rows and counts

The two steps read and write disjoint areas, so their writes are one atomic write of the version.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pyarrow as pa

from streamjoin.runtime.operator import InputSpec, Operator, StepInput, StepResult
from streamjoin.statestore.base import KeyValue, Store
from streamjoin.statestore.columns import ColumnWrite
from streamjoin.table.rekey import TableRekey
from streamjoin.table.stage import TableJoinStage
from streamjoin.table.state import KEY_AREA_PREFIX
from streamjoin.table.views import FUSED_VIEWS

if TYPE_CHECKING:
    from streamjoin.runtime.regroup import Ownership

__all__ = ["FusedTableJoinStage", "AREA_PREFIX", "SIDES", "keyed_by_join_key", "direct_side"]

SIDES = ("left", "right")
AREA_PREFIX = KEY_AREA_PREFIX


def keyed_by_join_key(key: Sequence[str], on: Sequence[str]) -> bool:
    """Whether a side's primary key ``key`` is its join key ``on``, column for column: a change
    routed by primary key then reaches the partition of its join key."""
    return list(key) == list(on)


def direct_side(stage: TableRekey) -> bool:
    """Whether a key stage's side can run inside the join stage (:func:`keyed_by_join_key`)."""
    return keyed_by_join_key(stage.side.key, stage.side.on)


class FusedTableJoinStage(Operator):
    """Stage 2 with the key steps of its direct sides (see module)."""

    kind = "table_join_fused"
    set_aside_inputs = ("left", "right", "left_changes", "right_changes", "left_changes_source",
                        "right_changes_source")
    state_views = FUSED_VIEWS

    def __init__(self, join: TableJoinStage, keyed: Mapping[str, TableRekey]) -> None:
        """``join``: the join stage; ``keyed``: the key stage of each direct side (by side name),
        built with ``area_prefix=AREA_PREFIX[side]``. Raises ValueError for a side that is not
        direct (:func:`direct_side`), for no direct side, or for a key stage without its prefix."""
        if not keyed or any(name not in SIDES for name in keyed):
            raise ValueError(f"a fused join stage takes the key stage of one or both sides, not {sorted(keyed)}")
        for name, stage in keyed.items():
            if not direct_side(stage):
                raise ValueError(f"the {name} side's primary key is not its join key: it keeps its key stage")
            if stage.layout["keys"].prefix != AREA_PREFIX[name] + b"K":
                raise ValueError(f"the {name} key stage must be built with area_prefix={AREA_PREFIX[name]!r}")
        self.join, self.keyed = join, dict(keyed)
        #: the sides in input order: routed ones first, then direct ones
        self.order: tuple[str, ...] = (tuple(s for s in SIDES if s not in keyed)
                                       + tuple(s for s in SIDES if s in keyed))
        routed = dict(zip(SIDES, join.inputs))
        specs = []
        for name in self.order:
            if name in self.keyed:
                raw = self.keyed[name].inputs[0]
                specs.append(InputSpec(f"{name}_changes", raw.schema, tuple(self.keyed[name].side.on), raw.time))
            else:
                specs.append(routed[name])
        self._inputs = tuple(specs)

    def __repr__(self) -> str:
        return f"FusedTableJoinStage(join={self.join!r}, keyed={self.keyed!r})"

    @property
    def inputs(self) -> tuple[InputSpec, ...]:
        return self._inputs

    @property
    def output_schema(self) -> pa.Schema:
        return self.join.output_schema

    @property
    def waits_for_watermark(self) -> bool:
        """A direct side with ``expire_rows`` retracts rows once the horizon passes them."""
        return any(stage.waits_for_watermark for stage in self.keyed.values())

    def definition(self) -> dict[str, Any]:
        return {"kind": self.kind, "join": self.join.definition(),
                **{f"{name}_keys": self.keyed[name].definition() for name in SIDES if name in self.keyed}}

    def regroup(self, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
        """The join stage's entries of the owned key groups, and each direct side's key-stage
        entries (keyed by primary key, which is the join key)."""
        kept = list(self.join.regroup(sources, owned))
        for stage in self.keyed.values():
            kept += stage.regroup(sources, owned)
        return sorted(kept)

    def step(self, state: Store, batch: StepInput) -> StepResult:
        """Each direct side's key step, then the join step over both sides' routed changes."""
        if len(batch.rows) != len(self._inputs):
            raise ValueError(f"this fused join stage takes {len(self._inputs)} inputs, got {len(batch.rows)}")
        at = {name: i for i, name in enumerate(self.order)}
        routed: dict[str, pa.Table] = {}
        keyed: dict[str, StepResult] = {}
        for name in SIDES:
            i = at[name]
            if name not in self.keyed:
                routed[name] = batch.rows[i]
                continue
            advanced = (batch.advanced_at[i],) if batch.advanced_at else ()
            keyed[name] = self.keyed[name].step(state, StepInput(
                batch.version, batch.partition, (batch.rows[i],), (batch.max_times[i],), batch.final,
                batch.processing_time, advanced))
            routed[name] = keyed[name].output
        joined = self.join.step(state, StepInput(batch.version, batch.partition, (routed["left"], routed["right"]),
                                                 (None, None), batch.final, batch.processing_time))
        writes = _writes(joined)
        metrics: Counter[str] = Counter(joined.metrics)
        for result in keyed.values():
            writes = writes.plus(_writes(result))
            metrics.update(result.metrics)
        aside = tuple(keyed[name].set_aside[0] if name in keyed else joined.set_aside[SIDES.index(name)]
                      for name in self.order)
        return StepResult(joined.output, aside, writes=writes.sorted(), metrics=dict(metrics))


def _writes(result: StepResult) -> ColumnWrite:
    """A step result's state changes, as columns: the table join's steps give them so."""
    if result.writes is None:
        raise ValueError("a fused join stage's steps give their writes as columns")
    return result.writes
