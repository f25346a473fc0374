"""The table-table join's stage 2 with the key step of a side whose join key never changes inside it.

A side's key stage exists to retract a row from its old join key when an update moves it, which
only a stage partitioned by primary key can do. A side whose primary key holds its join key (the
same columns: a foreign-key join's key side, or both sides of a one-to-one join; or a part of
them: order lines keyed by ``(order_id, line)`` joined on ``order_id``), or that is declared with
an immutable join key (``<side>_immutable_join_key``: an append-only event table, or rows that
never move, such as Nexmark's auctions and their seller), never moves a row: routed by its join
key, every change of a primary key reaches the partition that holds that key's state.
:class:`FusedTableJoinStage` runs such a side's :class:`streamjoin.table.rekey.TableRekey` step
and then the :class:`streamjoin.table.stage.TableJoinStage` step in one task, over one store, so a
version of the join runs one stage and one exchange fewer for that side (and, when both sides
fuse, one stage in all). ``TableTableJoin(..., fuse_key_stages=True)`` builds it
(:attr:`streamjoin.table.operator.TableTableJoin.plan`).

A side whose changes carry their pre-images (a view's change stream, the ``streamjoin``
vocabulary: another join's output in a chain) moves rows, but says where from: an update's
``update_preimage`` holds the row at its old join key. Read as a delete there, it is routed to
that join key's partition and retracts the row, while the ``update_postimage`` inserts it at the
new one; so that side fuses too.

A key step that is not keyed by the join key column for column (:func:`keyed_by_join_key`) runs
with ``by_join_key`` (:class:`~streamjoin.table.rekey.TableRekey`): a deleted key keeps its join
key in its value, its state is split by that join key when partitions change, and on a declared
side a change that would move a held row to another join key is set aside with its reason
(:data:`streamjoin.table.rekey.MOVED_REASON`). A declaration is the user's promise, as a
``NOT ENFORCED`` constraint of SQL engines is: a move is seen only where the old and the new join
key fall in one partition, and a delete must carry the row's join key to reach it.

Inputs, in this order (the plan puts earlier stages' outputs before a join input): the routed
changes of each side that keeps its key stage (named ``left`` / ``right``, as the join stage's),
then the changes of each fused side (``left_changes`` / ``right_changes``, the key stage's
``changes`` input, routed by its join-key columns). The output, the view changes and the metrics
are the two steps' (a metric both report is summed); rows a fused side's key step sets aside are
that input's.

**State**: the join stage's areas (:data:`streamjoin.table.state.LAYOUT`) and each fused side's
key-stage areas (:data:`streamjoin.table.rekey.LAYOUT`) under the prefix ``l`` or ``r``::

    b"lK" | pack(primary key)  ->  pack(change time, sequence, has row, *join key)   (left fused)
    b"rK" | ...                                                                      (right fused)
    b"L" | b"R" | b"\\x00meta"  ->  the join stage's rows and counts

A fused side keyed by its join key column for column (:func:`direct_side`) keeps **one entry a
key**: its key step holds the row (``TableRekey(holds_rows=True)``)::

    b"rK" | pack(primary key)  ->  pack(change time, sequence, has row) + the row's bytes (none: deleted)

and the join stage holds none of that side's rows in ``L`` / ``R``: its step reads them there (the
one row of a join key, by key: :meth:`streamjoin.table.stage.TableJoinStage.with_rows_in`) and
gives its upserts back instead of writing them, and this stage puts each after its key's head.
So a change of such a side reads and writes one entry, not one of each area, and the version's
writes, the store's merges, the changelog and its snapshots carry a third fewer entries in a
foreign-key join. A checkpoint begun before (its key step's definition without ``holds_rows``)
keeps its rows beside its keys (:func:`rows_apart_sides`).

The two steps read and write disjoint areas (or, for a side whose key step holds its rows, the
join step reads that side's and writes none), so their writes are one atomic write of the version.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changes import ChangeFormat
from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.evolution import OptionRule, SchemaPlace
from streamjoin.runtime.keygroups import routing_types
from streamjoin.runtime.operator import InputSpec, Operator, StepInput, StepResult
from streamjoin.statestore.base import KeyValue, Store
from streamjoin.statestore.codecs import unpack, unpack_head
from streamjoin.statestore.columns import ColumnWrite
from streamjoin.statestore.keysort import index_in
from streamjoin.table import load
from streamjoin.table.rekey import TableRekey, carries_pre_images
from streamjoin.table.stage import TableJoinStage
from streamjoin.table.state import HELD, KEY_AREA_PREFIX, LAYOUT
from streamjoin.table.step import JoinStep
from streamjoin.table.views import FUSED_VIEWS

if TYPE_CHECKING:
    from streamjoin.runtime.regroup import Ownership

__all__ = ["FusedTableJoinStage", "AREA_PREFIX", "SIDES", "keyed_by_join_key", "direct_side", "fusable",
           "FusedKeys", "fused_keys", "rows_apart_sides"]

SIDES = ("left", "right")
AREA_PREFIX = KEY_AREA_PREFIX


def keyed_by_join_key(key: Sequence[str], on: Sequence[str]) -> bool:
    """Whether a side's primary key ``key`` is its join key ``on``, column for column: a change
    routed by primary key then reaches the partition of its join key."""
    return list(key) == list(on)


def direct_side(stage: TableRekey) -> bool:
    """Whether a key stage's side is keyed by its join key (:func:`keyed_by_join_key`)."""
    return keyed_by_join_key(stage.side.key, stage.side.on)


