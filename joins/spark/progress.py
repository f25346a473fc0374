"""The join in Spark's progress: its metrics as observed metrics of the query.

Every task of a version ends its output with one *metrics row*: the output columns null and a
text column ``METRICS`` holding, as one JSON object, what the partition did (rows in, out, set
aside and late per input, pairs, state rows and bytes, store restores and their time, the join's
watermarks in microseconds). The column is null on every output row, and a null string is cheaper
for Spark to convert from Arrow than a null struct of the same fields (see the runtime design
page, "The join in Spark's progress"). After ``mapInArrow`` the
runtime parses the P metrics rows (one a task) and aggregates them with ``observe``, named
``observation_name``, which Spark reports in ``StreamingQueryProgress.observedMetrics``
(``lastProgress``, listeners, the UI) as one struct field, ``OBSERVED``, then drops them: what
remains is exactly the join's output. The join's watermarks are observed as text with their UTC
offset (``2024-01-01 00:29:00.000000Z``; Spark would render a timestamp in the session's time zone,
without saying which), so that ``progress_metrics`` reads the same instant wherever it runs.

``progress_metrics`` is the documented way to read them: Spark hands the observation over in
different shapes (classic PySpark: a row holding a dict; Spark Connect: a row of ``values`` and
``schema``; a listener's event: nested rows), and it gives one dict of named, typed values for all.

The join's watermark is reported there, not as Spark's event-time watermark: declaring one after
the join (``withWatermark``) would make a query whose inputs carry their own watermark fail
("Redefining watermark is disallowed"), and Spark's watermark is not what the join uses.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.checkpoint import resolve_location
from streamjoin.runtime.operator import NEG_INF, POS_INF, Operator
from streamjoin.runtime.registry import operator_class
from streamjoin.spark.checks import quoted
from streamjoin.table.operator import JOIN, LEFT_KEYS, RIGHT_KEYS

__all__ = ["METRICS", "OBSERVED", "observation_name", "input_observation_name", "progress_schema", "metrics_batch", "report_progress",
           "progress_metrics", "is_time_field", "time_of"]

METRICS = "_sj_metrics"
#: The one field of the join's observed metrics: a struct of the micro-batch's totals.
OBSERVED = "metrics"

_COMMON_SUMS = ("output_rows", "state_entries_estimate", "state_bytes", "entries_restored", "state_versions_replayed")
_PER_INPUT_SUMS = ("input_rows", "set_aside_rows", "late_rows")
#: How an observed watermark is written (Spark's datetime pattern: UTC offset last, ``Z`` for UTC).
_TIME_TEXT = "yyyy-MM-dd HH:mm:ss.SSSSSSXXX"
_PREFIX = "streamjoin "
#: Spark SQL types of the metrics' Arrow types (event times travel as microseconds: BIGINT in the JSON)
_SQL_TYPES = {pa.int64(): "BIGINT", pa.float64(): "DOUBLE"}


def is_time_field(name: str, operator: Operator | type[Operator] = Operator) -> bool:
    """Whether metric ``name`` of ``operator`` (its class's ``time_metrics``: its watermarks) is an
    event time; every input's largest event time (``max_time_<input>``) is one."""
    return name in operator.time_metrics or name.startswith("max_time_")


def time_of(micros: int | None) -> datetime | None:
    """An event time in microseconds as a UTC datetime; None for none (None or -infinity), the
    largest datetime for +infinity (a batch run's final watermark)."""
    if micros is None or micros == NEG_INF:
        return None
    if micros >= POS_INF:
        return datetime.max.replace(tzinfo=timezone.utc)
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=micros)


def observation_name(operator: Operator, checkpoint: str) -> str:
    """The name of the join's observed metrics in ``StreamingQueryProgress.observedMetrics``."""
    return f"streamjoin {operator.kind} {checkpoint}"


