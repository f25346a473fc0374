"""Starting a join from state rows: what Flink's State Processor API and Spark's ``initialState``
give, for a join's whole state.

A join's state, as ``read_state`` shows it (one table of rows per side, :attr:`Operator.state_views`),
can start a new checkpoint: after a fix to the data (read, correct, start again), or to move a
join to a new definition keeping what the old one held. The rows given for each side are

1. checked against that side's columns before anything is written (:func:`check_state`: a
   missing side or column, or a type that does not cast, is a :class:`JoinDefinitionError`;
   ``read_state``'s ``_partition`` and ``_version`` and any other extra column are ignored);
2. routed to partitions by the key the operator reads from them (:meth:`Operator.state_key`),
   exactly as the join's input rows of that key are, and kept as initial rows of the name
   :func:`streamjoin.runtime.checkpoint.initial.state_name` (once, when the checkpoint has no
   state, like every initial row); with them, the maxima every partition needs
   (:meth:`Operator.state_summary`, merged over all partitions);
3. loaded by each partition's first version: the operator makes the state entries
   (:meth:`Operator.load_state`) and the version steps on them (:func:`step_on_loaded`); the
   version's delta holds the whole state, so restore, retries and rescaling work as for any
   version. Executing the first version again loads the same rows again.

The output of the versions after is what the run that ended holding that state would have
emitted next: nothing is emitted for the state rows themselves.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import pyarrow as pa

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.typenames import type_name
from streamjoin.runtime.checkpoint.initial import PROGRESS
from streamjoin.runtime.keygroups import routing_types
from streamjoin.runtime.operator import Operator, StepInput, StepResult
from streamjoin.statestore.columns import ColumnWrite
from streamjoin.statestore.memory import scratch_store

__all__ = ["state_columns", "check_state", "conform_state", "key_table", "with_keys", "route_state", "merge_summary",
           "step_on_loaded", "split_sides", "KEY_PREFIX", "check_given", "check_progress", "state_progress"]

#: The prefix of the routing key columns :func:`key_table` adds.
KEY_PREFIX = "__sj_state_k"


def state_columns(operator: Operator, side: str) -> pa.Schema:
    """The columns of ``side``'s state rows (``read_state``'s, without ``_partition`` and ``_version``)."""
    return pa.schema(operator.state_views[side].schema(operator.definition()))


def check_state(operator: Operator, given: Mapping[str, pa.Schema]) -> None:
    """Raise :class:`JoinDefinitionError` unless every side in ``given`` (its rows' schema) is a
    side of the operator's state whose every column is there, in a type that casts to it."""
    sides = list(operator.state_views)
    for side, schema in given.items():
        if side not in operator.state_views:
            raise JoinDefinitionError(f"initial_state: {operator.kind} has no state side {side!r}; its sides are {sides}")
        for field in state_columns(operator, side):
            if field.name not in schema.names:
                raise JoinDefinitionError(
                    f"initial_state[{side!r}] has no column {field.name!r}: give the rows as read_state returns "
                    f"them for that side (columns {state_columns(operator, side).names})")
            found = schema.field(field.name).type
            if found != field.type and not _casts(found, field.type):
                raise JoinDefinitionError(
                    f"initial_state[{side!r}] column {field.name!r} is {type_name(found)}, which does not cast to the "
                    f"state's {type_name(field.type)}: cast it, or give the rows as read_state returns them")


def _casts(source: pa.DataType, target: pa.DataType) -> bool:
    try:
        pa.array([], source).cast(target)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return False
    return True


def conform_state(operator: Operator, side: str, rows: pa.Table) -> pa.Table:
    """``rows`` as ``side``'s state columns, in their order and types (a value that does not fit
    its column's type is a :class:`JoinDefinitionError` naming it)."""
    columns = state_columns(operator, side)
    try:
        return pa.Table.from_arrays([rows.column(f.name).cast(f.type) for f in columns], schema=columns)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise JoinDefinitionError(f"initial_state[{side!r}]: {exc}") from exc


def key_table(operator: Operator, side: str, rows: pa.Table) -> pa.Table:
    """The routing key of each state row (``rows``: conformed) as columns ``KEY_PREFIX<i>``, in
    the types the join routes its inputs' keys in."""
    arrays = operator.state_key(side, rows)
    types = routing_types(operator.inputs)
    return pa.Table.from_arrays([a.cast(t) for a, t in zip(arrays, types)],
                                names=[f"{KEY_PREFIX}{i}" for i in range(len(types))])


def with_keys(operator: Operator, side: str, rows: pa.Table) -> pa.Table:
    """``rows`` (conformed) with their routing key columns (:func:`key_table`) after them."""
    keys = key_table(operator, side, rows)
    for name in keys.column_names:
        rows = rows.append_column(name, keys.column(name))
    return rows


def route_state(operator: Operator, side: str, rows: pa.Table, partitions: int, groups: int) -> list[pa.Table]:
    """``rows`` (conformed) split by partition, by key group as the engine routes the inputs."""
    from streamjoin.runtime.local import route  # (the in-process runner's task imports this module)

    tagged = with_keys(operator, side, rows)
    keys = tagged.column_names[rows.num_columns:]
    parts = route(tagged, keys, partitions, groups=groups, types=routing_types(operator.inputs))
    return [part.select(rows.column_names) for part in parts]


def check_given(rows: Mapping[str, object] | None, progress: Mapping[str, object] | None) -> None:
    """Raise :class:`JoinDefinitionError` for ``initial_progress`` given without ``initial_state``."""
    if progress and not rows:
        raise JoinDefinitionError("initial_progress is the progress of the state rows given as initial_state=: "
                                  "give both")


def check_progress(operator: Operator, progress: Mapping[str, int | None] | None) -> dict[str, int]:
    """The summary entries of ``progress`` (by input name, in each time column's unit: µs for a timestamp; None: none), or
    :class:`JoinDefinitionError` naming an input the operator does not have."""
    names = [spec.name for spec in operator.inputs]
    out: dict[str, int] = {}
    for name, value in (progress or {}).items():
        if name not in names:
            raise JoinDefinitionError(f"initial_progress: {operator.kind} has no input {name!r}; its inputs are {names}")
        if value is not None:
            out[PROGRESS + name] = int(value)
    return out


def state_progress(checkpoint: str) -> dict[str, int]:
    """Each input's event-time progress (by the join's input names, in its time column's unit: µs for a timestamp) after the newest version
    of ``checkpoint`` (a join's; a table-table join's stages read together): what a join started
    from its state rows starts from (``initial_progress``), so that its watermark is the one that
    checkpoint's next version would have had. Read it with the query stopped. Empty before any
    version; ``JoinDefinitionError`` for a location that is not a join checkpoint."""
    from streamjoin.runtime.checkpoint import Checkpoint
    from streamjoin.runtime.checkpoint.files import CheckpointFiles
    from streamjoin.runtime.plan import STAGES_FILE

    found = CheckpointFiles(checkpoint).read_json(STAGES_FILE)
    if found is None:
        if Checkpoint(checkpoint).binding.root() is None:   # (a typo would start the new join with no progress)
            raise JoinDefinitionError(
                f"state_progress: {checkpoint} is not a join checkpoint (it has no streamjoin.json, nor stages "
                "with one); pass the checkpoint location of the join the new one starts from")
        return _progress(checkpoint)
    out: dict[str, int] = {}
    for stage, wired in (found.get("inputs") or {}).items():
        own = _progress(f"{checkpoint.rstrip('/')}/{stage}" if stage else checkpoint)
        merge_summary(out, {wired[name]: t for name, t in own.items() if name in wired})
    return out


def _progress(checkpoint: str) -> dict[str, int]:
    """A one-stage checkpoint's progress by its operator's input names (its commit records'
    ``max_time_<input>`` of its newest version)."""
    from streamjoin.runtime.checkpoint import Checkpoint

    metrics = Checkpoint(checkpoint).commits.read_metrics()
    if not metrics:
        return {}
    newest = max(int(m.get("version", 0)) for m in metrics)
    out: dict[str, int] = {}
    for record in metrics:
        if int(record.get("version", 0)) != newest:
            continue
        for name, value in record.items():
            if name.startswith("max_time_") and value is not None:
                merge_summary(out, {name[len("max_time_"):]: int(value)})
    return out


def merge_summary(into: dict[str, int], more: Mapping[str, int]) -> dict[str, int]:
    """``into`` updated with ``more``, each value the larger of the two."""
    for name, value in more.items():
        into[name] = max(into[name], int(value)) if name in into else int(value)
    return into


def step_on_loaded(operator: Operator, rows: Mapping[str, pa.Table], summary: Mapping[str, int],
                   batch: StepInput) -> StepResult:
    """A partition's first version started from state rows: the operator's step on the state
    :meth:`Operator.load_state` makes of ``rows``, in a scratch memory store; the result's
    writes are that whole state after the step, as columns in key order, so the version's delta
    restores it."""
    with scratch_store("initial-state") as scratch:
        scratch.write(operator.load_state(rows, summary, batch.version))
        result = operator.step(scratch, batch)
        result.write_to(scratch, None)
        chunks = list(scratch.scan_columns())
    keys, values = (pa.concat_arrays([c[i].cast(pa.binary()) for c in chunks]) if chunks else pa.array([], pa.binary())
                    for i in (0, 1))
    return StepResult(output=result.output, set_aside=result.set_aside,
                      writes=ColumnWrite(keys, values, pa.array([], pa.binary())), metrics=result.metrics)


def split_sides(tables: Sequence[pa.Table | None], sides: Sequence[str]) -> dict[str, pa.Table]:
    """The sides whose state rows a partition has (``tables``: one per side, None: none)."""
    return {side: table for side, table in zip(sides, tables) if table is not None}