def fusable(key: Sequence[str], on: Sequence[str], immutable_join_key: bool = False, kept: bool = False,
            before_images: bool = False) -> bool:
    """Whether a side's key step can run inside the join stage: it is declared with an immutable
    join key, or, unless its checkpoint recorded a key stage of its own (``kept``: one started
    before such a side fused keeps its stages), its join-key columns are among its primary-key
    columns or its changes carry their pre-images (``before_images``: a view's change stream;
    see module)."""
    return bool(immutable_join_key) or (not kept and (set(on) <= set(key) or before_images))


@dataclass(frozen=True)
class FusedKeys:
    """How a fused side's key step runs (:class:`~streamjoin.table.rekey.TableRekey`'s options)."""

    by_join_key: bool
    immutable: bool
    before_images: bool
    holds_rows: bool


def fused_keys(key: Sequence[str], on: Sequence[str], changes: ChangeFormat, immutable_join_key: bool = False,
               kept: bool = False, rows_apart: bool = False) -> FusedKeys | None:
    """How a side's key step runs inside the join stage (None: the side keeps its key stage,
    :func:`fusable`). Keyed by its join key column for column it runs as in a key stage and
    holds the side's rows (unless ``rows_apart``: a checkpoint that keeps them in the join
    stage's area, :func:`rows_apart_sides`); else by join key, setting moves aside when declared
    immutable and reading pre-images as retractions when its rows can move and its changes carry
    them."""
    images = carries_pre_images(changes)
    if not fusable(key, on, immutable_join_key, kept, images):
        return None
    routed = not keyed_by_join_key(key, on)
    moves = not set(on) <= set(key)   # a row can change join key
    declared = bool(immutable_join_key) and routed
    return FusedKeys(routed, declared, images and routed and moves and not declared, not routed and not rows_apart)


def rows_apart_sides(definition: Mapping[str, Any] | None) -> frozenset[str]:
    """The sides whose fused key step a fused join stage's recorded ``definition`` (None: none
    recorded) runs without holding the side's rows (a checkpoint begun before key steps held
    them, streamjoin 0.3's first layout): such a side keeps that layout, its rows in the join
    stage's area beside its keys."""
    if not definition or definition.get("kind") != FusedTableJoinStage.kind:
        return frozenset()
    return frozenset(name for name in SIDES if f"{name}_keys" in definition
                     and not definition[f"{name}_keys"].get("by_join_key")
                     and not definition[f"{name}_keys"].get("holds_rows"))


