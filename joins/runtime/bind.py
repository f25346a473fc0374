"""Binding a query to its checkpoint, on the driver, before any task runs: the one bind every
engine calls (the Spark layer, the in-process runner, the benches' profiles).

:func:`bind_query`, in order: records or checks the definition, run mode and key groups
(``streamjoin.json``, :class:`streamjoin.runtime.checkpoint.binding.Binding`); makes
``partitions`` the partition count (the current partitioning epoch, or a new one: a rescale,
:func:`streamjoin.runtime.rescale.bind_partitions`); records each input's set-aside columns;
and, when the checkpoint has neither state nor complete initial rows, calls the engine's
``write_initial`` (which routes the initial rows to their partitions, as the engine routes the
query's rows) and marks them complete, or, asked to ``defer_initial``, leaves that to the engine
(:func:`write_initial_rows`, e.g. while its query starts). A definition whose inputs' columns evolved in ways the
operator's state can follow (:meth:`Operator.schema_places`) is recorded as an evolution. ``streamjoin.json`` is read once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping

from streamjoin.runtime.checkpoint import Checkpoint, RunMode
from streamjoin.runtime.operator import Operator, set_aside_schema
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.rescale import Epoch, bind_partitions

__all__ = ["BoundQuery", "bind_query", "write_initial_rows"]


@dataclass(frozen=True)
class BoundQuery:
    """A query bound to its checkpoint: where it is (``uri``, resolved), its partition count,
    key groups and partitioning epoch, and the state config its tasks run with (``initial`` set
    when the checkpoint holds complete initial rows)."""

    uri: str
    partitions: int
    key_groups: int
    epoch: Epoch
    state: StateConfig
    #: the operator the tasks run: the one bound, for the checkpoint's schema history
    #: (:meth:`Operator.with_schema_history`); None only for a record made by hand
    operator: Operator | None = None
    #: the initial rows are still to be written (``bind_query(defer_initial=True)``): the engine
    #: calls :func:`write_initial_rows` and lets no task run until they are complete
    initial_pending: bool = False

    @property
    def checkpoint(self) -> Checkpoint:
        """The bound checkpoint."""
        return Checkpoint(self.uri)


def bind_query(
    uri: str, operator: Operator, partitions: int, *, mode: RunMode = RunMode.STREAMING,
    key_groups: int | None = None, state: StateConfig | None = None,
    write_initial: Callable[[BoundQuery], Mapping[str, int]] | None = None, defer_initial: bool = False,
) -> BoundQuery:
    """Bind checkpoint ``uri`` to ``operator`` run in ``partitions`` partitions (see module).

    ``write_initial(bound)`` writes each partition's initial rows (``cp.initial.write``) and
    returns how many rows each input has; it is called only when the checkpoint has no state and
    no complete initial rows (a join's first start, or one whose earlier writing failed), and the
    rows are then marked complete. ``defer_initial``: instead of calling it, clear what an earlier
    writing left and return a query with ``initial_pending`` set, whose engine then calls
    :func:`write_initial_rows` before any task runs. Raises what :meth:`Binding.bind` and
    :func:`streamjoin.runtime.rescale.bind_partitions` raise (:class:`JoinDefinitionError`,
    :class:`CheckpointMismatchError`), before any initial rows are written.
    """
    checkpoint = Checkpoint(uri)
    root = checkpoint.binding.bind(operator.definition(), partitions, mode=mode, key_groups=key_groups,
                                   places=operator.schema_places(), options=operator.option_rules())
    epoch = bind_partitions(checkpoint, partitions, operator, root=root)
    for spec in operator.inputs:
        checkpoint.set_aside.write_schema(spec.name, set_aside_schema(spec.schema))
    state = replace(state or StateConfig(), checkpoint_id=checkpoint.binding.identity(root))
    history = checkpoint.binding.bound_history
    evolved = operator.with_schema_history(history) if len(history) > 1 else operator
    bound = BoundQuery(checkpoint.uri, partitions, checkpoint.binding.key_groups(root), epoch, state, evolved)
    done = checkpoint.initial.done()
    if done is None and write_initial is not None and not checkpoint.commits.has_state():
        checkpoint.initial.clear()   # (what a writing cut short left: a side the rows now lack must not stay)
        if defer_initial:
            return replace(bound, state=replace(bound.state, initial=True), initial_pending=True)
        done = dict(write_initial(bound))
        checkpoint.initial.mark_done(done)
    if done is not None:
        bound = replace(bound, state=replace(bound.state, initial=True))
    return bound


def write_initial_rows(bound: BoundQuery, write_initial: Callable[[BoundQuery], Mapping[str, int]]
                       ) -> dict[str, int]:
    """Write the initial rows of a query bound with ``initial_pending`` (``write_initial(bound)``,
    as :func:`bind_query` calls it), mark them complete and return how many each input has; if
    writing raises, record why
    (:meth:`streamjoin.runtime.checkpoint.initial.Initial.mark_failed`, which
    :meth:`~streamjoin.runtime.checkpoint.initial.Initial.wait` raises) and raise it again."""
    checkpoint = bound.checkpoint
    try:
        counts = dict(write_initial(bound))
    except BaseException as exc:
        checkpoint.initial.mark_failed(f"{type(exc).__name__}: {exc}")
        raise
    checkpoint.initial.mark_done(counts)
    return counts
