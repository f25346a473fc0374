"""A time column turned into another time type in the JVM, keeping the event time it stands for.

The joins read a time as microseconds since the epoch (docs/design/semantics.md, "Time"): a
``TIMESTAMP`` (an instant) by its instant, a ``TIMESTAMP_NTZ`` (a wall-clock time) as that
wall-clock time in UTC, a ``DATE`` as its midnight in UTC, whatever the session's time zone.
Spark's own ``CAST`` between these types goes through the session time zone
(``spark.sql.session.timeZone``), so it would move every time by the zone's offset; :func:`as_time`
keeps the microseconds instead, as the Arrow casts of the engine-free operators do.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DateType, TimestampNTZType, TimestampType

__all__ = ["as_time", "is_time"]


def _epoch() -> Column:
    """1970-01-01 00:00 as a ``TIMESTAMP_NTZ`` (cast from a string: no time zone involved)."""
    return F.lit("1970-01-01 00:00:00").cast("timestamp_ntz")


def is_time(data_type: DataType) -> bool:
    """Whether ``data_type`` is one :func:`as_time` converts from (``TIMESTAMP``, ``TIMESTAMP_NTZ``, ``DATE``)."""
    return isinstance(data_type, (TimestampType, TimestampNTZType, DateType))


def as_time(value: Column, source: DataType, target: DataType) -> Column | None:
    """``value``, of type ``source``, as ``target``, computed in the JVM, with the same microseconds
    since the epoch (UTC) as an event time; nulls stay null. None unless ``source`` is a time type
    (:func:`is_time`) and ``target`` a timestamp type: the caller then converts otherwise."""
    if not is_time(source) or not isinstance(target, (TimestampType, TimestampNTZType)):
        return None
    if source == target:
        return value
    if isinstance(source, TimestampType):
        micros = F.unix_micros(value)
    else:
        ntz = value if isinstance(source, TimestampNTZType) else value.cast("timestamp_ntz")   # a date: its midnight
        micros = F.timestamp_diff("MICROSECOND", _epoch(), ntz)
    if isinstance(target, TimestampType):
        return F.timestamp_micros(micros)
    return F.timestamp_add("MICROSECOND", micros, _epoch())
