"""The base class of change vocabularies, and the column checks their ``validate`` uses.

A vocabulary is how one family of change tables spells its changes (Delta's ``_change_type``,
Debezium's ``op`` with ``before``/``after``, ...). It is one stateless subclass of
:class:`ChangeVocabulary`; the columns of one particular table (key, change time, sequence, ...)
are in that table's :class:`streamjoin.changes.ChangeFormat`. Operators and the Spark layer never
test a vocabulary's name: they ask the object (:attr:`~ChangeVocabulary.needs_pre_stage`,
:attr:`~ChangeVocabulary.snapshot_op`, :meth:`~ChangeVocabulary.normalise`, ...).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Callable, ClassVar

import pyarrow as pa

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.typenames import type_name

if TYPE_CHECKING:
    from streamjoin.changes.format import ChangeFormat
    from streamjoin.changes.internal import Normalised

__all__ = ["ChangeVocabulary", "require_column", "require_sequence", "is_text", "is_time"]


class ChangeVocabulary(ABC):
    """One change vocabulary: detect it, validate a format of it, normalise its batches.

    Subclasses set :attr:`name` (and, when they differ from the defaults, :attr:`needs_pre_stage`
    and :attr:`snapshot_op`) and implement the four abstract methods. Make one known with
    :func:`streamjoin.changes.register_vocabulary`. Two instances of one class with one name are
    equal, so formats compare by value (and survive pickling to Spark executors).
    """

    #: The name users pass (``changes="delta"``) and a join's definition records.
    name: ClassVar[str]
    #: Whether a change table keeps its key inside a nested value (an envelope or a JSON string),
    #: so it must be turned into the plain form (:func:`streamjoin.changes.pre_stage`) before it can
    #: be routed by top-level key columns. Operators take only vocabularies that need none.
    needs_pre_stage: ClassVar[bool] = True
    #: The op a bootstrap row carries: an upsert whose change time may be null (it then comes
    #: before every change of its key). None: the vocabulary has no such rows.
    snapshot_op: ClassVar[str | None] = None
    #: Whether a table-table join applies a key's changes in sequence order alone (a view's change
    #: stream, whose change times need not grow with the order it was written in); False: in
    #: (change time, sequence) order, as every join does.
    ordered_by_sequence: ClassVar[bool] = False

    @abstractmethod
    def detect(self, schema: pa.Schema) -> bool:
        """Whether a change table with ``schema`` looks spelled in this vocabulary.

        Asked by :func:`streamjoin.changes.detect_vocabulary`, newest vocabulary first, when the
        user names none: answer True only for columns that mark this vocabulary.
        """

    @abstractmethod
    def default_format(self, schema: pa.Schema, key: tuple[str, ...], *, time: str | None,
                       sequence: str | None, time_argument: str) -> ChangeFormat:
        """The format of a change table with ``schema`` in this vocabulary, with its default columns.

        ``time``/``sequence``: the change-time and sequence columns the user named (None: the
        vocabulary's defaults). Raises :class:`JoinDefinitionError` when the vocabulary has no
        default the user must give, naming the argument ``time_argument`` (say ``table_time``).
        """

    @abstractmethod
    def validate(self, schema: pa.Schema, fmt: ChangeFormat) -> list[pa.Field]:
        """Check a change table's ``schema`` against ``fmt``; return the row's fields (key included).

        Definition time, before any row is read: raises :class:`JoinDefinitionError` naming a
        missing column or a wrong type. :meth:`ChangeFormat.row_fields` adds the checks every
        vocabulary shares (key columns present, no reserved names, a known ``time_unit``).
        """

    @abstractmethod
    def normalise(self, table: pa.Table, fmt: ChangeFormat, *, timeless_snapshots: bool = False) -> Normalised:
        """One batch of a change table in the internal form (:mod:`streamjoin.changes.internal`).

        Never raises on bad rows: they are set aside with a reason and counted. Build it with
        :func:`~streamjoin.changes.internal.to_internal`; ``timeless_snapshots`` passes through.
        """

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.name == self.name

    def __hash__(self) -> int:
        return hash((type(self).__qualname__, self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def is_text(kind: pa.DataType) -> bool:
    """A string type (either width)."""
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def is_time(kind: pa.DataType) -> bool:
    """A timestamp, or an integer counted in a time unit."""
    return pa.types.is_timestamp(kind) or pa.types.is_integer(kind)


def require_column(schema: pa.Schema, name: str | None, check: Callable[[pa.DataType], bool], what: str) -> None:
    """Raise :class:`JoinDefinitionError` unless ``schema`` has a column ``name`` that passes ``check``."""
    if name not in schema.names:
        raise JoinDefinitionError(f"the change table has no column {name!r}; its columns are {schema.names}")
    kind = schema.field(name).type
    if not check(kind):
        raise JoinDefinitionError(f"the change table's column {name!r} must be {what}, not {type_name(kind)}")


def require_sequence(schema: pa.Schema, name: str | None) -> None:
    """The sequence column, when one is named, must be an integer column."""
    if name is not None and name not in schema.names:
        raise JoinDefinitionError(
            f"the change table has no column {name!r}, the sequence that orders one key's changes of one change "
            f"time; its columns are {schema.names}: add it, or name another integer column as the sequence "
            "(the join's table_sequence=, left_sequence= or right_sequence=)")
    if name is not None:
        require_column(schema, name, pa.types.is_integer, "an integer column")
