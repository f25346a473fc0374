"""Time helpers: durations from ``timedelta`` or Spark interval strings, and event times as
microseconds.

* :func:`parse_duration` reads ``lower``/``upper``/``delay``/``grace``/... as a
  :class:`datetime.timedelta` or a Spark interval string (``"10 minutes"``, ``"1 hour 30 seconds"``,
  ``"interval -5 seconds"``), in microseconds, refusing durations the int64 time arithmetic of the
  operators cannot hold (:class:`streamjoin.errors.JoinDefinitionError` naming the argument).
* :func:`micros` and :func:`times_of` read a timestamp column (unit s, ms or us, any time zone) as
  int64 microseconds since the epoch (UTC).
"""

from __future__ import annotations

import datetime
import re
from typing import Union

import numpy as np
import pyarrow as pa

from streamjoin.errors import JoinDefinitionError

__all__ = ["Duration", "MAX_DURATION_US", "parse_duration", "micros", "times_of"]

#: A duration: a timedelta or a Spark interval string such as ``"10 minutes"``.
Duration = Union[datetime.timedelta, str]

#: The largest duration magnitude accepted (2**61 µs, about 73,000 years): an event time plus or
#: minus two such durations still fits the int64 microseconds the operators compute in.
MAX_DURATION_US = 1 << 61

_UNITS_US = {
    "week": 7 * 86_400_000_000, "day": 86_400_000_000, "hour": 3_600_000_000, "minute": 60_000_000,
    "second": 1_000_000, "millisecond": 1_000, "microsecond": 1,
}
_UNIT_NAMES = {
    **{name: name for name in _UNITS_US}, **{name + "s": name for name in _UNITS_US},
    "ms": "millisecond", "us": "microsecond",
}
_TERM = re.compile(r"([+-]?)\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]+)")


def parse_duration(argument: str, value: object) -> int:
    """``value``, a :class:`datetime.timedelta` or a Spark interval string, in microseconds.

    Strings are a sum of ``<number> <unit>`` terms, each with an optional sign, optionally after the
    word ``interval``: ``"10 minutes"``, ``"1 hour 30 seconds"``, ``"-5 seconds"``,
    ``"interval 1 day 2 hours"``, ``"1.5 seconds"``, ``"250 ms"``. Units: week, day, hour, minute,
    second, millisecond (``ms``), microsecond (``us``), singular or plural, any case. Months and
    years are refused (they have no fixed length). Raises :class:`JoinDefinitionError` naming
    ``argument`` for anything else, and for a duration beyond :data:`MAX_DURATION_US`.
    """
    if isinstance(value, datetime.timedelta):
        total = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    elif isinstance(value, str):
        total = _parse_interval(argument, value)
    else:
        raise JoinDefinitionError(
            f"{argument} must be a datetime.timedelta or an interval string such as '10 minutes', "
            f"not {type(value).__name__} ({value!r})"
        )
    if abs(total) > MAX_DURATION_US:
        raise JoinDefinitionError(
            f"{argument}={value!r} is too long: durations are limited to +-{MAX_DURATION_US} microseconds "
            "(about 73,000 years) so that event times plus durations fit int64 microseconds; use a shorter one"
        )
    return total


def _parse_interval(argument: str, text: str) -> int:
    body = text.strip().lower()
    if body.startswith("interval"):
        body = body[len("interval"):]
    body = body.strip()
    total, at = 0, 0
    while at < len(body):
        found = _TERM.match(body, at)
        unit = _UNIT_NAMES.get(found.group(3)) if found else None
        if found is None or unit is None:
            hint = " (months and years have no fixed length)" if found and found.group(3).startswith(("month", "year")) else ""
            raise JoinDefinitionError(
                f"{argument}={text!r} is not an interval this join understands{hint}; write e.g. '10 minutes', "
                "'1 hour 30 seconds', '-5 seconds' or '250 milliseconds' (units week, day, hour, minute, "
                "second, millisecond/ms, microsecond/us), or pass a datetime.timedelta"
            )
        sign = -1 if found.group(1) == "-" else 1
        total += sign * _term_micros(argument, text, found.group(2), _UNITS_US[unit])
        at = found.end()
        while at < len(body) and body[at] in " ,":
            at += 1
    if at == 0:
        raise JoinDefinitionError(f"{argument}={text!r} is empty; write e.g. '10 minutes' or pass a datetime.timedelta")
    return total


def _term_micros(argument: str, text: str, number: str, scale: int) -> int:
    """``number`` units of ``scale`` µs, exactly; a fraction finer than a microsecond is refused."""
    if "." not in number:
        return int(number) * scale
    whole, _, fraction = number.partition(".")
    digits = len(fraction)
    if (int(fraction or 0) * scale) % 10 ** digits:
        raise JoinDefinitionError(f"{argument}={text!r} is finer than a microsecond; round it")
    return int(whole or 0) * scale + (int(fraction or 0) * scale) // 10 ** digits


def micros(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A timestamp column (any unit, any time zone) as int64 microseconds since the epoch (UTC);
    nulls stay null."""
    if values.type.unit != "us":
        values = values.cast(pa.timestamp("us", values.type.tz))
    return values.cast(pa.int64())


def times_of(table: pa.Table, column: str) -> np.ndarray:
    """Event times of ``table[column]`` as int64 microseconds (nulls read as 0)."""
    return micros(table.column(column)).fill_null(0).to_numpy()
