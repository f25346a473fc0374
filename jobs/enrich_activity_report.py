"""What the activity-enrichment job reports, computed with Spark batch queries over its files.

The **independent calculation** uses neither the operator nor its state: for each event that the
join did not set aside, a window query over the snapshot plus every valid change of the whole
history (from all change files at once) picks the user's last version with change time ``<=`` the
event's time; a delete means no profile. The as-of output must equal it row for row.

An event's **arrival batch** is the number of the file it came from: the job reads one file per
micro-batch from each input, so file ``b`` is micro-batch ``b`` (checked against the join's
metrics, see :attr:`Summary.files_are_batches`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jobs.activity_generator import ActivityConfig

__all__ = ["Summary", "summarise", "print_summary"]

_VALID_OPS = ("insert", "update", "upsert", "delete")
_COLUMNS = ["event_id", "user_id", "ts", "action", "changed_at", "plan", "country"]


@dataclass(frozen=True)
class Summary:
    """The job's results (counts are events unless named otherwise)."""

    paths: object
    counts: dict[str, int]
    events_in: int
    events_out: int
    enriched: int
    no_profile_unknown_user: int          # the user never had a profile
    no_profile_at_that_time: int          # not signed up yet, or closed, at the event's time
    waited: int                           # arrived at or after the table watermark: waited in state
    joined_on_arrival: int
    version_arrived_later: int            # the profile version it got arrived in a later micro-batch
    stream_dead_letters: dict[str, int]
    table_dead_letters: dict[str, int]
    stale_changes: int
    late_changes: int
    peak_events_waiting: int
    files_are_batches: bool
    latest_compared: int
    latest_different: int
    latest_causes: dict[str, int]
    examples: list[str] = field(default_factory=list)
    mismatches: int = 0                   # rows in one result but not the other (both directions)
    reference_rows: int = 0

    @property
    def same(self) -> bool:
        return self.mismatches == 0 and self.reference_rows == self.events_out


def summarise(spark, paths, config: ActivityConfig, counts: dict[str, int]) -> Summary:
    """Read the inputs, both outputs and the as-of checkpoint; compute every reported number."""
    from pyspark.sql import functions as F

    from jobs.enrich_activity import CHANGE_DDL, EVENT_DDL
    from joins import join_metrics, set_aside_rows

    events = _with_batch(spark.read.schema(EVENT_DDL).parquet(paths.events))
    changes = _with_batch(spark.read.schema(CHANGE_DDL).parquet(paths.changes))
    as_of = spark.read.parquet(paths.output("as_of")).select(*_COLUMNS)
    latest = spark.read.parquet(paths.output("latest")).select(*_COLUMNS)
    stream_aside = set_aside_rows(spark, paths.checkpoint("as_of"), "stream")
    metrics = [r.asDict() for r in join_metrics(spark, paths.checkpoint("as_of")).collect()]

    versions = _versions(changes, spark.read.parquet(paths.snapshot))
    on_time = events if stream_aside is None else events.join(stream_aside.select("event_id"), "event_id", "left_anti")
    reference = _reference(spark, on_time, versions)
    check = _compare(reference, as_of)

    per_file = dict(events.groupBy("batch").count().collect())
    read = _per_version(metrics, "input_rows_stream", sum)
    marks = _per_version(metrics, "table_watermark", max)
    shown = _per_event(spark, as_of, latest, events, versions, marks).cache()
    totals = shown.agg(*_totals()).first().asDict()
    waiting = _per_version(metrics, "events_waiting", sum)
    return Summary(
        paths=paths, counts=counts, events_in=sum(per_file.values()), events_out=totals["out"],
        enriched=totals["enriched"], no_profile_unknown_user=totals["unknown"],
        no_profile_at_that_time=totals["out"] - totals["enriched"] - totals["unknown"],
        waited=totals["waited"], joined_on_arrival=totals["out"] - totals["waited"],
        version_arrived_later=totals["arrived_later"],
        stream_dead_letters=_by_reason(stream_aside),
        table_dead_letters=_by_reason(set_aside_rows(spark, paths.checkpoint("as_of"), "table")),
        stale_changes=sum(r.get("stale_changes") or 0 for r in metrics),
        late_changes=sum(r.get("late_changes") or 0 for r in metrics),
        peak_events_waiting=max(waiting.values(), default=0),
        files_are_batches=all(read.get(b, 0) == n for b, n in per_file.items()),
        latest_compared=totals["compared"], latest_different=sum(totals[c] for c in _CAUSES),
        latest_causes={text: totals[c] for c, text in _CAUSES.items() if totals[c]},
        examples=_examples(shown), mismatches=check["reference only"] + check["as-of only"],
        reference_rows=check["reference"],
    )


