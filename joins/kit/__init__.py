"""What every join shares, engine-free: one module per idea.

* :mod:`~streamjoin.kit.how`: the join kind, one :class:`How` for all joins, read with Spark's
  aliases; each join declares the kinds it supports.
* :mod:`~streamjoin.kit.on`: ``on`` and other column-name arguments.
* :mod:`~streamjoin.kit.names`: input and output column-name rules (duplicates, reserved names,
  ``_left``/``_right`` suffixes).
* :mod:`~streamjoin.kit.order`: the one canonical row order (nulls first).
* :mod:`~streamjoin.kit.keys`: the common key type (also the Spark layer's routing type) and
  floating-point keys as Spark compares them.
* :mod:`~streamjoin.kit.times`: durations and timestamps as microseconds.
* :mod:`~streamjoin.kit.typenames`: column types named as Spark SQL names them, for errors.
* :mod:`~streamjoin.kit.columns`: an input batch's columns as declared, and the set-aside reason column.
* :mod:`~streamjoin.kit.arrivals`: sorting a batch's rows into late, null time, null key and to
  process, and the rows set aside with their reason.
"""

from __future__ import annotations

from streamjoin.kit.arrivals import Arrivals, set_aside, sort_out
from streamjoin.kit.how import HOW_ALIASES, EnrichmentHow, How, IntervalHow, TableHow, parse_how
from streamjoin.kit.keys import common_key_type, family_key_type, normal_key_array, normal_keys, routing_key_type
from streamjoin.kit.on import On, column_names, parse_on
from streamjoin.kit.order import NULLS, canonical_order, canonical_sort_keys, sort_canonically, sortable
from streamjoin.kit.times import MAX_DURATION_US, Duration, micros, parse_duration, times_of

__all__ = [
    "parse_how", "parse_duration", "normal_keys", "normal_key_array", "MAX_DURATION_US", "HOW_ALIASES",
    "How", "On", "parse_on", "column_names", "common_key_type", "family_key_type", "routing_key_type",
    "NULLS", "sortable", "canonical_sort_keys", "canonical_order", "sort_canonically", "Duration",
    "micros", "times_of", "Arrivals", "sort_out", "set_aside", "IntervalHow", "EnrichmentHow",
    "TableHow",
]
