"""``on``: which columns a join compares, and the one reading of column-name arguments.

``on`` is a column name (the same on both sides), a list of names (the same on both sides), or a
pair ``(left names, right names)`` compared pairwise. Errors are
:class:`streamjoin.errors.JoinDefinitionError` naming the argument.
"""

from __future__ import annotations

from typing import Sequence, Union

from streamjoin.errors import JoinDefinitionError

__all__ = ["On", "parse_on", "column_names"]

#: A join condition: a name, a list of names, or a pair (left names, right names).
On = Union[str, Sequence[str], tuple[Sequence[str], Sequence[str]]]


def parse_on(on: On) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``on`` as (left names, right names): each one or more distinct names, of one length."""
    if isinstance(on, str):
        left = right = (on,)
    elif (
        isinstance(on, (list, tuple)) and len(on) == 2
        and all(isinstance(part, (list, tuple)) for part in on)
    ):
        left, right = tuple(on[0]), tuple(on[1])
    elif isinstance(on, (list, tuple)):
        left = right = tuple(on)
    else:
        raise JoinDefinitionError(f"on must be a column name, a list of names or a pair of lists, not {on!r}")
    for side, names in (("left", left), ("right", right)):
        if not names or not all(isinstance(n, str) for n in names):
            raise JoinDefinitionError(f"on: the {side} key must be one or more column names, got {names!r}")
        if len(set(names)) != len(names):
            raise JoinDefinitionError(f"on: the {side} key names a column twice: {list(names)}")
    if len(left) != len(right):
        raise JoinDefinitionError(
            f"on: the left key has {len(left)} columns {list(left)}, the right key {len(right)} {list(right)}"
        )
    return left, right


def column_names(value: str | Sequence[str], what: str) -> tuple[str, ...]:
    """``value``, a name or a list of names, as one or more distinct names; ``what`` names the
    argument in the :class:`JoinDefinitionError` raised otherwise."""
    names = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, (list, tuple)) else ()
    if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise JoinDefinitionError(f"{what} must be one or more distinct column names, not {value!r}")
    return names