def input_observation_name(checkpoint: str) -> str:
    """The name of a streaming stage's observed input count (``rows``: the rows its micro-batch
    read, flush rows included). The count is incidental: the observation keeps Spark from
    planning a micro-batch in which none of the stage's sources has data as zero tasks. Spark
    replaces such a source with an empty relation, its optimizer (``PropagateEmptyRelation``)
    folds the union and the repartition above it into that empty relation, and a ``mapInArrow``
    over it runs no task: the stage's version would be skipped (a table-table join's key stage in
    a micro-batch where only the other table changed), and its next version could not find the
    state it follows. An observation is never folded, so the repartition above it stays and runs
    the stage's tasks, with no rows."""
    return f"streamjoin-input {checkpoint}"


def _fields(operator: Operator) -> list[pa.Field]:
    """The observed metrics' fields: per input, the runtime's sums; the rows set aside before
    routing (a set-aside input that is no input: counted by partition 0); the common sums; then
    the operator's own."""
    inputs = [spec.name for spec in operator.inputs]
    names = [f"{m}_{name}" for name in inputs for m in _PER_INPUT_SUMS]
    names += [f"set_aside_rows_{name}" for name in operator.set_aside_inputs if name not in inputs] + list(_COMMON_SUMS)
    fields = [pa.field(n, pa.int64()) for n in names]
    fields += [pa.field("stores_rebuilt", pa.int64()), pa.field("stores_reopened", pa.int64()),
               pa.field("state_open_seconds", pa.float64())]
    for name in operator.metric_merges:
        fields.append(pa.field(name, pa.timestamp("us", "UTC") if name in operator.time_metrics else pa.int64()))
    return fields


def progress_schema(operator: Operator) -> pa.Schema:
    """The schema ``mapInArrow`` returns: the output's columns, then the metrics as JSON text."""
    return operator.output_schema.append(pa.field(METRICS, pa.string()))


def _parsed_type(operator: Operator) -> str:
    """The Spark type a metrics row's JSON is parsed as: ``_fields``, times in microseconds."""
    return "struct<" + ",".join(f"{quoted(f.name)}:{_SQL_TYPES.get(f.type, 'BIGINT')}" for f in _fields(operator)) + ">"


def _time(value: Any) -> int | None:
    return None if value is None or value in (NEG_INF, POS_INF) else int(value)


def metrics_batch(operator: Operator, metrics: Mapping[str, Any], schema: pa.Schema) -> pa.RecordBatch:
    """One row of ``schema`` (``progress_schema``): output columns null, then ``metrics`` as JSON
    (the fields of ``_fields``, event times in microseconds, None for none)."""
    values: dict[str, Any] = {}
    for field in _fields(operator):
        if field.name == "stores_rebuilt":
            values[field.name] = int(metrics.get("state_open") not in ("reused", None))
        elif field.name == "stores_reopened":
            values[field.name] = int(bool(metrics.get("state_reopened")))
        elif field.name in operator.time_metrics:
            values[field.name] = _time(metrics.get(field.name))
        else:
            values[field.name] = metrics.get(field.name, 0)
    columns = [pa.nulls(1, f.type) if f.nullable else _placeholder(f.type) for f in operator.output_schema]
    columns.append(pa.array([json.dumps(values, separators=(",", ":"))], pa.string()))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _placeholder(kind: pa.DataType) -> pa.Array:
    """One value of ``kind`` for a column declared not null (the metrics row is dropped anyway)."""
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pa.array([""], kind)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return pa.array([b""], kind)
    if pa.types.is_boolean(kind):
        return pa.array([False], kind)
    return pa.array([0], pa.int64()).cast(kind)


def report_progress(df: DataFrame, operator: Operator, checkpoint: str) -> DataFrame:
    """``df`` (of ``progress_schema``) as the join's output, its metrics observed as one struct
    field ``OBSERVED``."""
    metrics = F.col(METRICS)
    observed = df.observe(observation_name(operator, checkpoint), F.expr(observed_sql(operator)).alias(OBSERVED))
    # Spark pushes no filter below ``observe`` (it would change what is observed)
    kept = observed.where(metrics.isNull())
    return kept.selectExpr(*[quoted(name) for name in operator.output_schema.names])