class FusedTableJoinStage(Operator):
    """Stage 2 with the key steps of its fused sides (see module)."""

    kind = "table_join_fused"
    set_aside_inputs = ("left", "right", "left_changes", "right_changes", "left_changes_source",
                        "right_changes_source")
    state_views = FUSED_VIEWS

    def __init__(self, join: TableJoinStage, keyed: Mapping[str, TableRekey]) -> None:
        """``join``: the join stage; ``keyed``: the key stage of each fused side (by side name),
        built with ``area_prefix=AREA_PREFIX[side]``, and with ``by_join_key`` unless the side is
        keyed by its join key (:func:`direct_side`). Raises ValueError for a key stage that is
        neither, for no key stage, or for a key stage without its prefix."""
        if not keyed or any(name not in SIDES for name in keyed):
            raise ValueError(f"a fused join stage takes the key stage of one or both sides, not {sorted(keyed)}")
        for name, stage in keyed.items():
            if direct_side(stage) == stage.by_join_key:
                raise ValueError(f"the {name} key stage must be routed by join key (by_join_key) exactly when its "
                                 "primary key is not its join key column for column")
            if stage.layout["keys"].prefix != AREA_PREFIX[name] + b"K":
                raise ValueError(f"the {name} key stage must be built with area_prefix={AREA_PREFIX[name]!r}")
        self.keyed = dict(keyed)
        # a key step that holds its side's rows: the join step reads and gives them, writes none
        self.join = join.with_rows_in({name: stage.layout["keys"] for name, stage in self.keyed.items()
                                       if stage.holds_rows})
        #: the sides in input order: routed ones first, then fused ones
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
        """A fused side with ``expire_rows`` retracts rows once the horizon passes them."""
        return any(stage.waits_for_watermark for stage in self.keyed.values())

    def definition(self) -> dict[str, Any]:
        return {"kind": self.kind, "join": self.join.definition(),
                **{f"{name}_keys": self.keyed[name].definition() for name in SIDES if name in self.keyed}}

    def schema_places(self) -> tuple[SchemaPlace, ...]:
        """The join stage's sides, and each fused side's key stage (its ``<side>_keys`` entry)."""
        joined = tuple(replace(p, path=("join", *p.path)) for p in self.join.schema_places())
        return joined + tuple(self.keyed[name].side.schema_place(f"{name}_keys", input=f"{name}_keys")
                              for name in SIDES if name in self.keyed)

    def option_rules(self) -> tuple[OptionRule, ...]:
        """Each fused side's key stage's (a longer retention)."""
        return tuple(replace(rule, path=(f"{name}_keys", *rule.path)) for name in SIDES if name in self.keyed
                     for rule in self.keyed[name].option_rules())

    def with_schema_history(self, definitions: Sequence[Mapping[str, Any]]) -> FusedTableJoinStage:
        """This stage with its join stage's rows in the layouts of their history (see
        :meth:`TableJoinStage.with_schema_history`)."""
        return FusedTableJoinStage(self.join.with_schema_history([d["join"] for d in definitions]), self.keyed)

    def regroup(self, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
        """The join stage's entries of the owned key groups, and each fused side's key-stage
        entries (by primary key where it is the join key, else by the join key they hold)."""
        kept = list(self.join.regroup(sources, owned))
        for stage in self.keyed.values():
            kept += stage.regroup(sources, owned)
        if self.join.rows_in:   # the rows held per side, counted where each side's rows are
            counts = []
            for name in SIDES:
                area = self.join.rows_in.get(name)
                counts.append(sum(1 for key, value in kept if key.startswith(area.prefix) and unpack_head(value, 3)[0][2])
                              if area is not None else
                              sum(1 for key, _ in kept if key.startswith(LAYOUT[name].prefix)))
            kept = [entry for entry in kept if entry[0] != HELD.key()] + \
                ([HELD.put(tuple(counts))] if any(HELD.get(source) is not None for source in sources) else [])
        return sorted(kept)

    # -- starting from state rows (streamjoin.table.load) ------------------------------------------

    def _keyed_side(self, side: str) -> tuple[str, TableRekey | None]:
        """The table of a ``<table>_keys`` side, and its fused key step (None: not fused here)."""
        name = side[:-len("_keys")]
        return name, self.keyed.get(name)

    def state_key(self, side: str, rows: pa.Table) -> list[pa.Array]:
        """A row's routing key: its join key; a fused side's key row's: its key step's
        (:meth:`TableRekey.state_key`). Keys of a side that keeps its key stage are refused."""
        if side in SIDES:
            return self.join.state_key(side, rows)
        name, stage = self._keyed_side(side)
        if stage is None:
            if rows.num_rows:
                raise JoinDefinitionError(
                    f"initial_state[{side!r}]: this join stage holds no keys of the {name} table, whose key stage "
                    f"is a stage of its own: give them to the stage {side!r}")
            return [pa.nulls(0, kind) for kind in routing_types(self._inputs)]
        return stage.state_key("keys", rows)

    def state_summary(self, side: str, rows: pa.Table) -> dict[str, int]:
        """A fused side's key step's, as the progress of its ``<table>_changes`` input."""
        if side in SIDES:
            return {}
        name, stage = self._keyed_side(side)
        return {} if stage is None else load.key_summary(stage, rows, self._inputs[self.order.index(name)].name)

    def load_state(self, rows: Mapping[str, pa.Table], summary: Mapping[str, int], version: int) -> list[KeyValue]:
        """The join stage's entries of the rows, and each fused side's key step's of its keys."""
        entries = load.join_entries(self.join, rows)
        for name, stage in self.keyed.items():
            keys = stage.load_state({"keys": rows[f"{name}_keys"]} if f"{name}_keys" in rows else {}, summary, version)
            if stage.holds_rows:   # its rows' entries are under its keys: each put after its key's head
                area = stage.layout["keys"]
                held = {key: row for key, row in entries if key.startswith(area.prefix)}
                entries = [entry for entry in entries if not entry[0].startswith(area.prefix)]
                keys = [(key, _row_after_head(name, key[len(area.prefix):], value, held.pop(key, None))
                         if key.startswith(area.prefix) else value) for key, value in keys]
                if held:
                    raise JoinDefinitionError(
                        f"initial_state[{name!r}] holds a row of primary key {area.decode(next(iter(held)))[0]} that "
                        f"initial_state['{name}_keys'] has no entry for; give every row's key, as read_state shows it")
            entries += keys
        return sorted(entries)

    def step(self, state: Store, batch: StepInput) -> StepResult:
        """Each fused side's key step, then the join step over both sides' routed changes."""
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
        step = JoinStep(self.join, state, StepInput(batch.version, batch.partition, (routed["left"], routed["right"]),
                                                    (None, None), batch.final, batch.processing_time))
        joined = step.run()
        kept = {name: _with_rows(_writes(result), *step.upserted[name]) if name in step.upserted else _writes(result)
                for name, result in keyed.items()}
        # the join's areas' prefixes sort before the key steps' (l, r): in key order as they come
        writes = ColumnWrite.concat([_writes(joined), *kept.values()])
        metrics: Counter[str] = Counter(joined.metrics)
        for result in keyed.values():   # filled in SIDES order: left (l) before right (r)
            metrics.update(result.metrics)
        aside = tuple(keyed[name].set_aside[0] if name in keyed else joined.set_aside[SIDES.index(name)]
                      for name in self.order)
        return StepResult(joined.output, aside, writes=writes.sorted(), metrics=dict(metrics))


def _row_after_head(side: str, pk: bytes, head: bytes, row: bytes | None) -> bytes:
    """The state value of primary key ``pk`` (``pack`` bytes) where its key step holds the row:
    ``head`` (``pack(change time, sequence, has row)``), then ``row`` when the head says it has
    one. Raises :class:`JoinDefinitionError` for a key said to hold a row that is not given, or a
    row of a key said to hold none."""
    has_row = bool(unpack_head(head, 3)[0][2])
    if has_row == (row is not None):
        return head + (row or b"")
    what = "holds a row (_has_row true) that" if has_row else "holds no row (_has_row false), yet"
    raise JoinDefinitionError(f"initial_state['{side}_keys']: the key {list(unpack(pk))} {what} initial_state[{side!r}] "
                              f"{'does not give' if has_row else 'gives one'}; give both as read_state shows them")


def _with_rows(write: ColumnWrite, keys: pa.Array, rows: pa.Array) -> ColumnWrite:
    """A key step's ``write`` that holds its side's rows (``TableRekey(holds_rows=True)``), each
    put of a key upserted in the version (state ``keys``, given with their ``rows``) followed
    by its row. Every upsert is a put of the key step (its key's last change leaves a row);
    raises ValueError otherwise (the two steps disagree: a defect)."""
    if not len(keys):
        return write
    at = index_in(write.put_keys, keys)
    found = at >= 0
    if int(found.sum()) != len(keys):
        raise ValueError(f"the join step upserted {len(keys)} rows of a side whose key step holds them, and the key "
                         f"step wrote {int(found.sum())} of their keys")
    taken = pa.array(np.where(found, at, 0), pa.int64(), mask=~found)
    tails = pc.fill_null(rows.take(taken).cast(pa.binary()), b"")
    values = pc.binary_join_element_wise(write.put_values, tails, pa.scalar(b"", pa.binary()))
    return ColumnWrite(write.put_keys, values, write.delete_keys)


def _writes(result: StepResult) -> ColumnWrite:
    """A step result's state changes, as columns: the table join's steps give them so."""
    if result.writes is None:
        raise ValueError("a fused join stage's steps give their writes as columns")
    return result.writes
