"""The operator the runtime is measured with.

``PassThrough`` returns its input rows and keeps no state: with it, the runtime's cost over a bare
``repartition`` + ``mapInArrow`` is measured (``streamjoin bench runtime``).
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.operator import REASON_COLUMN, InputSpec, Operator, StepInput, StepResult
from streamjoin.runtime.registry import register
from streamjoin.statestore.base import Store

__all__ = ["PassThrough", "check_columns", "empty_aside"]


def check_columns(schema: pa.Schema, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise JoinDefinitionError(f"{what}: no column {missing} among {schema.names}")


def empty_aside(schema: pa.Schema) -> pa.Table:
    return schema.append(pa.field(REASON_COLUMN, pa.string())).empty_table()


@register
class PassThrough(Operator):
    """Outputs every input row unchanged; no state. ``waits``: what it says its output does
    (:attr:`~streamjoin.runtime.operator.Operator.waits_for_watermark`; no effect on its output),
    to run it with either no-data flush."""

    kind = "pass_through"
    set_aside_inputs = ("input",)

    def __init__(self, schema: pa.Schema, key: Sequence[str], time: str | None = None, waits: bool = False) -> None:
        check_columns(schema, list(key) + ([time] if time else []), "pass_through")
        self._input = InputSpec("input", schema, tuple(key), time)
        self._waits = waits

    @property
    def waits_for_watermark(self) -> bool:
        return self._waits

    @property
    def inputs(self) -> tuple[InputSpec, ...]:
        return (self._input,)

    @property
    def output_schema(self) -> pa.Schema:
        return self._input.schema

    def definition(self) -> dict[str, Any]:
        return {"kind": self.kind, "key": list(self._input.key), "columns": self._input.schema.names}

    def step(self, state: Store, batch: StepInput) -> StepResult:
        return StepResult(batch.rows[0], (empty_aside(self._input.schema),))
