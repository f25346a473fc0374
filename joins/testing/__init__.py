"""streamjoin.testing: property-test your own join pipelines for determinism.

    assert_deterministic(pipeline, inputs, *, mode=...)   batch run vs streams over random micro-batch
                                                          splits, partitions, stores, restarts, retries
    LocalJoins                                            the joins over Arrow tables, in process
    interval_join_reference, as_of_join_reference,        the reference joins over Arrow tables or pandas
    view_reference, view_rows
    streamjoin.testing.strategies                         Hypothesis strategies: event streams, change
                                                          streams (plain, Delta, Debezium), micro-batches
    streamjoin.testing.spark                              the Spark engine and local_session (pyspark)
    streamjoin.testing.plugin                             the pytest fixture ``streamjoin_spark``

The row-level references the project's own properties use stay in :mod:`streamjoin.testing.interval`,
:mod:`streamjoin.testing.enrichment` and :mod:`streamjoin.testing.table`. Importing this package
needs neither pyspark nor Hypothesis; ``assert_deterministic`` and the strategies need Hypothesis
(``pip install "/path/to/streamjoin[testing]"``). Errors: :class:`NonDeterministicError`, a
:class:`streamjoin.errors.JoinError` and an ``AssertionError``; :class:`PipelineError` (a
``JoinError``), the pipeline raised.
"""

import typing as _typing

if _typing.TYPE_CHECKING:  # the real names, for type checkers; at run time see __getattr__
    from typing import Any

    from streamjoin.testing.compare import Rows, difference, rows_of
    from streamjoin.testing.determinism import Mode, NonDeterministicError, PipelineError, Report, assert_deterministic
    from streamjoin.testing.local import LocalJoins
    from streamjoin.testing.plan import RunPlan
    from streamjoin.testing.reference import (
        as_of_join_reference,
        interval_join_reference,
        view_reference,
        view_rows,
    )

__all__ = [
    "LocalJoins",
    "Mode",
    "NonDeterministicError",
    "PipelineError",
    "Report",
    "Rows",
    "RunPlan",
    "as_of_join_reference",
    "assert_deterministic",
    "difference",
    "interval_join_reference",
    "rows_of",
    "view_reference",
    "view_rows",
]

# Imported on first use: the pytest plugin (streamjoin.testing.plugin) is loaded in every pytest run
# of a project that installs streamjoin, so importing this package must stay cheap and safe.
_LAZY = {
    "Rows": "compare", "difference": "compare", "rows_of": "compare",
    "Mode": "determinism", "NonDeterministicError": "determinism", "PipelineError": "determinism",
    "Report": "determinism",
    "assert_deterministic": "determinism", "LocalJoins": "local", "RunPlan": "plan",
    "as_of_join_reference": "reference", "interval_join_reference": "reference",
    "view_reference": "reference", "view_rows": "reference",
}


def __getattr__(name: str) -> "Any":
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"streamjoin.testing.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'streamjoin.testing' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