def observed_sql(operator: Operator) -> str:
    """The observed aggregate as Spark SQL: the P metrics rows collected, parsed and folded.

    One aggregate only: Spark evaluates every aggregate of an observation on every row (tens of
    nanoseconds each), and the output rows all pass here; a list of the P metrics rows folded once
    costs one null check a row, where a sum per field (11 to 20 aggregates, by join) cost about a
    quarter of a pass-through's time. Written as one SQL text, Spark parses it in one call; built
    from ``pyspark.sql.functions`` it took thousands of Py4J calls, about 0.3 s a join's definition.
    """
    combined = _combined(operator)
    zero = ", ".join(f"{_text(name)}, {_zero(how, kind)}" for name, how, kind in combined)
    merged = ", ".join(f"{_text(name)}, {_merged(operator, name, how)}" for name, how, _ in combined)
    finished = ", ".join(
        f"{_text(name)}, " + (f"date_format(_sj_acc.{quoted(name)}, {_text(_TIME_TEXT)})"
                              if name in operator.time_metrics else f"_sj_acc.{quoted(name)}")
        for name, _, _ in combined)
    rows = f"transform(collect_list({quoted(METRICS)}), _sj_text -> from_json(_sj_text, {_text(_parsed_type(operator))}))"
    return (f"aggregate({rows}, named_struct({zero}), (_sj_acc, _sj_row) -> named_struct({merged}), "
            f"_sj_acc -> named_struct({finished}))")


def _text(value: str) -> str:
    """``value`` as a Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _combined(operator: Operator) -> list[tuple[str, str, pa.DataType]]:
    """(name, how: ``sum``/``max``/``count``, type) of each observed field, in order."""
    fields = _fields(operator)
    out = [(f.name, "sum", f.type) for f in fields
           if f.name not in operator.metric_merges and f.name != "state_open_seconds"]
    out.append(("state_open_seconds_max", "max", pa.float64()))
    out.append(("partitions", "count", pa.int64()))
    kinds = {f.name: f.type for f in fields}
    out += [(name, how, kinds[name]) for name, how in operator.metric_merges.items()]
    return out


def _zero(how: str, kind: pa.DataType) -> str:
    if how != "max":
        return "CAST(0 AS BIGINT)"
    return f"CAST(NULL AS {_SQL_TYPES.get(kind, 'TIMESTAMP')})"


def _merged(operator: Operator, name: str, how: str) -> str:
    acc = f"_sj_acc.{quoted(name)}"
    if how == "count":
        return f"{acc} + 1"
    if how == "max":
        value = f"_sj_row.{quoted(name.removesuffix('_max'))}"
        if name in operator.time_metrics:
            value = f"timestamp_micros({value})"
        return f"greatest({acc}, {value})"
    return f"{acc} + coalesce(_sj_row.{quoted(name)}, CAST(0 AS BIGINT))"


def _location(name: str) -> str:
    """The checkpoint of a join's metrics name (``streamjoin <kind> <checkpoint>``)."""
    return name.split(" ", 2)[-1]


def _join_stage(names: list[str]) -> list[str]:
    """``names`` (metrics names), or the join stage's alone when they are the stages of one
    table-table join (its ``join`` stage beside its key stages): the stage whose metrics are the
    view's."""
    split = [_location(name).rstrip("/").rpartition("/") for name in names]
    parents, stages = {parent for parent, _, _ in split}, [stage for _, _, stage in split]
    if len(names) > 1 and len(parents) == 1 and set(stages) <= {JOIN, LEFT_KEYS, RIGHT_KEYS} and stages.count(JOIN) == 1:
        return [names[stages.index(JOIN)]]
    return names


