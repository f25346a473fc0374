"""The join kind, ``how``: one enum for every join, read as Spark reads it.

Each join declares the kinds it supports (interval: all six; enrichment: inner, left; table-table:
inner, left, full) and reads ``how=`` with :func:`parse_how`: any case, underscores ignored, with
Spark's aliases (``outer`` is ``full``, ``semi`` is ``left_semi``, ...). A kind the join does not
support, and an unknown spelling, raise :class:`streamjoin.errors.JoinDefinitionError` naming the
kinds it does support.
"""

from __future__ import annotations

from enum import Enum
from typing import Iterable, Literal

from streamjoin.errors import JoinDefinitionError

__all__ = ["How", "parse_how", "HOW_ALIASES", "IntervalHow", "EnrichmentHow", "TableHow"]


class How(str, Enum):
    """A join kind, and what it implies for each side (``"left"`` or ``"right"``)."""

    INNER = "inner"
    LEFT = "left"
    RIGHT = "right"
    FULL = "full"
    LEFT_SEMI = "left_semi"
    LEFT_ANTI = "left_anti"

    @property
    def pairs(self) -> bool:
        """Whether matched pairs are output (not semi/anti)."""
        return self not in (How.LEFT_SEMI, How.LEFT_ANTI)

    def preserves(self, side: str) -> bool:
        """Whether ``side``'s unmatched rows are output null-padded (the outer joins)."""
        return self is How.FULL or (self is How.LEFT and side == "left") or (self is How.RIGHT and side == "right")

    def emits_unmatched(self, side: str) -> bool:
        """Whether ``side``'s rows that never matched are output (null-padded, or as themselves
        for ``left_anti``)."""
        return self.preserves(side) or (self is How.LEFT_ANTI and side == "left")

    def marks(self, side: str) -> bool:
        """Whether ``side`` must remember which of its rows matched."""
        return self.emits_unmatched(side) or (self is How.LEFT_SEMI and side == "left")


#: The ``how=`` spellings each join's public signature admits, for type checkers: the kinds it
#: supports in Spark's documented lowercase spellings (at run time any case is accepted).
IntervalHow = Literal[
    "inner", "left", "leftouter", "left_outer", "right", "rightouter", "right_outer", "full", "outer",
    "fullouter", "full_outer", "left_semi", "leftsemi", "semi", "left_anti", "leftanti", "anti",
]
EnrichmentHow = Literal["inner", "left", "leftouter", "left_outer"]
TableHow = Literal["inner", "left", "leftouter", "left_outer", "full", "outer", "fullouter", "full_outer"]

#: Spark's spellings of each join kind, after lower-casing and removing underscores.
HOW_ALIASES: dict[str, How] = {
    "inner": How.INNER,
    "left": How.LEFT, "leftouter": How.LEFT,
    "right": How.RIGHT, "rightouter": How.RIGHT,
    "full": How.FULL, "outer": How.FULL, "fullouter": How.FULL,
    "leftsemi": How.LEFT_SEMI, "semi": How.LEFT_SEMI,
    "leftanti": How.LEFT_ANTI, "anti": How.LEFT_ANTI,
}


def parse_how(value: object, allowed: Iterable[str | How]) -> How:
    """The join kind ``value`` names, one of ``allowed`` (kinds or their canonical names).

    Spelled as Spark spells it: any case, underscores ignored, ``outer``/``fullouter`` for
    ``full``, ``leftouter``, ``rightouter``, ``semi``/``leftsemi``, ``anti``/``leftanti``. Raises
    :class:`JoinDefinitionError` for an unknown spelling, and for a kind not in ``allowed``.
    """
    kinds = [How(kind) for kind in allowed]
    names = ", ".join(kind.value for kind in kinds)
    if isinstance(value, str):
        kind = HOW_ALIASES.get(value.lower().replace("_", ""))
        if kind is not None and kind in kinds:
            return kind
        if kind is not None:
            raise JoinDefinitionError(
                f"how={value!r} is a {kind.value} join, which this join does not support; use one of "
                f"{names} (Spark's spellings of those are accepted too)"
            )
    raise JoinDefinitionError(
        f"unknown how={value!r}; use one of {names} (or a Spark spelling such as "
        "'left_outer', 'full_outer', 'leftsemi', 'anti' of one of them)"
    )
