"""Errors of change data capture from PostgreSQL.

    JoinError (streamjoin.errors)
    └── CdcError                    anything raised by streamjoin.cdc and the PostgreSQL source and sink
        ├── PostgresDriverMissing   psycopg is not installed: install the ``postgres`` extra
        ├── ServerBinariesMissing   PostgreSQL's server programs or the wal2json plugin are not installed
        ├── SourceSetupError        the database cannot feed a change stream: wal_level is not
        │                           logical, the slot is missing, a table has no primary key or
        │                           replica identity, or is unknown
        └── ConnectionLost          the server could not be reached after every retry
"""

from __future__ import annotations

from streamjoin.errors import JoinError

__all__ = ["CdcError", "PostgresDriverMissing", "ServerBinariesMissing", "SourceSetupError", "ConnectionLost"]


class CdcError(JoinError):
    """Base class of the errors of change data capture from PostgreSQL."""


class PostgresDriverMissing(CdcError, ImportError):
    """psycopg 3 is not installed; ``pip install "/path/to/streamjoin[postgres]"`` brings it."""


class ServerBinariesMissing(CdcError):
    """PostgreSQL's server programs or the wal2json plugin are missing; the message says how to install them."""


class SourceSetupError(CdcError):
    """The database is not set up to feed a change stream; the message says what to change."""


class ConnectionLost(CdcError):
    """The server could not be reached after every retry; ``attempts`` says how many were made."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts
