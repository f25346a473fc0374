"""Key groups: the fixed, fine partitioning of a join's keys that its state is kept by.

A row's **key group** is ``pmod(murmur3(join key), G)``: Spark's ``hash()`` of the routing key
columns (Murmur3_x86_32, seed 42, each non-null column hashed with the previous column's hash as
seed) modulo ``G``, the checkpoint's number of key groups, fixed when the join is first defined
(default :data:`DEFAULT_KEY_GROUPS`). Partition ``p`` of ``P`` owns the contiguous range of key
groups ``kg`` with ``kg * P // G == p`` (Flink's assignment), so a restart with another partition
count moves whole key groups, and a new partition's state is the part of one or a few old
partitions' state that belongs to its key groups.

The hash is computed here in numpy for the key values as Spark holds them (so the Spark layer can
compute it in the JVM, ``pmod(hash(keys...), G)``, and the split of stored state, done in Python,
finds the same key groups): integers, booleans, dates (``hashInt`` / ``hashLong`` by width),
timestamps (microseconds, ``hashLong``), floating point (the IEEE bits, ``-0.0`` as ``0.0``, one
NaN), strings and binary (``hashUnsafeBytes`` of the bytes) and decimals (the unscaled value).
A test checks it against Spark's own ``hash``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Iterator, Sequence, cast

import numpy as np
import pyarrow as pa

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.keys import normal_key_array, routing_key_type
from streamjoin.kit.typenames import type_name

__all__ = [
    "DEFAULT_KEY_GROUPS", "SEED", "spark_hash", "key_groups", "owners", "by_owner", "group_range", "slot_values",
    "routing_types", "check_count", "check_key_groups", "values_table", "mask_owned",
]

#: Key groups of a join whose user does not choose ``max_partitions``.
DEFAULT_KEY_GROUPS = 4096
#: The seed of Spark's ``hash()`` and of its hash partitioning.
SEED = 42

_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_U32 = 0xFFFFFFFF


def check_count(value: object, name: str, *, least: int = 1, most: int | None = None, why: str = "") -> int:
    """``value`` if it is an int (not a bool) from ``least`` to ``most`` (None: no upper bound),
    else :class:`JoinDefinitionError` naming ``name``, the accepted range (``why``: what the upper
    bound is) and the value given. Every count a user gives (partitions, key groups, retention)
    is checked with it where it is given, before anything is written."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= least \
            and (most is None or value <= most):
        return value
    if most is None:
        accepted = f"an int of at least {least}"
    else:
        accepted = f"an int from {least} to {most}" + (f" ({why})" if why else "")
    raise JoinDefinitionError(f"{name} must be {accepted}, not {value!r}")


def check_key_groups(groups: object, partitions: object) -> None:
    """Raise :class:`JoinDefinitionError` unless ``groups`` (key groups, ``max_partitions``) is an
    int of at least 1 and ``partitions`` an int from 1 to ``groups`` (a partition owns whole key
    groups, at least one)."""
    check_count(groups, "max_partitions")
    check_count(partitions, "partitions", most=groups if isinstance(groups, int) else None,
                why="the join's key groups, max_partitions, fixed when its checkpoint is created")


# -- Murmur3_x86_32 as Spark computes it, vectorised over uint32 arrays ----------------------------


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k1(k: np.ndarray) -> np.ndarray:
    return _rotl(k * _C1, 15) * _C2


