"""How each PostgreSQL type arrives, with its extreme and special values, through the slot and
through the snapshot; a value no Arrow type holds sets its change aside instead of stopping the query."""

from __future__ import annotations

import math
from datetime import date, datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pytest

from streamjoin.cdc import connect, create_slot
from streamjoin.changes import pre_stage
from streamjoin.spark.postgres_source import postgres_change_format

pytestmark = pytest.mark.postgres

_SCHEMA = """
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE DOMAIN positive AS integer CHECK (VALUE > 0);
CREATE TABLE kinds (
    id integer PRIMARY KEY, i2 smallint, i8 bigint, f4 real, f8 double precision, dec numeric(10,2),
    anynum numeric, bignum numeric(60,5), flag boolean, txt text, vc varchar(5), ch char(3), uid uuid,
    d date, ts timestamp, tstz timestamptz, arr integer[], doc jsonb, raw bytea, feel mood, pos positive,
    span interval, at time
)"""
_ROWS = [
    "(1, 1, 1, 1.5, 2.25, 3.50, 4.5, 5, true, 'a', 'b', 'c', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
    "'2024-05-01', '2024-05-01 12:00:00.5', '2024-05-01 12:00:00+02', '{1,NULL,3}', '{\"k\": [1, 2.5]}', "
    "'\\x00ff', 'happy', 7, '1 day 2 hours', '12:34:56')",
    "(2, -32768, -9223372036854775808, 'NaN', 'Infinity', 99999999.99, 'NaN', "
    "1234567890123456789012345678901234567890123456789012345.12345, false, '', '', '', NULL, "
    "'infinity', '-infinity', 'infinity', '{}', 'null', '', 'sad', 1, '-1 year', '24:00:00')",
    "(3, 32767, 9223372036854775807, '-Infinity', '-0', -0.01, '-Infinity', 0, NULL, NULL, NULL, NULL, NULL, "
    "'-infinity', 'infinity', '-infinity', NULL, '[]', NULL, NULL, NULL, NULL, NULL)",
    "(4, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, '10000-01-01 00:00', NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL)",
    "(5, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, '0044-03-15 BC', NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL)",
    "(6, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '294276-12-31 23:59:59+00', NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL)",
]
_UTC = timezone.utc
_LATEST = datetime(9999, 12, 31, 23, 59, 59, 999999)
_EARLIEST = datetime(1, 1, 1)


def _reader(dsn: str, slot: str):
    from streamjoin.spark.postgres_source import _Options, _Reader

    return _Reader(_Options({"dsn": dsn, "slot": slot, "table": "public.kinds", "retry_delay": "0.05"}))


