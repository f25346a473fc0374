"""Obviously-correct reference implementations of the joins, for the tests to compare with.

Each reference is a few nested loops over Python rows (dicts), written for clarity, not speed.
They give the *relational* result: the multiset of output rows once every window has closed.

Interval join (docs/design/semantics.md "Interval join"):

    reference_interval_join(left_rows, right_rows, ...)   the output multiset, as tuples
    interval_watermarks(batches, ...)                     the watermark of each batch (docs/design/semantics.md "Time")
    interval_late_rows(batches, ...)                      which rows of each batch are late
    is_heartbeat(row, time)                               whether a row is a heartbeat (only a time)
    join_key(value)                                       a key value as joins compare it

With ``heartbeats=True`` (the joins' option) a row whose every column but its time is None is a
heartbeat: its time counts in the watermarks like any row's, and it is never joined, output or late.

Key values compare as in Spark's joins: ``-0.0`` equals ``0.0`` and NaN equals NaN.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from streamjoin.kit.keys import normal_key_value

__all__ = ["reference_interval_join", "interval_watermarks", "interval_late_rows", "is_heartbeat", "join_key",
           "NAN_KEY"]

Row = Mapping[str, Any]


class _NaNKey:
    """The one value every NaN key stands for: equal to itself (unlike a float NaN), hashable."""

    def __repr__(self) -> str:
        return "NAN_KEY"


#: What :func:`join_key` makes of every NaN.
NAN_KEY = _NaNKey()


def join_key(value: Any) -> Any:
    """``value`` as join keys compare (Spark's rule): ``-0.0`` -> ``0.0``, any NaN -> :data:`NAN_KEY`,
    anything else as it is."""
    return normal_key_value(value, NAN_KEY)


def is_heartbeat(row: Row, time: str) -> bool:
    """Whether ``row`` is a heartbeat: its ``time`` is not None and every other value is."""
    return row[time] is not None and all(value is None for name, value in row.items() if name != time)


def reference_interval_join(
    left_rows: Sequence[Row],
    right_rows: Sequence[Row],
    *,
    left_key: Sequence[str],
    right_key: Sequence[str],
    left_time: str,
    right_time: str,
    lower: Any,
    upper: Any,
    how: str,
    left_columns: Sequence[str],
    right_columns: Sequence[str],
    heartbeats: bool = False,
) -> list[tuple]:
    """The interval join of all rows, as a list of output tuples (order irrelevant).

    A pair matches when every key value is equal (:func:`join_key`) and not None, and
    ``l[left_time] + lower <= r[right_time] <= l[left_time] + upper``. An output tuple is
    ``(key values, left non-key values, right non-key values)``, each part in column order; an
    unmatched row has None for the other side's part and its own key values; left_semi/left_anti
    output the left row's values in ``left_columns`` order. Rows whose time is None never join
    and are not output (the operator sets them aside); with ``heartbeats``, neither do heartbeats
    (:func:`is_heartbeat`).
    """
    left_rows = [r for r in left_rows if r[left_time] is not None and not (heartbeats and is_heartbeat(r, left_time))]
    right_rows = [r for r in right_rows
                  if r[right_time] is not None and not (heartbeats and is_heartbeat(r, right_time))]

    def matches(l: Row, r: Row) -> bool:
        keys_equal = all(
            l[a] is not None and r[b] is not None and join_key(l[a]) == join_key(r[b])
            for a, b in zip(left_key, right_key)
        )
        return keys_equal and l[left_time] + lower <= r[right_time] <= l[left_time] + upper

    left_rest = [c for c in left_columns if c not in left_key]
    right_rest = [c for c in right_columns if c not in right_key]
    out: list[tuple] = []
    right_matched = [False] * len(right_rows)
    for l in left_rows:
        matched = False
        for j, r in enumerate(right_rows):
            if matches(l, r):
                matched = True
                right_matched[j] = True
                if how in ("inner", "left", "right", "full"):
                    out.append(tuple(l[c] for c in left_key) + tuple(l[c] for c in left_rest)
                               + tuple(r[c] for c in right_rest))
        if (how == "left_semi" and matched) or (how == "left_anti" and not matched):
            out.append(tuple(l[c] for c in left_columns))
        if how in ("left", "full") and not matched:
            out.append(tuple(l[c] for c in left_key) + tuple(l[c] for c in left_rest)
                       + (None,) * len(right_rest))
    if how in ("right", "full"):
        for r, matched in zip(right_rows, right_matched):
            if not matched:
                out.append(tuple(r[c] for c in right_key) + (None,) * len(left_rest)
                           + tuple(r[c] for c in right_rest))
    return out


def interval_watermarks(
    batches: Sequence[tuple[Sequence[Row], Sequence[Row]]], *, left_time: str, right_time: str, delay: Any,
    left_delay: Any = None, right_delay: Any = None, watermark_policy: str = "min",
    idle_timeout: Any = None, processing_times: Sequence[Any] | None = None,
) -> list[Any]:
    """The watermark of each batch: min (``watermark_policy="max"``: max) over the two inputs of
    the largest event time in earlier batches minus that input's delay (``left_delay`` /
    ``right_delay``, default ``delay``); None (minus infinity) until both inputs have had a row.

    With ``idle_timeout`` and ``processing_times`` (one per batch, of a type that subtracts to
    ``idle_timeout``'s): an input whose largest time last advanced (or, with no row yet, the
    first processing time of a batch with rows) at least ``idle_timeout`` before the processing
    time of the newest earlier batch with rows is left out; with every input left out, or if the
    value would be lower, the batch before's watermark holds (it never decreases)."""
    marks: list[Any] = []
    maxima: list[Any] = [None, None]
    advanced: list[Any] = [None, None]
    now = None
    waits = (delay if left_delay is None else left_delay, delay if right_delay is None else right_delay)
    pick = min if watermark_policy == "min" else max
    for v, (left_rows, right_rows) in enumerate(batches):
        idle = [idle_timeout is not None and now is not None and at is not None and now - at >= idle_timeout
                for at in advanced]
        active = [i for i in (0, 1) if not idle[i]]
        mark = None if not active or any(maxima[i] is None for i in active) \
            else pick(maxima[i] - waits[i] for i in active)
        previous = marks[-1] if marks else None
        marks.append(previous if mark is None or (previous is not None and previous > mark) else mark)
        time = None if processing_times is None else processing_times[v]
        for i, (rows, column) in enumerate(((left_rows, left_time), (right_rows, right_time))):
            times = [r[column] for r in rows if r[column] is not None]
            if times and (maxima[i] is None or max(times) > maxima[i]):
                maxima[i] = max(times)
                advanced[i] = time if time is not None else advanced[i]
        if time is not None and (left_rows or right_rows):
            advanced = [time if a is None and m is None else a for a, m in zip(advanced, maxima)]
            now = time if now is None else max(now, time)
    return marks


def interval_late_rows(
    batches: Sequence[tuple[Sequence[Row], Sequence[Row]]], *, left_time: str, right_time: str, delay: Any,
    left_delay: Any = None, right_delay: Any = None, watermark_policy: str = "min", heartbeats: bool = False,
    idle_timeout: Any = None, processing_times: Sequence[Any] | None = None,
) -> list[tuple[list[bool], list[bool]]]:
    """For each batch, per input, whether each row is late (event time < that batch's watermark,
    :func:`interval_watermarks`); with ``heartbeats``, a heartbeat never is."""
    out = []
    watermarks = interval_watermarks(batches, left_time=left_time, right_time=right_time, delay=delay,
                                     left_delay=left_delay, right_delay=right_delay,
                                     watermark_policy=watermark_policy, idle_timeout=idle_timeout,
                                     processing_times=processing_times)

    def late(row: Row, time: str, mark: Any) -> bool:
        return (mark is not None and row[time] is not None and row[time] < mark
                and not (heartbeats and is_heartbeat(row, time)))

    for (left_rows, right_rows), mark in zip(batches, watermarks):
        out.append(([late(r, left_time, mark) for r in left_rows], [late(r, right_time, mark) for r in right_rows]))
    return out
