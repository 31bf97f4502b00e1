"""A Spark statement bound before the charge is analysed once: its run reuses the
DataFrame Spark analysed when it was bound (``SparkEngine._analysed``).

The run must give what a statement analysed afresh gives, a statement is reused once
only, a statement bound with other parameters (values or types) is another statement,
and the engine keeps a bounded number of bound statements (a bound statement may
never run).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import Query
from dpkit.analytics.engines import spark as spark_module


def _engine(spark: Any) -> Any:
    frame = pd.DataFrame({"p": [1, 1, 2, 3, 3, 3], "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    session = dp.Session.from_spark(
        spark.createDataFrame(frame), privacy_unit="p", budget=dp.PureDP(1.0)
    )
    return session._engine


def test_a_bound_statement_runs_its_analysed_dataframe_once(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine(spark)
    analysed: list[str] = []
    fresh = engine._dataframe

    def counting(sql: str, params: Any) -> Any:
        analysed.append(sql)
        return fresh(sql, params)

    monkeypatch.setattr(engine, "_dataframe", counting)
    sql = f"SELECT count(*) AS n, sum(x) AS s FROM {engine.relation} WHERE x > ?"
    engine._bind(sql, [2.0])
    assert engine._execute(sql, [2.0]) == [(4, 18.0)]
    assert analysed == [sql]  # analysed when bound, run without a second analysis
    assert engine._execute(sql, [2.0]) == [(4, 18.0)]  # once only: analysed again
    assert len(analysed) == 2
    engine._bind(sql, [2.0])
    assert engine._execute(sql, [5.0]) == [(1, 6.0)]  # other values: another statement
    assert engine._execute(sql, [2]) == [(4, 18.0)]  # another type too
    assert len(analysed) == 5


def test_the_engine_keeps_a_bounded_number_of_bound_statements(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine(spark)
    monkeypatch.setattr(spark_module, "_MAX_ANALYSED", 3)
    sql = f"SELECT count(*) FROM {engine.relation} WHERE x > ?"
    for value in range(6):
        engine._bind(sql, [float(value)])
    assert len(engine._analysed) == 3
    assert [key[1][0][1] for key in engine._analysed] == [3.0, 4.0, 5.0]  # newest kept


@pytest.mark.filterwarnings("ignore::dpkit.errors.InsecureRandomWarning")
def test_a_session_query_on_spark_gives_its_results_with_the_reuse(spark: Any) -> None:
    """A Session's own query end to end, seeded: the release DuckDB gives."""
    frame = pd.DataFrame({"p": [1, 1, 2, 3, 3, 3], "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    query = Query().bound(max_rows=2).count().sum("x", bounds=(0.0, 10.0))
    on_spark = dp.Session.from_spark(
        spark.createDataFrame(frame), privacy_unit="p", budget=dp.PureDP(1.0), rng=4
    )
    on_duckdb = dp.Session.from_pandas(frame, privacy_unit="p", budget=dp.PureDP(1.0), rng=4)
    a = on_spark.evaluate(query, budget=dp.PureDP(0.5)).dataframe
    b = on_duckdb.evaluate(query, budget=dp.PureDP(0.5)).dataframe
    pd.testing.assert_frame_equal(a, b)
