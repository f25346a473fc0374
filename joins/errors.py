"""Errors of the join operators and their runtime.

    JoinError                       anything raised by joins
    ├── JoinDefinitionError         bad arguments: a missing column, a wrong type, bad bounds
    └── CheckpointMismatchError     a checkpoint written by another query, definition or partition count
"""

from __future__ import annotations

__all__ = ["JoinError", "JoinDefinitionError", "CheckpointMismatchError"]


class JoinError(Exception):
    """Base class of errors raised by streamjoin's joins."""


class JoinDefinitionError(JoinError, ValueError):
    """A join was defined with arguments it cannot run with; raised before any query starts."""


class CheckpointMismatchError(JoinError):
    """The checkpoint belongs to another query, join definition or partition count."""
