"""Obviously-correct references of the enrichment join (docs/design/semantics.md "Enrichment"), for the tests to compare with.

Rows are Python dicts. A batch is ``(events, changes)``; a change is a dict with ``key`` (a tuple),
``op`` (``"upsert"``, ``"delete"`` or ``"heartbeat"``), ``time`` (None: a timeless snapshot row, before every change of its key), ``seq`` (or None) and ``row``
(the value columns, a tuple); an event is a dict with ``key`` (a tuple, None values allowed),
``time`` and ``row`` (its columns, a tuple, the event time among them). Times are integers (µs).
With ``heartbeats=True`` (the join's option for events) an event whose ``row`` has no value but
its time is a heartbeat: its time counts in the event watermark like any event's, and it is
never joined, output or late.

    enrichment_watermarks(batches, delay)        (event watermark, table watermark) of each batch
    late_flags(batches, delay)                   which events / changes of each batch are late
    reference_as_of(batches, how, delay, ttl)    output multiset, from the whole change history
    reference_latest(batches, how, delay, ttl)   output multiset, given the batch boundaries

Both references leave out late rows (and the changes after them nothing), order a key's changes
by (time, seq) with a None seq first, and ignore a change equal in that order to an earlier one
(the first to arrive wins; within a batch, the first in the list). With a ``ttl`` (µs; None:
none) the row found is *expired*, and gives no row, when its change time is below ``event time -
ttl`` (as_of) or below ``table watermark - ttl`` (latest; no watermark yet: nothing expires); a
timeless row counts as changed at minus infinity.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["enrichment_watermarks", "late_flags", "reference_as_of", "reference_latest", "is_heartbeat_event"]

Batch = tuple[Sequence[dict], Sequence[dict]]


def enrichment_watermarks(batches: Sequence[Batch], delay: int | tuple[int, int]) -> list[tuple[Any, Any]]:
    """Per batch: (max event time before it - stream delay, max change time before it - table
    delay), None while the input has had no row. Heartbeats count as changes. ``delay`` is one
    delay for both inputs or a (stream_delay, table_delay) pair."""
    stream_delay, table_delay = delay if isinstance(delay, tuple) else (delay, delay)
    marks, max_event, max_change = [], None, None
    for events, changes in batches:
        marks.append((None if max_event is None else max_event - stream_delay,
                      None if max_change is None else max_change - table_delay))
        for e in events:
            if e["time"] is not None:
                max_event = e["time"] if max_event is None else max(max_event, e["time"])
        for c in changes:
            if c["time"] is not None:
                max_change = c["time"] if max_change is None else max(max_change, c["time"])
    return marks


def is_heartbeat_event(event: dict) -> bool:
    """Whether ``event`` is a heartbeat: it has a time, and its row no other value."""
    return event["time"] is not None and sum(value is not None for value in event["row"]) == 1


def late_flags(batches: Sequence[Batch], delay: int | tuple[int, int],
               heartbeats: bool = False) -> list[tuple[list[bool], list[bool]]]:
    """Per batch: whether each event (time < event watermark) and change (time < table
    watermark; a timeless one once there is a table watermark) is late; a heartbeat never is (it
    carries nothing to lose), nor, with ``heartbeats``, an event heartbeat."""
    out = []
    for (events, changes), (ew, tw) in zip(batches, enrichment_watermarks(batches, delay)):
        out.append(([ew is not None and e["time"] < ew and not (heartbeats and is_heartbeat_event(e))
                     for e in events],
                    [tw is not None and c["op"] != "heartbeat" and (c["time"] is None or c["time"] < tw)
                     for c in changes]))
    return out


def _order(change: dict) -> tuple:
    """(has a time, time, seq): a timeless change first, then by time, a None seq first."""
    timed = change["time"] is not None
    return (timed, change["time"] if timed else 0, float("-inf") if change["seq"] is None else change["seq"])


def _expired(change: dict | None, limit: int | None, ttl: int | None) -> bool:
    """Whether ``change`` was changed more than ``ttl`` before ``limit`` (None: minus infinity)."""
    if change is None or ttl is None or limit is None:
        return False
    return change["time"] is None or change["time"] < limit - ttl


def _output(event: dict, change: dict | None, how: str, width: int) -> list[tuple]:
    if change is None or change["op"] == "delete":
        return [] if how == "inner" else [tuple(event["row"]) + (None,) * width]
    return [tuple(event["row"]) + tuple(change["row"])]


def _accepted(batches: Sequence[Batch], delay: int | tuple[int, int],
              heartbeats: bool = False) -> list[tuple[list[dict], list[dict]]]:
    """Each batch's events and changes that are not late; changes without heartbeats and
    duplicates (same key, time and seq as an earlier one); with ``heartbeats``, events without
    heartbeats."""
    seen: set = set()
    out = []
    for (events, changes), (late_e, late_c) in zip(batches, late_flags(batches, delay, heartbeats)):
        kept = []
        for change, late in zip(changes, late_c):
            ident = (change["key"], _order(change))
            if not late and change["op"] != "heartbeat" and ident not in seen:
                seen.add(ident)
                kept.append(change)
        out.append(([e for e, late in zip(events, late_e)
                     if not late and not (heartbeats and is_heartbeat_event(e))], kept))
    return out


def reference_as_of(batches: Sequence[Batch], *, how: str, delay: int | tuple[int, int], width: int,
                    ttl: int | None = None, heartbeats: bool = False) -> list[tuple]:
    """Each event joined with its key's last change at or before its time, over all changes,
    unless that change is older than the event's time minus ``ttl``.

    ``width`` is the number of value columns (for null padding). An event with a None in its
    key matches nothing.
    """
    accepted = _accepted(batches, delay, heartbeats)
    history = [c for _, changes in accepted for c in changes]
    out: list[tuple] = []
    for events, _ in accepted:
        for event in events:
            candidates = [c for c in history if None not in event["key"] and c["key"] == event["key"]
                          and (c["time"] is None or c["time"] <= event["time"])]
            best = max(candidates, key=_order) if candidates else None
            out += _output(event, None if _expired(best, event["time"], ttl) else best, how, width)
    return out


def reference_latest(batches: Sequence[Batch], *, how: str, delay: int | tuple[int, int], width: int,
                     ttl: int | None = None, heartbeats: bool = False) -> list[tuple]:
    """Per batch: apply its changes (a change not newer than the key's current one is stale),
    then join each of its events with its key's current row, unless that row is older than the
    batch's table watermark minus ``ttl``."""
    current: dict = {}
    out: list[tuple] = []
    marks = enrichment_watermarks(batches, delay)
    for (events, changes), (_, tw) in zip(_accepted(batches, delay, heartbeats), marks):
        for change in changes:
            now = current.get(change["key"])
            if now is None or _order(change) > _order(now):
                current[change["key"]] = change
        for event in events:
            row = current.get(event["key"])
            out += _output(event, None if _expired(row, tw, ttl) else row, how, width)
    return out
