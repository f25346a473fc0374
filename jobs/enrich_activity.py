"""The activity-enrichment job (DDIA ch. 11, stream-table join): each activity event gets the user's
profile as it was at the event's time.

A seeded generator writes activity events (``event_id, user_id, ts, action``) and the profiles'
change feed, a plain change table (``user_id, op, changed_at, plan, country``; ``op`` in
``insert``/``update``/``delete``/``heartbeat``): plan upgrades and downgrades, country moves,
sign-ups and account closures, plus a snapshot of the profiles at the start, loaded with
``bootstrap=``. One Parquet file per micro-batch and stream, one hour of activity each. The change
feed's position against the activity varies, as a CDC connector's does: sometimes it is half an
hour ahead, sometimes a quarter of an hour behind, so some changes reach the job in a later
micro-batch than events they precede. A few change rows are bad (an unknown op, a null key, a null change time) and a few
events arrive late: both go to the join's dead-letter output.

The job runs ``stream_table_join(mode="as_of")`` over the files (an event waits in state until
the table's watermark, which heartbeats advance, has passed its time), writes the enriched events
as Parquet and prints a summary: events in and out, enriched or without a profile, events that
waited, dead letters by reason, a few events shown with the profile version they got, and how many
events ``mode="latest"`` (run over the same files as a second query) enriches differently. It
checks its as-of result against an independent batch calculation (for each event, the user's last
change at or before the event's time, from the snapshot and the whole change history) and exits
with status 1 if they differ.
"""

from __future__ import annotations

import argparse
import time

from streamjoin.enrichment.spec import ModeName
from streamjoin.jobs.activity_generator import DELAY, ActivityConfig, write_activity
from streamjoin.jobs.common import JobPaths, add_run_options, help_text, prepare_root, stage
from streamjoin.jobs.session import session_from_args
from streamjoin.statestore.registry import DEFAULT_KIND

__all__ = ["register", "add_arguments", "run", "run_job", "config_from_args", "Paths"]

EVENT_DDL = "event_id bigint, user_id bigint, ts timestamp, action string"
CHANGE_DDL = "user_id bigint, op string, changed_at timestamp, plan string, country string"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "enrich-activity",
        help="run the activity-enrichment job: a stream-table as-of join with a profile change feed",
        description=help_text(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--events", type=int, default=20_000,
                        help="random activity events; each profile change also logs one (default 20,000)")
    parser.add_argument("--users", type=int, default=500, help="users with profiles (default 500)")
    parser.add_argument("--batches", type=int, default=4,
                        help="hours of activity, one micro-batch each; the feed adds two heartbeat batches (default 4)")
    add_run_options(parser, seed=11, store_help="state store: arranged (default), rocksdb, lmdb, rocksdb-kv, lmdb-kv, memory",
                    partitions_help="state partitions (default 4)")


class Paths(JobPaths):
    """Where the job's inputs, outputs and checkpoints go, under one root."""

    @property
    def events(self) -> str:
        return self._under("inputs", "events")

    @property
    def changes(self) -> str:
        return self._under("inputs", "profile_changes")

    @property
    def snapshot(self) -> str:
        return self._under("inputs", "profiles_snapshot.parquet")

    def output(self, mode: str) -> str:
        """The enriched events of the ``mode`` join (Parquet)."""
        return self._under(f"enriched_{mode}")

    def checkpoint(self, mode: str) -> str:
        """The ``mode`` join's checkpoint: changelogs, dead letters, metrics."""
        return self._under("checkpoints", mode)

    def spark_checkpoint(self, mode: str) -> str:
        return self._under("checkpoints", f"spark_{mode}")


def run(args: argparse.Namespace, spark=None) -> int:
    """The command: run the job with the parsed arguments; 0 when the self-check passes, else 1."""
    from streamjoin.jobs.enrich_activity_report import print_summary

    own = spark is None and (args.master is not None or args.remote is not None)
    spark = session_from_args(args, args.partitions) if own else spark
    try:
        summary = run_job(config_from_args(args), prepare_root(args.out, "enrich-activity"), store=args.store, partitions=args.partitions,
                          spark=spark)
    finally:
        if own:
            spark.stop()
    print_summary(summary)
    return 0 if summary.same else 1


