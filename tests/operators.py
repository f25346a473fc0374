"""``RunningCount``: a small stateful operator the Spark runtime is tested with.

It counts rows per key: for each key a version touches it outputs the key and the count of all its
rows so far (one row per key and version, so the output does not depend on the order of rows in a
batch).
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.bench.operators import check_columns as _check_columns
from streamjoin.runtime.operator import REASON_COLUMN, InputSpec, Operator, StepInput, StepResult
from streamjoin.runtime.registry import register
from streamjoin.statestore.base import Store
from streamjoin.statestore.codecs import decode_int, encode_int, pack

__all__ = ["RunningCount"]


@register
class RunningCount(Operator):
    """Per key, the number of rows seen so far; rows with a null key are set aside."""

    kind = "running_count"
    set_aside_inputs = ("input",)

    def __init__(self, schema: pa.Schema, key: Sequence[str]) -> None:
        _check_columns(schema, key, "running_count")
        self._input = InputSpec("input", schema, tuple(key), None)
        self._output = pa.schema([schema.field(k) for k in key] + [pa.field("count", pa.int64())])

    @property
    def inputs(self) -> tuple[InputSpec, ...]:
        return (self._input,)

    @property
    def output_schema(self) -> pa.Schema:
        return self._output

    def definition(self) -> dict[str, Any]:
        return {"kind": self.kind, "key": list(self._input.key)}

    def step(self, state: Store, batch: StepInput) -> StepResult:
        rows = batch.rows[0]
        key = list(self._input.key)
        null_key = pc.is_null(rows.column(key[0]))
        for k in key[1:]:
            null_key = pc.or_(null_key, pc.is_null(rows.column(k)))
        aside = rows.filter(null_key)
        aside = aside.append_column(REASON_COLUMN, pa.array(["null key"] * aside.num_rows, pa.string()))
        counts = rows.filter(pc.invert(null_key)).group_by(key).aggregate([([], "count_all")])
        counts = counts.sort_by([(k, "ascending") for k in key])
        encoded = [pack(*values) for values in zip(*(counts.column(k).to_pylist() for k in key))]
        before = state.multi_get(encoded)
        totals = [
            (decode_int(old) if old is not None else 0) + n
            for old, n in zip(before, counts.column("count_all").to_pylist())
        ]
        output = counts.select(key).append_column("count", pa.array(totals, pa.int64()))
        puts = [(k, encode_int(total)) for k, total in zip(encoded, totals)]
        return StepResult(
            output.cast(self._output), (aside,), puts=puts, metrics={"keys_updated": len(puts)}
        )
