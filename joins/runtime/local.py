"""Run an operator over several partitions in this process, exactly as the Spark runtime does.

``LocalRunner`` routes each version's rows to partitions by the key groups of their key columns
(:mod:`streamjoin.runtime.keygroups`) and calls
:func:`streamjoin.runtime.task.run_task` for every partition (empty ones too, as Spark does), so the
tests exercise the same state, changelog and watermark code as a Spark query, without a JVM. It
can also lose its local stores, execute a version again, and restart (with another partition
count too, :mod:`streamjoin.runtime.rescale`), to test recovery and rescaling.
"""

from __future__ import annotations

import dataclasses
import shutil
import zlib
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa

from streamjoin.kit import normal_keys
from streamjoin.runtime.bind import bind_query
from streamjoin.runtime.checkpoint.initial import state_name
from streamjoin.runtime.keygroups import by_owner, check_count, key_groups, owners, routing_types
from streamjoin.runtime.operator import Operator
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.rescale import current_epoch, epoch_dir
from streamjoin.runtime.task import TaskInfo, local_store_path, run_task
from streamjoin.statestore import Store, destroy_store
from streamjoin.statestore.codecs import pack

__all__ = ["LocalRunner", "route"]


def route(
    table: pa.Table, key: Sequence[str], partitions: int, *, groups: int | None = None,
    types: Sequence[pa.DataType] | None = None,
) -> list[pa.Table]:
    """Split ``table`` into ``partitions`` tables by its ``key`` columns' values: by key group
    (:func:`streamjoin.runtime.keygroups.key_groups` of ``groups`` key groups, keys cast to
    ``types``; each partition takes a contiguous range of key groups), or, with ``groups`` None,
    by a CRC-32 of the values (the route before key groups, kept for ``streamjoin bench rescale``)."""
    if partitions == 1 or table.num_rows == 0:
        return [table] + [table.slice(0, 0)] * (partitions - 1)
    if groups is not None:
        found = dict(by_owner(table, owners(key_groups(table, key, groups, types), partitions, groups)))
        return [found.get(p, table.slice(0, 0)) for p in range(partitions)]
    normal = normal_keys(table, key)  # -0.0 and 0.0, and every NaN, to one partition (as Spark routes)
    columns = [normal.column(k).to_pylist() for k in key]
    hashed = [zlib.crc32(pack(*values)) % partitions for values in zip(*columns)]
    indices: list[list[int]] = [[] for _ in range(partitions)]
    for row, target in enumerate(hashed):
        indices[target].append(row)
    return [table.take(pa.array(ix, pa.int64())) for ix in indices]