def _with_batch(df):
    """``df`` with the number of the file each row came from (``part-NNNN``) as ``batch``."""
    from pyspark.sql import functions as F

    return df.withColumn("batch", F.regexp_extract(F.col("_metadata.file_name"), r"part-(\d+)", 1).cast("int"))


def _versions(changes, snapshot):
    """Every valid profile version: the snapshot's rows and the changes (``deleted`` for a delete)."""
    from pyspark.sql import functions as F

    valid = F.col("op").isin(*_VALID_OPS) & F.col("user_id").isNotNull() & F.col("changed_at").isNotNull()
    return (changes.filter(valid)
            .select("user_id", "changed_at", "plan", "country", (F.col("op") == "delete").alias("deleted"),
                    F.col("batch").alias("change_batch"))
            .unionByName(snapshot.select("user_id", "changed_at", "plan", "country", F.lit(False).alias("deleted"),
                                         F.lit(None).cast("int").alias("change_batch"))))


def _reference(spark, events, versions):
    """For each event, the user's last version at or before its time (a delete: none), by SQL."""
    events.createOrReplaceTempView("sj_activity_events")
    versions.createOrReplaceTempView("sj_profile_versions")
    return spark.sql("""
        SELECT event_id, user_id, ts, action,
               IF(deleted, NULL, changed_at) AS changed_at, IF(deleted, NULL, plan) AS plan,
               IF(deleted, NULL, country) AS country
        FROM (SELECT e.event_id, e.user_id, e.ts, e.action, v.changed_at, v.plan, v.country, v.deleted,
                     row_number() OVER (PARTITION BY e.event_id ORDER BY v.changed_at DESC) AS rank
              FROM sj_activity_events e
              LEFT JOIN sj_profile_versions v ON v.user_id = e.user_id AND v.changed_at <= e.ts)
        WHERE rank = 1
    """)


def _compare(reference, as_of) -> dict[str, int]:
    """Rows of the reference, and rows only in one of the two results (as multisets)."""
    from pyspark.sql import functions as F

    def side(df, name):
        return df.select(F.lit(name).alias("side"))

    parts = side(reference, "reference").unionByName(side(reference.exceptAll(as_of), "reference only")) \
        .unionByName(side(as_of.exceptAll(reference), "as-of only"))
    found = dict(parts.groupBy("side").count().collect())
    return {name: found.get(name, 0) for name in ("reference", "reference only", "as-of only")}


def _per_version(metrics: list[dict], name: str, combine) -> dict[int, int]:
    """A metric per version, combined over partitions."""
    values: dict[int, list[int]] = {}
    for record in metrics:
        if record.get(name) is not None:
            values.setdefault(record["version"], []).append(record[name])
    return {v: combine(xs) for v, xs in values.items()}


def _per_event(spark, as_of, latest, events, versions, marks: dict[int, int]):
    """Each as-of output row with what the summary needs: its micro-batch, that batch's table
    watermark, the batch its version arrived in, whether the user ever had a profile, and what
    latest mode gave it; times formatted for printing."""
    from pyspark.sql import functions as F

    fmt = "yyyy-MM-dd HH:mm:ss"
    tw = spark.createDataFrame(sorted(marks.items()), "batch int, tw bigint")
    known = versions.select("user_id").distinct().withColumn("known", F.lit(True))
    arrived = versions.filter(~F.col("deleted")).select("user_id", "changed_at", "change_batch")
    latest = latest.select("event_id", F.lit(True).alias("in_latest"),
                           *[F.col(c).alias(f"latest_{c}") for c in ("changed_at", "plan", "country")])
    return (as_of.join(events.select("event_id", "batch"), "event_id")
            .join(F.broadcast(tw), "batch", "left")
            .join(known, "user_id", "left")
            .join(arrived, ["user_id", "changed_at"], "left")
            .join(latest, "event_id", "left")
            .withColumn("cause", _cause())
            .withColumn("event_time", F.date_format("ts", fmt))
            .withColumn("version_time", F.date_format("changed_at", fmt))
            .withColumn("latest_version_time", F.date_format("latest_changed_at", fmt)))


