"""The stream-table enrichment join operator (docs/design/semantics.md "Enrichment"), engine-free.

    op = EnrichmentJoin(activity.schema, profile_changes.schema, "user_id", stream_time="ts",
                        changes=ChangeFormat.delta("user_id"), delay=timedelta(minutes=1))

Input 0, ``stream``: events, routed by their (foreign) key ``on``; input 1, ``table``: a change
table in a vocabulary with top-level key columns (plain, Delta; :mod:`streamjoin.changes`), routed
by the table's key. A vocabulary that keeps the key in an envelope (Debezium) is first turned
into the plain form (``streamjoin.changes.pre_stage``, read with ``routable_format(fmt)``); the
rows it sets aside there are that stage's dead letters.

**Watermarks** of version ``v`` (never decreasing; +infinity after the rows of a ``final``
version): the *event watermark* ``ew = max event time before v - delay`` and the *table watermark*
``tw = max change time before v - delay`` (heartbeats count): each input's own progress, the same
``delay`` for both. **Late rows**: an event with ``t < ew`` (``"late"``) and a change with change
time ``< tw`` (``"late change"``) are set aside, in both modes, so a change can arrive up to
``delay`` behind the table's newest change. **Event heartbeats** (``heartbeats=True``): an event whose only non-null column is its event
time moves the event watermark like any event and is otherwise dropped, counted as
``heartbeat_events`` (never joined, waiting, output or set aside, late or not).
Also set aside: a null event time, a null event key
(``how="inner"``; ``"left"`` outputs it at once, null-padded), and the change rows
:func:`streamjoin.changes.normalise` refuses.

**Versions of a key** are ordered by (change time, sequence; a null sequence first), a
bootstrap row without change time before every change (:mod:`streamjoin.changes`, snapshot rows). A change
equal in that order to one already applied is a duplicate: the first applied wins (within one
batch: the first in canonical row order), and the later one is *stale*, ignored and counted; so is
a change older than the newest version no waiting or future event can reach (as_of) or than the
newest version (latest).

**as_of**: an event at ``t`` joins the last version with change time ``<= t`` (a delete: no row).
It is released once ``t < tw`` (then every change it can see has arrived, as an earlier change is
late), or by ``grace`` once ``t < ew - grace`` (joining the versions known then; counted as
``released_by_grace``). A key keeps the newest version ``<= min(ew, release bound)`` and every
later one; a key whose one version left is a delete older than ``tw`` is dropped.
**latest**: this version's changes are applied first, then every event joins its key's newest
version at once.
**Table TTL** (``table_ttl``, None: none): a version *expires* when its key has not changed for
longer than the TTL, in table time. as_of: an event at ``t`` finds its version expired when that
version's change time is ``< t - ttl``; latest: when it is ``< tw - ttl`` (the table watermark of the version); a
timeless bootstrap row counts as changed at minus infinity (give the bootstrap a change time). An expired
version gives no row, as none would (counted as ``expired_lookups``). A key's newest version
``<= keep_to`` (latest: its newest) whose change time is ``< expire_before`` (``keep_to - ttl``;
latest: ``tw - ttl``) is dropped, as every later lookup finds it expired.
**Output**: each released event's columns, then the table's value columns (see
:mod:`streamjoin.enrichment.spec`), in canonical event order; ``how="left"`` null-pads events without
a row, ``"inner"`` drops them. **Bootstrap**: :meth:`EnrichmentJoin.bootstrap_changes` turns a
snapshot into changes to give to version 0 with (or before) the first real changes.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Mapping, Sequence

import pyarrow as pa

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment import load
from streamjoin.enrichment.runs_step import RunsStep
from streamjoin.enrichment.spec import DEFAULT_LAYOUT, EnrichmentSpec, How, LayoutName, Mode, build_spec
from streamjoin.enrichment.step import Step
from streamjoin.enrichment.views import VIEWS
from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.columns import cast_values
from streamjoin.kit.times import Duration
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.evolution import OptionRule, SchemaPlace
from streamjoin.runtime.operator import InputSpec, SpecOperator, StepInput, StepResult
from streamjoin.statestore.base import KeyValue, Store

if TYPE_CHECKING:
    from streamjoin.runtime.regroup import Ownership

__all__ = ["EnrichmentJoin", "Mode", "How", "layout_for"]


def layout_for(checkpoint: str | None, layout: LayoutName | None) -> LayoutName:
    """The layout a query runs in: ``layout`` when given, else the one the enrichment state of
    ``checkpoint`` is kept in (a checkpoint started before ``"runs"`` became the default keeps
    ``"buckets"``), else the default, ``"runs"``."""
    if layout is not None:
        return layout
    if checkpoint is not None:
        binding = Checkpoint(checkpoint).binding
        root = binding.root()
        definition = binding.definition(root) if root else {}
        if definition.get("kind") == EnrichmentJoin.kind and definition.get("layout") == 2:
            return "buckets"
    return DEFAULT_LAYOUT


class EnrichmentJoin(SpecOperator):
    """Enriches events with the version of a changing table's row they refer to (see module)."""

    kind = "enrichment_join"
    #: ``table_source``: change rows the Spark layer refuses before routing
    set_aside_inputs = ("stream", "table", "table_source")
    metric_merges = {"matched": "sum", "events_waiting": "sum", "released_by_grace": "sum", "expired_lookups": "sum",
                     "event_watermark": "max", "table_watermark": "max", "heartbeat_events": "sum"}
    time_metrics = frozenset({"event_watermark", "table_watermark"})
    state_views = VIEWS

    def __init__(
        self, stream: pa.Schema, table: pa.Schema, on: str | Sequence[str], *, stream_time: str,
        changes: ChangeFormat, mode: str | Mode = "as_of", how: str | How = "left",
        delay: Duration = datetime.timedelta(0), grace: Duration | None = None,
        buckets: int = 64, event_bucket: datetime.timedelta = datetime.timedelta(seconds=1),
        table_ttl: datetime.timedelta | str | None = None,
        stream_delay: datetime.timedelta | str | None = None, table_delay: datetime.timedelta | str | None = None,
        heartbeats: bool = False, layout: LayoutName | None = None,
    ) -> None:
        """Validate the join; raise :class:`streamjoin.errors.JoinDefinitionError` naming any problem.

        Tuning (no effect on results; part of the definition): ``buckets`` key buckets of table
        versions per partition, ``event_bucket`` the width of waiting events' time buckets.
        ``heartbeats``: an event whose every column but its event time is null is a heartbeat
        (see module). ``layout``: how a partition holds the table's versions: ``"runs"`` (None,
        the default: sorted runs probed a batch at a time, held in memory within the worker's
        budget and read by chunks beyond it, :mod:`streamjoin.enrichment.runs`) or
        ``"buckets"`` (per key bucket, read as a version touches them; ``buckets`` and
        ``event_bucket`` tune it). Both give the same results; a checkpoint keeps the layout it
        was started with (:func:`layout_for` finds it).
        """
        self.spec: EnrichmentSpec = build_spec(
            stream, table, on, stream_time=stream_time, changes=changes, mode=mode, how=how,
            delay=delay, grace=grace, buckets=buckets, event_bucket=event_bucket, table_ttl=table_ttl,
            stream_delay=stream_delay, table_delay=table_delay, heartbeats=heartbeats,
            layout=DEFAULT_LAYOUT if layout is None else layout,
        )
        self._inputs = (InputSpec("stream", stream, self.spec.stream_key, stream_time),
                        InputSpec("table", table, changes.key, changes.time))

    @property
    def waits_for_watermark(self) -> bool:
        """``as_of`` holds an event until the table watermark passes its time; ``latest`` joins
        every event at once."""
        return self.spec.mode is Mode.AS_OF

    def step(self, state: Store, batch: StepInput) -> StepResult:
        """Join one version's rows of one partition against its state (as of ``version - 1``)."""
        if len(batch.rows) != 2 or len(batch.max_times) != 2:
            raise ValueError("an enrichment join step takes exactly two inputs (stream, table)")
        return (RunsStep if self.spec.layout == "runs" else Step)(self.spec, state, batch).run()

    def schema_places(self) -> tuple[SchemaPlace, ...]:
        return self.spec.schema_places()

    def option_rules(self) -> tuple[OptionRule, ...]:
        """A longer delay, and a longer table TTL (or none): versions already expired stay gone,
        the others are kept longer from now on."""
        return (OptionRule(("delay_us",), "delay"), OptionRule(("delays_us",), "stream_delay/table_delay"),
                OptionRule(("table_ttl_us",), "table_ttl", absent_is_most=True))

    def regroup(self, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
        """Split state by key group after a change of partition count (:mod:`streamjoin.enrichment.regroup`)."""
        from streamjoin.enrichment.regroup import regroup, regroup_runs

        return (regroup_runs if self.spec.layout == "runs" else regroup)(self.spec, sources, owned)

    def state_key(self, side: str, rows: pa.Table) -> list[pa.Array]:
        """A state row's key columns (:mod:`streamjoin.enrichment.load`)."""
        return load.key_arrays(self.spec, side, rows)

    def load_state(self, rows: Mapping[str, pa.Table], summary: Mapping[str, int], version: int) -> list[KeyValue]:
        """The state holding ``rows`` before ``version`` (:mod:`streamjoin.enrichment.load`)."""
        return load.entries(self.spec, rows, version)

    def bootstrap_changes(self, snapshot: pa.Table) -> pa.Table:
        """A snapshot of the table (its row columns) as upserts in the table input's schema.

        Each row's op is the vocabulary's snapshot op (:meth:`ChangeFormat.snapshot_op`). A change
        time column present in the snapshot keeps its values; a row without one (column absent or
        null) keeps a null change time: it comes before every change of its key, and its change
        time reads as null in the output. Delta's metadata columns are filled in
        (``_commit_version`` null). Give the result to version 0 as (part of) its table rows: it
        is then exactly as if those rows had been the table's history (a timeless row given to a
        later version is a late change). Raises :class:`JoinDefinitionError` naming a column and
        a value that does not cast to the table's type.
        """
        fmt, schema = self.spec.changes, self.spec.table
        op, n = fmt.snapshot_op(), snapshot.num_rows
        arrays = []
        for field in schema:
            if field.name == fmt.op:
                arrays.append(pa.repeat(pa.scalar(op), n))
            elif field.name in snapshot.column_names:
                arrays.append(snapshot.column(field.name))
            else:
                arrays.append(pa.nulls(n, field.type))
        return pa.Table.from_arrays([cast_values(a, f.type, f"column {f.name!r} of bootstrap (as the table's changes)",
                                                 JoinDefinitionError) for a, f in zip(arrays, schema)], schema=schema)

    def __repr__(self) -> str:
        s = self.spec
        return (f"EnrichmentJoin(on={list(s.stream_key)!r}, stream_time={s.stream_time!r}, "
                f"changes={s.changes!r}, mode={s.mode.value!r}, how={s.how.value!r}, "
                f"delay=timedelta(microseconds={s.delay}), grace="
                f"{None if s.grace is None else f'timedelta(microseconds={s.grace})'}, table_ttl="
                f"{None if s.ttl is None else f'timedelta(microseconds={s.ttl})'})")