class LocalRunner:
    """Drives one operator through versions 0, 1, 2, ... over ``partitions`` partitions."""

    def __init__(
        self,
        operator: Operator,
        checkpoint: str,
        *,
        partitions: int = 1,
        config: StateConfig | None = None,
        key_groups: int | None = None,
        query_id: str | None = None,
        wrap_store: Callable[[Store], Store] | None = None,
    ) -> None:
        """Bind ``checkpoint`` to the operator: a new one keeps state in ``key_groups`` key groups
        (None: the default); ``partitions`` is an int from 1 to the key groups (else
        :class:`JoinDefinitionError`, before the checkpoint is written); an existing one may be restarted with another ``partitions``
        (:mod:`streamjoin.runtime.rescale`), unless written before key groups. ``query_id``: run
        as the tasks of that streaming query (the checkpoint is bound to it, and each partition's
        store stays open between versions, :mod:`streamjoin.statestore.warm`); None: as batch tasks.
        ``wrap_store``: given to every task (:func:`streamjoin.runtime.task.step_task`; benchmark
        instrumentation, None: no wrapping)."""
        check_count(partitions, "partitions")
        if key_groups is not None:
            check_count(key_groups, "key_groups")
        self.operator = operator
        self.query_id = query_id
        self.wrap_store = wrap_store
        self.partitions = partitions
        bound = bind_query(checkpoint, operator, partitions, key_groups=key_groups,
                           state=config or StateConfig(store="memory"))
        self.operator = bound.operator or operator   # for the checkpoint's schema history
        self.config = bound.state
        self.checkpoint = bound.checkpoint
        self.groups = bound.key_groups
        self.types = routing_types(operator.inputs)
        self.version = 0
        self.metrics: list[dict[str, Any]] = []

    def run(self, *rows: pa.Table, version: int | None = None, final: bool = False,
            processing_time: int | None = None) -> pa.Table:
        """Execute one version (the next one unless ``version`` is given) and return its output.
        ``processing_time`` (µs; None: none) is the version's processing time, given to every
        partition as Spark's batch timestamp is (:attr:`streamjoin.runtime.task.TaskInfo.processing_time`);
        nothing here reads a clock."""
        if len(rows) != len(self.operator.inputs):
            raise ValueError(f"{self.operator.kind} takes {len(self.operator.inputs)} inputs, got {len(rows)}")
        version = self.version if version is None else version
        routed = [self._route(t, spec.key) for t, spec in zip(rows, self.operator.inputs)]
        outputs = []
        for partition in range(self.partitions):
            task = TaskInfo(version, partition, self.partitions, final=final, query_id=self.query_id,
                            processing_time=processing_time)
            part_rows = tuple(r[partition] for r in routed)
            output, metrics = run_task(self.operator, self.checkpoint, self.config, task, part_rows,
                                       wrap_store=self.wrap_store)
            outputs.append(output)
            self.metrics.append(metrics)
        self.version = version + 1
        return pa.concat_tables(outputs) if outputs else self.operator.output_schema.empty_table()

    def set_initial(self, input_name: str, rows: pa.Table) -> None:
        """Give input ``input_name`` these rows in the first version (a bootstrap snapshot's
        changes), written to the checkpoint and routed by key exactly as the Spark layer does."""
        spec = next((s for s in self.operator.inputs if s.name == input_name), None)
        if spec is None:
            raise ValueError(f"{self.operator.kind} has no input {input_name!r}")
        for partition, part in enumerate(self._route(rows, spec.key)):
            if part.num_rows:
                self.checkpoint.initial.write(input_name, partition, part)
        self.checkpoint.initial.mark_done({input_name: rows.num_rows})
        self.config = dataclasses.replace(self.config, initial=True)

    def set_initial_state(self, rows: Mapping[str, pa.Table], progress: Mapping[str, int] | None = None) -> None:
        """Start the join from state rows (:mod:`streamjoin.runtime.initial_state`): ``rows``, by
        side, as ``read_state`` shows them (``_partition`` and ``_version`` are ignored), checked,
        routed by key and written to the checkpoint as the Spark layer does; each partition's
        first version loads them. ``progress``: each input's event-time progress (by input name,
        as the commit records keep it: µs for a timestamp column;
        :func:`streamjoin.runtime.initial_state.state_progress` of the checkpoint the rows were
        read from) the first version starts from. Call it before the first version. Every side is
        checked and routed before anything is written."""
        self.write_initial_state(self.prepare_initial_state(rows, progress))

    def prepare_initial_state(self, rows: Mapping[str, pa.Table], progress: Mapping[str, int] | None = None
                              ) -> tuple[dict[str, list[pa.Table]], dict[str, int]]:
        """:meth:`set_initial_state`'s checks and routing: each side's rows by partition, and the
        summary (raises :class:`JoinDefinitionError` for rows it cannot load; writes nothing)."""
        from streamjoin.runtime.initial_state import (
            check_progress,
            check_state,
            conform_state,
            merge_summary,
            route_state,
        )

        check_state(self.operator, {side: table.schema for side, table in rows.items()})
        summary: dict[str, int] = check_progress(self.operator, progress)
        parts: dict[str, list[pa.Table]] = {}
        for side, table in rows.items():
            parts[side] = route_state(self.operator, side, conform_state(self.operator, side, table),
                                      self.partitions, self.groups)
            for part in parts[side]:
                if part.num_rows:
                    merge_summary(summary, self.operator.state_summary(side, part))
        return parts, summary

    def write_initial_state(self, prepared: tuple[dict[str, list[pa.Table]], dict[str, int]]) -> None:
        """Write what :meth:`prepare_initial_state` made, and mark it complete."""
        parts, summary = prepared
        for side, tables in parts.items():
            for partition, part in enumerate(tables):
                if part.num_rows:
                    self.checkpoint.initial.write(state_name(side), partition, part)
        self.checkpoint.initial.write_summary(summary)
        self.checkpoint.initial.mark_done({state_name(side): sum(t.num_rows for t in tables)
                                           for side, tables in parts.items()})
        self.config = dataclasses.replace(self.config, initial=True)

    def _route(self, table: pa.Table, key: Sequence[str]) -> list[pa.Table]:
        return route(table, key, self.partitions, groups=self.groups, types=self.types)

    def lose_local_state(self, partition: int | None = None) -> None:
        """Delete local stores (one partition or all), as if their executor were lost."""
        parts = range(self.partitions) if partition is None else [partition]
        epoch = epoch_dir(current_epoch(self.checkpoint))
        for p in parts:
            path = local_store_path(self.config, self.checkpoint, p, epoch)
            destroy_store(self.config.store, path)
            shutil.rmtree(path + ".undo", ignore_errors=True)

    def with_store(self, store: str) -> "LocalRunner":
        """The same runner, continuing on another backend's local stores (rebuilt from changelogs)."""
        clone = LocalRunner.__new__(LocalRunner)
        clone.__dict__.update(self.__dict__)
        clone.config = dataclasses.replace(self.config, store=store)
        return clone
