"""What the activity-enrichment job reports: the independent check, counts and examples.

The **independent calculation** is Spark batch SQL that uses neither the operator nor its state:
for each event the join did not set aside, a window query over the snapshot plus every valid
change of the whole history (all change files at once) picks the user's last version with change
time ``<=`` the event's time; a delete means no profile. The as-of output must equal it as a
multiset of rows (compared on the driver). The other numbers are small aggregates, computed on the driver with pandas from
the two outputs (read through Spark), the input files, the join's metrics and its dead letters.

An event's **arrival batch** is the number of the file it came from: the job reads one file per
micro-batch from each input, so file ``b`` is micro-batch ``b`` (checked against the join's
metrics: :attr:`Summary.files_are_batches`). An event **waited** when its time was at or after the
table watermark of that micro-batch (the join's ``table_watermark`` metric).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["Summary", "summarise", "print_summary"]

_VALID_OPS = ("insert", "update", "upsert", "delete")
_COLUMNS = ["event_id", "user_id", "ts", "action", "changed_at", "plan", "country"]
#: Why latest mode's profile differs from the as-of one (code -> words).
_CAUSES = {"future": "latest had already applied a change made after the event",
           "missed": "the change in force at the event's time reached the job in a later micro-batch"}


@dataclass(frozen=True)
class Summary:
    """The job's results (counts are events unless named otherwise)."""

    paths: Any                            # streamjoin.jobs.enrich_activity.Paths
    counts: dict[str, int]                # what the generator wrote
    events_in: int
    events_out: int
    enriched: int
    no_profile_unknown_user: int          # the user never had a profile
    no_profile_at_that_time: int          # not signed up yet, or closed, at the event's time
    waited: int                           # arrived at or after the table watermark: waited in state
    joined_on_arrival: int
    version_arrived_later: int            # the change in force at its time arrived in a later micro-batch
    stream_dead_letters: dict[str, int]
    table_dead_letters: dict[str, int]
    stale_changes: int
    late_changes: int
    peak_events_waiting: int
    files_are_batches: bool
    latest_compared: int
    latest_different: int
    latest_causes: dict[str, int]
    reference_rows: int                   # events the independent calculation enriched
    mismatches: int                       # rows in one result but not in the other (both ways)
    examples: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        """Whether the as-of output equals the independent calculation."""
        return self.mismatches == 0 and self.reference_rows == self.events_out


def summarise(spark, paths, counts: dict[str, int]) -> Summary:
    """Read the inputs, both outputs and the as-of checkpoint; compute every reported number."""
    from streamjoin import join_metrics, set_aside_rows

    events, changes = _read_files(paths.events), _read_files(paths.changes)
    stream_aside = set_aside_rows(spark, paths.checkpoint("as_of"), "stream")
    reference = _reference(spark, paths, stream_aside)

    from pyspark.sql import functions as F

    from streamjoin.runtime.operator import NEG_INF

    # the table watermark in microseconds; none yet (null): every event waits for it
    recorded = join_metrics(spark, paths.checkpoint("as_of"))
    metrics = [r.asDict() for r in recorded.withColumn(
        "table_watermark", F.coalesce(F.unix_micros("table_watermark"), F.lit(NEG_INF))).collect()]
    as_of = _pandas(spark.read.parquet(paths.output("as_of")).select(*_COLUMNS).toArrow())
    differences = _differences(reference, as_of)
    latest = _pandas(spark.read.parquet(paths.output("latest")).select(*_COLUMNS).toArrow())
    versions = _versions(changes, _pandas(pq.read_table(paths.snapshot)))
    shown = _per_event(as_of, latest, events, versions, _per_version(metrics, "table_watermark", max))
    read = _per_version(metrics, "input_rows_stream", sum)
    per_file = events.groupby("batch").size().to_dict()
    unknown = int((shown["changed_at"].isna() & ~shown["known"]).sum())
    enriched = int(shown["changed_at"].notna().sum())
    waited = int(shown["waited"].sum())
    causes = shown["cause"].value_counts().to_dict()
    return Summary(
        paths=paths, counts=counts, events_in=len(events), events_out=len(shown), enriched=enriched,
        no_profile_unknown_user=unknown, no_profile_at_that_time=len(shown) - enriched - unknown,
        waited=waited, joined_on_arrival=len(shown) - waited,
        version_arrived_later=int((shown["change_batch"] > shown["batch"]).sum()),
        stream_dead_letters=_by_reason(stream_aside),
        table_dead_letters=_by_reason(set_aside_rows(spark, paths.checkpoint("as_of"), "table")),
        stale_changes=sum(r.get("stale_changes") or 0 for r in metrics),
        late_changes=sum(r.get("late_changes") or 0 for r in metrics),
        peak_events_waiting=max(_per_version(metrics, "events_waiting", sum).values(), default=0),
        files_are_batches=all(read.get(b, 0) == n for b, n in per_file.items()),
        latest_compared=int(shown["in_latest"].sum()), latest_different=sum(causes.values()),
        latest_causes={_CAUSES[c]: int(n) for c, n in causes.items()},
        reference_rows=len(reference), mismatches=sum(differences.values()),
        examples=_examples(shown),
    )


