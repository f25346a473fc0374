"""The one canonical row order: how every join sorts the rows it processes.

Rows are sorted by the columns a join names first (its event time and key, or its key and change
order), then by every other column whose type Arrow can sort, in schema order; all ascending,
**nulls first** (as Spark sorts ascending; a timeless snapshot row, with a null change time, comes
before every change). Dictionary columns sort by their values; lists, structs and maps by their
bytes (:mod:`streamjoin.kit.nested`: element by element, field by field). Sorting every batch this
way makes an operator's state and output independent of the order of rows within a batch.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.kit.nested import encode_nested, is_nested, physical_nested

__all__ = ["NULLS", "SortKeys", "sortable", "ascending", "canonical_sort_keys", "canonical_order", "sort_canonically"]

#: Where nulls go in the canonical order (Arrow's ``null_placement``).
NULLS = "at_start"

#: Arrow sort keys: (column, "ascending", null placement).
SortKeys = tuple[tuple[str, str, str], ...]


@lru_cache(maxsize=None)
def sortable(kind: pa.DataType) -> bool:
    """Whether Arrow sorts tables by a column of ``kind`` (dictionaries: by their values)."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    probe = pa.table({"c": pa.nulls(2, kind), "d": pa.array([1, 0])})
    try:
        pc.sort_indices(probe, sort_keys=[("c", "ascending"), ("d", "ascending")])
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return False
    return True


def ascending(*names: str) -> SortKeys:
    """Sort keys for ``names`` in the canonical direction and null placement."""
    return tuple((name, "ascending", NULLS) for name in names)


def _by_bytes(kind: pa.DataType) -> bool:
    """Whether a column of ``kind`` sorts by its values' bytes (a nested type a row can keep)."""
    return is_nested(kind) and physical_nested(kind) is not None


def canonical_sort_keys(schema: pa.Schema, first: Sequence[str]) -> SortKeys:
    """``first``, then every other column of ``schema`` Arrow can sort by or that sorts by its
    bytes (a list, struct or map), in schema order."""
    rest = [n for n in schema.names if n not in first
            and (sortable(schema.field(n).type) or _by_bytes(schema.field(n).type))]
    return ascending(*first, *rest)


def canonical_order(table: pa.Table, keys: SortKeys) -> pa.Array:
    """Indices putting ``table`` in the order of ``keys`` (dictionary columns by their values,
    nested ones by their bytes).

    Arrow compares ``-0.0`` equal to ``0.0`` and every NaN equal to every other; rows that differ
    only there are then ordered by those floating-point columns' bit patterns, so the order never
    depends on the rows' order in the input."""
    names = [name for name, *_ in keys]
    view = table.select(names)
    for i, kind in enumerate(view.schema.types):
        if pa.types.is_dictionary(kind):
            view = view.set_column(i, names[i], view.column(i).cast(kind.value_type))
        elif _by_bytes(kind):
            view = view.set_column(i, names[i], encode_nested(view.column(i), kind))
    sort_keys = list(keys)
    for i, kind in enumerate(view.schema.types):
        if (pa.types.is_float32(kind) or pa.types.is_float64(kind)) and view.num_rows:
            bits = _float_bits(view.column(i))
            name = f"__sj_bits_{i}"
            view = view.append_column(name, bits)
            sort_keys.append((name, "ascending", NULLS))
    return pc.sort_indices(view, sort_keys=sort_keys)


def _float_bits(column: pa.ChunkedArray) -> pa.Array:
    """A floating-point column's values as their float64 bit patterns (uint64; nulls as 0)."""
    values = column.combine_chunks().cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)
    return pa.array(np.ascontiguousarray(values, np.float64).view(np.uint64))


def sort_canonically(table: pa.Table, keys: SortKeys) -> pa.Table:
    """``table`` in the order of ``keys`` (see :func:`canonical_order`)."""
    return table.take(canonical_order(table, keys))