def progress_metrics(query_or_progress: Any, checkpoint: str | None = None) -> dict[str, Any] | None:
    """The join's metrics of one micro-batch, by name.

    Counts are ints, ``state_open_seconds_max`` a float in seconds, the watermarks UTC datetimes
    (None: no watermark yet). The same on classic Spark and Spark Connect.

    Args:
        query_or_progress: A ``StreamingQuery`` (its ``lastProgress``), a
            ``StreamingQueryProgress`` (an element of ``recentProgress``, a listener event's
            ``progress``), a listener's ``QueryProgressEvent``, or a progress as JSON text
            (``progress.json``, as ``StreamingQueryProgress.fromJson`` takes it) or as a dict
            (``json.loads(progress.json)``).
        checkpoint: Picks the join when the query has several (the ``checkpoint=`` it was defined
            with, or one of a table-table join's stages: ``<checkpoint>/left_keys``, ...); None:
            the query's one join. A table-table join's metrics are its join stage's (the view's
            changes), its key stages' by their own checkpoints.

    Returns:
        The metrics, or None when there is no progress yet or it observed no join (a trigger that
        ran no micro-batch).

    Raises:
        JoinDefinitionError: The join asked for is not in the progress, or several are and
            ``checkpoint`` is None (the message names them).
    """
    progress = query_or_progress
    if isinstance(progress, (str, bytes, bytearray)):
        progress = _parsed(progress)
    if hasattr(progress, "lastProgress"):
        progress = progress.lastProgress
    elif not isinstance(progress, Mapping) and hasattr(progress, "progress"):
        progress = progress.progress
    if progress is None:
        return None
    observed = progress["observedMetrics"] if "observedMetrics" in progress else {}
    joins = {name: value for name, value in (observed or {}).items() if name.startswith(_PREFIX)}
    if not joins:
        return None
    if checkpoint is None:
        chosen = _join_stage(list(joins))
    else:
        location = resolve_location(checkpoint)
        chosen = [name for name in joins if _location(name) == location]
        if not chosen:   # a table-table join's own checkpoint: its stages are below it
            below = location.rstrip("/") + "/"
            chosen = _join_stage([name for name in joins if _location(name).startswith(below)])
    if len(chosen) != 1:
        wanted = "one join" if checkpoint is None else f"a join with checkpoint {checkpoint}"
        raise JoinDefinitionError(
            f"progress_metrics: this progress has {len(joins)} joins' metrics, not {wanted}: "
            f"{sorted(joins)}; pass checkpoint= one of them (the location after the kind)")
    times = operator_class(chosen[0].split(" ", 2)[1]).time_metrics   # the name: "streamjoin <kind> <checkpoint>"
    return {name: _typed(value) if name in times else value
            for name, value in _struct(joins[chosen[0]])[OBSERVED].items()}


def _parsed(text: str | bytes | bytearray) -> Any:
    """A progress given as JSON text, as a dict; :class:`JoinDefinitionError` if it is not one."""
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise JoinDefinitionError(
            f"progress_metrics: the text given is not a progress in JSON ({exc}): pass a query, a "
            "StreamingQueryProgress or its .json") from exc
    if not isinstance(found, Mapping):
        raise JoinDefinitionError(f"progress_metrics: the JSON given is a {type(found).__name__}, not a progress "
                                  "(an object with observedMetrics): pass a query, a StreamingQueryProgress or its .json")
    return found


def _struct(value: Any) -> dict[str, Any]:
    """An observed row as a dict (nested rows too), whatever shape Spark handed it over in: a
    ``Row``, a dict, or ``{"values": [...], "schema": <struct type>}`` (Spark Connect)."""
    if hasattr(value, "asDict"):
        value = value.asDict(recursive=True)
    value = _zipped(value)
    if not isinstance(value, Mapping) or not isinstance(value.get(OBSERVED), Mapping):
        raise JoinDefinitionError(f"progress_metrics: cannot read the observation {value!r}: "
                                  f"it has no struct {OBSERVED!r}")
    return dict(value)


def _zipped(value: Any, schema: Any = None) -> Any:
    """``value`` with every ``{"values", "schema"}`` pair (a struct as Spark Connect renders it:
    its values in the order of the schema's fields) made a dict of the fields by name."""
    if isinstance(value, Mapping) and set(value) == {"values", "schema"}:
        value, schema = value["values"], value["schema"]
        if isinstance(schema, str):
            schema = json.loads(schema)
    if isinstance(value, Mapping):
        return {k: _zipped(v) for k, v in value.items()}
    if isinstance(schema, Mapping) and schema.get("type") == "struct" and isinstance(value, (list, tuple)):
        return {field["name"]: _zipped(v, field["type"]) for field, v in zip(schema["fields"], value)}
    return value


def _typed(value: Any) -> Any:
    """An observed watermark as documented: a UTC datetime (None: none yet)."""
    if value is None:
        return value
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.astimezone(timezone.utc)
    text = str(value)
    return datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text).astimezone(timezone.utc)
