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
The table-table join has no watermark: its ``left_delay``/``right_delay`` are per-table retention
horizons (:mod:`streamjoin.table.retention`).
"""

from __future__ import annotations

from typing import Literal, Sequence

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.times import Duration, parse_duration

__all__ = ["WatermarkPolicy", "POLICIES", "parse_policy", "input_delays", "combine_watermark"]

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


def combine_watermark(max_times: Sequence[int | None], delays: Sequence[int], policy: str, floor: int) -> int:
    """``min`` (or ``max``) over inputs of ``max_time_i - delay_i``, never below ``floor``
    (minus infinity); ``floor`` while an input has seen no row."""
    if not max_times or any(t is None for t in max_times):
        return floor
    marks = [int(t) - d for t, d in zip(max_times, delays)]  # type: ignore[arg-type]
    return max(min(marks) if policy == "min" else max(marks), floor)


def _non_negative(name: str, value: Duration) -> int:
    micros = parse_duration(name, value)
    if micros < 0:
        raise JoinDefinitionError(f"{name} ({value}) must be >= 0")
    return micros
