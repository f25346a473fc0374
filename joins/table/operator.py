"""The table-table join (docs/design/semantics.md "Table-table join"), engine-free: two change streams -> the joined view's change stream.

    join = TableTableJoin(posts.schema, follows.schema, (["author_id"], ["followee_id"]),
                          left_key="post_id", right_key="follow_id", how="inner",
                          left_time="at", right_time="at")

It runs as three operators (:mod:`streamjoin.runtime.operator`), chained version by version:

1. ``join.left_stage`` (:class:`streamjoin.table.rekey.TableRekey`), input ``changes`` routed by the
   left table's **primary key** (``join.left_stage.inputs[0].key``): left changes -> left routed
   changes (:mod:`streamjoin.table.spec`), retracting a row from its old join key when it moves;
2. ``join.right_stage``, the same for the right table;
3. ``join.join_stage`` (:class:`streamjoin.table.stage.TableJoinStage`), inputs ``left`` and
   ``right`` (the two stages' outputs of the same version) routed by their **join-key** columns
   (``join.join_stage.inputs[i].key``): routed changes -> the view's change stream, in the Delta
   change data feed vocabulary (``join.output_schema``).

Applying the output in (``_commit_version``, ``_seq``) order (:class:`streamjoin.view.MaterializedView`)
gives, after every version, the relational join of the two tables as they stand (docs/design/semantics.md "Table-table join").
``join.plan`` declares the three as stages (:mod:`streamjoin.runtime.plan`), each with its own
state under the join's checkpoint (``left_keys``, ``right_keys``, ``join``): the Spark layer and
:class:`streamjoin.runtime.plan_runner.PlanRunner` (in process) run that plan. With
``fuse_key_stages=True``, a side whose primary key is its join key has no stage 1: its key step
runs inside stage 3 (``join.fused``, :mod:`streamjoin.table.fused`), and so does the key step of a
side whose join key is part of its primary key or that is declared with an immutable join key
(``left_immutable_join_key``, ``right_immutable_join_key``).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Collection, Sequence

import pyarrow as pa

from streamjoin.changes import ChangeFormat
from streamjoin.errors import JoinDefinitionError
from streamjoin.interval.spec import On
from streamjoin.kit.times import Duration
from streamjoin.runtime.checkpoint.binding import ROOT, Binding
from streamjoin.runtime.checkpoint.files import CheckpointFiles
from streamjoin.runtime.plan import UNRECORDED_STAGES, JoinPlan, Stage, recorded_stages
from streamjoin.table.fused import AREA_PREFIX, SIDES, FusedKeys, FusedTableJoinStage, fused_keys, rows_apart_sides
from streamjoin.table.rekey import TableRekey
from streamjoin.table.retention import side_retentions
from streamjoin.table.spec import How, TableJoinSpec, common_key_types, detect_format, parse_on
from streamjoin.table.stage import TableJoinStage

__all__ = ["TableTableJoin", "How", "LEFT_KEYS", "RIGHT_KEYS", "JOIN"]

#: The stages' names: their sub-checkpoints under the join's checkpoint.
LEFT_KEYS, RIGHT_KEYS, JOIN = "left_keys", "right_keys", "join"


class TableTableJoin:
    """A validated table-table join and its stages (see module docstring)."""

    def __init__(
        self, left_schema: pa.Schema, right_schema: pa.Schema, on: On, *, left_key: str | Sequence[str],
        right_key: str | Sequence[str], how: str | How = "inner", left_changes: ChangeFormat | None = None,
        right_changes: ChangeFormat | None = None, left_time: str | None = None, right_time: str | None = None,
        retention: Duration | None = None, expire_rows: bool = False,
        left_delay: Duration | None = None, right_delay: Duration | None = None, fuse_key_stages: bool = False,
        left_immutable_join_key: bool = False, right_immutable_join_key: bool = False,
        kept_key_stages: Collection[str] = (), rows_apart: Collection[str] = (),
    ) -> None:
        """Validate everything; raise :class:`streamjoin.errors.JoinDefinitionError` saying what to change.

        ``on``: a column name, a list of names (the same on both sides), or a pair (left names,
        right names). ``left_key``/``right_key``: the primary keys. ``*_changes`` None: told from
        the columns (:func:`streamjoin.table.spec.detect_format`; plain changes need ``*_time``).
        ``retention`` (a timedelta or a Spark interval string; None: keep every key forever):
        each key stage drops tombstones older than its side's newest change time minus
        ``retention`` and sets changes older than that aside as late; ``expire_rows`` drops
        rows whose last change is that old too, retracting their view rows
        (:mod:`streamjoin.table.retention`). ``left_delay``/``right_delay``: that table's own
        horizon distance instead of ``retention`` (how late its changes may be; the table-table
        join's lateness is its retention horizon, see :func:`streamjoin.table.retention.side_retentions`).
        ``fuse_key_stages``: a side whose join key never changes for a primary key runs its key
        step inside the join stage (:mod:`streamjoin.table.fused`): one stage and one exchange
        fewer. That is a side whose join-key columns are among its primary-key columns, or one
        declared with ``left_immutable_join_key`` / ``right_immutable_join_key`` (the user's
        promise: its rows never move to another join key, and its deletes carry the join key; a
        move seen is set aside, :data:`streamjoin.table.rekey.MOVED_REASON`). ``kept_key_stages``:
        the sides (``"left"``, ``"right"``) whose key stage the checkpoint recorded
        (:meth:`recorded_key_stages`); such a side fuses only when declared. A fused side keyed
        by its join key has its rows held by its key step (one state entry a key,
        :mod:`streamjoin.table.fused`), unless it is among ``rows_apart``: the sides whose
        checkpoint keeps them beside its keys (:meth:`recorded_rows_apart`).
        """
        if not isinstance(fuse_key_stages, bool):
            raise JoinDefinitionError(f"fuse_key_stages must be True or False, not {fuse_key_stages!r}")
        for argument, value in (("left_immutable_join_key", left_immutable_join_key),
                                ("right_immutable_join_key", right_immutable_join_key)):
            if not isinstance(value, bool):
                raise JoinDefinitionError(f"{argument} must be True or False, not {value!r}")
        for argument, sides in (("kept_key_stages", kept_key_stages), ("rows_apart", rows_apart)):
            if isinstance(sides, str) or not set(sides) <= set(SIDES):
                raise JoinDefinitionError(f"{argument} names sides of the join, some of {list(SIDES)}, not {sides!r}")
        immutable = {"left": left_immutable_join_key, "right": right_immutable_join_key}
        left_fmt = detect_format("left", left_schema, left_key, left_time, left_changes)
        right_fmt = detect_format("right", right_schema, right_key, right_time, right_changes)
        left_on, right_on = parse_on(on)
        types = common_key_types(left_schema, left_fmt, left_on, right_schema, right_fmt, right_on)
        # a table whose delay equals ``retention`` gets the same stage (and definition) as without one
        left_kept, right_kept = side_retentions(retention, [("left_delay", left_delay), ("right_delay", right_delay)],
                                                expire_rows)
        sides = {"left": (left_schema, left_fmt, left_on, left_kept), "right": (right_schema, right_fmt, right_on,
                                                                                 right_kept)}

        def key_stage(name: str, area_prefix: bytes = b"", fused: FusedKeys | None = None) -> TableRekey:
            schema, fmt, side_on, kept = sides[name]
            options = {} if fused is None else asdict(fused)   # its fields are TableRekey's routing options
            return TableRekey(schema, fmt, side_on, name, key_types=types, retention=kept, expire_rows=expire_rows,
                              area_prefix=area_prefix, **options)

        self.left_stage, self.right_stage = key_stage("left"), key_stage("right")
        self.join_stage = TableJoinStage(self.left_stage.side, self.right_stage.side, how)
        keyed = {}
        for stage in (self.left_stage, self.right_stage):
            name, side = stage.side.name, stage.side
            how_fused = fused_keys(side.key, side.on, side.changes, immutable[name], name in kept_key_stages,
                                   name in rows_apart)
            if fuse_key_stages and how_fused is not None:
                keyed[name] = key_stage(name, AREA_PREFIX[name], how_fused)
        self.fused = FusedTableJoinStage(self.join_stage, keyed) if keyed else None

    @staticmethod
    def recorded_fusion(checkpoint: str) -> bool | None:
        """Whether the join whose checkpoint is ``checkpoint`` was started with its key stages
        fused (``fuse_key_stages``), as its folder records it: stages without the key stage of a
        side, or one stage (its state in the folder itself); None for a checkpoint nothing was
        recorded in yet. A join with no side that fuses records three stages either way."""
        files = CheckpointFiles(checkpoint)
        stages = recorded_stages(files)
        if stages is not None:
            return LEFT_KEYS not in stages or RIGHT_KEYS not in stages
        if files.read_json(ROOT) is not None:
            return True
        # three stages written before stages.json was (streamjoin 0.2's included): not fused
        return False if any(files.exists(f"{name}/{ROOT}") for name in UNRECORDED_STAGES) else None

    @staticmethod
    def recorded_key_stages(checkpoint: str) -> frozenset[str]:
        """The sides (``"left"``, ``"right"``) whose key stage the join's checkpoint recorded
        (none for a new checkpoint, or one of one stage)."""
        stages = recorded_stages(CheckpointFiles(checkpoint)) or ()
        return frozenset(side for side, name in (("left", LEFT_KEYS), ("right", RIGHT_KEYS)) if name in stages)

    @staticmethod
    def recorded_rows_apart(checkpoint: str) -> frozenset[str]:
        """The fused sides whose key step the join's checkpoint records without their rows (a
        checkpoint begun before key steps held them: :func:`streamjoin.table.fused.rows_apart_sides`);
        none for a new checkpoint. Its state keeps that layout."""
        files = CheckpointFiles(checkpoint)
        stages = recorded_stages(files)
        where = files if stages is None or "" in stages else CheckpointFiles(f"{files.uri.rstrip('/')}/{JOIN}")
        binding = Binding(where)
        root = binding.root()
        return rows_apart_sides(binding.definition(root) if root is not None else None)

    @property
    def plan(self) -> JoinPlan:
        """The three stages: each side's changes by primary key, then both by join key. Fused
        (``fuse_key_stages``), the key stage of each side whose join key never changes is left
        out and the join stage reads that side's changes; with both sides fused the join is that
        one stage, its state in the join's checkpoint itself."""
        if self.fused is None:
            return JoinPlan((Stage(LEFT_KEYS, self.left_stage, (0,)), Stage(RIGHT_KEYS, self.right_stage, (1,)),
                             Stage(JOIN, self.join_stage, (LEFT_KEYS, RIGHT_KEYS))), SIDES)
        names = {"left": LEFT_KEYS, "right": RIGHT_KEYS}
        kept = [Stage(names[s], stage, (i,)) for i, (s, stage) in enumerate((("left", self.left_stage),
                                                                            ("right", self.right_stage)))
                if s not in self.fused.keyed]
        inputs = tuple(SIDES.index(s) if s in self.fused.keyed else names[s] for s in self.fused.order)
        return JoinPlan((*kept, Stage(JOIN if kept else "", self.fused, inputs)), SIDES)

    @property
    def spec(self) -> TableJoinSpec:
        return self.join_stage.spec

    @property
    def how(self) -> How:
        return self.spec.how

    @property
    def output_schema(self) -> pa.Schema:
        """The view's change stream: left row, right row, ``_change_type``, ``_commit_version``, ``_seq``."""
        return self.spec.output_schema

    @property
    def view_schema(self) -> pa.Schema:
        """The view's columns (the output without the change-feed columns)."""
        return self.spec.view_schema

    @property
    def view_key(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Output names of the left and right primary-key columns: the view key."""
        return self.spec.view_key

    def definition(self) -> dict[str, Any]:
        return self.spec.definition()

    def __repr__(self) -> str:
        s = self.spec
        return (f"TableTableJoin(on=({list(s.left.on)!r}, {list(s.right.on)!r}), left_key={list(s.left.key)!r}, "
                f"right_key={list(s.right.key)!r}, how={s.how.value!r}, left_changes={s.left.changes!r}, "
                f"right_changes={s.right.changes!r})")
