"""The rows a join's task receives: its inputs unioned into one flat DataFrame, in shared *lanes*.

Each unioned row carries an input tag (:data:`INPUT_TAG`, the input's index; ``-1`` for the
no-data flush source's rows), then its input's columns in lanes (:class:`Layout`): a lane holds
one Spark type, and each input puts its columns of that type in lanes of it, key columns first, so
the rows are as wide as the widest input rather than all inputs together, and inputs whose key
types agree carry each key column in the same lane; a lane an input does not use is null in its
rows. Flat columns shuffle and cross into Arrow faster than one struct per input, and shared lanes
faster than a column per input's column.

The driver builds the union (:func:`union_inputs`, :func:`tagged`); the task takes each input's
rows back out of the Arrow batches it receives (:func:`split_inputs`, :func:`input_rows`) and the
micro-batch's timestamp from the :data:`NOW` column (:func:`batch_time`). Both sides use one
:class:`Layout`, computed on the driver and pickled with the task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema

from streamjoin.runtime.defaults import EXISTS_DEFAULT
from streamjoin.runtime.operator import InputSpec, Operator
from streamjoin.spark.checks import quoted

__all__ = ["INPUT_TAG", "NOW", "Layout", "arrow_schema", "tagged", "union_inputs", "split_inputs", "input_rows",
           "batch_time"]

#: The input tag of the unioned rows: the input's index (a TINYINT).
INPUT_TAG = "_sj_input"
#: The micro-batch's timestamp, beside the rows of an operator that reads processing time
#: (added after the shuffle: the rows cross it without it).
NOW = "_sj_now"
#: A lane of the unioned rows.
_LANE = "_sj_{}"


@dataclass(frozen=True)
class Layout:
    """Where the inputs' columns travel in the unioned rows: input ``i``'s column ``j`` in lane
    ``lanes[i][j]``. Each input fills lanes of its columns' Spark types in order, key columns
    first, so inputs whose key types agree carry each key column in the same lane."""

    lanes: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, inputs: Sequence[DataFrame], operator: Operator) -> "Layout":
        pools: dict[str, list[int]] = {}
        count = 0
        lanes = []
        for df, spec in zip(inputs, operator.inputs):
            names = spec.schema.names
            fields = {f.name: f for f in df.schema.fields}   # one schema call (a round trip on Connect)
            order = [names.index(k) for k in spec.key] + [j for j, n in enumerate(names) if n not in spec.key]
            used: dict[str, int] = {}
            mine = [0] * len(names)
            for j in order:
                kind = fields[names[j]].dataType.json()
                n = used.get(kind, 0)
                used[kind] = n + 1
                pool = pools.setdefault(kind, [])
                if n == len(pool):
                    pool.append(count)
                    count += 1
                mine[j] = pool[n]
            lanes.append(tuple(mine))
        return cls(tuple(lanes))

    def name(self, i: int, j: int) -> str:
        """The lane column of input ``i``'s column ``j``."""
        return _LANE.format(self.lanes[i][j])


def arrow_schema(df: DataFrame) -> pa.Schema:
    """The Arrow schema an operator sees for ``df``'s rows (timestamps in UTC microseconds); a
    column's existence default (Spark's ``EXISTS_DEFAULT`` metadata) kept in its field's metadata
    (:mod:`streamjoin.runtime.defaults`)."""
    schema = to_arrow_schema(df.schema, timezone="UTC")
    defaults = {f.name: f.metadata[EXISTS_DEFAULT] for f in df.schema.fields if EXISTS_DEFAULT in (f.metadata or {})}
    if not defaults:
        return schema
    return pa.schema([f.with_metadata({EXISTS_DEFAULT: str(defaults[f.name])}) if f.name in defaults else f
                      for f in schema])


def tagged(df: DataFrame, i: int, operator: Operator, layout: Layout) -> DataFrame:
    """Input ``i``'s rows as: input tag, then its columns (values as they are) in their lanes."""
    spec = operator.inputs[i]
    columns = [f"CAST({i} AS TINYINT) AS {quoted(INPUT_TAG)}"]
    columns += [f"{quoted(name)} AS {quoted(layout.name(i, j))}" for j, name in enumerate(spec.schema.names)]
    return df.selectExpr(*columns)


def union_inputs(inputs: Sequence[DataFrame], operator: Operator, layout: Layout) -> DataFrame:
    """One DataFrame: input tag, then each input's columns in their lanes (:func:`tagged`)."""
    parts = [tagged(df, i, operator, layout) for i, df in enumerate(inputs)]
    combined = parts[0]
    for part in parts[1:]:
        combined = combined.unionByName(part, allowMissingColumns=True)
    return combined


def split_inputs(batches: list[pa.RecordBatch], operator: Operator, layout: Layout) -> tuple[pa.Table, ...]:
    """Each input's rows of the unioned ``batches``, as a table of that input's schema."""
    if not batches:
        return tuple(spec.schema.empty_table() for spec in operator.inputs)
    table = pa.Table.from_batches(batches)
    if len(operator.inputs) == 1:
        return (input_rows(table, 0, operator.inputs[0], layout),)   # the flush source's stream has no rows
    tags = table.column(INPUT_TAG)
    return tuple(input_rows(table.filter(pc.equal(tags, i)), i, spec, layout)
                 for i, spec in enumerate(operator.inputs))


def input_rows(table: pa.Table, index: int, spec: InputSpec, layout: Layout) -> pa.Table:
    """Input ``index``'s columns of ``table`` (from their lanes) as a table of the input's schema."""
    names = spec.schema.names
    columns = [table.column(layout.name(index, j)) for j in range(len(names))]
    return pa.Table.from_arrays(columns, names=names).cast(spec.schema).combine_chunks()


def batch_time(batches: list[pa.RecordBatch]) -> int | None:
    """The micro-batch's timestamp (µs) the rows carry (:data:`NOW`); None without rows or column."""
    if not batches or NOW not in batches[0].schema.names:
        return None
    values = pa.chunked_array([b.column(NOW) for b in batches])
    latest = pc.max(values.cast(pa.timestamp("us", tz=values.type.tz)).cast(pa.int64())).as_py()
    return None if latest is None else int(latest)
