"""``epoch(x)`` gives DuckDB's DOUBLE on Spark, to the last bit.

``dpkit describe`` reads dates and times as ``epoch(x)`` (seconds since 1970), and
synthesis finds a timestamp column's domain on it. SQLGlot writes Spark's
``UNIX_TIMESTAMP``, which cuts the fraction toward zero (-0.5 s became 0) and reads a
TIMESTAMP_NTZ through the session's time zone; the Spark engine now writes DuckDB's own
arithmetic (``dpkit.analytics.engines.spark._epoch_seconds``). Checked here on instants
from year 385 to 2286, whole seconds, single microseconds either side of 1970, with both
engines in time zones other than UTC.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

EPOCH = dt.datetime(1970, 1, 1)


def _micros() -> list[int]:
    rng = random.Random(20261129)
    spread = [rng.randint(-5 * 10**16, 10**16) for _ in range(400)]
    whole = [rng.randint(-(10**10), 10**10) * 10**6 for _ in range(50)]
    edges = [0, -1, 1, 999, -999, 1000, -1000, 10**6 - 1, -(10**6) + 1, 10**6, -(10**6)]
    return sorted(set(spread + whole + edges))


def _on_duckdb(micros: list[int]) -> list[tuple[Any, ...]]:
    import duckdb

    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'Asia/Kolkata'")
    connection.execute("CREATE TABLE t AS SELECT unnest(?) AS u", [micros])
    # make_timestamp(u) is the wall clock of u microseconds; as TIMESTAMPTZ, read in UTC.
    connection.execute("SET TimeZone = 'UTC'")
    connection.execute(
        "CREATE TABLE s AS SELECT u, make_timestamp(u) AS naive, "
        "CAST(make_timestamp(u) AS TIMESTAMPTZ) AS zoned, "
        "CAST(make_timestamp(u) AS DATE) AS day FROM t"
    )
    connection.execute("SET TimeZone = 'Asia/Kolkata'")
    return connection.execute(
        "SELECT u, epoch(naive), epoch(zoned), epoch(day) FROM s ORDER BY u"
    ).fetchall()


def _on_spark(spark: Any, micros: list[int]) -> list[tuple[Any, ...]]:
    from pyspark.sql import types as T  # noqa: N812 - PySpark's own convention

    from dpkit.analytics.engines.spark import SparkEngine

    rows = [(u, EPOCH + dt.timedelta(microseconds=u)) for u in micros]
    schema = T.StructType(
        [T.StructField("u", T.LongType()), T.StructField("naive", T.TimestampNTZType())]
    )
    # timestamp_micros(u) is the instant u (Spark's TIMESTAMP), whatever the time zone.
    frame = spark.createDataFrame(rows, schema).selectExpr(
        "u", "naive", "timestamp_micros(u) AS zoned", "CAST(naive AS DATE) AS day"
    )
    engine = SparkEngine(frame)
    engine._spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        columns = ", ".join(engine.expression(f"epoch({c})") for c in ("naive", "zoned", "day"))
        return engine._execute(f"SELECT u, {columns} FROM {engine.relation} ORDER BY u")
    finally:
        engine._spark.conf.unset("spark.sql.session.timeZone")


def test_epoch_is_duckdbs_double_on_spark(spark: Any) -> None:
    micros = _micros()
    duck = _on_duckdb(micros)
    sparked = [tuple(row) for row in _on_spark(spark, micros)]
    assert len(sparked) == len(duck) == len(micros)
    for ours, theirs in zip(sparked, duck, strict=True):
        assert ours == theirs, (ours, theirs)
    # The fraction is kept (UNIX_TIMESTAMP would have cut it).
    assert any(row[1] != int(row[1]) for row in duck)


def test_epoch_of_a_date_past_year_294000_is_duckdbs_number_on_spark(spark: Any) -> None:
    """SQLGlot wrote ``unix_date(d)`` back as ``DATEDIFF(DAY, DATE '1970-01-01', d)``,
    which Spark computes through microseconds: it raised "long overflow" on such a date,
    after the charge, on one row's value (found by an adversarial review, issue 34).
    DuckDB's epoch of DATE '300000-01-01' is 108,853,222 days of 86,400 s."""
    from dpkit.analytics.engines.spark import SparkEngine

    frame = spark.sql("SELECT make_date(300000, 1, 1) AS d UNION ALL SELECT DATE '2020-01-01'")
    engine = SparkEngine(frame)
    rows = engine._execute(f"SELECT {engine.expression('epoch(d)')} FROM {engine.relation}")
    assert sorted(row[0] for row in rows) == [1577836800.0, 108853222 * 86400.0]
