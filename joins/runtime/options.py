"""Where and how a join keeps its state: :class:`StateConfig`, what the runtime's tasks run with,
and :class:`JoinOptions`, the options the PySpark joins take.

:class:`JoinOptions` holds ``store``, ``checkpoint``, ``partitions``, ``store_options``,
``state_dir`` and ``max_partitions`` as the public join functions take them, checks them once
when made (before any query starts) and gives the :class:`StateConfig` the runtime runs with.
Errors are :class:`streamjoin.errors.JoinDefinitionError` naming the argument.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Mapping, get_args

from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.keygroups import check_count, check_key_groups
from streamjoin.statestore.errors import BackendNotFoundError, StoreArgumentError
from streamjoin.statestore.registry import DEFAULT_KIND, check_store_options, resolve_backend

__all__ = ["JoinOptions", "StateConfig", "default_local_dir", "EndOfRun", "END_OF_RUN", "check_end_of_run"]

#: What a streaming join does when a ``trigger(availableNow=True)`` run has read its data
#: (docs/design/end-of-input.md): ``"hold"``, ``"flush"`` (the default, given as None) or ``"release"``.
EndOfRun = Literal["hold", "flush", "release"]
END_OF_RUN: tuple[str, ...] = get_args(EndOfRun)


def check_end_of_run(value: object) -> None:
    """Raise :class:`JoinDefinitionError` unless ``value`` is one of :data:`END_OF_RUN` or None (the default)."""
    if value is not None and value not in END_OF_RUN:
        from streamjoin.errors import JoinDefinitionError

        raise JoinDefinitionError(f"end_of_run must be one of {', '.join(map(repr, END_OF_RUN))}, not {value!r}")


def default_local_dir() -> str:
    """Where local stores live unless configured: under the system's temporary directory."""
    return os.path.join(tempfile.gettempdir(), "streamjoin-state")


@dataclass(frozen=True)
class StateConfig:
    """Where and how partitions keep state (``local_dir`` None: :func:`default_local_dir`).

    ``store`` is checked when the config is made (its module imported): an unknown kind raises
    :class:`JoinDefinitionError` naming the valid ones, before any task runs; so are
    ``store_options`` (names the backend does not take, and values it refuses:
    ``Store.check_options``), ``snapshot_every`` (an int of at least 1) and ``retain_versions``
    (at least 2: a version executed again restores the one before it).
    """

    store: str = DEFAULT_KIND
    store_options: Mapping[str, Any] = field(default_factory=dict)
    local_dir: str | None = None
    snapshot_every: int = 10
    retain_versions: int = 10
    #: Keep a partition's local store open in this process after a streaming query's task, for
    #: its next task (reused only at exactly the version wanted; see :mod:`streamjoin.statestore.warm`).
    keep_warm: bool = True
    #: The checkpoint holds initial rows for the first version (``cp.initial``): set by
    #: :func:`streamjoin.runtime.bind.bind_query` when it does, so that other joins look for them
    #: only in a partition's first version, not in every task.
    initial: bool = False
    #: The bound checkpoint's id (:meth:`streamjoin.runtime.checkpoint.binding.Binding.identity`),
    #: set by :func:`streamjoin.runtime.bind.bind_query`: part of each local store's owner tag.
    checkpoint_id: str | None = None
    #: Testing only: a path prefix; a task finding ``<prefix>.<point>.v<version>.p<partition>``
    #: deletes it and fails, once (points: ``before-commit``, ``after-commit``).
    fail_once: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.store, str):
            raise JoinDefinitionError(f"store must be a store kind (a str), not {self.store!r}")
        try:
            resolve_backend(self.store)
        except BackendNotFoundError as exc:
            raise JoinDefinitionError(f"store={self.store!r}: {exc}") from exc
        try:
            check_store_options(self.store, self.store_options)
        except StoreArgumentError as exc:
            raise JoinDefinitionError(f"store_options={dict(self.store_options)!r}: {exc}") from exc
        check_count(self.snapshot_every, "snapshot_every")
        check_count(self.retain_versions, "retain_versions", least=2)   # (re-execution restores v-1)


@dataclass(frozen=True)
class JoinOptions:
    """A join's state settings, validated.

    ``store``: ``arranged`` (the default), ``rocksdb`` or ``lmdb`` (the arranged store on those
    hosts), ``rocksdb-kv``, ``lmdb-kv``, ``memory`` or ``package.module:Class`` (its module imported now); ``checkpoint``: a path or ``pyarrow.fs`` URI, or None (a batch join then uses a new
    temporary one; a streaming join refuses None when it starts); ``partitions``: an int from 1 to
    ``max_partitions``, or None for ``spark.sql.shuffle.partitions``; ``store_options``: keyword options of the store;
    ``state_dir``: the local stores' root (None: under Spark's local directory);
    ``max_partitions``: the most partitions the join may ever be rescaled to (its number of key
    groups, fixed when its checkpoint is created; None: 4096, or what the checkpoint recorded).
    """

    store: str = DEFAULT_KIND
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
