"""The arguments the three joins share (streamjoin.kit): Spark's join-kind spellings and interval strings."""

from __future__ import annotations

import datetime as dt
import typing

import pyarrow as pa
import pytest

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.enrichment.spec import HOWS as EnrichmentHows
from streamjoin.errors import JoinDefinitionError
from streamjoin.interval.operator import IntervalJoin
from streamjoin.interval.spec import HOWS as IntervalHows
from streamjoin.kit import (
    HOW_ALIASES,
    MAX_DURATION_US,
    EnrichmentHow,
    How,
    IntervalHow,
    TableHow,
    parse_duration,
    parse_how,
)
from streamjoin.kit.times import spark_interval
from streamjoin.table.operator import TableTableJoin
from streamjoin.table.spec import HOWS as TableHows

EVENTS = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("v", pa.string())])
TABLE = pa.schema([("k", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("name", pa.string())])
SEC = dt.timedelta(seconds=1)


def interval(**options):
    args = {"left_time": "ts", "right_time": "ts", "lower": -SEC, "upper": SEC, "delay": SEC, **options}
    return IntervalJoin(EVENTS, EVENTS, "k", **args)


def table_join(**options):
    return TableTableJoin(TABLE, TABLE, "k", left_key="k", right_key="k", left_time="at", right_time="at", **options)


def enrichment(**options):
    args = dict(stream_time="ts", changes=ChangeFormat.plain("k", time="at"), delay=SEC, **options)
    return EnrichmentJoin(EVENTS, TABLE, "k", **args)


@pytest.mark.parametrize("spelling, kind", [
    ("outer", "full"), ("full_outer", "full"), ("fullouter", "full"), ("FULL", "full"),
    ("left_outer", "left"), ("leftouter", "left"), ("LeftOuter", "left"),
    ("right_outer", "right"), ("rightouter", "right"),
    ("semi", "left_semi"), ("leftsemi", "left_semi"), ("left_semi", "left_semi"), ("LEFT_SEMI", "left_semi"),
    ("anti", "left_anti"), ("leftanti", "left_anti"), ("left_anti", "left_anti"), ("Inner", "inner"),
])
def test_interval_join_how_accepts_sparks_spellings(spelling, kind):
    assert interval(how=spelling).spec.how.value == kind


@pytest.mark.parametrize("spelling, kind", [
    ("outer", "full"), ("full_outer", "full"), ("FullOuter", "full"), ("left_outer", "left"), ("LEFTOUTER", "left"),
])
def test_table_join_how_accepts_sparks_spellings(spelling, kind):
    assert table_join(how=spelling).how.value == kind


@pytest.mark.parametrize("spelling, kind", [("left_outer", "left"), ("leftouter", "left"), ("INNER", "inner")])
def test_enrichment_how_accepts_sparks_spellings(spelling, kind):
    assert enrichment(how=spelling).spec.how.value == kind


@pytest.mark.parametrize("make, spelling", [
    (table_join, "right_outer"), (table_join, "semi"), (table_join, "leftanti"),
    (enrichment, "outer"), (enrichment, "right"), (enrichment, "left_semi"),
])
def test_join_how_alias_of_an_unsupported_kind_is_refused_by_name(make, spelling):
    with pytest.raises(JoinDefinitionError, match=rf"how='{spelling}' is a .* join, which this join does not support"):
        make(how=spelling)


def test_parse_how_refuses_unknown_spellings_listing_the_allowed():
    with pytest.raises(JoinDefinitionError, match="unknown how='lefty'; use one of inner, left"):
        parse_how("lefty", ["inner", "left"])
    with pytest.raises(JoinDefinitionError, match="unknown how=3"):
        parse_how(3, ["inner"])


# Accepted and refused spellings, each checked against Spark 4.3 (`CAST(s AS INTERVAL)`,
# `INTERVAL 's'` and `withWatermark("t", s)` in a local session): accepted ones with the duration
# Spark gave, refused ones refused by all three.
@pytest.mark.parametrize("text, micros", [
    ("10 minutes", 600_000_000), ("1 hour 30 seconds", 3_630_000_000), ("2 days", 172_800_000_000),
    ("-5 seconds", -5_000_000), ("interval 10 minutes", 600_000_000), ("INTERVAL 1 Day -2 hours", 79_200_000_000),
    ("1 week", 604_800_000_000), ("2 weeks", 1_209_600_000_000), ("1 weeks", 604_800_000_000),
    ("1.5 seconds", 1_500_000), ("250 milliseconds", 250_000), ("7 microseconds", 7), ("1 minute", 60_000_000),
    ("0 seconds", 0), ("5 MINUTES", 300_000_000), ("1 MiNuTeS", 60_000_000), ("1 hours", 3_600_000_000),
    (".5 seconds", 500_000), ("5. seconds", 5_000_000), ("+5 seconds", 5_000_000), ("- 5 seconds", -5_000_000),
    ("-1.5 seconds", -1_500_000), ("-.5 seconds", -500_000), ("  7 days  ", 604_800_000_000),
    ("5\tminutes", 300_000_000), ("5 minutes\n", 300_000_000), ("interval  5 seconds", 5_000_000),
    ("1 day -1 hour", 82_800_000_000), ("1 second 1 second", 2_000_000), ("0.000001 seconds", 1),
    ("1.1234567 seconds", 1_123_456), ("1.0000001 seconds", 1_000_000),
    ("1 days 2 hours 3 minutes 4.5 seconds", 93_784_500_000), ("10 milliseconds 5 microseconds", 10_005),
])
def test_parse_duration_reads_spark_interval_strings(text, micros):
    assert parse_duration("delay", text) == micros


@pytest.mark.parametrize("text", [
    "0 s", "5 mins", "5 min", "5m", "5minutes", "250 ms", "10 us", "1 h", "1 hr", "1 hrs", "1 d", "2 d", "1 sec",
    "1 secs", "1 nanosecond", "1.5 minutes", "10 minutes,5 seconds", "10 minutes, 5 seconds", "", "interval",
    "interval5 seconds", "1 seconds s", "1 secondss", "3 hoursX", "1e3 seconds", ". seconds", "1..5 seconds",
    "1:30", "01:00:00", "10 minutz", "ten minutes", "5", "-", "5 seconds -", "1.0000000001 seconds",
])
def test_parse_duration_refuses_what_spark_refuses_naming_the_argument(text):
    with pytest.raises(JoinDefinitionError, match=r"^grace=.* is not an interval Spark reads"):
        parse_duration("grace", text)


@pytest.mark.parametrize("text", ["1 month", "2 years", "1 year -12 months 1 month"])
def test_parse_duration_refuses_months_and_years_saying_why(text):
    with pytest.raises(JoinDefinitionError, match=r"^grace=.* has months or years, which have no fixed length"):
        parse_duration("grace", text)


def test_parse_duration_takes_months_that_cancel_out():
    assert parse_duration("grace", "1 year -12 months 5 seconds") == 5_000_000


@pytest.mark.parametrize("text", ["2147483648 days", "9223372036854775808 microseconds", "2562047788 hours 2562047788 hours"])
def test_spark_interval_refuses_what_overflows_spark_arithmetic(text):
    with pytest.raises(ValueError, match="overflows|64 bits"):
        spark_interval(text)


def test_interval_join_durations_accept_spark_interval_strings():
    spec = interval(lower="-1 second", upper="interval 1 hour 30 seconds", delay="5 minutes").spec
    assert (spec.lower, spec.upper, spec.delay) == (-1_000_000, 3_630_000_000, 300_000_000)
    assert spec.definition() == interval(lower=-SEC, upper=dt.timedelta(hours=1, seconds=30),
                                         delay=dt.timedelta(minutes=5)).spec.definition()


def test_enrichment_durations_accept_spark_interval_strings():
    spec = EnrichmentJoin(EVENTS, TABLE, "k", stream_time="ts", changes=ChangeFormat.plain("k", time="at"),
                          delay="10 seconds", grace="1 minute").spec
    assert (spec.delay, spec.grace) == (10_000_000, 60_000_000)


@pytest.mark.parametrize("argument", ["lower", "upper", "delay"])
def test_interval_join_refuses_durations_beyond_int64_microseconds(argument):
    values = dict(lower=dt.timedelta.min, upper=dt.timedelta.max, delay=dt.timedelta.max)
    with pytest.raises(JoinDefinitionError, match=rf"^{argument}=.* is too long"):
        interval(**{argument: values[argument]})


def test_enrichment_refuses_a_grace_beyond_int64_microseconds():
    with pytest.raises(JoinDefinitionError, match=r"^grace=.* is too long"):
        enrichment(grace=dt.timedelta.max)


def test_interval_join_with_the_longest_window_runs(tmp_path):
    from streamjoin.runtime.local import LocalRunner

    longest = dt.timedelta(microseconds=MAX_DURATION_US)
    op = interval(lower=-longest, upper=longest, delay=longest, how="full")
    runner = LocalRunner(op, str(tmp_path), partitions=2)
    t = dt.datetime(2024, 1, 1)
    rows = pa.table({"k": [1, 2], "ts": pa.array([t, t], pa.timestamp("us")), "v": ["a", "b"]}, schema=EVENTS)
    first = runner.run(rows, EVENTS.empty_table())
    second = runner.run(EVENTS.empty_table(), rows.slice(0, 1), final=True)
    assert first.num_rows == 0
    assert sorted(second.column("k").to_pylist()) == [1, 2]


@pytest.mark.parametrize("literal, allowed", [
    (IntervalHow, IntervalHows), (EnrichmentHow, EnrichmentHows), (TableHow, TableHows),
])
def test_how_literals_spell_exactly_the_kinds_each_join_accepts(literal, allowed):
    spellings = set(typing.get_args(literal))
    assert {parse_how(s, allowed) for s in spellings} == {How(a) for a in allowed}
    # every Spark spelling of those kinds (HOW_ALIASES: lower case, without underscores) is there
    assert {s.replace("_", "") for s in spellings} == {k for k, v in HOW_ALIASES.items() if v in set(map(How, allowed))}


def test_mode_and_vocabulary_literals_name_the_modes_and_built_in_vocabularies():
    from streamjoin.changes import VocabularyName, vocabularies
    from streamjoin.enrichment.spec import Mode, ModeName

    assert set(typing.get_args(ModeName)) == {m.value for m in Mode}
    assert set(typing.get_args(VocabularyName)) <= {v.name for v in vocabularies()}
    assert {"plain", "delta", "debezium", "debezium_json", "streamjoin"} == set(typing.get_args(VocabularyName))
