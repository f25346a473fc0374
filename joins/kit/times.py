"""Time helpers: durations from ``timedelta`` or Spark interval strings, and event times as
microseconds.

* :func:`parse_duration` reads ``lower``/``upper``/``delay``/``grace``/... as a
  :class:`datetime.timedelta` or a Spark interval string (``"10 minutes"``, ``"1 hour 30 seconds"``,
  ``"interval -5 seconds"``; read by :func:`spark_interval` exactly as Spark reads it), in
  microseconds, refusing durations the int64 time arithmetic of the operators cannot hold (:class:`streamjoin.errors.JoinDefinitionError` naming the argument).
* :func:`micros` and :func:`times_of` read a timestamp column (unit s, ms or us, any time zone) as
  int64 microseconds since the epoch (UTC).
"""

from __future__ import annotations

import datetime
import json
from typing import Union

import numpy as np
import pyarrow as pa

from streamjoin.errors import JoinDefinitionError

__all__ = ["Duration", "MAX_DURATION_US", "parse_duration", "spark_interval", "micros", "times_of", "describe_durations",
           "describe_duration"]

#: A duration: a timedelta or a Spark interval string such as ``"10 minutes"``.
Duration = Union[datetime.timedelta, str]

#: The largest duration magnitude accepted (2**61 µs, about 73,000 years): an event time plus or
#: minus two such durations still fits the int64 microseconds the operators compute in.
MAX_DURATION_US = 1 << 61

