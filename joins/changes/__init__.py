"""Change-stream vocabularies, normalised into one internal form (docs/design/changes.md).

A table input is a stream of changes. :class:`ChangeFormat` says how one change table is spelled:
its vocabulary and columns. Each vocabulary is one :class:`ChangeVocabulary` subclass, in one
module, registered in one registry:

    internal     the internal form (``__sj_op``, ``__sj_time``, ``__sj_seq``, op codes),
                 :class:`Normalised`, :func:`set_aside` and the helpers vocabularies build it with
    vocabulary   the :class:`ChangeVocabulary` base class
    registry     :func:`register_vocabulary`, :func:`get_vocabulary`, :func:`detect_vocabulary`
                 (the one detection rule) and :func:`resolve_format` (given, named or detected)
    format       :class:`ChangeFormat`
    plain, delta, debezium   the built-in vocabularies (debezium: as columns and as JSON strings)
    streamjoin   a table-table join's output (a view's change stream), accepted by the next join
    prestage     :func:`pre_stage`: a vocabulary with its key in an envelope, in the plain form

:func:`normalise` turns a batch into the internal form by asking the format's vocabulary. Rows it
refuses are set aside with a reason (``"unknown op"``, ``"null change time"``, ``"null key"``,
and a vocabulary's own), checked in that order; heartbeat rows need only a change time. Snapshot
rows (a vocabulary's :attr:`~ChangeVocabulary.snapshot_op`, written by a join's bootstrap) are
upserts; one without a change time is kept with a null ``__sj_time`` only when the caller asks
(``timeless_snapshots=True``, the enrichment join) and is otherwise set aside.
"""

from __future__ import annotations

import pyarrow as pa

from streamjoin.changes.format import ChangeFormat
from streamjoin.changes.internal import (
    DELETE,
    HEARTBEAT,
    OP,
    PLAIN_COLUMNS,
    SEQ,
    SKIPPED,
    SNAPSHOT,
    SNAPSHOT_OP,
    TIME,
    UNKNOWN,
    UPSERT,
    Normalised,
    micros,
    op_codes,
    sequence_numbers,
    set_aside,
    struct_rows,
    to_internal,
    top_level_changes,
)
from streamjoin.changes.prestage import pre_stage, routable_format, routable_schema, to_plain
from streamjoin.changes.registry import (
    VocabularyName,
    detect_vocabulary,
    get_vocabulary,
    register_vocabulary,
    resolve_format,
    unregister_vocabulary,
    vocabularies,
)
from streamjoin.changes.vocabulary import ChangeVocabulary, is_text, is_time, require_column, require_sequence

__all__ = [
    "ChangeFormat", "ChangeVocabulary", "Normalised", "normalise",
    "register_vocabulary", "unregister_vocabulary", "get_vocabulary", "vocabularies", "detect_vocabulary",
    "resolve_format", "VocabularyName", "pre_stage", "routable_format", "routable_schema", "to_plain",
    "OP", "TIME", "SEQ", "UPSERT", "DELETE", "HEARTBEAT", "SKIPPED", "SNAPSHOT", "UNKNOWN", "SNAPSHOT_OP",
    "PLAIN_COLUMNS", "set_aside", "to_internal", "top_level_changes", "op_codes", "micros",
    "sequence_numbers", "struct_rows", "require_column", "require_sequence", "is_text", "is_time",
]


def normalise(table: pa.Table, fmt: ChangeFormat, *, timeless_snapshots: bool = False) -> Normalised:
    """Normalise one batch of a change table by its vocabulary; never raises on bad rows.

    ``timeless_snapshots``: keep snapshot rows without a change time (null ``__sj_time``) instead
    of setting them aside as ``"null change time"``.
    """
    return fmt.vocabulary.normalise(table, fmt, timeless_snapshots=timeless_snapshots)


def _register_builtins() -> None:
    """The built-ins, general first (the detection rule asks the newest first)."""
    from streamjoin.changes.debezium import DebeziumJsonVocabulary, DebeziumVocabulary
    from streamjoin.changes.delta import DeltaVocabulary
    from streamjoin.changes.plain import PlainVocabulary
    from streamjoin.changes.streamjoin import StreamjoinVocabulary

    for vocabulary in (PlainVocabulary(), DebeziumJsonVocabulary(), DebeziumVocabulary(), DeltaVocabulary(),
                       StreamjoinVocabulary()):
        register_vocabulary(vocabulary, replace=True)


_register_builtins()
