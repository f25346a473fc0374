"""``streamjoin checkpoint describe|verify|repartition|migrate <checkpoint>``: a whole join checkpoint, every partition.

``describe`` prints the binding (kind, definition, partitions, query id) and, per partition, the
changelog's restorable versions and size, the newest snapshot, the watermark input and the rows set
aside by reason. ``verify`` checks every changelog, record and set-aside file (see :data:`VERIFY_HELP`
for its exit codes): a version a stopped query had half committed is reported as the normal state
it is, saying what the next run does. ``--json`` prints the same as JSON, for scripts; a progress bar
(on stderr, when it is a terminal) follows the partitions. ``repartition --partitions N`` changes
the partition count of a stopped query's checkpoint (:func:`streamjoin.runtime.rescale.plan_repartition`);
``migrate`` upgrades one written by streamjoin 0.2 (:func:`streamjoin.runtime.migrate.migrate`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from streamjoin.jobs.common import help_text

__all__ = ["register", "VERIFY_HELP", "MIGRATE_HELP"]

VERIFY_HELP = (
    "Check every changelog, commit record and set-aside file of a join checkpoint. A version the query "
    "was committing when it stopped (some partitions' files of it written, not all) is the normal state "
    "after a crash or a stop: it is printed as a note saying what the next run does. With "
    "--spark-checkpoint, such a version that the query's Spark commit log has is damage (its records "
    "were lost). Exit status: 0 when nothing is damaged (notes may be printed), 1 when something is "
    "damaged or missing (each problem names its file and what to do), 2 for a usage error.")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("checkpoint", help="describe, verify, repartition or migrate a whole join checkpoint",
                                   description=help_text(__doc__.split("\n\n")[0]))
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, func, text, description in (
            ("describe", _describe, "every partition's versions, state size, watermark inputs, set-aside rows; "
             "the binding", None),
            ("verify", _verify, "check every changelog, record and set-aside file; exit 1 naming what is "
             "damaged", VERIFY_HELP)):
        sub = actions.add_parser(name, help=text, description=description or text)
        sub.add_argument("checkpoint", help="the checkpoint= location of a join (a path or URI)")
        sub.add_argument("--json", action="store_true", help="print JSON")
        if name == "verify":
            sub.add_argument("--spark-checkpoint", metavar="LOCATION",
                             help="the query's Spark checkpointLocation: a version its commit log has must have "
                                  "every commit record here")
        sub.set_defaults(func=func)
    text = ("change the partition count: check every changelog, record the new count; the next run (with "
            "partitions=N) rebuilds each new partition from the old ones it takes key groups from")
    sub = actions.add_parser("repartition", help=text, description=text)
    sub.add_argument("checkpoint", help="the checkpoint= location of a join (a path or URI)")
    sub.add_argument("--partitions", type=_partitions, required=True, metavar="N",
                     help="the new partition count, from 1 to the checkpoint's key groups (max_partitions)")
    sub.add_argument("--force", action="store_true",
                     help="skip the check that no query committed a version in the last two minutes")
    sub.add_argument("--json", action="store_true", help="print JSON")
    sub.set_defaults(func=_repartition)
    sub = actions.add_parser("migrate", help="upgrade a checkpoint of streamjoin 0.2 (format 1) to this format, "
                             "keeping its state", description=MIGRATE_HELP)
    sub.add_argument("checkpoint", help="the checkpoint= location of a join (a path or URI)")
    sub.add_argument("--partitions", type=_partitions, metavar="N",
                     help="the partition count the query will run with (default: the one it ran with)")
    sub.add_argument("--max-partitions", type=_partitions, metavar="G", dest="key_groups",
                     help="the key groups the state is kept by from now on, the most partitions it can run "
                          "with (default 4096)")
    sub.add_argument("--force", action="store_true",
                     help="skip the check that no query committed a version in the last two minutes")
    sub.add_argument("--dry-run", action="store_true", help="check everything and say what it would do; write nothing")
    sub.add_argument("--json", action="store_true", help="print JSON")
    sub.set_defaults(func=_migrate)


MIGRATE_HELP = (
    "Upgrade the checkpoint of a join written by streamjoin 0.2 (format 1) to this streamjoin's format, "
    "offline, with its query stopped; a table-table join's stages are migrated together. No state is "
    "rewritten: the commit records are made from the old progress and metrics records, and the first "
    "version the query runs afterwards rebuilds each partition's state from the old changelogs, as after "
    "a repartition. The replaced streamjoin.json is kept as format-1/streamjoin.json; the migration is "
    "one-way (copy the checkpoint first to keep 0.2's). A migration cut short is finished by running it "
    "again; a checkpoint already of this format is left alone. Then check it with `streamjoin checkpoint "
    "verify` and restart the query on it and on its Spark checkpoint.")


def _partitions(text: str) -> int:
    """``--partitions``: an int of at least 1 (the upper bound, the checkpoint's key groups, is
    checked against the checkpoint)."""
    from streamjoin.errors import JoinDefinitionError
    from streamjoin.runtime.keygroups import check_count

    try:
        value: object = int(text)
    except ValueError:
        value = text
    try:
        return check_count(value, "--partitions")
    except JoinDefinitionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _bar(args: argparse.Namespace, what: str):
    from tqdm import tqdm

    bar = tqdm(desc=what, unit="partition", disable=args.json or not sys.stderr.isatty(), file=sys.stderr)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()
    return bar, progress


def _describe(args: argparse.Namespace) -> int:
    from streamjoin.errors import JoinError
    from streamjoin.runtime.inspect import describe_checkpoint, stage_checkpoints

    try:
        stages = stage_checkpoints(args.checkpoint)
    except JoinError as exc:
        print(f"streamjoin checkpoint: {exc}", file=sys.stderr)
        return 1
    reports = []
    for uri in stages:
        bar, progress = _bar(args, uri)
        try:
            with bar:
                reports.append(describe_checkpoint(uri, progress))
        except JoinError as exc:   # a damaged file: named, with what to do
            print(f"streamjoin checkpoint: {exc}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps([r.to_json() for r in reports], indent=2, default=str))
        return 0
    for report in reports:
        print(f"{report.uri}: {report.kind}, {report.partitions} partitions, {report.mode or '?'} run, "
              f"query {report.query_id or '-'}, newest version {report.newest_version}")
        print(f"  definition: {json.dumps(report.definition, sort_keys=True)}")
        for n, changes in enumerate(report.evolutions, 1):
            print(f"  schema evolution {n}: {'; '.join(changes)}")
        if report.initial:
            given = ", ".join(f"{_initial_name(name)} {count:,}" for name, count in sorted(report.initial.items()))
            print(f"  started with initial rows: {given}")
        if report.rebuild_into is not None:
            print(f"  the next run rebuilds the state into {report.rebuild_into} partitions, from these "
                  f"{report.partitions} (repartitioned or migrated since the last run)")
        for part in report.parts:
            versions = f"{part.versions[0]}..{part.versions[-1]}" if part.versions else "none"
            aside = "; ".join(f"{i}: " + ", ".join(f"{r} {n}" for r, n in sorted(c.items()))
                              for i, c in sorted(part.set_aside.items())) or "none"
            snapshot = ("no snapshot" if part.snapshot_version is None
                        else f"snapshot v{part.snapshot_version} ({part.snapshot_entries} entries)")
            print(f"  p={part.partition}: versions {versions}, {part.changelog_files} files, "
                  f"{part.changelog_bytes:,} bytes, {snapshot}, max event times {_times(part.max_times)}, "
                  f"set aside {aside}")
    return 0


def _initial_name(name: str) -> str:
    """An initial-rows name as a user gave it: an input's (a bootstrap), or a state side's."""
    from streamjoin.runtime.checkpoint.initial import STATE_PREFIX

    return f"state side {name[len(STATE_PREFIX):]}" if name.startswith(STATE_PREFIX) else f"input {name}"


def _times(values) -> str:
    """Event times (µs since the epoch) as ISO-8601 UTC."""
    from datetime import datetime, timezone

    return "[" + ", ".join("-" if v is None else datetime.fromtimestamp(v / 1e6, timezone.utc).isoformat(timespec="seconds")
                           for v in values or ()) + "]"


def _verify(args: argparse.Namespace) -> int:
    from streamjoin.errors import JoinError
    from streamjoin.runtime.inspect import Verification, check_checkpoint, stage_checkpoints

    results: dict[str, Verification] = {}
    try:
        stages = stage_checkpoints(args.checkpoint)
    except JoinError as exc:
        results[args.checkpoint] = Verification([str(exc)], [])
    else:
        for uri in stages:
            bar, progress = _bar(args, uri)
            with bar:
                try:
                    results[uri] = check_checkpoint(uri, progress, args.spark_checkpoint)
                except JoinError as exc:
                    results[uri] = Verification([str(exc)], [])
    damaged = any(r.problems for r in results.values())
    if args.json:
        print(json.dumps({"ok": not damaged, "problems": {u: r.problems for u, r in results.items()},
                          "notes": {u: r.notes for u, r in results.items()}}, indent=2))
    else:
        for uri, result in results.items():
            print(f"{uri}: " + ("ok" if not result.problems else f"{len(result.problems)} problem(s)"))
            for problem in result.problems:
                print(f"  {problem}")
            for note in result.notes:
                print(f"  note: {note}")
    return 1 if damaged else 0


def _each_stage(args: argparse.Namespace, command: str, action: Any) -> list[Any] | None:
    """``action(checkpoint, now, progress)`` for each stage of ``args.checkpoint`` (``now``: the
    time, None with ``--force``), a progress bar following it; None after printing the error
    of one that raised."""
    import time

    from streamjoin.errors import JoinError
    from streamjoin.runtime.checkpoint import Checkpoint
    from streamjoin.runtime.inspect import stage_checkpoints

    try:
        done = []
        for uri in stage_checkpoints(args.checkpoint):
            bar, progress = _bar(args, f"checking {uri}")
            with bar:
                done.append(action(Checkpoint(uri), None if args.force else time.time(), progress))
        return done
    except JoinError as exc:
        print(f"streamjoin checkpoint {command}: {exc}", file=sys.stderr)
        return None


def _repartition(args: argparse.Namespace) -> int:
    from streamjoin.runtime.rescale import plan_repartition

    plans = _each_stage(args, "repartition", lambda cp, now, progress: plan_repartition(
        cp, args.partitions, now=now, progress=progress))
    if plans is None:
        return 1
    if args.json:
        print(json.dumps([{"checkpoint": p.uri, "from": p.old.partitions, "to": p.new.partitions,
                           "epoch": p.new.number, "version": p.version,
                           "sources": [list(s) for s in p.sources]} for p in plans], indent=2))
        return 0
    for plan in plans:
        if plan.new == plan.old:
            print(f"{plan.uri}: already {plan.new.partitions} partitions; nothing to do")
            continue
        print(f"{plan.uri}: {plan.old.partitions} -> {plan.new.partitions} partitions (partitioning epoch "
              f"{plan.new.number}), from state as of version {plan.version if plan.version is not None else '-'}")
        for p, sources in enumerate(plan.sources):
            print(f"  new p={p} <- old " + ", ".join(f"p={q}" for q in sources))
    print(f"run the query with partitions={args.partitions}: its first version rebuilds each partition")
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from streamjoin.runtime.migrate import migrate

    done = _each_stage(args, "migrate", lambda cp, now, progress: migrate(
        cp, partitions=args.partitions, key_groups=args.key_groups, now=now, progress=progress, dry_run=args.dry_run))
    if done is None:
        return 1
    if args.json:
        print(json.dumps([m.to_json() for m in done], indent=2))
        return 0
    for m in done:
        if m.from_format is None:
            print(f"{m.uri}: already format 2; nothing to do")
            continue
        print(f"{m.uri}: format {m.from_format} -> 2, state as of version {m.version} in {m.old_partitions} partitions, "
              f"to run with {m.partitions} over {m.key_groups} key groups; {m.records} commit records "
              + ("to write" if args.dry_run else "written"))
    if args.dry_run:
        print("dry run: nothing written; run it again without --dry-run to migrate")
    elif any(m.from_format is not None for m in done):
        count = ", ".join(sorted({str(m.partitions) for m in done}))
        print(f"run the query with partitions={count} on this checkpoint and its Spark checkpoint: its first version "
              "rebuilds each partition's state from the old changelogs (`streamjoin checkpoint verify` checks it first)")
    return 0