# -- the independent calculation (Spark) -----------------------------------------------------------

def _reference(spark, paths, stream_aside) -> pd.DataFrame:
    """The independent calculation's rows: each on-time event with the version in force at its time."""
    from pyspark.sql import functions as F

    from streamjoin.jobs.enrich_activity import CHANGE_DDL, EVENT_DDL

    events = spark.read.schema(EVENT_DDL).parquet(paths.events)
    if stream_aside is not None:
        events = events.join(stream_aside.select("event_id"), "event_id", "left_anti")
    valid = F.col("op").isin(*_VALID_OPS) & F.col("user_id").isNotNull() & F.col("changed_at").isNotNull()
    changes = (spark.read.schema(CHANGE_DDL).parquet(paths.changes).filter(valid)
               .select("user_id", "changed_at", "plan", "country", (F.col("op") == "delete").alias("deleted")))
    snapshot = spark.read.parquet(paths.snapshot).select("user_id", "changed_at", "plan", "country",
                                                         F.lit(False).alias("deleted"))
    events.createOrReplaceTempView("sj_activity_events")
    changes.unionByName(snapshot).createOrReplaceTempView("sj_profile_versions")
    reference = spark.sql("""
        SELECT event_id, user_id, ts, action,
               IF(deleted, NULL, changed_at) AS changed_at, IF(deleted, NULL, plan) AS plan,
               IF(deleted, NULL, country) AS country
        FROM (SELECT e.event_id, e.user_id, e.ts, e.action, v.changed_at, v.plan, v.country, v.deleted,
                     row_number() OVER (PARTITION BY e.event_id ORDER BY v.changed_at DESC) AS rank
              FROM sj_activity_events e
              LEFT JOIN sj_profile_versions v ON v.user_id = e.user_id AND v.changed_at <= e.ts)
        WHERE rank = 1
    """)

    return _pandas(reference.toArrow())


def _differences(reference: pd.DataFrame, as_of: pd.DataFrame) -> dict[str, int]:
    """Rows only in the reference and only in the as-of output, compared as multisets of rows."""
    def numbered(df: pd.DataFrame) -> pd.DataFrame:
        df = df[_COLUMNS]
        return df.assign(_n=df.groupby(_COLUMNS, dropna=False).cumcount())

    both = numbered(reference).merge(numbered(as_of), on=[*_COLUMNS, "_n"], how="outer", indicator=True)
    sides = both["_merge"].value_counts()
    return {"reference only": int(sides.get("left_only", 0)), "as-of only": int(sides.get("right_only", 0))}


# -- counts (pandas) ---------------------------------------------------------------------------------

def _read_files(directory: str) -> pd.DataFrame:
    """Every ``part-NNNN.parquet`` file of an input, with its number as ``batch``."""
    parts = []
    for name in sorted(os.listdir(directory)):
        match = re.fullmatch(r"part-(\d+)\.parquet", name)
        if match:
            parts.append(_pandas(pq.read_table(os.path.join(directory, name))).assign(batch=int(match[1])))
    return pd.concat(parts, ignore_index=True)


