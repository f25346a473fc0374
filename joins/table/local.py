"""Run a table-table join's three stages in this process, as the Spark layer does.

``LocalTableTableRunner`` drives one :class:`streamjoin.runtime.local.LocalRunner` per stage, each with its own
checkpoint (``<checkpoint>/left_keys``, ``<checkpoint>/right_keys``, ``<checkpoint>/join``):
version ``v`` runs the left and right key stages on that version's changes, then the join stage
on their outputs. Rows are routed to partitions as the stages' inputs say (primary key, then
join key), so a row that moves to another join key is retracted on one partition and inserted
on another.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from streamjoin.runtime.local import LocalRunner
from streamjoin.runtime.options import StateConfig
from streamjoin.table.operator import TableTableJoin

__all__ = ["LocalTableTableRunner"]

STAGES = ("left_keys", "right_keys", "join")


class LocalTableTableRunner:
    """Drives a :class:`TableTableJoin` through versions 0, 1, 2, ... over ``partitions`` partitions."""

    def __init__(self, join: TableTableJoin, checkpoint_dir: str, *, partitions: int = 1,
                 config: StateConfig | None = None, query_id: str | None = None,
                 key_groups: int | None = None) -> None:
        """``query_id``: run the stages as a streaming query's tasks; ``key_groups``: each new stage
        checkpoint's key groups (None: the default) (:class:`LocalRunner`)."""
        self.join = join
        self.checkpoint_dir = checkpoint_dir
        operators = (join.left_stage, join.right_stage, join.join_stage)
        self.runners = {name: LocalRunner(op, os.path.join(checkpoint_dir, name), partitions=partitions, config=config,
                                         query_id=query_id, key_groups=key_groups)
                        for name, op in zip(STAGES, operators)}
        self.version = 0

    @property
    def partitions(self) -> int:
        return self.runners["join"].partitions

    def run(self, left_changes: pa.Table, right_changes: pa.Table, version: int | None = None,
            final: bool = False) -> pa.Table:
        """Execute one version (the next one unless ``version`` is given); return its view changes."""
        version = self.version if version is None else version
        left = self.runners["left_keys"].run(left_changes, version=version, final=final)
        right = self.runners["right_keys"].run(right_changes, version=version, final=final)
        output = self.runners["join"].run(left, right, version=version, final=final)
        self.version = version + 1
        return output

    def lose_local_state(self, partition: int | None = None) -> None:
        """Delete every stage's local stores (one partition or all), as if their executor were lost."""
        for runner in self.runners.values():
            runner.lose_local_state(partition)

    def with_store(self, store: str) -> "LocalTableTableRunner":
        """The same runner, continuing on another backend's local stores (rebuilt from changelogs)."""
        clone = LocalTableTableRunner.__new__(LocalTableTableRunner)
        clone.__dict__.update(self.__dict__)
        clone.runners = {name: runner.with_store(store) for name, runner in self.runners.items()}
        return clone

    def metric(self, name: str, stage: str | None = None) -> int:
        """A metric summed over every partition and version run so far (of one stage, or all)."""
        stages = STAGES if stage is None else (stage,)
        return sum(int(m.get(name, 0)) for s in stages for m in self.runners[s].metrics)

    def metrics(self, stage: str) -> list[dict[str, Any]]:
        """Every step's metrics of ``stage`` (``left_keys``, ``right_keys`` or ``join``), in run order."""
        return list(self.runners[stage].metrics)

    def dead_letters(self, side: str) -> pa.Table | None:
        """The change rows of ``side`` set aside so far, with their ``_reason`` (None: none)."""
        root = os.path.join(self.checkpoint_dir, f"{side}_keys", "set_aside", "changes")
        tables = [pq.read_table(os.path.join(d, f)) for d, _, files in sorted(os.walk(root))
                  for f in sorted(files) if f.endswith(".parquet") and f != "schema.parquet"]
        return pa.concat_tables(tables) if tables else None
