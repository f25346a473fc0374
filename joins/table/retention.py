"""Retention of the table-table join's key stages: the horizon, the expiry index, what expires.

Without retention a key stage keeps, per primary key, the order of its last change forever (a
deleted key's is a *tombstone*), so its state grows with every key ever seen. With
``retention=d`` (docs/design/semantics.md "Table-table join", Retention):

* the **horizon** of version ``v`` is ``max_time(v) - d``, where ``max_time(v)`` is the largest
  change time in the side's change table over every version before ``v`` and every partition
  (``StepInput.max_times``, kept by the runtime; minus infinity before the first row). It is the
  same on every partition and when a version runs again, and never decreases;
* a change whose change time is below the horizon when it arrives is **late**: set aside with the
  reason :data:`LATE_REASON` and counted (``late_changes``), never applied;
* after a version's changes are applied, every tombstone whose change time is below the horizon
  is dropped (``tombstones_expired``) and, with ``expire_rows``, every row whose last change is
  below it too (``rows_expired``): a DELETE at its join key goes to the join stage, which retracts
  its view rows. A key changed in the version is never expired in it (its change is not late).

**Per-table delays** (``left_delay=`` / ``right_delay=``, :func:`side_retentions`): in this join
lateness *is* the horizon (nothing waits for a watermark: every change is applied when it arrives),
so a table's delay is its own ``d``, overriding ``retention`` for that table only; the rules above
then hold per table with its ``d``. A table with neither keeps every key forever.

Dropping a tombstone changes no later decision: a change older than the tombstone is below the
horizon too, so it is set aside as late instead of being found stale.

The **expiry index** (area ``expiry`` of the key stage's layout) holds one entry per key that can
expire (every tombstone; with ``expire_rows`` every key), ordered by change time, so a version
reads only the entries below its horizon: expiry costs what expires, not the state's size::

    b"T" | encode_timestamp(change time) | pack(primary key)   ->   b""
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa

from streamjoin.changes import ChangeFormat
from streamjoin.changes.internal import UNITS
from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.times import Duration, parse_duration
from streamjoin.runtime.areas import Area
from streamjoin.runtime.operator import NEG_INF
from streamjoin.statestore.base import Store
from streamjoin.statestore.codecs import encode_timestamp

__all__ = ["Retention", "LATE_REASON", "parse_retention", "side_retentions"]

#: The reason of a change set aside because it is older than the horizon.
LATE_REASON = "late change: older than the retention horizon"


@dataclass(frozen=True)
class Retention:
    """How long a key stage keeps keys: ``retention_us`` behind the side's newest change time;
    ``expire_rows``: rows expire too, not only tombstones."""

    retention_us: int
    expire_rows: bool = False

    def horizon(self, max_time: int | None, scale: int) -> int:
        """The horizon (µs) given the side's largest change time so far (``max_time`` in the time
        column's unit, ``scale`` µs each; None: no row yet, the horizon is minus infinity)."""
        if max_time is None:
            return NEG_INF
        return max(NEG_INF, max_time * scale - self.retention_us)

    def indexed(self, has_row: bool) -> bool:
        """Whether a key whose last change leaves it with (``has_row``) or without a row can expire."""
        return not has_row or self.expire_rows

    def definition(self) -> dict[str, object]:
        return {"retention_us": self.retention_us, "expire_rows": self.expire_rows}


def parse_retention(retention: Duration | None, expire_rows: bool) -> Retention | None:
    """The checked retention (None: keep everything). Raises :class:`JoinDefinitionError` for a
    negative or malformed duration, or ``expire_rows`` without a retention."""
    if not isinstance(expire_rows, bool):
        raise JoinDefinitionError(f"expire_rows must be True or False, not {expire_rows!r}")
    if retention is None:
        if expire_rows:
            raise JoinDefinitionError("expire_rows=True needs a retention (for example retention='7 days')")
        return None
    us = parse_duration("retention", retention)
    if us < 0:
        raise JoinDefinitionError(f"retention={retention!r} is negative; give a duration of zero or more")
    return Retention(us, expire_rows)


def side_retentions(retention: Duration | None, overrides: Sequence[tuple[str, Duration | None]],
                    expire_rows: bool) -> tuple[Duration | None, ...]:
    """Per table, the ``retention`` its key stage uses: its override (``left_delay`` /
    ``right_delay``, named in ``overrides``) when given, else ``retention``. Raises
    :class:`JoinDefinitionError` for a negative or malformed override, or ``expire_rows`` with a
    table that would have no retention."""
    out: list[Duration | None] = []
    for name, value in overrides:
        if value is None:
            out.append(retention)
            continue
        us = parse_duration(name, value)
        if us < 0:
            raise JoinDefinitionError(f"{name}={value!r} is negative; give a duration of zero or more")
        out.append(datetime.timedelta(microseconds=us))
    if expire_rows and any(r is None for r in out):
        missing = [name for (name, _), r in zip(overrides, out) if r is None]
        raise JoinDefinitionError(
            f"expire_rows=True needs a retention for every table (for example retention='7 days'); "
            f"{' and '.join(missing)} not given and no retention")
    return tuple(out)


def time_scale(schema: pa.Schema, changes: ChangeFormat) -> int:
    """Microseconds per unit of the maximum the runtime keeps of the change-time column: 1 for a
    timestamp column (kept in µs), else the integer column's ``time_unit``."""
    kind = schema.field(changes.time).type
    return 1 if pa.types.is_timestamp(kind) else UNITS[changes.time_unit]


def index_key(area: Area, time: int, pk: bytes) -> bytes:
    """The expiry-index key of a key (``pk``: its packed primary key) last changed at ``time``."""
    return area.join(encode_timestamp(time), pk)


def due(area: Area, state: Store, horizon: int) -> list[tuple[bytes, bytes]]:
    """The expiry-index entries below ``horizon``: (index key, packed primary key), in time order."""
    if horizon == NEG_INF:
        return []
    cut = len(area.prefix) + 8
    return [(key, key[cut:]) for key, _ in state.scan(*area.below(horizon))]
