"""Column-name rules every join applies to its inputs and its output.

* an input is a :class:`pyarrow.Schema` without duplicate names (:func:`check_schema`);
* it has the columns the join names (:func:`check_present`) and none the join reserves
  (:func:`check_reserved`);
* an output name on both sides gets a side suffix (:func:`suffixed`: ``<name>_left``,
  ``<name>_right``, ``<name>_table``); a name that still appears twice is refused
  (:func:`check_output_names`): the user renames a column before joining.

Every error is a :class:`streamjoin.errors.JoinDefinitionError` saying which input and column.
"""

from __future__ import annotations

from typing import Collection, Iterable, Sequence

import pyarrow as pa

from streamjoin.errors import JoinDefinitionError

__all__ = ["duplicates", "check_schema", "check_present", "check_reserved", "suffixed", "check_output_names"]


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


def suffixed(names: Iterable[str], clash: Collection[str], suffix: str) -> list[str]:
    """``names`` with ``suffix`` (``"_left"``, ...) added to those in ``clash``."""
    return [f"{name}{suffix}" if name in clash else name for name in names]


def check_output_names(names: Iterable[str], suffixes: str) -> None:
    """Raise if an output name appears twice even after the ``suffixes`` (``"_left/_right"``) were
    added to clashing names."""
    twice = duplicates(names)
    if twice:
        raise JoinDefinitionError(
            f"output column names {twice} appear twice even after adding {suffixes} to clashing names; "
            "rename those columns in one input before joining"
        )
