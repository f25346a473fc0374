"""The engine-free operator contract: one partition, one version, a whole batch at a time.

An operator is a pure function of (its state as of version ``v-1``, the rows of version ``v`` for
each input, the global event-time progress before ``v``) to (output rows, rows set aside, the state
changes of version ``v``, metrics). It reads its state through a :class:`streamjoin.statestore.Store` and never
writes it: it returns the writes, and the runtime commits them with the version (changelog first,
then the local store). It never reads the wall clock and never uses randomness, so executing a
version again from the same state gives the same result, and its output must not depend on the
order of rows inside a batch.

Time is microseconds since the epoch (``int``). ``max_times[i]`` is the largest event time among
input ``i``'s rows in all versions before this one, across all partitions (None before the first
row): the operator derives its watermarks from it (docs/design/semantics.md "Time"). ``final`` marks the last version of a
run (a batch run's only one, or a streaming run's closing version): after this version's rows, the
watermark is +infinity; ``max_times`` are still the progress before it. An operator that
reads processing time (:attr:`Operator.uses_processing_time`: an ``idle_timeout``) gets it as data
too: ``processing_time``, the latest processing time known before the version, and
``advanced_at[i]``, the processing time at which input ``i``'s progress last advanced (both
carried by the commit records, the same on every partition and every execution of a version).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Mapping, Sequence

import pyarrow as pa

from streamjoin.errors import CheckpointMismatchError, JoinDefinitionError
from streamjoin.kit.columns import REASON_COLUMN, cast_values, conform
from streamjoin.statestore.base import KeyValue, Store
from streamjoin.statestore.columns import ColumnWrite

if TYPE_CHECKING:
    from streamjoin.runtime.evolution import OptionRule, SchemaPlace
    from streamjoin.runtime.plan import JoinPlan
    from streamjoin.runtime.regroup import Ownership
    from streamjoin.runtime.views import StateView

__all__ = ["InputSpec", "StepInput", "StepResult", "Operator", "REASON_COLUMN", "NEG_INF", "POS_INF", "conform", "cast_values", "set_aside_schema", "SpecOperator"]


#: Watermark bounds, as microseconds (the int64 range).
NEG_INF = -(1 << 63)
POS_INF = (1 << 63) - 1


@dataclass(frozen=True)
class InputSpec:
    """One input of an operator.

    ``key`` columns route rows to partitions (rows with equal keys meet in one partition);
    ``time`` is the event-time column whose maximum drives the watermark (None: no event time).
    """

    name: str
    schema: pa.Schema
    key: tuple[str, ...]
    time: str | None


@dataclass(frozen=True)
class StepInput:
    """What one partition receives for one version."""

    version: int
    partition: int
    rows: tuple[pa.Table, ...]
    max_times: tuple[int | None, ...]
    final: bool = False
    #: The latest processing time (µs) known before this version; None: none known.
    processing_time: int | None = None
    #: Per input, the processing time (µs) its progress last advanced at (None or empty: not known).
    advanced_at: tuple[int | None, ...] = ()


@dataclass
class StepResult:
    """What one partition produces for one version.

    ``set_aside[i]`` holds input ``i``'s rows that were not processed, in that input's schema plus
    a string column :data:`REASON_COLUMN` (``"late"``, ``"null event time"``, ...). Nothing an
    operator does not process may go anywhere else.
    """

    output: pa.Table
    set_aside: tuple[pa.Table, ...]
    puts: Sequence[KeyValue] = ()
    deletes: Sequence[bytes] = ()
    delete_ranges: Sequence[tuple[bytes, bytes]] = ()
    metrics: Mapping[str, int] = field(default_factory=dict)
    #: the state changes as Arrow columns, for an operator that computes them column-wise
    #: (``Store.write_columns``); with it, ``puts``, ``deletes`` and ``delete_ranges`` stay empty
    writes: ColumnWrite | None = None

    def __post_init__(self) -> None:
        if self.writes is not None and (self.puts or self.deletes or self.delete_ranges):
            raise ValueError("a step result gives its state changes as lists or as columns (writes=), not both")

    def write_to(self, store: Store, version: int | None) -> None:
        """Apply the state changes to ``store`` in one atomic write at ``version``."""
        if self.writes is not None:
            store.write_columns(self.writes, version=version)
        else:
            store.write(self.puts, self.deletes, self.delete_ranges, version=version)


class Operator(ABC):
    """A partitioned, stateful operator with a fixed output schema.

    ``definition()`` is JSON-serialisable and identifies what the operator computes (kind, columns,
    bounds, mode...): a checkpoint written by one definition is refused by another.
    """

    #: short name of the operator kind, e.g. ``"interval_join"``: a checkpoint's definition names
    #: it, and :mod:`streamjoin.runtime.registry` gives the class back from it
    kind: str = "operator"

    # What the engine reads about a kind, declared on its class (from a checkpoint's definition
    # alone, through the registry: ``set_aside_rows``, ``join_metrics``, progress, ``read_state``).
    #: The input names whose rows it sets aside (its inputs' names, and any whose rows the Spark
    #: layer refuses before routing, e.g. ``table_source``).
    set_aside_inputs: ClassVar[tuple[str, ...]] = ()
    #: Its own metrics (beyond the runtime's, in ``StepResult.metrics``) and how partitions'
    #: values combine: ``"sum"``, or ``"max"`` (a watermark: the same on every partition).
    metric_merges: ClassVar[Mapping[str, str]] = {}
    #: Which of its metrics are event times (µs; shown as timestamps).
    time_metrics: ClassVar[frozenset[str]] = frozenset()
    #: Its state as ``read_state`` shows it, by side.
    state_views: ClassVar[Mapping[str, StateView]] = {}

    @property
    @abstractmethod
    def inputs(self) -> tuple[InputSpec, ...]:
        """The operator's inputs, in the order ``StepInput.rows`` carries them."""

    @property
    @abstractmethod
    def output_schema(self) -> pa.Schema:
        """The schema of ``StepResult.output``."""

    @abstractmethod
    def definition(self) -> dict[str, Any]:
        """A JSON-serialisable description of what this operator computes."""

    @abstractmethod
    def step(self, state: Store, batch: StepInput) -> StepResult:
        """Process one version's rows against ``state`` (as of ``batch.version - 1``)."""

    def schema_places(self) -> tuple[SchemaPlace, ...]:
        """Where :meth:`definition` lists each input's columns, for the schema evolutions its
        checkpoint accepts (:mod:`streamjoin.runtime.evolution`): an operator that names places
        reads state rows stored under an earlier schema of an input in the current one. The
        default, none, keeps the columns a checkpoint was started with."""
        return ()

    def option_rules(self) -> tuple[OptionRule, ...]:
        """The options of :meth:`definition` a checkpoint accepts a larger value of (a delay, a
        TTL, a retention: :class:`streamjoin.runtime.evolution.OptionRule`). The default, none,
        refuses any changed option."""
        return ()

    def with_schema_history(self, definitions: Sequence[Mapping[str, Any]]) -> Operator:
        """This operator for a checkpoint whose definitions were ``definitions`` (the first one,
        then each schema evolution's, oldest first; the last is this operator's): one whose state
        holds what its rows need to be read under every earlier schema (the table-table join's
        stored row layouts, :mod:`streamjoin.table.layouts`). The default, for state that
        carries its schema, is the operator itself."""
        return self

    @property
    def uses_processing_time(self) -> bool:
        """Whether its results depend on processing time (an ``idle_timeout``): the engine then
        hands each task the batch's processing time (``TaskInfo.processing_time``)."""
        return False

    @property
    def waits_for_watermark(self) -> bool:
        """Whether some of its output waits for a later version's watermark (a row released,
        closed or expired once the watermark passes it). Such a join's query needs a no-data
        micro-batch after the one whose rows moved the watermark, in the same run under
        ``trigger(availableNow=True)``: only the flush source gives one there
        (:mod:`streamjoin.spark.flush`). The default, True, is the safe answer for any operator."""
        return True

    @property
    def plan(self) -> JoinPlan:
        """The join this operator is on its own: one stage over its inputs
        (:meth:`streamjoin.runtime.plan.JoinPlan.single`)."""
        from streamjoin.runtime.plan import JoinPlan  # (plan imports this module)

        return JoinPlan.single(self)

    def regroup(self, sources: Sequence[Store], owned: Ownership) -> Iterable[KeyValue]:
        """The state of the key groups ``owned`` selects, made from ``sources`` (the states of the
        old partitions that held them), in ascending key order: a new partition's state after a
        change of partition count (:mod:`streamjoin.runtime.regroup`). The default refuses, so an
        operator that cannot split its state by key group cannot be rescaled."""
        raise CheckpointMismatchError(
            f"{self.kind} cannot split its state by key group, so its checkpoint keeps the partition "
            "count it was started with; run it with that count, or start from a new checkpoint location")

    # -- starting from state rows (streamjoin.runtime.initial_state) --------------------------------

    def state_key(self, side: str, rows: pa.Table) -> list[pa.Array]:
        """The key each of ``side``'s state rows is routed by (``rows``: :attr:`state_views`'
        columns of ``side``): one array per key column, in the order of the inputs' ``key``, so
        the row reaches the partition its key's input rows reach. The default refuses: an
        operator that cannot say it cannot start from state rows."""
        raise JoinDefinitionError(f"{self.kind} cannot start from state rows (initial_state=): "
                                  "start it from a new checkpoint without them")

    def state_summary(self, side: str, rows: pa.Table) -> dict[str, int]:
        """What every partition's first version needs to know of all of ``side``'s state rows,
        as values merged by their maximum (e.g. the watermark the state was read at). The
        default: nothing."""
        return {}

    def load_state(self, rows: Mapping[str, pa.Table], summary: Mapping[str, int], version: int) -> list[KeyValue]:
        """The state entries of a partition given ``rows`` (each side's state rows routed to it,
        :attr:`state_views`' columns; a side may be missing or empty) and ``summary``
        (:meth:`state_summary` merged over all partitions): the state a run that ended before
        ``version`` holding those rows would have, so that ``version`` (which steps on it) and the
        versions after give that run's output. The default refuses (:meth:`state_key`)."""
        raise JoinDefinitionError(f"{self.kind} cannot start from state rows (initial_state=): "
                                  "start it from a new checkpoint without them")



class SpecOperator(Operator):
    """An operator defined by a validated ``spec`` (which has ``output_schema`` and
    ``definition()``) and a fixed tuple of inputs, set by the subclass as ``spec`` and ``_inputs``."""

    spec: Any
    _inputs: tuple[InputSpec, ...]

    @property
    def inputs(self) -> tuple[InputSpec, ...]:
        return self._inputs

    @property
    def output_schema(self) -> pa.Schema:
        return self.spec.output_schema

    def definition(self) -> dict[str, Any]:
        return self.spec.definition()

def set_aside_schema(schema: pa.Schema) -> pa.Schema:
    """The columns of an input's set-aside rows: the input's own, then :data:`REASON_COLUMN`."""
    return schema.append(pa.field(REASON_COLUMN, pa.string()))


