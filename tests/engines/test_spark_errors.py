"""The Session's error rule on Spark: success and errors depend on the schema and
public parameters only (docs/analytics.md, "Threat model").

Spark 4 runs in ANSI mode by default, where a bad CAST, a division by zero or an
overflow raises on the row that causes it. The attacks of
tests/adversarial/test_expression_oracles.py run here on Spark DataFrames: the
transcript the attacker sees must be identical on neighbouring tables.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import Query
from dpkit.errors import EngineError, InvalidParameter

TINY = dp.PureDP(1e-6)


def staff(salary_of_alice: float | None) -> pd.DataFrame:
    rows = [
        ("alice", "north", salary_of_alice, 5, 4),
        ("bob", "south", 41_000.0, 2, 3),
        ("carol", "north", 58_000.0, 9, 7),
        ("dan", "east", 36_500.0, 1, 1),
    ]
    if salary_of_alice is None:
        rows = rows[1:]
    return pd.DataFrame(rows, columns=["name", "region", "salary", "clicks", "visits"])


def transcript(spark: Any, frame: pd.DataFrame, queries: list[Query]) -> list[str]:
    session = dp.Session.from_spark(spark.createDataFrame(frame), budget=dp.PureDP(1.0), rng=0)
    seen = []
    for query in queries:
        try:
            session.evaluate(query, budget=TINY)
            seen.append("ok")
        except dp.DPError as err:
            seen.append(f"{type(err).__name__}: {err}")
    seen.append(f"spent {session.spent!r}")
    return seen


ATTACKS = {
    "cast": "CASE WHEN name = 'alice' AND salary >= {t} THEN CAST('x' AS INTEGER) ELSE 1 END = 1",
    "integer-division-by-zero": "CASE WHEN name = 'alice' AND salary >= {t} THEN clicks // 0 "
    "ELSE 1 END = 1",
    "division-by-zero": "CASE WHEN name = 'alice' AND salary >= {t} THEN clicks / 0 ELSE 1 END = 1",
    "modulo-by-zero": "CASE WHEN name = 'alice' AND salary >= {t} THEN clicks % 0 ELSE 1 END = 1",
    "integer-overflow": "CASE WHEN name = 'alice' AND salary >= {t} THEN "
    "CAST(9223372036854775807 AS BIGINT) + clicks ELSE 1 END = 1",
    "multiplication-overflow": "CASE WHEN name = 'alice' AND salary >= {t} THEN "
    "CAST(9223372036854775807 AS BIGINT) * clicks ELSE 1 END = 1",
    "narrowing-cast": "CAST(CASE WHEN name = 'alice' AND salary >= {t} THEN 1000 ELSE 1 END "
    "AS TINYINT) = 1",
    "date-cast": "CAST(CASE WHEN salary >= {t} THEN 'not a date' ELSE '2020-01-01' END AS DATE) "
    "> DATE '2000-01-01'",
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_error_oracle_answers_the_same_on_neighbours(spark: Any, attack: str) -> None:
    queries = [Query().filter(ATTACKS[attack].format(t=t)).count() for t in (0, 45_000, 60_000)]
    low = transcript(spark, staff(52_000.0), queries)
    high = transcript(spark, staff(30_000.0), queries)
    assert low == high == transcript(spark, staff(None), queries)
    assert all(outcome == "ok" for outcome in low[:-1])


def test_regular_expressions_must_be_literals_on_spark(spark: Any) -> None:
    # A pattern read from a row ('(' on alice's row only) would make Spark raise while
    # reading: refused before anything runs, whatever the rows.
    probe = "regexp_matches('abc', CASE WHEN name = 'alice' THEN '(' ELSE 'a' END)"
    for frame in (staff(52_000.0), staff(None)):
        session = dp.Session.from_spark(spark.createDataFrame(frame), budget=dp.PureDP(1.0))
        with pytest.raises(EngineError, match="literal"):
            session.evaluate(Query().filter(probe).count(), budget=TINY)
        assert session.spent == dp.PureDP(0.0)
    session = dp.Session.from_spark(spark.createDataFrame(staff(1.0)), budget=dp.PureDP(1.0))
    with pytest.raises(EngineError):  # a bad literal pattern fails at binding, on any data
        session.evaluate(Query().filter("regexp_matches(name, '(')").count(), budget=TINY)
    assert session.spent == dp.PureDP(0.0)
    session.evaluate(Query().filter("regexp_matches(name, '^a')").count(), budget=TINY)


def test_schema_level_error_is_reported_before_the_charge(spark: Any) -> None:
    session = dp.Session.from_spark(spark.createDataFrame(staff(1.0)), budget=dp.PureDP(1.0))
    with pytest.raises((EngineError, InvalidParameter, dp.DPError)):
        session.evaluate(Query().filter("strlen(name) > 2").count(), budget=TINY)
    assert session.spent == dp.PureDP(0.0)


def test_a_failure_while_reading_keeps_the_charge_and_names_the_class_only(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = dp.Session.from_spark(spark.createDataFrame(staff(52_000.0)), budget=dp.PureDP(1.0))
    engine = session._engine

    def failing(sql: str, params: Any) -> Any:
        class Reading:
            schema = None

            def collect(self) -> Any:
                raise RuntimeError("row alice has salary 52000")

        return Reading()

    monkeypatch.setattr(engine, "_dataframe", failing)
    monkeypatch.setattr(engine, "_bind", lambda sql, params: None)
    with pytest.raises(EngineError) as caught:
        session.evaluate(Query().count(), budget=TINY)
    assert "52000" not in str(caught.value) and "RuntimeError" in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert session.spent == TINY


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql import SparkSession

    from dpkit.analytics.engines import spark as spark_engine

    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(spark_engine.shutil, "which", lambda name: None)
    with pytest.raises(InvalidParameter, match="Java"):
        spark_engine.spark_session("test")


def test_a_spark_job_failure_raises_engine_error_and_spends_alike_on_neighbours(
    spark: Any,
) -> None:
    # A real Spark job failure while rows are read: the DataFrame handed to the Session
    # computes a column with a Python function that fails on one row (as an executor
    # lost or a corrupt file would fail the job). The query is charged before it runs,
    # so the table where the job fails and its neighbour without that row spend alike,
    # and the error names the failure's class only.
    from pyspark.sql import functions, types

    def fail_on_alice(salary):  # type: ignore[no-untyped-def]  # PySpark reads hints
        if salary == 52_000.0:
            raise ValueError("alice earns 52000")
        return salary

    fragile = functions.udf(fail_on_alice, types.DoubleType())

    outcomes, spent = [], []
    for salary in (52_000.0, None):
        frame = spark.createDataFrame(staff(salary)).withColumn("salary", fragile("salary"))
        session = dp.Session.from_spark(frame, budget=dp.PureDP(1.0))
        try:
            session.evaluate(Query().sum("salary", bounds=(0.0, 1e5)), budget=TINY)
            outcomes.append("ok")
        except EngineError as err:
            assert "52000" not in str(err) and "alice" not in str(err)
            assert err.__cause__ is None
            outcomes.append(str(err))
        spent.append(session.spent)
    assert outcomes[0].startswith("Spark failed while reading the data") and outcomes[1] == "ok"
    assert spent == [TINY, TINY]