def config_from_args(args: argparse.Namespace) -> ActivityConfig:
    """The generator's configuration the command-line arguments ask for."""
    for name in ("events", "users", "batches"):
        if getattr(args, name) < 1:
            raise SystemExit(f"streamjoin enrich-activity: --{name} must be at least 1")
    return ActivityConfig(events=args.events, users=args.users, batches=args.batches, seed=args.seed)


def run_job(config: ActivityConfig, root: str, *, store: str = DEFAULT_KIND, partitions: int = 4, spark=None):
    """Generate the inputs under ``root``, run both joins and compute the summary (not printed).

    Uses ``spark`` if given (and leaves it running), else a local session that it stops.
    Returns a :class:`streamjoin.jobs.enrich_activity_report.Summary`.
    """
    from streamjoin.jobs.enrich_activity_report import summarise

    paths = Paths(root)
    own_session = spark is None
    started = time.perf_counter()
    stage(1, 4, f"generating {config.events:,} activity events for {config.users:,} users over {config.batches} "
             f"hours (seed {config.seed}) under {paths.inputs}", started)
    counts = write_activity(paths.inputs, config)
    print(f"      {counts['events']:,} events ({counts['profile_events']:,} logged by profile changes) in "
          f"{counts['event_files']} files; {counts['changes']:,} profile changes, {counts['bad_changes']} bad rows "
          f"and heartbeats in {counts['change_files']} files; a snapshot of {counts['snapshot_rows']:,} profiles",
          flush=True)
    if spark is None:
        from streamjoin.jobs.session import job_session

        stage(2, 4, "starting a local Spark session", started)
        spark = job_session(partitions)
    try:
        batches = counts["change_files"]
        stage(3, 4, f"as-of join (mode='as_of') and, side by side over the same files, mode='latest' "
                 f"(its own checkpoint), store={store}: {batches} micro-batches each", started)
        _run_queries(spark, paths, store, partitions, batches)
        stage(4, 4, "independent batch calculation and comparisons", started)
        summary = summarise(spark, paths, counts)
    finally:
        if own_session:
            spark.stop()
    print(f"      done in {time.perf_counter() - started:.0f} s", flush=True)
    return summary


def _run_queries(spark, paths: Paths, store: str, partitions: int, batches: int) -> None:
    """Run the as-of and the latest join over the input files to the end, at the same time."""
    modes: tuple[ModeName, ...] = ("as_of", "latest")
    queries = {mode: _start(spark, paths, mode, store, partitions) for mode in modes}
    shown = 0
    while True:
        finished = all([q.awaitTermination(0.5) for q in queries.values()])
        done = {mode: len(q.recentProgress) for mode, q in queries.items()}
        if min(done.values()) > shown:
            shown = min(done.values())
            print(f"      micro-batch {shown}/{batches} done by both queries", flush=True)
        if finished:
            break
    for mode, query in queries.items():
        if query.exception() is not None:
            raise RuntimeError(f"the {mode} query failed: {query.exception()}")


def _start(spark, paths: Paths, mode: ModeName, store: str, partitions: int):
    """Start one streaming join over the input files (``availableNow``: to their end, then stop)."""
    from streamjoin import stream_table_join

    events = spark.readStream.schema(EVENT_DDL).option("maxFilesPerTrigger", 1).parquet(paths.events)
    changes = spark.readStream.schema(CHANGE_DDL).option("maxFilesPerTrigger", 1).parquet(paths.changes)
    bootstrap = spark.read.parquet(paths.snapshot)
    joined = stream_table_join(
        events, changes, "user_id", stream_time="ts", table_key="user_id", table_time="changed_at",
        mode=mode, how="left", delay=DELAY, bootstrap=bootstrap, store=store, partitions=partitions,
        checkpoint=paths.checkpoint(mode),
    )
    return (joined.writeStream.format("parquet").option("path", paths.output(mode)).queryName(f"enrich_{mode}")
            .option("checkpointLocation", paths.spark_checkpoint(mode)).trigger(availableNow=True).start())
