"""Key groups (:mod:`streamjoin.runtime.keygroups`): Spark's ``hash()`` reproduced for every key
type (the expected values were printed by Spark 4's ``F.hash`` for these rows; the Spark suite
checks the routing against Spark itself), the contiguous ranges partitions own, the shuffle slots."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.keygroups import (
    SEED,
    _hash_int,
    check_count,
    check_key_groups,
    group_range,
    key_groups,
    owners,
    slot_values,
    spark_hash,
)
from streamjoin.runtime.local import route

UTC = dt.timezone.utc
COLUMNS = {
    "i": (pa.int32(), [1, -7], [-559580957, -1618159745]),
    "l": (pa.int64(), [10**12, -5], [-1720003073, 424949597]),
    "s": (pa.string(), ["a", ""], [1485273170, 142593372]),
    "u": (pa.large_string(), ["héllo wörld", "abcd"], [-281075962, -396302900]),
    "b": (pa.binary(), [b"\x01\xff\x80", b""], [609492289, 142593372]),
    "d": (pa.float64(), [1.5, float("inf")], [1290763749, 833680482]),
    "z": (pa.float64(), [-0.0, 0.0], [-1670924195, -1670924195]),
    "n": (pa.float64(), [float("nan"), 2.0], [-1281358385, -2030303457]),
    "t": (pa.bool_(), [True, False], [-559580957, 933211791]),
    "dt": (pa.date32(), [dt.date(2020, 1, 2), dt.date(1960, 1, 1)], [-1509429657, 1238262706]),
    "ts": (pa.timestamp("us", "UTC"), [dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC), dt.datetime(1960, 1, 1, tzinfo=UTC)],
           [-1738069110, -1530488822]),
    "dc": (pa.decimal128(10, 2), [Decimal("12.34"), Decimal("-0.01")], [-1028144669, -939490007]),
    "db": (pa.decimal128(30, 1), [Decimal("123456789012345678901.5"), Decimal("-99999999999999999999.5")],
           [975144850, 564454047]),
    "ni": (pa.int32(), [None, 5], [42, 1023896466]),
    "f": (pa.float32(), [3.25, -0.0], [-1250353445, 933211791]),
}


@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_spark_hash_equals_spark_for_each_key_type(name):
    kind, values, expected = COLUMNS[name]
    assert spark_hash([pa.array(values, kind)]).tolist() == expected


def test_spark_hash_of_several_columns_chains_seeds_and_skips_nulls():
    columns = [pa.array(values, kind) for kind, values, _ in COLUMNS.values()]
    assert spark_hash(columns).tolist() == [-369349495, -135803277]


def test_spark_hash_of_a_sliced_string_array_reads_its_own_values():
    values = pa.array(["x", "a", "héllo wörld", None, "abcd"]).slice(1, 4)
    assert spark_hash([values]).tolist() == [1485273170, -281075962, SEED, -396302900]


def test_key_groups_refuse_a_key_type_spark_cannot_hash():
    with pytest.raises(JoinDefinitionError, match="cannot be assigned to key groups"):
        key_groups(pa.table({"k": pa.array([[1]], pa.list_(pa.int64()))}), ["k"], 16)


@given(partitions=st.integers(1, 64), groups=st.integers(64, 5000))
def test_group_ranges_are_contiguous_and_owned_by_their_partition(partitions, groups):
    ends = [group_range(p, partitions, groups) for p in range(partitions)]
    assert ends[0][0] == 0 and ends[-1][1] == groups
    assert all(a[1] == b[0] for a, b in zip(ends, ends[1:]))
    for p, (start, end) in enumerate(ends):
        assert end > start
        assert set(owners(np.arange(start, end), partitions, groups).tolist()) == {p}


@pytest.mark.parametrize("partitions", [1, 2, 5, 200])
def test_slot_values_reach_their_partition(partitions):
    slots = np.array(slot_values(partitions), dtype=np.int64)
    hashed = _hash_int(slots, np.full(partitions, SEED, dtype=np.uint32)).view(np.int32).astype(np.int64)
    assert np.mod(hashed, partitions).tolist() == list(range(partitions))


def test_route_by_key_group_agrees_across_integer_widths():
    narrow = pa.table({"k": pa.array([1, 2, 3, 40000], pa.int32())})
    wide = pa.table({"k": pa.array([1, 2, 3, 40000], pa.int64())})
    a = [t.column("k").to_pylist() for t in route(narrow, ["k"], 3, groups=64)]
    b = [t.column("k").to_pylist() for t in route(wide, ["k"], 3, groups=64)]
    assert a == b and sum(map(len, a)) == 4


@pytest.mark.parametrize("value, message", [
    (0, "partitions must be an int from 1 to 4096 (the join's key groups, max_partitions, fixed when its "
        "checkpoint is created), not 0"),
    (-1, "from 1 to 4096 (the join's key groups, max_partitions, fixed when its checkpoint is created), not -1"),
    (4097, "from 1 to 4096 (the join's key groups, max_partitions, fixed when its checkpoint is created), not 4097"),
    (True, "not True"),
    (2.0, "not 2.0"),
    ("3", "not '3'"),
])
def test_check_key_groups_refuses_a_partition_count_naming_the_range(value, message):
    with pytest.raises(JoinDefinitionError) as error:
        check_key_groups(4096, value)
    assert message in str(error.value)


@pytest.mark.parametrize("groups", [0, -4, False, 8.0, None])
def test_check_key_groups_refuses_a_key_group_count(groups):
    with pytest.raises(JoinDefinitionError, match=f"max_partitions must be an int of at least 1, not {groups!r}"):
        check_key_groups(groups, 1)


def test_check_count_returns_a_count_in_range():
    assert check_count(7, "n", most=7) == 7 and check_count(1, "n") == 1
    with pytest.raises(JoinDefinitionError, match="retain must be an int of at least 2, not 1"):
        check_count(1, "retain", least=2)
