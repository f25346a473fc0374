"""Connections to PostgreSQL: psycopg imported lazily, and reconnection with backoff.

psycopg 3 is the ``postgres`` extra (``pip install "/path/to/streamjoin[postgres]"``); :func:`psycopg`
imports it or raises :class:`PostgresDriverMissing` naming the extra. :func:`with_retry` runs a
unit of work that opens its own connection (connect, run, close) again after a connection error,
waiting with :class:`Retry`'s exponential backoff, then raises :class:`ConnectionLost`: what a
reader or a sink does when the server restarted under it. :func:`connect` is that for a bare connection.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from streamjoin.cdc.errors import ConnectionLost, PostgresDriverMissing

__all__ = ["psycopg", "Retry", "connect", "with_retry", "is_connection_error"]

T = TypeVar("T")


def psycopg() -> Any:
    """The psycopg 3 module; raises :class:`PostgresDriverMissing` when it is not installed."""
    try:
        import psycopg as module
    except ImportError as exc:
        raise PostgresDriverMissing(
            'change data capture from PostgreSQL needs psycopg 3: pip install "/path/to/streamjoin[postgres]"') from exc
    return module


@dataclass(frozen=True)
class Retry:
    """How often and how patiently to retry a lost connection: ``attempts`` tries in all, waiting
    ``first_delay`` seconds after the first failure and ``factor`` times longer after each next one."""

    attempts: int = 6
    first_delay: float = 0.5
    factor: float = 2.0

    def delays(self) -> list[float]:
        """The waits between the attempts (one fewer than ``attempts``)."""
        return [self.first_delay * self.factor ** i for i in range(max(self.attempts - 1, 0))]


def is_connection_error(exc: BaseException) -> bool:
    """True for errors a new connection may cure (server gone, restarting, not yet accepting)."""
    errors = psycopg().errors
    return isinstance(exc, (psycopg().OperationalError, errors.AdminShutdown, errors.CannotConnectNow))


def with_retry(attempt: Callable[[], T], dsn: str, retry: Retry | None = None) -> T:
    """``attempt()`` (which opens its own connection to ``dsn``), again after a connection error.

    Errors other than connection errors propagate at once. Raises :class:`ConnectionLost` after
    ``retry.attempts`` failed tries.
    """
    retry = retry or Retry()
    last: BaseException | None = None
    for delay in [*retry.delays(), None]:
        try:
            return attempt()
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            last = exc
        if delay is not None:
            time.sleep(delay)
    raise ConnectionLost(
        f"PostgreSQL at {_where(dsn)} could not be reached after {retry.attempts} attempts: {last}; "
        "check that the server runs and accepts connections", attempts=retry.attempts) from last


def connect(dsn: str, retry: Retry | None = None, *, autocommit: bool = True) -> Any:
    """An open connection, retried with backoff (see :func:`with_retry`); the caller closes it."""
    return with_retry(lambda: psycopg().connect(dsn, autocommit=autocommit), dsn, retry)


def _where(dsn: str) -> str:
    words = dict(part.split("=", 1) for part in dsn.split() if "=" in part)
    return f"{words.get('host', 'localhost')}:{words.get('port', '5432')}"
