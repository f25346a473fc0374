"""Hypothesis, imported on first use: the kit's strategies and search need it, nothing else does."""

from __future__ import annotations

try:
    import hypothesis
    from hypothesis import strategies
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        "streamjoin.testing's strategies and assert_deterministic need Hypothesis, which is not installed "
        'here: pip install "/path/to/streamjoin[testing]"'
    ) from exc

__all__ = ["hypothesis", "strategies"]
