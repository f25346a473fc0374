"""Errors of the join operators and their runtime, under the one root of every streamjoin error.

    StreamjoinError                 anything streamjoin raised: catch it to catch them all
    ├── JoinError                   anything raised by joins
    │   ├── JoinDefinitionError     bad arguments: a missing column, a wrong type, bad bounds
    │   ├── CheckpointMismatchError a checkpoint written by another query, definition, partition count
    │   │                           or kind of run (streaming or batch)
    │   ├── CheckpointDamagedError  a checkpoint record is garbled, or files it shows were written are gone
    │   ├── InitialRowsError        a join's initial rows (bootstrap, initial_state) could not be written
    │   ├── WorkerStartError        Spark could not start a Python worker of a join's query in time
    │   ├── ViewError               a view store (streamjoin.view) cannot be used as asked
    │   ├── CdcError                change data capture from PostgreSQL (streamjoin.cdc.errors)
    │   └── NonDeterministicError   the determinism kit found a difference (streamjoin.testing)
    ├── StoreError                  a state store (streamjoin.statestore.errors)
    └── ChangelogError              a changelog (streamjoin.changelog.errors)

``StreamjoinError`` lives in the lowest layer (``streamjoin.statestore.errors``) so that every
package derives from it; it is exported here and as ``streamjoin.StreamjoinError``.
"""

from __future__ import annotations

from streamjoin.statestore.errors import StreamjoinError

__all__ = ["StreamjoinError", "JoinError", "JoinDefinitionError", "CheckpointMismatchError", "CheckpointDamagedError",
           "InitialRowsError", "WorkerStartError"]


class JoinError(StreamjoinError):
    """Base class of errors raised by streamjoin's joins."""


class JoinDefinitionError(JoinError, ValueError):
    """A join was defined with arguments it cannot run with; raised before any query starts."""


class CheckpointMismatchError(JoinError):
    """The checkpoint belongs to another query, join definition, partition count or kind of run."""


class CheckpointDamagedError(JoinError):
    """A checkpoint file cannot be read, or state the checkpoint shows was committed is missing.

    ``path``: the file or directory at fault. Nothing was written; the message says what to do.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class InitialRowsError(JoinError):
    """A join's initial rows (its ``bootstrap`` or ``initial_state``), written while its streaming
    query started, could not be written: raised by the query's first micro-batch, before any task
    of it runs, with the reason (for example a value that does not cast to its column's type).
    Nothing of the join's state was written; define the join again once the rows are fixed."""


class WorkerStartError(JoinError, RuntimeError):
    """Spark could not start a Python worker that a join's streaming query needs ("Python worker
    failed to connect back": the machine was too loaded to start Python within Spark's fixed wait).
    Raised by the query's ``awaitTermination()`` (and returned by its ``exception()``) in place of
    Spark's ``StreamingQueryException``, which is its ``__cause__``; the message says what to do."""
