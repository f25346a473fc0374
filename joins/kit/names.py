"""Column-name rules every join applies to its inputs and its output.

* an input is a :class:`pyarrow.Schema` without duplicate names (:func:`check_schema`);
* it has the columns the join names (:func:`check_present`) and none the join reserves
  (:func:`check_reserved`);
* an output name on both sides gets a side suffix (:func:`suffixed`: ``<name>_left``,
  ``<name>_right``, ``<name>_table``); a name that still appears twice is refused
  (:func:`check_output_names`): the user renames a column before joining.

Output names clash as Spark resolves names by default (``spark.sql.caseSensitive`` false): names
that differ only in case (``Val`` and ``val``) are one name, so both get their suffix; otherwise
the output would hold two columns no Spark expression can tell apart (``AMBIGUOUS_REFERENCE``).

Every error is a :class:`streamjoin.errors.JoinDefinitionError` saying which input and column.
"""

from __future__ import annotations

from typing import Collection, Iterable, Sequence

import pyarrow as pa

from streamjoin.errors import JoinDefinitionError

__all__ = ["duplicates", "check_schema", "check_present", "check_reserved", "clashes", "suffixed",
           "check_output_names"]


def duplicates(names: Iterable[str]) -> list[str]:
    """The names that appear more than once in ``names``, sorted."""
    seen: set[str] = set()
    twice: set[str] = set()
    for name in names:
        (twice if name in seen else seen).add(name)
    return sorted(twice)


def check_schema(schema: object, what: str, input_name: str | None = None) -> None:
    """Raise unless ``schema`` (the ``what`` schema) is a :class:`pyarrow.Schema` with distinct
    names; ``input_name`` names the input in the duplicate message (default ``the <what> input``)."""
    if not isinstance(schema, pa.Schema):
        raise JoinDefinitionError(f"the {what} schema must be a pyarrow.Schema, not {type(schema).__name__}")
    twice = duplicates(schema.names)
    if twice:
        raise JoinDefinitionError(f"{input_name or f'the {what} input'} has duplicate column names {twice}")


def check_present(names: Sequence[str], columns: Iterable[str], where: str, listed: str = "columns") -> None:
    """Raise for the first of ``columns`` not in ``names`` (``where``, e.g. ``"the left input"``)."""
    for column in columns:
        if column not in names:
            raise JoinDefinitionError(f"{where} has no column {column!r}; its {listed} are {list(names)}")


def check_reserved(names: Collection[str], reserved: Iterable[str], where: str,
                   why: str = "a name streamjoin reserves") -> None:
    """Raise for the first of ``reserved`` that ``names`` (``where``'s columns) uses."""
    for name in reserved:
        if name in names:
            raise JoinDefinitionError(f"{where} has a column {name!r}, {why}; rename it")


def _folded(name: str) -> str:
    """``name`` as Spark compares names by default: its lower case."""
    return name.lower()


def clashes(names: Iterable[str], others: Iterable[str]) -> set[str]:
    """The names of either that the other also has, compared as Spark does (see module)."""
    names, others = list(names), list(others)
    common = {_folded(n) for n in names} & {_folded(n) for n in others}
    return {n for n in (*names, *others) if _folded(n) in common}


def suffixed(names: Iterable[str], clash: Collection[str], suffix: str) -> list[str]:
    """``names`` with ``suffix`` (``"_left"``, ...) added to those in ``clash``, compared as Spark
    does (see module)."""
    folded = {_folded(c) for c in clash}
    return [f"{name}{suffix}" if _folded(name) in folded else name for name in names]


def check_output_names(names: Iterable[str], suffixes: str) -> None:
    """Raise if an output name appears twice, compared as Spark does, even after the ``suffixes``
    (``"_left/_right"``) were added to clashing names."""
    names = list(names)
    twice = duplicates(_folded(n) for n in names)
    twice = sorted({n for n in names if _folded(n) in twice})
    if twice:
        raise JoinDefinitionError(
            f"output column names {twice} appear twice even after adding {suffixes} to clashing names; "
            "rename those columns in one input before joining"
        )
