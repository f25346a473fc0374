"""``streamjoin changelog inspect|verify|compact|restore``: look after one partition's changelog.

Exit codes: 0 success (for ``verify``: no damage), 1 damage or a changelog/store error (the message
says which file and what to do), 2 bad usage. A URI that is not a changelog directory (missing, a
file, or without changelog files, e.g. a join's checkpoint root) exits 1 saying what was expected,
and a negative ``--version`` / ``--up-to`` exits 1 naming the versions the log can restore.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from streamjoin.changelog.compaction import compact
from streamjoin.changelog.errors import ChangelogError, StoreNotEmptyError, VersionNotRetainedError
from streamjoin.changelog.inspect import LogSummary, describe, require_changelog, verify
from streamjoin.changelog.log import Changelog, check_retention
from streamjoin.changelog.restore import restore
from streamjoin.statestore.errors import StoreError
from streamjoin.statestore.registry import DEFAULT_KIND, backend_names, check_store_options, destroy_store, open_store

__all__ = ["register"]

#: Restores with at least this many entries show a progress bar.
PROGRESS_FROM = 100_000

_URI_HELP = ("the changelog directory of one operator partition: a local path or a pyarrow.fs URI "
             "(e.g. s3://bucket/checkpoint/state/p=0)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``changelog`` and its actions to the ``streamjoin`` command."""
    parser = subparsers.add_parser(
        "changelog", help="inspect, verify, compact or restore a partition's changelog",
        description="Look after the changelog of one operator partition: the deltas of every "
        "version and the compacted snapshots from which a local store is rebuilt.",
        epilog="examples:\n"
        "  streamjoin changelog inspect /ckpt/join/state/p=0\n"
        "  streamjoin changelog verify s3://bucket/ckpt/join/state/p=0\n"
        "  streamjoin changelog compact /ckpt/join/state/p=0 --retain 5\n"
        "  streamjoin changelog restore /ckpt/join/state/p=0 --version 41 --backend lmdb --into ./p0-restored",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    parser.set_defaults(func=lambda args: _usage(parser))
    _add(actions, "inspect", _inspect, "list versions, files, sizes, entry counts, compaction ratio",
         [(("--json",), dict(action="store_true", help="print the summary as JSON"))])
    _add(actions, "verify", _verify, "check every checksum and the continuity of the versions; "
         "exit 1 naming each damaged or missing file", [])
    _add(actions, "compact", _compact, "write a snapshot and delete files the retained versions "
         "do not need", [
             (("--up-to",), dict(type=int, metavar="V", help="snapshot version (default: newest)")),
             (("--retain",), dict(type=_retention, metavar="N", default=10,
                                  help="keep the newest N >= 2 versions restorable (default: 10)")),
         ])
    _add(actions, "restore", _restore, "rebuild a store of the chosen backend at one version", [
        (("--into",), dict(required=True, metavar="PATH", help="where the store goes (new or empty)")),
        (("--version",), dict(type=int, metavar="V", help="version to restore (default: newest)")),
        (("--backend",), dict(default=DEFAULT_KIND, choices=backend_names(),
                              help=f"store kind (default: {DEFAULT_KIND}; memory only lives in this process)")),
        (("--store-option",), dict(action="append", default=[], type=_store_option, metavar="NAME=VALUE",
                                   help="an option of the store, as the query's store_options give it (repeat for "
                                        "more; e.g. host=lmdb for an arranged store whose files live in LMDB); "
                                        "a whole number or true/false is read as one")),
        (("--force",), dict(action="store_true", help="replace a store already at --into")),
        (("--no-progress",), dict(action="store_true", help="no progress bar")),
    ])


def _add(actions: argparse._SubParsersAction, name: str, func: Callable[[argparse.Namespace], int],
         summary: str, options: list[tuple[tuple[str, ...], dict[str, Any]]]) -> None:
    sub = actions.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".")
    sub.add_argument("uri", metavar="URI", help=_URI_HELP)
    for flags, kwargs in options:
        sub.add_argument(*flags, **kwargs)
    sub.set_defaults(func=lambda args: _guarded(func, args))