def _mix_h1(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    return _rotl(h ^ k, 13) * np.uint32(5) + np.uint32(0xE6546B64)


def _fmix(h: np.ndarray, length: int | np.ndarray) -> np.ndarray:
    h = h ^ np.asarray(length, dtype=np.uint32)
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def _hash_int(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """Spark's ``hashInt`` of int32 values (as uint32 bits) with per-row seeds."""
    return _fmix(_mix_h1(seed, _mix_k1(values.astype(np.uint32))), 4)


def _hash_long(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """Spark's ``hashLong`` of int64 values with per-row seeds."""
    bits = values.astype(np.int64).view(np.uint64)
    low = (bits & np.uint64(_U32)).astype(np.uint32)
    high = (bits >> np.uint64(32)).astype(np.uint32)
    return _fmix(_mix_h1(_mix_h1(seed, _mix_k1(low)), _mix_k1(high)), 8)


def _hash_bytes(values: pa.Array, seed: np.ndarray) -> np.ndarray:
    """Spark's ``hashUnsafeBytes`` of each (binary) value with per-row seeds: its whole
    little-endian 4-byte words, then each remaining byte, sign-extended, as a word of its own;
    then the length. Vectorised by rounds: round ``r`` mixes word ``r`` of every value that long."""
    values = values.cast(pa.large_binary())
    buffers = values.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64)[values.offset: values.offset + len(values) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
    words = lengths // 4
    h = seed.copy()
    for r in range(int(words.max()) if len(words) else 0):
        rows = np.flatnonzero(words > r)
        at = starts[rows] + 4 * r
        word = (data[at].astype(np.uint32) | (data[at + 1].astype(np.uint32) << np.uint32(8))
                | (data[at + 2].astype(np.uint32) << np.uint32(16)) | (data[at + 3].astype(np.uint32) << np.uint32(24)))
        h[rows] = _mix_h1(h[rows], _mix_k1(word))
    for t in range(3):
        rows = np.flatnonzero(lengths % 4 > t)
        byte = data[starts[rows] + 4 * words[rows] + t].astype(np.int8).astype(np.int32).view(np.uint32)
        h[rows] = _mix_h1(h[rows], _mix_k1(byte))
    return _fmix(h, lengths.astype(np.uint32))


def _column_hash(values: pa.Array, seed: np.ndarray) -> np.ndarray:
    """``seed`` updated by one column (a null keeps its row's seed), as Spark's ``hash`` does."""
    kind = values.type
    valid = np.ones(len(values), dtype=bool) if values.null_count == 0 else \
        np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_boolean(kind):
        ints = np.asarray(values.fill_null(False).to_numpy(zero_copy_only=False), dtype=np.int64)
        hashed = _hash_int(ints, seed)
    elif pa.types.is_integer(kind) and kind.bit_width <= 32 and pa.types.is_signed_integer(kind) \
            or kind in (pa.uint8(), pa.uint16()):
        hashed = _hash_int(_ints(values), seed)
    elif pa.types.is_integer(kind):
        hashed = _hash_long(_ints(values), seed)
    elif pa.types.is_date32(kind):
        hashed = _hash_int(_ints(values.cast(pa.int32())), seed)
    elif pa.types.is_timestamp(kind):
        hashed = _hash_long(_ints(values.cast(pa.timestamp("us", kind.tz)).cast(pa.int64())), seed)
    elif pa.types.is_float32(kind):
        floats = np.asarray(normal_key_array(values).fill_null(0.0).to_numpy(zero_copy_only=False), dtype="<f4")
        bits = np.where(np.isnan(floats), np.uint32(0x7FC00000), floats.view(np.uint32))
        hashed = _hash_int(bits, seed)
    elif pa.types.is_float64(kind):
        floats = np.asarray(normal_key_array(values).fill_null(0.0).to_numpy(zero_copy_only=False), dtype="<f8")
        bits = np.where(np.isnan(floats), np.int64(0x7FF8000000000000), floats.view(np.int64))
        hashed = _hash_long(bits, seed)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) \
            or pa.types.is_large_binary(kind):
        hashed = _hash_bytes(values, seed)
    elif pa.types.is_decimal(kind):
        hashed = _decimal_hash(values, seed, valid)
    else:
        raise JoinDefinitionError(f"a join key of type {type_name(kind)} cannot be assigned to key groups; cast it to "
                                  "an integer, string, binary, floating-point, decimal, date or timestamp type")
    return np.where(valid, hashed, seed).astype(np.uint32)


def _ints(values: pa.Array) -> np.ndarray:
    return np.asarray(values.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)


def _decimal_hash(values: pa.Array, seed: np.ndarray, valid: np.ndarray) -> np.ndarray:
    kind = values.type
    unscaled = [None if v is None else int(v.scaleb(kind.scale)) for v in values.to_pylist()]
    if kind.precision <= 18:
        return _hash_long(np.array([0 if v is None else v for v in unscaled], dtype=np.int64), seed)
    return _hash_bytes(pa.array([b"" if v is None else _big_integer_bytes(v) for v in unscaled], pa.binary()), seed)


def _big_integer_bytes(value: int) -> bytes:
    """Java's ``BigInteger.toByteArray``: two's complement, big-endian, fewest bytes with a sign bit."""
    length = (value + (value < 0)).bit_length() // 8 + 1
    return value.to_bytes(length, "big", signed=True)


def spark_hash(columns: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
    """Spark's ``hash(c1, c2, ...)`` of the rows of ``columns`` (equal lengths), as int32."""
    n = len(columns[0]) if columns else 0
    seed = np.full(n, SEED, dtype=np.uint32)
    for column in columns:
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        seed = _column_hash(column, seed)
    return seed.view(np.int32)


def key_groups(
    table: pa.Table, key: Sequence[str], groups: int, types: Sequence[pa.DataType] | None = None
) -> np.ndarray:
    """The key group (int64 in ``[0, groups)``) of each row of ``table`` by its ``key`` columns,
    cast to ``types`` (the routing types, :func:`routing_types`; None: each column's own type with
    integers widened to int64 and floats to float64, so that a mix of widths agrees)."""
    columns = []
    for j, name in enumerate(key):
        values = table.column(name)
        kind = _widened(values.type) if types is None else types[j]
        columns.append(values if values.type == kind else values.cast(kind))
    hashed = spark_hash(columns).astype(np.int64)
    return np.mod(hashed, groups)


def _widened(kind: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if pa.types.is_integer(kind):
        return pa.int64()
    if pa.types.is_floating(kind):
        return pa.float64()
    return kind


def owners(groups_of_rows: np.ndarray, partitions: int, groups: int) -> np.ndarray:
    """The partition (of ``partitions``) owning each key group: ``kg * partitions // groups``."""
    return (np.asarray(groups_of_rows, dtype=np.int64) * partitions) // groups


def by_owner(table: pa.Table, targets: np.ndarray) -> Iterator[tuple[int, pa.Table]]:
    """The rows of ``table`` by the partition ``targets`` names for each (:func:`owners`): each
    partition that has rows, ascending, with its rows in their order in ``table``."""
    order = np.argsort(targets, kind="stable")
    ordered = targets[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(ordered) else ordered[:0]
    ends = np.r_[starts[1:], len(ordered)]
    for start, end in zip(starts.tolist(), ends.tolist()):
        yield int(ordered[start]), table.take(pa.array(order[start:end]))


def group_range(partition: int, partitions: int, groups: int) -> tuple[int, int]:
    """The key groups ``[start, end)`` that ``partition`` of ``partitions`` owns."""
    return -(-partition * groups // partitions), -(-(partition + 1) * groups // partitions)


def slot_values(partitions: int) -> list[int]:
    """For each partition ``p``, the smallest int ``x >= 0`` whose Spark hash partition among
    ``partitions`` is ``p`` (``pmod(hash(x), partitions) == p``): a row carrying ``x`` as its only
    shuffle key reaches the task numbered ``p``."""
    found: dict[int, int] = {}
    start = 0
    while len(found) < partitions:
        candidates = np.arange(start, start + 4096, dtype=np.int64)
        hashed = _hash_int(candidates, np.full(candidates.size, SEED, dtype=np.uint32)).view(np.int32)
        for x, p in zip(candidates.tolist(), np.mod(hashed.astype(np.int64), partitions).tolist()):
            found.setdefault(p, x)
        start += 4096
    return [found[p] for p in range(partitions)]


def routing_types(inputs: Sequence) -> list[pa.DataType]:
    """The type each key column is routed in (``inputs``: the operator's :class:`InputSpec` s):
    the inputs' type when all agree, else :func:`streamjoin.kit.keys.routing_key_type` (as the
    Spark layer casts them)."""
    out = []
    for j in range(len(inputs[0].key)):
        columns = [(spec.key[j], spec.schema.field(spec.key[j]).type) for spec in inputs]
        kinds = [k.value_type if pa.types.is_dictionary(k) else k for _, k in columns]
        out.append(kinds[0] if all(k == kinds[0] for k in kinds) else routing_key_type(columns))
    return out


def values_table(rows: Sequence[Sequence[object]], types: Sequence[pa.DataType]) -> pa.Table:
    """Key values (tuples of Python values, as :func:`streamjoin.statestore.codecs.unpack` gives
    them) as a table of columns ``k0, k1, ...`` of ``types``."""
    arrays = []
    for j, kind in enumerate(types):
        column = [row[j] for row in rows]
        if pa.types.is_decimal(kind):
            column = [None if v is None else v if isinstance(v, Decimal) else Decimal(cast(Any, v)) for v in column]
        arrays.append(pa.array(column, type=kind) if column else pa.array([], kind))
    return pa.Table.from_arrays(arrays, names=[f"k{j}" for j in range(len(types))])


def mask_owned(groups_of_rows: np.ndarray, partition: int, partitions: int, groups: int) -> np.ndarray:
    """Whether each key group belongs to ``partition`` of ``partitions``."""
    return owners(groups_of_rows, partitions, groups) == partition

