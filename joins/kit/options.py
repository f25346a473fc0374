"""Where and how a join keeps its state: one options object the PySpark joins share.

:class:`JoinOptions` holds ``store``, ``checkpoint``, ``partitions``, ``store_options``,
``state_dir`` and ``max_partitions`` as the public join functions take them, checks them once when made (before any
query starts) and gives the :class:`streamjoin.runtime.partition.StateConfig` the runtime runs
with. Errors are :class:`streamjoin.errors.JoinDefinitionError` naming the argument.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.keygroups import check_count, check_key_groups
from streamjoin.runtime.partition import StateConfig

__all__ = ["JoinOptions"]


@dataclass(frozen=True)
class JoinOptions:
    """A join's state settings, validated.

    ``store``: ``rocksdb``, ``lmdb``, ``memory`` or ``package.module:Class`` (its module imported
    now); ``checkpoint``: a path or ``pyarrow.fs`` URI, or None (a batch join then uses a new
    temporary one; a streaming join refuses None when it starts); ``partitions``: an int from 1 to
    ``max_partitions``, or None for ``spark.sql.shuffle.partitions``; ``store_options``: keyword options of the store;
    ``state_dir``: the local stores' root (None: under Spark's local directory);
    ``max_partitions``: the most partitions the join may ever be rescaled to (its number of key
    groups, fixed when its checkpoint is created; None: 4096, or what the checkpoint recorded).
    """

    store: str = "rocksdb"
    checkpoint: str | None = None
    partitions: int | None = None
    store_options: Mapping[str, Any] | None = None
    state_dir: str | None = None
    max_partitions: int | None = None
    state: StateConfig = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.checkpoint is not None and not isinstance(self.checkpoint, str):
            raise JoinDefinitionError(f"checkpoint must be a str (a path or URI), not {self.checkpoint!r}")
        most = self.max_partitions
        if most is not None:
            check_count(most, "max_partitions")
        if self.partitions is not None:
            if most is None:   # an existing checkpoint may record more key groups: checked when it is bound
                check_count(self.partitions, "partitions")
            else:
                check_key_groups(most, self.partitions)
        if self.store_options is not None and not isinstance(self.store_options, Mapping):
            raise JoinDefinitionError(f"store_options must be a mapping of option names to values, not {self.store_options!r}")
        if self.state_dir is not None and not isinstance(self.state_dir, (str, os.PathLike)):
            raise JoinDefinitionError(f"state_dir must be a local directory path, not {self.state_dir!r}")
        local_dir = None if self.state_dir is None else os.fspath(self.state_dir)
        config = StateConfig(store=self.store, store_options=dict(self.store_options or {}), local_dir=local_dir)
        object.__setattr__(self, "state", config)

    def at(self, checkpoint: str) -> JoinOptions:
        """These options with ``checkpoint`` (a stage's own location under the join's)."""
        return replace(self, checkpoint=checkpoint)
