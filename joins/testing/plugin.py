"""A pytest plugin: the ``streamjoin_spark`` fixture, one local Spark session for a whole test run.

Registered as a ``pytest11`` entry point, so a project that installs ``streamjoin[testing]`` gets
the fixture without a conftest. PySpark is imported only when a test asks for the fixture.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest


@pytest.fixture(scope="session")
def streamjoin_spark() -> Iterator[Any]:
    """A shared local Spark session set up for joins (:func:`streamjoin.testing.spark.local_session`),
    stopped at the end of the test run."""
    from streamjoin.testing.spark import local_session

    session = local_session()
    yield session
    session.stop()