def _pandas(table: pa.Table) -> pd.DataFrame:
    """``table`` as pandas, every timestamp in nanoseconds (so that they compare and merge)."""
    return table.to_pandas(coerce_temporal_nanoseconds=True)


def _versions(changes: pd.DataFrame, snapshot: pd.DataFrame) -> pd.DataFrame:
    """Every valid profile version (``deleted`` for a delete) and the micro-batch it arrived in."""
    valid = changes["op"].isin(_VALID_OPS) & changes["user_id"].notna() & changes["changed_at"].notna()
    changes = changes[valid].assign(deleted=lambda d: d["op"] == "delete").rename(columns={"batch": "change_batch"})
    snapshot = snapshot.assign(deleted=False, change_batch=np.nan)
    columns = ["user_id", "changed_at", "plan", "country", "deleted", "change_batch"]
    return pd.concat([changes[columns], snapshot[columns]], ignore_index=True).astype({"user_id": "int64"})


def _per_version(metrics: list[dict], name: str, combine: Callable[[list[int]], int]) -> dict[int, int]:
    """A metric per version, combined over partitions."""
    values: dict[int, list[int]] = {}
    for record in metrics:
        if record.get(name) is not None:
            values.setdefault(record["version"], []).append(record[name])
    return {v: combine(xs) for v, xs in values.items()}


def _per_event(as_of: pd.DataFrame, latest: pd.DataFrame, events: pd.DataFrame, versions: pd.DataFrame,
               table_watermarks: dict[int, int]) -> pd.DataFrame:
    """Each as-of output row with its micro-batch, whether it waited, the micro-batch in which
    the change in force at its time arrived (``change_batch``; a delete too, NaN for the
    snapshot), whether the user ever had a profile, and what latest mode gave it (and why)."""
    shown = as_of.merge(events[["event_id", "batch"]], on="event_id", how="left")
    shown["waited"] = _micros(shown["ts"]) >= shown["batch"].map(table_watermarks)
    shown["known"] = shown["user_id"].isin(set(versions["user_id"]))
    in_force = pd.merge_asof(shown[["event_id", "user_id", "ts"]].sort_values("ts"),
                             versions[["user_id", "changed_at", "change_batch"]].sort_values("changed_at"),
                             left_on="ts", right_on="changed_at", by="user_id")
    shown = shown.merge(in_force[["event_id", "change_batch"]], on="event_id", how="left")
    latest = latest[["event_id", "changed_at", "plan", "country"]].add_prefix("latest_").assign(in_latest=True)
    shown = shown.merge(latest, left_on="event_id", right_on="latest_event_id", how="left")
    shown["in_latest"] = shown["in_latest"].fillna(False).astype(bool)
    same = _same(shown["plan"], shown["latest_plan"]) & _same(shown["country"], shown["latest_country"])
    cause = np.select([same | ~shown["in_latest"], shown["change_batch"] > shown["batch"]],
                      np.array([None, "missed"], dtype=object), "future")
    return shown.assign(cause=cause).sort_values("event_id", ignore_index=True)


def _micros(times: pd.Series) -> pd.Series:
    return (times - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1)


def _same(a: pd.Series, b: pd.Series) -> pd.Series:
    """Null-safe equality."""
    return (a == b) | (a.isna() & b.isna())


def _by_reason(aside) -> dict[str, int]:
    if aside is None:
        return {}
    return {r["_reason"]: r["count"] for r in aside.groupBy("_reason").count().orderBy("_reason").collect()}


# -- examples ----------------------------------------------------------------------------------------

