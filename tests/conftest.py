"""Shared test set-up: Hypothesis profiles, and the ``spark`` fixture.

Profiles: ``ci`` (bounded; the default when CI=true), ``dev`` (the default), ``thorough`` (many
examples, for a local soak: ``HYPOTHESIS_PROFILE=thorough scripts/test``; properties that pin
a small budget run more of them there, see ``tests/examples.py``).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("dev", max_examples=150, deadline=None)
settings.register_profile(
    "thorough", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
_default = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _default))


@pytest.fixture(scope="session")
def spark(streamjoin_spark):
    """One local Spark session for every Spark test, wherever it lives: the kit's ``streamjoin_spark``
    fixture (:mod:`streamjoin.testing.plugin`, ``local[2,4]``: a failed task is tried up to four
    times, as on a cluster), under the name the tests use."""
    return streamjoin_spark
