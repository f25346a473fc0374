"""The timeline job's per-batch work and its summary: the view-consistency check and what is printed.

:class:`BatchChecker` is the streaming query's ``foreachBatch`` function: it writes each
micro-batch's view changes as Parquet, applies them with the view sink, and checks that the view
equals a Spark batch join of the two tables as they stand. Micro-batch ``b`` reads change file
``b`` of each table (one file per trigger, both tables with one file per batch), so the tables as
they stand after it are each row's latest change (by ``changed_at``) in files ``0..b``, deletes
removed. That is the stale rule of docs/design/semantics.md "Enrichment" as long as no row has two changes at one time, which the
generator guarantees.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from streamjoin.jobs.timeline_generator import Generated, Showcase, TimelineConfig

__all__ = ["BatchChecker", "BatchResult", "Summary", "summarise", "print_summary", "expected_view"]

_KINDS = ("insert", "update_preimage", "update_postimage", "delete")
_SHOWN = ("post_id", "author_id", "text")


@dataclass(frozen=True)
class BatchResult:
    """One micro-batch: view changes by kind, view size after it, and whether it equals the join."""

    batch_id: int
    changes: dict[str, int]
    view_rows: int
    consistent: bool
    missing: int = 0        # rows of the batch join that the view lacks
    extra: int = 0          # rows of the view that the batch join lacks


class BatchChecker:
    """The ``foreachBatch`` function of the timeline query (see module docstring)."""

    def __init__(self, spark, paths, sink, showcase: Showcase | None) -> None:
        self.spark, self.paths, self.sink, self.showcase = spark, paths, sink, showcase
        self.results: list[BatchResult] = []
        #: The showcase user's timeline rows after the batch before the showcase batch and after it.
        self.timelines: dict[int, list[dict]] = {}

    def __call__(self, df, batch_id: int) -> None:
        if self.sink.has_applied(batch_id):
            return   # Spark runs a micro-batch again after a failure: the view already holds it
        changes = df.toArrow()
        os.makedirs(self.paths.view_changes, exist_ok=True)
        pq.write_table(changes, os.path.join(self.paths.view_changes, f"part-{batch_id:04d}.parquet"))
        counts = self.sink.apply(changes, batch_id)
        view = self.sink.rows()
        expected = expected_view(self.spark, self.paths, batch_id, view.schema)
        got, want = Counter(_tuples(view)), Counter(_tuples(expected))
        result = BatchResult(batch_id, counts, view.num_rows, got == want, sum((want - got).values()),
                             sum((got - want).values()))
        self.results.append(result)
        if self.showcase is not None and batch_id in (self.showcase.batch - 1, self.showcase.batch):
            mine = view.filter(pc.equal(view.column("follower_id"), self.showcase.user))
            self.timelines[batch_id] = sorted(mine.select(_SHOWN).to_pylist(), key=lambda r: r["post_id"])
        out = ", ".join(f"{counts[k]:,} {k}" for k in _KINDS)
        verdict = "yes" if result.consistent else f"NO ({result.missing} rows missing, {result.extra} extra)"
        print(f"      micro-batch {batch_id}: {changes.num_rows:,} view changes ({out}); "
              f"view {view.num_rows:,} rows; equals the join of the current tables: {verdict}", flush=True)


def _tuples(table: pa.Table) -> list[tuple]:
    return [tuple(r.values()) for r in table.to_pylist()]


def current_table(spark, directory: str, ddl: str, key: str, upto: int):
    """The table as it stands after micro-batch ``upto``: each key's latest change in files
    ``0..upto``, deletes removed (a Spark batch DataFrame, without the ``op`` column)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    files = [os.path.join(directory, f"part-{i:04d}.parquet") for i in range(upto + 1)]
    latest = Window.partitionBy(key).orderBy(F.col("changed_at").desc())
    return (spark.read.schema(ddl).parquet(*files).withColumn("_n", F.row_number().over(latest))
            .where("_n = 1 AND op <> 'delete'").drop("_n", "op"))


def expected_view(spark, paths, upto: int, schema: pa.Schema) -> pa.Table:
    """The inner join of posts and follows as they stand after micro-batch ``upto``, by Spark, as Arrow."""
    from streamjoin.jobs.timeline import FOLLOWS_DDL, POSTS_DDL

    posts = current_table(spark, paths.posts, POSTS_DDL, "post_id", upto).withColumnRenamed("changed_at",
                                                                                           "changed_at_left")
    follows = current_table(spark, paths.follows, FOLLOWS_DDL, "follow_id", upto).withColumnRenamed(
        "changed_at", "changed_at_right")
    joined = posts.join(follows, posts["author_id"] == follows["followee_id"], "inner").select(*schema.names)
    return joined.toArrow().cast(schema)


