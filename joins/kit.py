"""Argument parsing the three joins share, engine-free: join kinds, durations and float keys.

* :func:`parse_how` reads ``how=`` as Spark does: case-insensitive, underscores ignored, with Spark's
  aliases (``outer`` is ``full``, ``semi`` is ``left_semi``, ...), and keeps only the kinds a join
  supports.
* :func:`parse_duration` reads ``lower``/``upper``/``delay``/``grace``/... as a
  :class:`datetime.timedelta` or a Spark interval string (``"10 minutes"``, ``"1 hour 30 seconds"``,
  ``"interval -5 seconds"``), in microseconds, refusing durations the int64 time arithmetic of the
  operators cannot hold.
* :func:`normal_keys` puts floating-point key values in the form Spark compares them in
  (``-0.0`` is ``0.0``; every NaN is one NaN, equal to itself), so that routing, matching and state
  keys agree with Spark's joins.

Every error is a :class:`streamjoin.errors.JoinDefinitionError` naming the argument and the value.
"""

from __future__ import annotations

import datetime
import re
from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.errors import JoinDefinitionError

__all__ = ["parse_how", "parse_duration", "normal_keys", "normal_key_array", "MAX_DURATION_US", "HOW_ALIASES"]

#: Spark's spellings of each join kind, after lower-casing and removing underscores.
HOW_ALIASES: dict[str, str] = {
    "inner": "inner",
    "left": "left", "leftouter": "left",
    "right": "right", "rightouter": "right",
    "full": "full", "outer": "full", "fullouter": "full",
    "leftsemi": "left_semi", "semi": "left_semi",
    "leftanti": "left_anti", "anti": "left_anti",
}

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


def parse_how(value: object, allowed: Iterable[str]) -> str:
    """The join kind ``value`` names, as one of ``allowed`` (canonical names: ``inner``, ``left``,
    ``right``, ``full``, ``left_semi``, ``left_anti``).

    Spelled as Spark spells it: any case, underscores ignored, ``outer``/``fullouter`` for
    ``full``, ``leftouter``, ``rightouter``, ``semi``/``leftsemi``, ``anti``/``leftanti``. Raises
    :class:`JoinDefinitionError` for an unknown spelling, and for a kind not in ``allowed``.
    """
    allowed = list(allowed)
    if isinstance(value, str):
        kind = HOW_ALIASES.get(value.lower().replace("_", ""))
        if kind is not None and kind in allowed:
            return kind
        if kind is not None:
            raise JoinDefinitionError(
                f"how={value!r} is a {kind} join, which this join does not support; use one of "
                f"{', '.join(allowed)} (Spark's spellings of those are accepted too)"
            )
    raise JoinDefinitionError(
        f"unknown how={value!r}; use one of {', '.join(allowed)} (or a Spark spelling such as "
        "'left_outer', 'full_outer', 'leftsemi', 'anti' of one of them)"
    )


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
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    elif isinstance(value, str):
        micros = _parse_interval(argument, value)
    else:
        raise JoinDefinitionError(
            f"{argument} must be a datetime.timedelta or an interval string such as '10 minutes', "
            f"not {type(value).__name__} ({value!r})"
        )
    if abs(micros) > MAX_DURATION_US:
        raise JoinDefinitionError(
            f"{argument}={value!r} is too long: durations are limited to +-{MAX_DURATION_US} microseconds "
            "(about 73,000 years) so that event times plus durations fit int64 microseconds; use a shorter one"
        )
    return micros


def _parse_interval(argument: str, text: str) -> int:
    body = text.strip().lower()
    if body.startswith("interval"):
        body = body[len("interval"):]
    body = body.strip()
    total, at = 0, 0
    while at < len(body):
        found = _TERM.match(body, at)
        unit = _UNIT_NAMES.get(found.group(3)) if found else None
        if unit is None:
            hint = " (months and years have no fixed length)" if found and found.group(3).startswith(("month", "year")) else ""
            raise JoinDefinitionError(
                f"{argument}={text!r} is not an interval this join understands{hint}; write e.g. '10 minutes', "
                "'1 hour 30 seconds', '-5 seconds' or '250 milliseconds' (units week, day, hour, minute, "
                "second, millisecond/ms, microsecond/us), or pass a datetime.timedelta"
            )
        sign, number = (-1 if found.group(1) == "-" else 1), found.group(2)
        if "." in number:
            whole, _, fraction = number.partition(".")
            scale = _UNITS_US[unit]
            digits = len(fraction)
            amount = int(whole or 0) * scale + (int(fraction or 0) * scale) // 10 ** digits
            if (int(fraction or 0) * scale) % 10 ** digits:
                raise JoinDefinitionError(f"{argument}={text!r} is finer than a microsecond; round it")
        else:
            amount = int(number) * _UNITS_US[unit]
        total += sign * amount
        at = found.end()
        while at < len(body) and body[at] in " ,":
            at += 1
    if at == 0:
        raise JoinDefinitionError(f"{argument}={text!r} is empty; write e.g. '10 minutes' or pass a datetime.timedelta")
    return total


def normal_key_array(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``values`` as join keys compare: a floating-point column with ``-0.0`` made ``0.0`` and every
    NaN made the one canonical NaN (nulls stay null); any other type unchanged."""
    kind = values.type
    if pa.types.is_dictionary(kind) and pa.types.is_floating(kind.value_type):
        values, kind = values.cast(kind.value_type), kind.value_type
    if not pa.types.is_floating(kind) or len(values) == 0:
        return values
    zeroed = pc.add(values, pa.scalar(0.0, kind))          # IEEE: -0.0 + 0.0 == +0.0
    return pc.if_else(pc.is_nan(values), pa.scalar(float("nan"), kind), zeroed)


def normal_keys(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """``table`` with its floating-point ``columns`` put through :func:`normal_key_array` (same
    schema; columns it lacks, and dictionary-encoded ones, are left alone)."""
    for name in dict.fromkeys(columns):
        index = table.schema.get_field_index(name)
        if index < 0:
            continue
        column = table.column(index)
        if pa.types.is_floating(column.type):
            table = table.set_column(index, table.schema.field(index), normal_key_array(column))
    return table
