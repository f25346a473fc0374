"""Fixtures shared by the join tests: drivers made on demand and closed after the test."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest


def _closing(cls: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """A factory of ``cls(**options)``; every object it made is closed when the test ends."""
    made: list[Any] = []

    def make(**options: Any) -> Any:
        made.append(cls(**options))
        return made[-1]

    yield make
    for thing in made:
        thing.close()


@pytest.fixture
def script() -> Iterator[Callable[..., Any]]:
    """``script(**options)``: an enrichment join driven in-process (tests.joins.test_enrichment.Script)."""
    from tests.joins.test_enrichment import Script

    yield from _closing(Script)


@pytest.fixture
def timeline() -> Iterator[Callable[..., Any]]:
    """``timeline(**options)``: a table-table view driven in-process (tests.joins.test_table_join.Timeline)."""
    from tests.joins.test_table_join import Timeline

    yield from _closing(Timeline)