#: Why latest mode's profile differs from the as-of one (column value -> words).
_CAUSES = {"future": "used a change made after the event",
           "missed": "missed a change made before the event (it reached the job in a later micro-batch)",
           "delete": "a delete seen by one mode only"}


def _cause():
    from pyspark.sql import functions as F

    same = F.col("plan").eqNullSafe(F.col("latest_plan")) & F.col("country").eqNullSafe(F.col("latest_country"))
    return (F.when(same | F.col("in_latest").isNull(), None)
            .when(F.col("latest_changed_at") > F.col("ts"), "future")
            .when(F.col("latest_changed_at") < F.col("changed_at"), "missed")
            .otherwise("delete"))


def _totals():
    from pyspark.sql import functions as F

    def n(condition):
        return F.coalesce(F.sum(condition.cast("int")), F.lit(0))

    return [F.count("*").alias("out"), F.count("changed_at").alias("enriched"),
            n(F.col("changed_at").isNull() & F.col("known").isNull()).alias("unknown"),
            n(F.unix_micros("ts") >= F.col("tw")).alias("waited"),
            n(F.col("change_batch") > F.col("batch")).alias("arrived_later"),
            F.count("in_latest").alias("compared"),
            *[n(F.col("cause") == c).alias(c) for c in _CAUSES]]


def _examples(shown) -> list[str]:
    """A few events shown with the profile version each mode gave them."""
    from pyspark.sql import functions as F

    lines = []
    # a plan upgrade: the user's last event before it and the event the upgrade logged
    pair = (shown.alias("u").join(shown.alias("b"), (F.col("b.user_id") == F.col("u.user_id"))
                                  & (F.col("b.ts") < F.col("u.changed_at")))
            .filter((F.col("u.action") == "upgrade") & F.col("b.plan").isNotNull() & (F.col("b.plan") != F.col("u.plan")))
            .orderBy(F.col("u.event_id"), F.col("b.ts").desc())
            .select(F.struct("b.*").alias("before"), F.struct("u.*").alias("after")).first())
    if pair is not None:
        before, after = pair["before"].asDict(), pair["after"].asDict()
        lines.append(f"user {after['user_id']} upgraded {before['plan']} -> {after['plan']} at "
                     f"{after['version_time']}; an event before it and the one it logged:")
        lines += [_line(before), _line(after)]
    # an event whose profile version reached the job in a later micro-batch than the event
    late = (shown.filter(F.col("change_batch") > F.col("batch"))
            .orderBy(F.col("cause").isNull(), "event_id").first())
    if late is not None:
        row = late.asDict()
        lines.append(f"user {row['user_id']}'s change at {row['version_time']} reached the job in micro-batch "
                     f"{row['change_batch']}, after this event (micro-batch {row['batch']}), which waited for it:")
        lines.append(_line(row))
    # an event just after the user closed the account
    closed = shown.filter((F.col("action") == "close_account") & F.col("changed_at").isNull()).orderBy("event_id").first()
    if closed is not None:
        row = closed.asDict()
        lines.append(f"user {row['user_id']} closed the account just before this event:")
        lines.append(_line(row))
    return lines


def _line(row: dict) -> str:
    as_of = _profile(row["plan"], row["country"], row["version_time"])
    latest = _profile(row["latest_plan"], row["latest_country"], row["latest_version_time"])
    return (f"  event {row['event_id']} ({row['action']}) at {row['event_time']}, micro-batch {row['batch']}: "
            f"as-of {as_of}; latest {latest}")


def _profile(plan, country, since) -> str:
    return "no profile" if plan is None else f"{plan}/{country} (version of {since})"


def _by_reason(aside) -> dict[str, int]:
    if aside is None:
        return {}
    return {r["_reason"]: r["count"] for r in aside.groupBy("_reason").count().orderBy("_reason").collect()}


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
    print(f"  got a profile version that reached the job in a later micro-batch than the event: "
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
    print(f"  enriched events (Parquet):       {paths.output('as_of')}")
    print(f"  latest-mode events (Parquet):    {paths.output('latest')}")
    print(f"  as-of checkpoint (dead letters, metrics): {paths.checkpoint('as_of')}")
    print(f"  inputs:                          {paths.inputs}")


def _reasons(counts: dict[str, int]) -> str:
    return ", ".join(f"{reason} {n:,}" for reason, n in counts.items()) or "none"
