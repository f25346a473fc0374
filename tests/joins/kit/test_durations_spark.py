"""Interval strings: the joins read them as Spark does (:func:`streamjoin.kit.times.spark_interval`).

Strings built from numbers, signs, Spark's unit words, near-misses of them and separators are read
by Spark's ``try_cast(s AS INTERVAL)`` (months, days and microseconds, or null where Spark refuses
the string) and by ours (or a ValueError); both must agree on every string.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from streamjoin.kit.times import spark_interval

pytestmark = pytest.mark.spark

_NUMBERS = st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(
    ["0", "1.5", ".5", "5.", ".", "1..5", "0.000001", "1.1234567", "1.0000000001", "1e3", "2147483648",
     "9223372036854775807", "9223372036854775808", "2562047788", "-", "+"]))
_WORDS = ["year", "month", "week", "day", "hour", "minute", "second", "millisecond", "microsecond"]
_UNITS = st.one_of(st.sampled_from(_WORDS + [w + "s" for w in _WORDS] + ["SECONDS", "Minutes"]), st.sampled_from(
    ["s", "m", "h", "d", "ms", "us", "min", "mins", "sec", "secs", "hr", "nanosecond", "secondss", "mon"]))
_SPACES = st.sampled_from([" ", "  ", "\t", "\n", " \x0b"])
_SEPARATORS = st.one_of(_SPACES, st.sampled_from(["", ",", " - ", " + ", "-"]))
_SIGNS = st.sampled_from(["", "", "-", "+", "- "])
#: terms Spark mostly reads (a sign, a number, white space, a unit word), and anything-goes ones
_WHOLE = st.integers(0, 10**6).map(str)
_GOOD_TERMS = st.one_of(
    st.tuples(_SPACES, _SIGNS, _WHOLE, _SPACES, st.sampled_from(_WORDS + [w + "s" for w in _WORDS])),
    st.tuples(_SPACES, _SIGNS, st.sampled_from(["1.5", ".5", "5.", "0.000001", "1.1234567", "-.5"]), _SPACES,
              st.sampled_from(["second", "seconds"])))
_TERMS = st.one_of(_GOOD_TERMS.map("".join), _GOOD_TERMS.map("".join),
                   st.tuples(_SEPARATORS, _NUMBERS, _SEPARATORS, _UNITS).map("".join))
_STRINGS = st.tuples(st.sampled_from(["", "interval", "INTERVAL", " interval "]),
                     st.lists(_TERMS, min_size=0, max_size=3)).map(lambda p: p[0] + "".join(p[1]))


def _ours(text: str) -> tuple[int, int] | None:
    """Months and the rest in microseconds (Spark's ``extract`` carries whole days of the
    microseconds into days), or None where we refuse ``text``."""
    try:
        months, days, micros = spark_interval(text)
    except ValueError:
        return None
    return months, days * 86_400_000_000 + micros


# no shrinking (each try is a Spark query): a failure lists every string read differently
@settings(max_examples=8, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_STRINGS, min_size=50, max_size=50))
def test_spark_interval_reads_strings_as_spark_does(spark, texts):
    frame = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i long, s string")
    frame = frame.selectExpr("i", "s", "try_cast(s AS INTERVAL) AS v").selectExpr(
        "i", "s", "v IS NULL AS refused", "extract(YEAR FROM v) * 12 + extract(MONTH FROM v) AS months",
        "extract(DAY FROM v) AS days",
        "CAST(extract(HOUR FROM v) AS BIGINT) * 3600000000 + CAST(extract(MINUTE FROM v) AS BIGINT) * 60000000"
        " + CAST(extract(SECOND FROM v) * 1000000 AS BIGINT) AS micros")
    rows = frame.orderBy("i").collect()
    spark_reads = [None if r.refused else (r.months, r.days * 86_400_000_000 + r.micros) for r in rows]
    differ = [(r.s, ours, theirs) for r, theirs in zip(rows, spark_reads) if (ours := _ours(r.s)) != theirs]
    assert not differ, f"(string, ours, Spark's) read differently: {differ}"
