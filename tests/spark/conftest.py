"""One local Spark session for every Spark test: the kit's ``streamjoin_spark`` fixture
(:mod:`streamjoin.testing.plugin`, ``local[2,4]``: a failed task is tried up to four times, as on a
cluster), under the name the tests use."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark(streamjoin_spark):
    return streamjoin_spark
