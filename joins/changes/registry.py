"""The one registry of change vocabularies, and the one rule that detects a table's vocabulary.

**Detection rule**: the registered vocabularies are asked in reverse order of registration
(the newest first); the first whose :meth:`~streamjoin.changes.ChangeVocabulary.detect` says yes
is the table's vocabulary. The built-ins register general first (plain, Debezium JSON, Debezium,
Delta, streamjoin), so a Delta feed that also has an ``op`` column is Delta, an ``op`` column
beside an ``after`` struct is Debezium, and a join's own output (a Delta feed with ``_seq`` and
``_change_timestamp``) is streamjoin; a vocabulary registered later is asked before all of them.
The Spark layer (both joins) and the engine-free table-table join find a table's format with
:func:`resolve_format`; the engine-free enrichment join takes a :class:`ChangeFormat` as given.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Literal, Sequence

import pyarrow as pa

from streamjoin.changes.vocabulary import ChangeVocabulary
from streamjoin.errors import JoinDefinitionError

if TYPE_CHECKING:
    from streamjoin.changes.format import ChangeFormat

__all__ = ["register_vocabulary", "unregister_vocabulary", "get_vocabulary", "vocabularies",
           "detect_vocabulary", "resolve_format", "VocabularyName", "format_argument"]

#: The built-in vocabularies' names, as the joins' public signatures admit them (for type
#: checkers); a vocabulary registered under another name is passed as a ``ChangeFormat``.
VocabularyName = Literal["plain", "delta", "debezium", "debezium_json", "streamjoin"]

_REGISTERED: dict[str, ChangeVocabulary] = {}


def register_vocabulary(vocabulary: ChangeVocabulary, *, replace: bool = False) -> ChangeVocabulary:
    """Make ``vocabulary`` known by its name; it is then detected before every earlier one.

    Raises :class:`JoinDefinitionError` if it is not a :class:`ChangeVocabulary` with a string
    name, or if the name is taken (``replace=True`` replaces the vocabulary of that name).
    """
    if not isinstance(vocabulary, ChangeVocabulary) or not isinstance(getattr(vocabulary, "name", None), str):
        raise JoinDefinitionError(f"a vocabulary is a ChangeVocabulary instance with a string name, not {vocabulary!r}")
    if vocabulary.name in _REGISTERED and not replace:
        raise JoinDefinitionError(f"a vocabulary named {vocabulary.name!r} is already registered; "
                                  "choose another name or pass replace=True")
    _REGISTERED.pop(vocabulary.name, None)
    _REGISTERED[vocabulary.name] = vocabulary
    return vocabulary


def unregister_vocabulary(name: str) -> None:
    """Forget the vocabulary called ``name``; raises :class:`JoinDefinitionError` if none is."""
    get_vocabulary(name)
    del _REGISTERED[name]


def get_vocabulary(name: str) -> ChangeVocabulary:
    """The vocabulary registered as ``name``; raises :class:`JoinDefinitionError` listing the names."""
    try:
        return _REGISTERED[name]
    except (KeyError, TypeError):
        raise JoinDefinitionError(f"unknown change vocabulary {name!r}; the registered ones are "
                                  f"{list(_REGISTERED)}") from None


def vocabularies() -> tuple[ChangeVocabulary, ...]:
    """The registered vocabularies in the order detection asks them (newest first)."""
    return tuple(reversed(_REGISTERED.values()))


def detect_vocabulary(schema: pa.Schema) -> ChangeVocabulary | None:
    """The vocabulary of a change table with ``schema`` by the detection rule; None if none says yes."""
    return next((v for v in vocabularies() if v.detect(schema)), None)


def format_argument(given: str | ChangeFormat | None, old: str | ChangeFormat | None, name: str,
                    old_name: str) -> str | ChangeFormat | None:
    """The vocabulary argument ``name`` of a join, or its value under its former name ``old_name``
    (``changes=`` before ``table_format=``), which still works with a :class:`DeprecationWarning`.
    Raises :class:`JoinDefinitionError` when both are given."""
    if old is None:
        return given
    if given is not None:
        raise JoinDefinitionError(f"{old_name}= is the former name of {name}=: pass {name}= only")
    warnings.warn(f"{old_name}= is deprecated and will be removed: pass {name}= (the same values), as every "
                  "join spells a side's change vocabulary <side>_format=", DeprecationWarning, stacklevel=3)
    return old


def resolve_format(schema: pa.Schema, changes: str | ChangeFormat | None, key: Sequence[str], *,
                   time: str | None = None, sequence: str | None = None, argument: str = "table_changes",
                   changes_argument: str = "table_format", time_argument: str = "table_time") -> ChangeFormat:
    """The :class:`ChangeFormat` of a change table: ``changes`` given, named, or detected.

    A :class:`ChangeFormat` must have ``key``; a name (``"delta"``) or None (detected from
    ``schema``) gives the vocabulary's :meth:`~ChangeVocabulary.default_format` with ``time`` and
    ``sequence``. ``argument``, ``changes_argument`` and ``time_argument`` name the user's
    arguments (the change table, its format, its change time) in messages. Raises
    :class:`JoinDefinitionError` saying how to choose.
    """
    from streamjoin.changes.format import ChangeFormat

    key = tuple(key)
    if isinstance(changes, ChangeFormat):
        if key != changes.key:
            raise JoinDefinitionError(f"the key {list(key)} differs from the key {list(changes.key)} of "
                                      f"{changes_argument}; make them the same")
        return changes
    if changes is None:
        vocabulary = detect_vocabulary(schema)
        if vocabulary is None:
            raise JoinDefinitionError(
                f"cannot tell the vocabulary of {argument} (columns {schema.names}): no registered vocabulary "
                f"({', '.join(v.name for v in vocabularies())}) recognises them, e.g. a Delta change data feed "
                "(_change_type), a Debezium envelope (op, before, after) or a plain change table (an 'op' "
                f"column); pass {changes_argument}=ChangeFormat.plain(...), .delta(...), .debezium(...), "
                ".debezium_json(key, row_schema) for JSON strings, or ChangeFormat('<vocabulary name>', ...)")
    elif isinstance(changes, str):
        vocabulary = get_vocabulary(changes)
    else:
        raise JoinDefinitionError(f"{changes_argument} must be a vocabulary name, a streamjoin.ChangeFormat or "
                                  f"None, not {changes!r}")
    return vocabulary.default_format(schema, key, time=time, sequence=sequence, time_argument=time_argument)
