"""A join's watermark from its inputs' progress: per-input lateness and the multiple-watermark policy.

Each input ``i`` has a delay ``d_i`` (how late its rows may arrive; ``delay=`` is the default of
every input, ``left_delay=``/``right_delay=`` or ``stream_delay=``/``table_delay=`` override it) and
so its own watermark ``max_time_i - d_i``. The enrichment join keeps the two apart (each input's
rows are late against their own; :func:`input_delays` only); the interval join's one watermark
combines them (:func:`combine_watermark`) as Spark's
``spark.sql.streaming.multipleWatermarkPolicy`` does: ``"min"`` (the default) waits for the slowest
input, so no input's row within its delay is late; ``"max"`` follows the fastest input, so results
come out sooner, but rows of the slower input below that watermark are set aside as late (results
then differ from the batch join). Until every input has had a row the watermark is minus infinity.

**Idleness** (``idle_timeout=``, opt-in, as Flink's ``WatermarkStrategy.withIdleness``): an input
whose progress (largest event time) has not advanced for at least ``idle_timeout`` of *processing*
time is idle and left out of the combination (:func:`idle_inputs`); the watermark follows the
other inputs, and stays where it is while every input is idle. Processing time arrives as data
(the runtime carries, per input, the processing time at which its progress last advanced, and the
latest processing time known), never from a clock read here; results then depend on it, so they
do not equal the batch join's.
The table-table join has no watermark: its ``left_delay``/``right_delay`` are per-table retention
horizons (:mod:`streamjoin.table.retention`).
"""

from __future__ import annotations

from typing import Literal, Sequence

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.times import Duration, parse_duration

__all__ = ["WatermarkPolicy", "POLICIES", "parse_policy", "input_delays", "combine_watermark", "parse_idle_timeout",
           "idle_inputs"]

#: The ``watermark_policy=`` values, for type checkers.
WatermarkPolicy = Literal["min", "max"]
POLICIES: tuple[str, ...] = ("min", "max")


def parse_policy(value: object) -> str:
    """``value`` as a watermark policy (``"min"`` or ``"max"``, any case); JoinDefinitionError otherwise."""
    if isinstance(value, str) and value.lower() in POLICIES:
        return value.lower()
    raise JoinDefinitionError(
        f"watermark_policy must be one of {POLICIES} (as Spark's multipleWatermarkPolicy), not {value!r}"
    )


def input_delays(delay: Duration, overrides: Sequence[tuple[str, Duration | None]]) -> tuple[int, ...]:
    """Per input, in microseconds: its override (named ``argument``) if given, else ``delay``.

    Each must be a duration >= 0; raises JoinDefinitionError naming the argument otherwise.
    """
    default = _non_negative("delay", delay)
    return tuple(default if value is None else _non_negative(name, value) for name, value in overrides)


def combine_watermark(max_times: Sequence[int | None], delays: Sequence[int], policy: str, floor: int,
                      idle: Sequence[bool] = ()) -> int:
    """``min`` (or ``max``) over inputs of ``max_time_i - delay_i``, never below ``floor``
    (minus infinity); ``floor`` while an input has seen no row. Inputs marked in ``idle``
    (:func:`idle_inputs`; none when empty) are left out; ``floor`` when every input is idle."""
    active = [(t, d) for i, (t, d) in enumerate(zip(max_times, delays)) if not (i < len(idle) and idle[i])]
    if not active or any(t is None for t, _ in active):
        return floor
    marks = [int(t) - d for t, d in active]  # type: ignore[arg-type]
    return max(min(marks) if policy == "min" else max(marks), floor)


def parse_idle_timeout(value: Duration | None) -> int | None:
    """``idle_timeout`` in microseconds (None: off); JoinDefinitionError unless a positive duration."""
    if value is None:
        return None
    micros = parse_duration("idle_timeout", value)
    if micros <= 0:
        raise JoinDefinitionError(
            f"idle_timeout ({value}) must be a positive duration (e.g. '10 minutes'), or None to never "
            "treat an input as idle")
    return micros


def idle_inputs(advanced_at: Sequence[int | None], now: int | None, timeout: int | None) -> tuple[bool, ...]:
    """Per input, whether it is idle: its progress last advanced at processing time
    ``advanced_at[i]`` (µs; None: not known, never idle) and ``now - advanced_at[i] >= timeout``.
    No input is idle with ``timeout`` None (the option off) or ``now`` None (no processing time)."""
    if timeout is None or now is None:
        return (False,) * len(advanced_at)
    return tuple(at is not None and now - at >= timeout for at in advanced_at)


def _non_negative(name: str, value: Duration) -> int:
    micros = parse_duration(name, value)
    if micros < 0:
        raise JoinDefinitionError(f"{name} ({value}) must be >= 0")
    return micros
