"""How many examples a property with a fixed budget runs under the active Hypothesis profile.

Properties that are expensive per example pin a small ``max_examples`` (which overrides the
profile's own); :func:`scaled` keeps that budget in the ``ci`` and ``dev`` profiles and multiplies
it in ``thorough`` (``HYPOTHESIS_PROFILE=thorough scripts/test``), so a local soak still explores
them further.
"""

from __future__ import annotations

import os

__all__ = ["scaled", "THOROUGH_FACTOR"]

#: how many times more examples the ``thorough`` profile runs of a pinned property
THOROUGH_FACTOR = 20


def scaled(examples: int) -> int:
    """``examples``, times :data:`THOROUGH_FACTOR` when the ``thorough`` profile is active."""
    return examples * THOROUGH_FACTOR if os.environ.get("HYPOTHESIS_PROFILE") == "thorough" else examples
