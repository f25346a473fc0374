"""The timeline job (DDIA ch. 11/12, table-table join): every user's home timeline, the posts of the
users they follow, kept up to date as a materialized view while posts and follows change.

A seeded generator writes two plain change tables (``op`` in ``insert``/``update``/``delete``,
change time ``changed_at``), one Parquet file per micro-batch each: posts (``post_id, author_id,
text``) created, edited, reassigned to another author (a change of join key) and deleted; follows
(``follow_id, follower_id, followee_id``) created, unfollowed (deleted) and edited to point at
someone else; plus a few stale changes (old versions sent again) and deletes of unknown rows.

The job runs ``table_table_join(posts, follows, on=posts.author_id = follows.followee_id,
how="inner")`` as a streaming query. Each micro-batch's view changes (Delta change-data-feed
vocabulary: ``insert``, ``update_preimage``, ``update_postimage``, ``delete``) are written as
Parquet and applied by ``view_sink`` to the timelines view, kept in a store on the driver; at the
end the timelines are written as Parquet. After every micro-batch the job checks **view
consistency**: the view equals a Spark batch join of the two tables as they stand (each row's
latest change from the change files read so far, deletes removed). It prints a summary: changes
in and out per kind, stale changes and unknown deletes from the join's metrics, and one user's
timeline before and after an unfollow and a deleted post. Exit status 1 if any check fails.
"""

from __future__ import annotations

import argparse
import time

from streamjoin.jobs.common import JobPaths, add_run_options, help_text, prepare_root, stage
from streamjoin.jobs.session import session_from_args
from streamjoin.jobs.timeline_generator import TimelineConfig, write_timeline_inputs
from streamjoin.statestore.registry import DEFAULT_KIND

__all__ = ["register", "add_arguments", "run", "run_job", "Paths", "POSTS_DDL", "FOLLOWS_DDL"]

POSTS_DDL = "post_id bigint, op string, changed_at timestamp, author_id bigint, text string"
FOLLOWS_DDL = "follow_id bigint, op string, changed_at timestamp, follower_id bigint, followee_id bigint"
ON = (["author_id"], ["followee_id"])


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "timeline",
        help="run the timeline job: a table-table join of posts and follows kept as a materialized view",
        description=help_text(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--posts", type=int, default=2_000, help="posts created over the run (default 2,000)")
    parser.add_argument("--users", type=int, default=300,
                        help="users; each follows about 5 others at the start (default 300)")
    parser.add_argument("--batches", type=int, default=8,
                        help="micro-batches, one hour of changes each; the middle one holds the showcase unfollow "
                             "and post deletion (default 8)")
    add_run_options(parser, seed=5, store_help="state store of the join and the view: arranged (default), rocksdb, lmdb, rocksdb-kv, lmdb-kv, memory",
                    partitions_help="state partitions of the join (default 4)")


class Paths(JobPaths):
    """Where the job's inputs, outputs and checkpoints go, under one root."""

    @property
    def posts(self) -> str:
        return self._under("inputs", "posts")

    @property
    def follows(self) -> str:
        return self._under("inputs", "follows")

    @property
    def view_changes(self) -> str:
        """The view's change stream, one Parquet file per micro-batch."""
        return self._under("view_changes")

    @property
    def timelines(self) -> str:
        """The final timelines (the whole view), one Parquet file."""
        return self._under("timelines.parquet")

    @property
    def view_store(self) -> str:
        """The view sink's store (on the driver)."""
        return self._under("view_store")

    @property
    def checkpoint(self) -> str:
        """The join's checkpoint: ``left_keys``, ``right_keys`` and ``join`` sub-checkpoints."""
        return self._under("checkpoints", "join")

    @property
    def spark_checkpoint(self) -> str:
        return self._under("checkpoints", "spark")


def run(args: argparse.Namespace, spark=None) -> int:
    """The command: run the job with the parsed arguments; 0 when view consistency held, else 1."""
    from streamjoin.jobs.timeline_report import print_summary

    config = TimelineConfig(posts=args.posts, users=args.users, batches=args.batches, seed=args.seed)
    own = spark is None and (args.master is not None or args.remote is not None)
    spark = session_from_args(args, args.partitions) if own else spark
    try:
        summary = run_job(config, prepare_root(args.out, "timeline"), store=args.store, partitions=args.partitions, spark=spark)
    finally:
        if own:
            spark.stop()
    print_summary(summary)
    return 0 if summary.consistent else 1


def run_job(config: TimelineConfig, root: str, *, store: str = DEFAULT_KIND, partitions: int = 4, spark=None):
    """Generate the inputs under ``root``, run the streaming join and compute the summary (not printed).

    Uses ``spark`` if given (and leaves it running), else a local session that it stops.
    Returns a :class:`streamjoin.jobs.timeline_report.Summary`.
    """
    from streamjoin.jobs.timeline_report import summarise

    paths = Paths(root)
    own_session = spark is None
    started = time.perf_counter()
    stage(1, 4, f"generating changes of {config.posts:,} posts and {config.users:,} users' follows in "
             f"{config.batches} micro-batches (seed {config.seed}) under {paths.inputs}", started)
    generated = write_timeline_inputs(paths.inputs, config)
    if spark is None:
        from streamjoin.jobs.session import job_session

        stage(2, 4, "starting a local Spark session", started)
        spark = job_session(partitions)
    try:
        stage(3, 4, f"streaming table_table_join (how='inner', store={store}, {partitions} partitions); after each "
                 "micro-batch: view changes -> Parquet, view sink, consistency check", started)
        checker = _stream(spark, paths, store, partitions, generated.showcase)
        stage(4, 4, f"writing the timelines to {paths.timelines}; reading the join's metrics", started)
        summary = summarise(spark, paths, config, generated, checker, store, partitions)
    finally:
        if own_session:
            spark.stop()
    print(f"      done in {time.perf_counter() - started:.0f} s", flush=True)
    return summary


def _stream(spark, paths: Paths, store: str, partitions: int, showcase):
    """Run the join over the change files to the end (``availableNow``); return the batch checker."""
    from streamjoin import table_table_join, view_sink
    from streamjoin.jobs.timeline_report import BatchChecker

    posts = spark.readStream.schema(POSTS_DDL).option("maxFilesPerTrigger", 1).parquet(paths.posts)
    follows = spark.readStream.schema(FOLLOWS_DDL).option("maxFilesPerTrigger", 1).parquet(paths.follows)
    changes = table_table_join(posts, follows, ON, left_key="post_id", right_key="follow_id", how="inner",
                               left_time="changed_at", right_time="changed_at", store=store,
                               checkpoint=paths.checkpoint, partitions=partitions)
    sink = view_sink(paths.view_store, left_key="post_id", right_key="follow_id", schema=changes, store=store)
    checker = BatchChecker(spark, paths, sink, showcase)
    query = (changes.writeStream.foreachBatch(checker).option("checkpointLocation", paths.spark_checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the timeline query failed: {query.exception()}")
    return checker

