"""The flush source's registration: defining several streaming joins in one session registers it
once, so Spark does not log a warning at every join (its log captured through log4j)."""

from __future__ import annotations

import pytest

from streamjoin import interval_join

pytestmark = pytest.mark.spark

_MANAGER = "org.apache.spark.sql.execution.datasources.DataSourceManager"


@pytest.fixture
def warnings_logged(spark):
    """The text of what Spark's data source registry logs at WARN during the test."""
    jvm = spark._jvm
    log4j = jvm.org.apache.logging.log4j
    writer = jvm.java.io.StringWriter()
    layout = log4j.core.layout.PatternLayout.newBuilder().withPattern("%p %m%n").build()
    appender = log4j.core.appender.WriterAppender.newBuilder().setName("streamjoin-test").setTarget(writer) \
        .setLayout(layout).build()
    appender.start()
    logger = log4j.LogManager.getLogger(_MANAGER)
    level = logger.getLevel()
    logger.addAppender(appender)
    log4j.core.config.Configurator.setLevel(_MANAGER, log4j.Level.WARN)
    try:
        yield writer.toString
    finally:
        logger.removeAppender(appender)
        log4j.core.config.Configurator.setLevel(_MANAGER, level)
        appender.stop()


def test_flush_source_is_registered_once_for_several_joins(spark, tmp_path, warnings_logged):
    read = spark.readStream.schema("k bigint, t timestamp")
    for i in range(3):
        (tmp_path / f"in{i}").mkdir()
        stream = read.parquet(str(tmp_path / f"in{i}"))
        interval_join(stream, stream, "k", left_time="t", right_time="t", lower="0 seconds", upper="1 second",
                      delay="0 seconds", checkpoint=str(tmp_path / f"join{i}"))
    assert "streamjoin_flush" not in warnings_logged()