def _retention(text: str) -> int:
    try:
        return check_retention(int(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("retain_versions", "--retain")) from None


def _store_option(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` of ``--store-option``: a whole number or true/false as one, else a string."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME=VALUE, e.g. host=lmdb")
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return name, lowered == "true"
    if lowered.lstrip("-").isdigit():
        return name, int(lowered)
    return name, value


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _guarded(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return func(args)
    except (ChangelogError, StoreError) as exc:
        print(f"streamjoin changelog {args.action}: {exc}", file=sys.stderr)
        return 1


def _log(args: argparse.Namespace, retain_versions: int = 10) -> Changelog:
    """The changelog at ``args.uri``, refused (naming what was expected) when it is not one."""
    log = Changelog(args.uri, retain_versions=retain_versions)
    require_changelog(log)
    return log


def _check_version(log: Changelog, value: int | None, flag: str) -> None:
    """Refuse a negative ``flag`` value, naming the versions the log can restore."""
    if value is not None and value < 0:
        raise VersionNotRetainedError(
            f"{flag} {value} is not a version: versions count from 0; {log.uri} can restore "
            f"{_versions(tuple(log.versions()))}", versions=(value, value))


def _inspect(args: argparse.Namespace) -> int:
    summary = describe(_log(args))
    if args.json:
        print(json.dumps(_as_json(summary), indent=2))
    else:
        print(_render(summary))
    return 0


def _verify(args: argparse.Namespace) -> int:
    log = _log(args)
    problems = verify(log)
    for problem in problems:
        print(f"DAMAGE ({type(problem).__name__}): {problem}")
    summary = describe(log)
    if problems:
        print(f"{len(problems)} problem(s) in {log.uri}; restorable: {_versions(summary.restorable)}")
        return 1
    print(f"OK: {len(summary.files)} files in {log.uri} verified (checksums, formats, versions); "
          f"restorable: {_versions(summary.restorable)}")
    return 0


def _compact(args: argparse.Namespace) -> int:
    log = _log(args, args.retain)
    _check_version(log, args.up_to, "--up-to")
    stats = compact(log, args.up_to)
    did = "wrote" if stats.wrote else "kept (already there)"
    print(f"snapshot of version {stats.version}: {did} {stats.snapshot}")
    print(f"  {stats.entries:,} live entries from {stats.entries_read:,} entries read "
          f"(compaction ratio {stats.ratio:.2f})")
    print(f"  deleted {len(stats.deleted)} files ({_size(stats.bytes_deleted)}) in {stats.seconds:.3f} s")
    return 0


def _restore(args: argparse.Namespace) -> int:
    log = _log(args)
    _check_version(log, args.version, "--version")
    options = dict(args.store_option)
    check_store_options(args.backend, options)
    if args.force:
        destroy_store(args.backend, args.into)
    with open_store(args.backend, args.into, **options) as store, _Bar(args.no_progress) as bar:
        try:
            stats = restore(log, store, args.version, progress=bar.update)
        except StoreNotEmptyError:
            raise StoreNotEmptyError(f"{args.into} already holds a {args.backend} store; pass "
                                     "--force to replace it, or choose another --into") from None
    rate = stats.entries_read / stats.seconds if stats.seconds else 0.0
    base = "no snapshot" if stats.base_version < 0 else f"the snapshot of version {stats.base_version}"
    deltas = f"{stats.deltas} delta{'' if stats.deltas == 1 else 's'}"
    print(f"restored version {stats.version} into {args.backend} store {args.into}: "
          f"{stats.entries_loaded:,} entries loaded from {base} and {deltas} "
          f"({stats.entries_read:,} entries read, {stats.method.value}) in {stats.seconds:.3f} s, "
          f"{rate:,.0f} entries/s")
    for skipped in stats.skipped:
        print(f"WARNING: passed over a damaged file: {skipped}", file=sys.stderr)
    return 0


class _Bar:
    """A tqdm bar on stderr, shown once a restore turns out to be long."""

    def __init__(self, disabled: bool) -> None:
        self.disabled = disabled
        self.bar: Any = None   # a tqdm bar once the restore is long enough to show one

    def update(self, done: int, total: int) -> None:
        if self.disabled or total < PROGRESS_FROM:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit=" entries", unit_scale=True, desc="restore", file=sys.stderr)
        self.bar.update(done - self.bar.n)

    def __enter__(self) -> "_Bar":
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.bar is not None:
            self.bar.close()


def _render(summary: LogSummary) -> str:
    lines = [f"changelog {summary.uri}: {len(summary.files)} files, {_size(summary.total_bytes)}",
             f"restorable versions: {_versions(summary.restorable)}", "",
             f"{'kind':<9}{'version':>9}{'entries':>12}{'bytes':>12}  file"]
    for f in summary.files:
        entries = f"{f.entries:,}" if f.entries is not None else "DAMAGED"
        lines.append(f"{f.kind.value:<9}{f.version:>9}{entries:>12}{f.size:>12,}  {f.name}")
    lines.append("")
    deltas = [f for f in summary.files if f.kind.value == "delta"]
    lines.append(f"deltas: {len(deltas)} files, {summary.delta_entries:,} entries")
    newest = summary.newest_snapshot
    if newest is not None:
        lines.append(f"newest snapshot: version {newest.version}, {newest.entries:,} live entries; "
                     f"compaction ratio {summary.compaction_ratio:.2f} (entries in the log per "
                     "live entry)")
    for label, names, note in (("temporary", summary.temps, "interrupted writes"),
                               ("leftover", summary.leftovers, "older than every retained version"),
                               ("unexpected", summary.others, "not written by streamjoin")):
        if names:
            lines.append(f"{len(names)} {label} file(s) ({note}; `compact` removes the first two "
                         f"kinds): {', '.join(names)}")
    return "\n".join(lines)


def _as_json(summary: LogSummary) -> dict[str, Any]:
    return {
        "uri": summary.uri,
        "restorable": list(summary.restorable),
        "files": [{"name": f.name, "kind": f.kind.value, "version": f.version, "bytes": f.size,
                   "entries": f.entries, "problem": f.problem or None} for f in summary.files],
        "total_bytes": summary.total_bytes,
        "delta_entries": summary.delta_entries,
        "compaction_ratio": summary.compaction_ratio,
        "temporary": list(summary.temps),
        "leftovers": list(summary.leftovers),
        "unexpected": list(summary.others),
    }


def _versions(versions: tuple[int, ...]) -> str:
    if not versions:
        return "none"
    if list(versions) == list(range(versions[0], versions[-1] + 1)):
        return f"{versions[0]}..{versions[-1]} ({len(versions)} versions)"
    return ", ".join(map(str, versions))


def _size(count: int) -> str:
    n = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} B"