@dataclass
class Summary:
    """Everything the job prints."""

    config: TimelineConfig
    generated: Generated
    results: list[BatchResult]
    metrics: dict[str, dict[str, int]]
    timelines: dict[int, list[dict]]
    view_rows: int
    followers: int
    paths: Any   # the job's Paths (streamjoin.jobs.timeline, which imports this module)
    store: str
    partitions: int
    changes_out: Counter = field(default_factory=Counter)

    @property
    def consistent(self) -> bool:
        return len(self.results) == self.config.batches and all(r.consistent for r in self.results)


def summarise(spark, paths, config: TimelineConfig, generated: Generated, checker: BatchChecker, store: str,
              partitions: int) -> Summary:
    """Write the timelines (through the view sink), read the join's metrics; the summary."""
    from streamjoin import join_metrics

    checker.sink.write_parquet(paths.timelines)
    view = checker.sink.rows()
    checker.sink.close()
    metrics: dict[str, dict[str, int]] = {}
    for stage in ("left_keys", "right_keys", "join"):
        df = join_metrics(spark, f"{paths.checkpoint}/{stage}")
        wanted = [c for c in ("stale_changes", "unknown_deletes", "inconsistent_deletes", "routed_upserts",
                              "routed_deletes") if c in df.columns]
        row = df.groupBy().sum(*wanted).collect()[0] if wanted else None
        metrics[stage] = {c: int(row[f"sum({c})"] or 0) for c in wanted} if row else {}
    out: Counter[str] = Counter()
    for r in checker.results:
        out.update(r.changes)
    followers = len(set(view.column("follower_id").to_pylist()))
    return Summary(config, generated, checker.results, metrics, checker.timelines, view.num_rows, followers,
                   paths, store, partitions, out)


def print_summary(s: Summary) -> None:
    p, f = s.generated.posts, s.generated.follows
    print("\nstreamjoin timeline: posts JOIN follows ON posts.author_id = follows.followee_id (inner), "
          f"store={s.store}, {s.partitions} partitions")
    print("changes in (plain change tables: op insert/update/delete, change time changed_at) under "
          f"{s.paths.inputs}:")
    print(f"  posts:   {p['insert']:,} created, {p['update']:,} edited, {p['reassign']:,} reassigned to another "
          f"author, {p['delete']:,} deleted; {p['stale']:,} stale re-sends, {p['unknown_delete']:,} deletes of unknown posts")
    print(f"  follows: {f['insert']:,} created, {f['reassign']:,} edited to another followee, "
          f"{f['delete']:,} unfollows; {f['stale']:,} stale re-sends, {f['unknown_delete']:,} deletes of unknown follows")
    print(f"view changes out (Delta change data feed vocabulary) in {s.paths.view_changes}:")
    print("  " + ", ".join(f"{k} {s.changes_out[k]:,}" for k in _KINDS))
    for stage, name in (("left_keys", "posts"), ("right_keys", "follows")):
        m = s.metrics.get(stage, {})
        print(f"join metrics ({name}, join_metrics(spark, '<checkpoint>/{stage}')): stale changes ignored "
              f"{m.get('stale_changes', 0):,}, unknown deletes {m.get('unknown_deletes', 0):,}")
    print(f"final timelines: {s.view_rows:,} (follower, post) rows for {s.followers:,} followers -> "
          f"{s.paths.timelines}")
    _print_showcase(s)
    checked = len(s.results)
    verdict = "yes" if s.consistent else "NO"
    print(f"view equals the join of the current tables: {verdict} (checked after each of {checked} micro-batches "
          f"against a Spark batch join; {s.config.batches} expected)")
    print(f"outputs under {s.paths.root}: view_changes/ (change stream), timelines.parquet, view_store/, "
          "checkpoints/, inputs/")


def _print_showcase(s: Summary) -> None:
    sc = s.generated.showcase
    if sc is None or sc.batch not in s.timelines or sc.batch - 1 not in s.timelines:
        print("no showcase user (too few micro-batches or follows)")
        return
    before, after = s.timelines[sc.batch - 1], s.timelines[sc.batch]
    print(f"user {sc.user}'s timeline before and after micro-batch {sc.batch}, in which user {sc.user} unfollows "
          f"user {sc.unfollowed} and post {sc.post_id} (by user {sc.post_author}) is deleted:")
    for label, rows in ((f"before (after micro-batch {sc.batch - 1})", before),
                        (f"after (micro-batch {sc.batch})", after)):
        print(f"  {label}: {len(rows)} posts")
        for r in rows:
            print(f"    post {r['post_id']:>5}  by user {r['author_id']:>4}  {r['text']!r}")
    now = {r["post_id"]: r for r in after}
    was = {r["post_id"]: r for r in before}
    for pid, r in was.items():
        if pid not in now:
            why = ("the post was deleted" if pid == sc.post_id else
                   f"user {sc.user} unfollowed user {sc.unfollowed}" if r["author_id"] == sc.unfollowed else
                   "the post changed author or a follow changed")
            print(f"  - post {pid} left the timeline: {why}")
    for pid, r in now.items():
        if pid not in was:
            print(f"  + post {pid} joined the timeline (new, or now by an author user {sc.user} follows)")
        elif r != was[pid]:
            print(f"  ~ post {pid} was edited")
