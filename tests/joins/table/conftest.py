"""Fixtures of the table-table join's tests: drivers made on demand and closed after the test."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from tests.joins.drivers import closing


@pytest.fixture
def timeline() -> Iterator[Callable[..., Any]]:
    """``timeline(**options)``: a table-table view driven in-process (tests.joins.table.test_examples.Timeline)."""
    from tests.joins.table.test_examples import Timeline

    yield from closing(Timeline)
