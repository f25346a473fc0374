"""One operator's checkpoint: its binding, its changelogs, and the per-version records beside them.

Layout under the checkpoint URI (a local path or a URI :func:`streamjoin.changelog.storage.resolve_uri`
accepts; resolved once, so every task of a query names the same place)::

    streamjoin.json                   what this checkpoint belongs to (definition, partitions, key
                                      groups, and whether a streaming query or a batch run writes
                                      it) and the id it was created with
    evolution/<n>.json                schema evolution n >= 1 of the inputs' columns: the changes
                                      and the definition they made, the newest the one the state
                                      is kept by (:mod:`streamjoin.runtime.evolution`)
    partitioning/e=<n>.json           partitioning epoch n >= 1: a later partition count
                                      (:mod:`streamjoin.runtime.rescale`); its changelogs are
                                      ``state/e=<n>/p=<p>/``
    query.json                        the streaming query that writes it (bound by its first task)
    flush.json                        the flush source of the streaming query that writes it
                                      (bound on the driver, before any task runs)
    state/p=<p>/                      partition p's changelog (deltas and snapshots)
    commits/v=<v>/p=<p>.of=<n>.t=<t0>_<t1>[.pt=<now>_<a0>_<a1>].json
                                      partition p (of n) committed version v: the name carries the
                                      largest event time per input over all partitions' rows up
                                      to v (``x``: none yet) and, for a join reading processing
                                      time, processing times (:mod:`.commits`), the content also
                                      its metrics
    set_aside/<input>/v=<v>/p=<p>.parquet   rows not processed (late, dead letters), with reasons
    initial/<input>/p=<p>/piece-<n>.arrow   rows given to the join's first version (e.g. a
                                      bootstrap snapshot) that task n of the job routing them
                                      sent to partition p (``p=<p>.arrow``: all of them, as
                                      written before 0.3's design step 39); ``initial/done.json``
                                      marks the set complete (``initial/failed.json`` says why
                                      a writing during a query's start failed),
                                      ``initial/used/p=<p>.json`` the version that took them

The files are owned by kind, one module each (as Spark separates its commit and offset logs):
:mod:`.files` (the primitives: location, JSON records, listings), :mod:`.binding`
(``streamjoin.json``, ``evolution/``, ``query.json``, ``flush.json``), :mod:`.commits` (commit records),
:mod:`.set_aside` and :mod:`.initial`; partitioning epochs are :mod:`streamjoin.runtime.rescale`'s.
:class:`Checkpoint` is the entry point and exposes them as ``cp.files``, ``cp.binding``,
``cp.commits``, ``cp.set_aside`` and ``cp.initial``.

Every file is written to a temporary name, made durable (``fsync`` on a local disk) and moved into
place, so a reader sees a whole file or none, and writing one again (a task or batch executed
again) replaces it with identical content. A task learns the watermark inputs from one listing of
the previous version's commit records (no read per partition), and commit records are pruned with
the changelog's retention, so the files a version adds, and the calls a task makes, do not grow
with the partition count. ``streamjoin.json`` and ``query.json`` are created only
if absent (atomically on a local disk; see :meth:`streamjoin.changelog.storage.Storage.write_if_absent`), so
of two runs binding a checkpoint at once exactly one wins and the other is compared with it. A
record that cannot be read raises :class:`CheckpointDamagedError` naming the file.
"""

from __future__ import annotations

import pyarrow.fs as pafs

from streamjoin.runtime.checkpoint.binding import FORMAT, Binding, RunMode
from streamjoin.runtime.checkpoint.commits import CommitRecord, Commits
from streamjoin.runtime.checkpoint.files import CheckpointFiles, resolve_location
from streamjoin.runtime.checkpoint.initial import Initial
from streamjoin.runtime.checkpoint.set_aside import SetAside

__all__ = ["Checkpoint", "CommitRecord", "FORMAT", "RunMode", "resolve_location"]


class Checkpoint:
    """One operator's checkpoint: its location and its families of files (see package)."""

    def __init__(self, uri: str) -> None:
        self.files = CheckpointFiles(uri)
        self.uri = self.files.uri
        self.binding = Binding(self.files)
        self.commits = Commits(self.files)
        self.set_aside = SetAside(self.files)
        self.initial = Initial(self.files)

    @property
    def fs(self) -> pafs.FileSystem:
        """The filesystem the checkpoint's files are on (``files.fs``)."""
        return self.files.fs

    @property
    def root(self) -> str:
        """The checkpoint's path on :attr:`fs` (``files.root``)."""
        return self.files.root

    def __repr__(self) -> str:
        return f"Checkpoint({self.uri!r})"

    def changelog_uri(self, partition: int) -> str:
        """The URI of partition ``partition``'s changelog (of partitioning epoch 0)."""
        return self.files.location(f"state/p={partition}")