def _examples(shown: pd.DataFrame) -> list[str]:
    """A few events shown with the profile version each mode gave them."""
    lines = []
    for _, after in shown[shown["action"] == "upgrade"].iterrows():   # the event an upgrade logged
        user = shown[(shown["user_id"] == after["user_id"]) & (shown["ts"] < after["changed_at"])
                     & shown["plan"].notna() & (shown["plan"] != after["plan"])]
        if len(user):
            before = user.sort_values("ts").iloc[-1]
            lines.append(f"user {after['user_id']} upgraded {before['plan']} -> {after['plan']} at "
                         f"{_time(after['changed_at'])}; an event before it and the one it logged:")
            lines += [_line(before), _line(after)]
            break
    later = shown[(shown["change_batch"] > shown["batch"]) & shown["changed_at"].notna()]
    if len(later):   # preferably one that latest mode got wrong with an older version
        order = later.assign(same=later["cause"].isna(), none=later["latest_plan"].isna())
        row = order.sort_values(["same", "none", "event_id"]).iloc[0]
        lines.append(f"user {row['user_id']}'s change at {_time(row['changed_at'])} reached the job in micro-batch "
                     f"{int(row['change_batch'])}, after this event (micro-batch {row['batch']}), which waited for it:")
        lines.append(_line(row))
    closed = shown[(shown["action"] == "close_account") & shown["changed_at"].isna()]
    if len(closed):
        row = closed.iloc[0]
        lines.append(f"user {row['user_id']} closed the account just before this event:")
        lines.append(_line(row))
    return lines


def _line(row: pd.Series) -> str:
    as_of = _profile(row["plan"], row["country"], row["changed_at"])
    latest = _profile(row["latest_plan"], row["latest_country"], row["latest_changed_at"])
    return (f"  event {row['event_id']} ({row['action']}) at {_time(row['ts'])}, micro-batch {row['batch']}: "
            f"as-of {as_of}; latest {latest}")


def _profile(plan, country, since) -> str:
    return "no profile" if pd.isna(plan) else f"{plan}/{country} (version of {_time(since)})"


def _time(value) -> str:
    return pd.Timestamp(value).tz_convert("UTC").strftime("%Y-%m-%d %H:%M:%S")


# -- printing ----------------------------------------------------------------------------------------

def print_summary(s: Summary) -> None:
    """The job's report, for people."""
    paths = s.paths
    print()
    print(f"as-of enrichment: {s.events_in:,} events in, {s.events_out:,} out "
          f"({sum(s.stream_dead_letters.values()):,} set aside)")
    print(f"  enriched with the profile as it was at the event's time: {s.enriched:,}")
    print(f"  no profile: {s.events_out - s.enriched:,} (unknown user {s.no_profile_unknown_user:,}; "
          f"not signed up yet or closed at that time {s.no_profile_at_that_time:,})")
    print(f"  waited in state for the table's watermark: {s.waited:,}; joined in the micro-batch they arrived in: "
          f"{s.joined_on_arrival:,} (at most {s.peak_events_waiting:,} waiting at once)")
    print(f"  the change in force at the event's time reached the job in a later micro-batch: "
          f"{s.version_arrived_later:,}")
    if not s.files_are_batches:
        print("  (note: Spark did not read one file per micro-batch, so the waiting counts are approximate)")
    print("dead letters, set_aside_rows(spark, checkpoint, ...):")
    print(f"  \"stream\": {_reasons(s.stream_dead_letters)}")
    print(f"  \"table\":  {_reasons(s.table_dead_letters)}")
    print(f"  stale changes ignored: {s.stale_changes}; late changes: {s.late_changes}")
    print("examples (as-of: the version at the event's time; latest: the table at the end of the event's micro-batch):")
    for line in s.examples:
        print(f"  {line}")
    print(f"latest mode (same inputs, a second query): {s.latest_different:,} of {s.latest_compared:,} events "
          "enriched differently (plan or country)")
    for cause, n in sorted(s.latest_causes.items(), key=lambda kv: -kv[1]):
        print(f"  {cause}: {n:,}")
    print(f"as-of result equals the independent calculation: {'yes' if s.same else 'no'} "
          f"({s.reference_rows:,} events computed by batch SQL, {s.mismatches:,} rows differ)")
    print("outputs:")
    print(f"  enriched events (Parquet):                {paths.output('as_of')}")
    print(f"  latest-mode events (Parquet):             {paths.output('latest')}")
    print(f"  as-of checkpoint (dead letters, metrics): {paths.checkpoint('as_of')}")
    print(f"  inputs:                                   {paths.inputs}")


def _reasons(counts: dict[str, int]) -> str:
    return ", ".join(f"{reason} {n:,}" for reason, n in counts.items()) or "none"