def _check_decoded(rows: dict[int, dict]) -> None:
    """Rows 1-3 arrive as documented (docs/postgres.md, "How each type arrives")."""
    one, two, three = rows[1], rows[2], rows[3]
    assert (one["i2"], one["i8"], one["f4"], one["f8"], one["dec"], one["anynum"], one["bignum"]) == (
        1, 1, 1.5, 2.25, Decimal("3.50"), "4.5", "5.00000")
    assert (one["flag"], one["txt"], one["vc"], one["ch"], one["uid"]) == (
        True, "a", "b", "c  ", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
    assert (one["d"], one["ts"], one["tstz"]) == (
        date(2024, 5, 1), datetime(2024, 5, 1, 12, 0, 0, 500000), datetime(2024, 5, 1, 10, tzinfo=_UTC))
    assert (one["arr"], one["doc"], one["raw"], one["feel"], one["pos"], one["span"], one["at"]) == (
        "{1,NULL,3}", '{"k": [1, 2.5]}', "00ff", "happy", "7", "1 day 02:00:00", "12:34:56")
    # wal2json writes NaN and the infinities of real, double and numeric as JSON null: null in both paths
    assert (two["f4"], two["f8"], three["f4"], two["anynum"], three["anynum"]) == (None,) * 5
    assert three["f8"] == 0 and math.copysign(1, three["f8"]) == -1  # -0 keeps its sign
    assert (two["i2"], two["i8"], three["i2"], three["i8"]) == (-32768, -2**63, 32767, 2**63 - 1)
    assert (two["dec"], three["dec"]) == (Decimal("99999999.99"), Decimal("-0.01"))
    assert two["bignum"] == "1234567890123456789012345678901234567890123456789012345.12345"
    assert (two["d"], two["ts"], two["tstz"]) == (_LATEST.date(), _EARLIEST, _LATEST.replace(tzinfo=_UTC))
    assert (three["d"], three["ts"], three["tstz"]) == (_EARLIEST.date(), _LATEST, _EARLIEST.replace(tzinfo=_UTC))
    assert (two["txt"], two["arr"], two["doc"], two["raw"], two["span"], two["at"]) == (
        "", "{}", "null", "", "-1 years", "24:00:00")


def test_reader_decodes_every_type_and_sets_aside_what_arrow_cannot_hold(dsn, slot):
    with connect(dsn) as conn:
        conn.execute(_SCHEMA)
        create_slot(dsn, slot)
        reader = _reader(dsn, slot)
        start = reader.initialOffset()
        for row in _ROWS:
            conn.execute(f"INSERT INTO kinds VALUES {row}")
        end = reader.latestOffset(start, None)
        (partition,) = reader.partitions(start, end)
        batch = pa.Table.from_batches(list(reader.read(partition)))  # never raises
    changes = batch.to_pylist()
    created = {r["after"]["id"]: r["after"] for r in changes if r["op"] == "c"}
    assert sorted(created) == [1, 2, 3]
    _check_decoded(created)
    undecodable = [r for r in changes if r["op"] == "undecodable"]
    assert [(r["before"], r["after"]) for r in undecodable] == [(None, None)] * 3
    assert [r["error"].split(":")[0] for r in undecodable] == ["column ts", "column d", "column tstz"]
    assert undecodable[1]["error"] == "column d: '0044-03-15 BC' does not fit date32[day]"
    assert all(r["error"] is None for r in changes if r["op"] != "undecodable")
    # the joins set such a change aside with its LSN and reason, and go on
    _, staged = pre_stage(batch, postgres_change_format("id"))
    aside = staged.aside.to_pylist()
    assert [(r["_reason"], r["lsn"], r["error"]) for r in aside] == [
        ("unknown op", r["lsn"], r["error"]) for r in undecodable]


def test_postgres_source_schema_of_every_type_is_one_spark_reads(dsn, slot):
    from pyspark.sql.pandas.types import from_arrow_schema

    from streamjoin.cdc import change_schema, table_info

    with connect(dsn) as conn:
        conn.execute(_SCHEMA)
        info = table_info(conn, "kinds")
    schema = from_arrow_schema(change_schema(info.schema), prefer_timestamp_ntz=False)
    assert schema["after"].dataType["dec"].dataType.simpleString() == "decimal(10,2)"
    assert schema["after"].dataType["bignum"].dataType.simpleString() == "string"


def test_create_slot_snapshot_decodes_every_type_and_sets_aside_what_arrow_cannot_hold(dsn, slot):
    with connect(dsn) as conn:
        conn.execute(_SCHEMA)
        for row in _ROWS:
            conn.execute(f"INSERT INTO kinds VALUES {row}")
    start = create_slot(dsn, slot, ["kinds"])
    rows = {r["id"]: r for r in start.snapshot["public.kinds"].to_pylist()}
    assert sorted(rows) == [1, 2, 3]
    _check_decoded(rows)
    aside = start.set_aside["public.kinds"].to_pylist()
    assert [(r["id"], r["_reason"].split(":")[0]) for r in aside] == [
        ("4", "column ts"), ("5", "column d"), ("6", "column tstz")]
