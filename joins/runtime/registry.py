"""The join kinds the engine knows: a checkpoint's definition names its operator's kind, and
this registry gives the operator class, whose declarations (:class:`streamjoin.runtime.operator.Operator`:
inputs set aside, metric merges, state views, rescaling) ``read_state``, ``set_aside_rows``,
``join_metrics`` and ``checkpoint repartition`` read. Nothing in the engine lists kinds itself.

The joins of this package are registered here by name (imported on first use, so that looking a
kind up does not import every join); another operator registers itself with :func:`register`
(a class decorator), e.g. a test's or a bench's.
"""

from __future__ import annotations

import importlib
from typing import TypeVar

from streamjoin.runtime.operator import Operator

__all__ = ["register", "operator_class", "kinds"]

#: The joins of this package: kind -> ``module:class``.
_BUILTIN = {
    "interval_join": "streamjoin.interval.operator:IntervalJoin",
    "enrichment_join": "streamjoin.enrichment.operator:EnrichmentJoin",
    "table_join_keys": "streamjoin.table.rekey:TableRekey",
    "table_join": "streamjoin.table.stage:TableJoinStage",
    "table_join_fused": "streamjoin.table.fused:FusedTableJoinStage",
}
_REGISTERED: dict[str, type[Operator]] = {}

O = TypeVar("O", bound=type[Operator])


def register(cls: O) -> O:
    """Register operator class ``cls`` under its ``kind`` (a class decorator); a kind registered
    twice keeps the newest class."""
    _REGISTERED[cls.kind] = cls
    return cls


def operator_class(kind: str | None) -> type[Operator]:
    """The operator class of ``kind``; :class:`Operator` itself (no declarations: nothing set
    aside beyond the folders found, no extra metrics, no state views, no rescaling) for a kind
    nobody registered."""
    if kind in _REGISTERED:
        return _REGISTERED[kind]
    if kind in _BUILTIN:
        module, name = _BUILTIN[kind].split(":")
        cls = getattr(importlib.import_module(module), name)
        _REGISTERED[kind] = cls
        return cls
    return Operator


def kinds() -> list[str]:
    """Every kind registered (this package's joins first)."""
    return list(dict.fromkeys([*_BUILTIN, *_REGISTERED]))
