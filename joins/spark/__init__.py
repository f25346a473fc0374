"""The Spark layer: the only part of ``joins`` that imports pyspark.

Its modules are imported on first use: the Python flush source's process (Spark Connect's:
:mod:`streamjoin.spark.flush_source`) imports that module only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real names, for type checkers; at run time see __getattr__
    from streamjoin.spark.runtime import arrow_schema, run_operator

__all__ = ["arrow_schema", "run_operator"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from streamjoin.spark import runtime

        value = getattr(runtime, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'streamjoin.spark' has no attribute {name!r}")
