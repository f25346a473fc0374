"""The operator the runtime is measured with.

``PassThrough`` returns its input rows and keeps no state: with it, the runtime's cost over a bare
``repartition`` + ``mapInArrow`` is measured (``streamjoin bench runtime``). It streams (each
piece of its rows out as it arrives, as an inner interval join's pairs), unless made with
``streams=False``, which steps each version's rows whole, as the other joins do.
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.operator import REASON_COLUMN, InputSpec, Operator, StepInput, StepResult, StreamingStep
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
    to run it with either no-data flush. ``streams``: each piece of a version's rows goes out as
    it arrives (:meth:`stream`); False: the version's rows are stepped whole."""

    kind = "pass_through"
    set_aside_inputs = ("input",)

    def __init__(self, schema: pa.Schema, key: Sequence[str], time: str | None = None, waits: bool = False,
                 streams: bool = True) -> None:
        check_columns(schema, list(key) + ([time] if time else []), "pass_through")
        self._input = InputSpec("input", schema, tuple(key), time)
        self._waits = waits
        self._streams = streams

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

    @property
    def streams_input(self) -> bool:
        """Its rows go out as they come in (:class:`_Passing`), unless made with ``streams=False``."""
        return self._streams

    def stream(self, state: Store, batch: StepInput) -> StreamingStep | None:
        return _Passing(self._input.schema) if self._streams else None


class _Passing(StreamingStep):
    """PassThrough's streaming step: each piece's rows out at once, nothing at the end."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema

    def feed(self, rows: tuple[pa.Table, ...]) -> pa.Table:
        return rows[0]

    def finish(self, batch: StepInput) -> StepResult:
        return StepResult(self.schema.empty_table(), (empty_aside(self.schema),))
