"""How the join tests drive a join in process.

``closing`` makes drivers on demand for a fixture and closes them after the test.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator


def closing(cls: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """A factory of ``cls(**options)``; every object it made is closed when the test ends."""
    made: list[Any] = []

    def make(**options: Any) -> Any:
        made.append(cls(**options))
        return made[-1]

    yield make
    for thing in made:
        thing.close()