#: Spark's interval units (``IntervalUtils.stringToInterval``), in the order it tries them, with
#: their length in microseconds (0: years, months, weeks and days, counted apart as Spark does).
#: Each is written as the word or the word plus "s".
_UNITS: tuple[tuple[str, int], ...] = (
    ("year", 0), ("week", 0), ("day", 0), ("hour", 3_600_000_000), ("second", 1_000_000), ("month", 0),
    ("minute", 60_000_000), ("millisecond", 1_000), ("microsecond", 1),
)
#: What Spark trims from both ends (ASCII whitespace and control characters) and what separates
#: terms (Java's ``Character.isWhitespace`` over ASCII).
_TRIMMED = "".join(map(chr, range(0x21))) + "\x7f"
_SPACE = frozenset(" \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
_DIGITS = frozenset("0123456789")
_LONG, _INT = 1 << 63, 1 << 31
_EXAMPLES = ("write e.g. '10 minutes', '1 hour 30 seconds', '-5 seconds', '1.5 seconds' or '250 milliseconds' "
             "(units week, day, hour, minute, second, millisecond, microsecond, each singular or "
             "plural, separated from the number by a space), or pass a datetime.timedelta")


def parse_duration(argument: str, value: object) -> int:
    """``value``, a :class:`datetime.timedelta` or a Spark interval string, in microseconds.

    Strings are read exactly as Spark reads ``CAST(s AS INTERVAL)``, ``INTERVAL 's'`` and
    ``withWatermark`` delays (:func:`spark_interval`): ``"10 minutes"``, ``"1 hour 30 seconds"``,
    ``"-5 seconds"``, ``"interval 1 day 2 hours"``, ``"1.5 seconds"``, ``"250 milliseconds"``.
    What Spark refuses is refused (``"5m"``, ``"5 mins"``, ``"250 ms"``, ``"1.5 minutes"``), and
    so are months and years, which have no fixed length. Raises :class:`JoinDefinitionError`
    naming ``argument`` for those, and for a duration beyond :data:`MAX_DURATION_US`.
    """
    if isinstance(value, datetime.timedelta):
        total = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    elif isinstance(value, str):
        try:
            months, days, micros_ = spark_interval(value)
        except ValueError as exc:
            raise JoinDefinitionError(f"{argument}={value!r} is not an interval Spark reads ({exc}); {_EXAMPLES}") from None
        if months:
            raise JoinDefinitionError(
                f"{argument}={value!r} has months or years, which have no fixed length; write the duration in "
                "weeks, days or smaller units (e.g. '30 days'), or pass a datetime.timedelta")
        total = days * 86_400_000_000 + micros_
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


def describe_duration(us: int) -> str:
    """``us`` microseconds in the largest unit that holds it exactly, as a Spark interval string
    (``"30 minutes"``, ``"-5 seconds"``, ``"1 day"``, ``"0 seconds"``)."""
    units = (("day", 86_400_000_000), ("hour", 3_600_000_000), ("minute", 60_000_000), ("second", 1_000_000),
             ("millisecond", 1_000), ("microsecond", 1))
    if us == 0:
        return "0 seconds"
    name, size = next((n, u) for n, u in units if us % u == 0)
    count = us // size
    return f"{count} {name}" + ("" if abs(count) == 1 else "s")


def describe_durations(value: object) -> str:
    """An option of µs as words: an int by :func:`describe_duration`, a list of ints each
    (``"[1 minute, 0 seconds]"``); anything else as JSON."""
    if isinstance(value, int) and not isinstance(value, bool):
        return describe_duration(value)
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return "[" + ", ".join(describe_duration(v) for v in value) + "]"
    return json.dumps(value, sort_keys=True)


def spark_interval(text: str) -> tuple[int, int, int]:
    """``text`` as Spark's ``IntervalUtils.stringToInterval`` reads it: (months, days,
    microseconds), each summed over the terms (``[+|-] number unit``, optionally after the word
    ``interval``; case-insensitive; a fraction only on seconds, at most nine digits, truncated to
    microseconds toward zero). Raises ValueError saying what is wrong where Spark raises,
    including where Spark's int32 months and days or int64 microseconds overflow."""
    s = text.strip(_TRIMMED).lower()
    n = len(s)
    if not s:
        raise ValueError("it is empty")
    if not s.isascii():
        raise ValueError("it has a character that is not ASCII")
    i = 0
    if s.startswith("interval"):
        if n == len("interval"):
            raise ValueError("it has no terms after 'interval'")
        if s[len("interval")] not in _SPACE:
            raise ValueError("'interval' must be followed by a space")
        i = len("interval") + 1
    months = days = micros_ = 0
    while True:
        while i < n and s[i] in _SPACE:
            i += 1
        if i == n:
            return months, days, micros_
        # a term's sign and number
        negative, point_first = s[i] == "-", s[i] == "."
        if s[i] in "+-":
            i += 1
            while i < n and s[i] in _SPACE:
                i += 1
            if i == n:
                raise ValueError("a sign is not followed by a number")
        elif s[i] not in _DIGITS and not point_first:
            raise ValueError(f"{s[i:].split()[0]!r} is not a number")
        value, fraction, scale = 0, 0, None   # scale: None without a decimal point, else nanoseconds per digit
        number_at = i
        if point_first:
            i, scale = i + 1, 100_000_000
        while i < n and s[i] not in _SPACE:
            c = s[i]
            if scale is None and c in _DIGITS:
                value = value * 10 + int(c)
                if value >= _LONG:
                    raise ValueError("a number does not fit in 64 bits")
            elif scale is None and c == ".":
                scale = 100_000_000
            elif c in _DIGITS and scale:
                fraction, scale = fraction + int(c) * scale, scale // 10
            elif c in _DIGITS:
                raise ValueError("a fraction has more than nine digits")
            else:
                raise ValueError(f"{s[number_at:].split()[0]!r} is not a number followed by a space and a unit")
            i += 1
        if i == n:
            raise ValueError("the last number has no unit")
        if point_first and scale == 100_000_000:
            raise ValueError("'.' is not a number")
        while s[i] in _SPACE:
            i += 1
        # its unit
        if scale is not None and s[i] != "s":
            raise ValueError(f"only seconds can have a fraction, not {s[i:].split()[0]!r}")
        fraction //= 1000
        if negative:
            value, fraction = -value, -fraction
        unit = next((u for u in _UNITS if s.startswith(u[0], i)), None)
        if unit is None:
            raise ValueError(f"{s[i:].split()[0]!r} is not a unit")
        word, scale_us = unit
        unit_at = i
        if word == "year":
            months = _exact(months + _exact(12 * value, _LONG), _INT)
        elif word == "month":
            months = _exact(months + _exact(value, _INT), _INT)
        elif word == "week":
            days = _exact(days + _exact(7 * value, _LONG), _INT)
        elif word == "day":
            days = _exact(days + _exact(value, _INT), _INT)
        else:
            micros_ = _exact(micros_ + _exact(value * scale_us, _LONG), _LONG)
            if word == "second":
                micros_ = _exact(micros_ + fraction, _LONG)
        i += len(word)
        if i < n and s[i] == "s":
            i += 1
        if i < n and s[i] not in _SPACE:
            raise ValueError(f"{s[unit_at:].split()[0]!r} is not a unit")


def _exact(value: int, bound: int) -> int:
    """``value`` if it fits a signed integer of ``bound`` (2**63: int64, 2**31: int32), as Spark's
    ``*Exact`` arithmetic requires; else ValueError."""
    if not -bound <= value < bound:
        raise ValueError("it overflows Spark's interval arithmetic")
    return value


def micros(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A timestamp column (any unit, any time zone) as int64 microseconds since the epoch (UTC);
    nulls stay null."""
    if values.type.unit != "us":
        values = values.cast(pa.timestamp("us", values.type.tz))
    return values.cast(pa.int64())


def times_of(table: pa.Table, column: str) -> np.ndarray:
    """Event times of ``table[column]`` as int64 microseconds (nulls read as 0)."""
    return micros(table.column(column)).fill_null(0).to_numpy()
