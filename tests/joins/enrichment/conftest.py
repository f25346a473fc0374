"""Fixtures of the enrichment join's tests: drivers made on demand and closed after the test."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from tests.joins.drivers import closing


@pytest.fixture
def script() -> Iterator[Callable[..., Any]]:
    """``script(**options)``: an enrichment join driven in-process (tests.joins.enrichment.test_examples.Script)."""
    from tests.joins.enrichment.test_examples import Script

    yield from closing(Script)
