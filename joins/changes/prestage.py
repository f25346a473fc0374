"""The pre-stage: changes whose key sits in an envelope, turned into the plain form before routing.

The runtime routes a change table's rows by top-level key columns. A vocabulary that keeps the key
inside a nested value (:attr:`ChangeVocabulary.needs_pre_stage`, e.g. Debezium) is first run
through :func:`pre_stage`: :func:`streamjoin.changes.normalise`, then :func:`to_plain`. Its output
is read with :func:`routable_format` (``ChangeFormat.plain(key, **PLAIN_COLUMNS)``); the rows it
refuses are that stage's set-aside rows. The Spark layer runs it over each source partition
before the shuffle; in-process callers run it on each batch.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changes.format import ChangeFormat
from streamjoin.changes.internal import DELETE, HEARTBEAT, OP, PLAIN_COLUMNS, SEQ, TIME, UPSERT, Normalised

__all__ = ["to_plain", "pre_stage", "routable_format", "routable_schema"]

_OP_NAMES = {UPSERT: "upsert", DELETE: "delete", HEARTBEAT: "heartbeat"}


def to_plain(changes: pa.Table, key: Sequence[str]) -> pa.Table:
    """The internal form ``changes`` (of :func:`streamjoin.changes.normalise`) as a plain change table.

    Columns: the key, then :data:`PLAIN_COLUMNS` (op as a string, change time as
    ``timestamp[us, UTC]``, sequence), then the values.
    """
    key = list(key)
    names = pa.array([_OP_NAMES[c] for c in sorted(_OP_NAMES)], pa.string())
    ops = pc.take(names, changes.column(OP).cast(pa.int32()))
    meta = [ops, changes.column(TIME).cast(pa.timestamp("us", "UTC")), changes.column(SEQ)]
    values = list(changes.column_names[len(key) + 3:])
    arrays = [changes.column(k) for k in key] + meta + [changes.column(n) for n in values]
    return pa.Table.from_arrays(arrays, names=key + list(PLAIN_COLUMNS.values()) + values)


def pre_stage(table: pa.Table, fmt: ChangeFormat) -> tuple[pa.Table, Normalised]:
    """One batch of ``fmt`` changes in the plain form, and its normalisation (rows set aside, counts).

    Works for every vocabulary; only those that :attr:`~ChangeVocabulary.needs_pre_stage` must use it.
    """
    result = fmt.vocabulary.normalise(table, fmt)
    return to_plain(result.changes, fmt.key), result


def routable_format(fmt: ChangeFormat) -> ChangeFormat:
    """The format an operator reads ``fmt``'s changes in: ``fmt`` itself, or the plain form's."""
    return ChangeFormat.plain(fmt.key, **PLAIN_COLUMNS) if fmt.vocabulary.needs_pre_stage else fmt


def routable_schema(fmt: ChangeFormat, schema: pa.Schema) -> pa.Schema:
    """The schema of :func:`pre_stage`'s plain form for a change table with ``schema``."""
    return to_plain(fmt.internal_schema(schema).empty_table(), fmt.key).schema
