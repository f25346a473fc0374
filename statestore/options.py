"""Checks of ``open_store`` options, shared by the backends: each bad value is refused before any
file is touched, with a :class:`StoreArgumentError` that names the kind, the option and the value."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from streamjoin.statestore.errors import StoreArgumentError

__all__ = ["flag", "seconds", "size", "check_all", "Check"]

#: A check of one option: ``(kind, name, value)``, raising ``StoreArgumentError`` for a bad value.
Check = Callable[[str, str, Any], object]


def check_all(kind: str, options: Mapping[str, Any], checks: Mapping[str, Check]) -> None:
    """Each of ``options`` that ``checks`` names, checked by its check."""
    for name, value in options.items():
        if name in checks:
            checks[name](kind, name, value)


def _refuse(kind: str, name: str, value: object, wanted: str) -> StoreArgumentError:
    return StoreArgumentError(f"open_store({kind!r}, ..., {name}={value!r}): {name} must be {wanted}")


def flag(kind: str, name: str, value: object) -> bool:
    """``value`` if it is a bool."""
    if type(value) is not bool:
        raise _refuse(kind, name, value, "True or False")
    return value


def seconds(kind: str, name: str, value: object) -> float | None:
    """``value`` if it is None or a finite number of seconds >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise _refuse(kind, name, value, "None or a number of seconds >= 0")
    return value


def size(kind: str, name: str, value: object, largest: int) -> int:
    """``value`` if it is an int number of bytes in ``1 .. largest``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= largest:
        raise _refuse(kind, name, value, f"a whole number of bytes from 1 to {largest}")
    return value
