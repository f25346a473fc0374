"""Sending equal keys to one task: the key a join's unioned rows are routed by, and the shuffle.

Each key column is cast to one Spark type shared by the inputs (:func:`common_key_types`, so equal
keys hash equally whichever input they come from) and, for floating-point keys, normalised
(:func:`routing_key`); :func:`routing_keys` picks each row's key column out of its input's lane
(:mod:`streamjoin.spark.lanes`). :func:`shuffle` repartitions by an expression of the key group so
that task ``p`` receives exactly the key groups partition ``p`` owns
(:mod:`streamjoin.runtime.keygroups`), without adding the routing key or the target to the
shuffled rows. The joins' inputs and their initial (bootstrap) rows are routed alike.
"""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.keys import routing_key_type
from streamjoin.runtime.keygroups import slot_values
from streamjoin.runtime.operator import Operator
from streamjoin.spark.lanes import INPUT_TAG, Layout, arrow_schema

__all__ = ["common_key_types", "routing_keys", "routing_key", "owner", "shuffle"]


def common_key_types(inputs: Sequence[DataFrame], operator: Operator) -> list[str]:
    """The Spark type each key column is cast to before routing, one per key column: the inputs'
    type when all agree, else :func:`streamjoin.kit.keys.routing_key_type` of their Arrow types
    (the key-type rule the joins compare keys with)."""
    widths = {len(spec.key) for spec in operator.inputs}
    if len(widths) != 1:
        raise JoinDefinitionError(f"every input of {operator.kind} needs the same number of key columns")
    schemas = [arrow_schema(df) for df in inputs]
    types = []
    for j in range(widths.pop()):
        found = {df.schema[spec.key[j]].dataType.simpleString() for df, spec in zip(inputs, operator.inputs)}
        if len(found) == 1:
            types.append(found.pop())
            continue
        columns = [(spec.key[j], schema.field(spec.key[j]).type) for schema, spec in zip(schemas, operator.inputs)]
        types.append(from_arrow_type(routing_key_type(columns)).simpleString())
    return types


def routing_keys(operator: Operator, key_types: Sequence[str], layout: Layout,
                 only: int | None = None) -> list[Column]:
    """The routing key of the unioned rows, one expression per key column: the key column of the
    row's input cast to the common type (floating-point ones normalised, :func:`routing_key`);
    one lane where every input's key column travels in it, else chosen by the input tag.
    ``only``: the rows all come from that input."""
    tag = F.col(INPUT_TAG)
    keys = []
    for j, data_type in enumerate(key_types):
        lanes = {i: layout.name(i, spec.schema.names.index(spec.key[j]))
                 for i, spec in enumerate(operator.inputs) if only is None or i == only}
        if len(set(lanes.values())) == 1:
            keys.append(routing_key(F.col(next(iter(lanes.values()))).cast(data_type), data_type))
            continue
        picked: Column | None = None
        for i, lane in lanes.items():
            value = routing_key(F.col(lane).cast(data_type), data_type)
            picked = F.when(tag == i, value) if picked is None else picked.when(tag == i, value)
        assert picked is not None
        keys.append(picked)
    return keys


def routing_key(key: Column, data_type: str) -> Column:
    """``key`` as the hash partitioning must see it: a floating-point key with ``-0.0`` made ``0.0``
    and every NaN one NaN (as Spark's joins compare them, and as the operators match them)."""
    if data_type not in ("float", "double"):
        return key
    return (F.when(key == 0, F.lit(0.0).cast(data_type))
            .when(F.isnan(key), F.lit(float("nan")).cast(data_type))
            .otherwise(key))


def owner(partitions: int, groups: int, keys: Sequence[Column]) -> Column:
    """The partition owning each row's key group (:mod:`streamjoin.runtime.keygroups`), an int:
    the key group ``pmod(hash(keys), groups)`` and its owner, computed in the JVM."""
    group = F.pmod(F.hash(*keys), F.lit(groups)).cast("bigint")
    return F.call_function("div", group * F.lit(partitions), F.lit(groups)).cast("int")


def shuffle(df: DataFrame, partitions: int, groups: int, keys: Sequence[Column]) -> DataFrame:
    """``df`` repartitioned so that task ``p`` gets the rows of the key groups partition ``p`` owns:
    the :func:`owner` of each row, mapped to the owner's *slot*, an int Spark's own hash
    partitioning sends to task ``p``. The repartition is by that expression: no column is added
    to the shuffled rows."""
    slots = F.array(*[F.lit(x) for x in slot_values(partitions)])
    return df.repartition(partitions, F.element_at(slots, owner(partitions, groups, keys) + 1))
