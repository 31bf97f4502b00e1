"""The SQL front door: GoogleSQL's DP SELECT -> the builder's Query, on the one path.

Attacks on it are in tests/adversarial/test_sql_attacks.py; the grammar property test
(refused on every table of a schema, or answered on every one) in
tests/properties/test_sql_grammar.py.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import Explanation, KeySet, Query
from dpkit.errors import SqlError


def _frames() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(3)
    n = 500
    visits = pd.DataFrame(
        {
            "uid": rng.integers(0, 60, n),
            "region_id": rng.integers(0, 4, n),
            "duration": rng.uniform(0, 3600, n),
            "day": pd.to_datetime("2024-01-01")
            + pd.to_timedelta(rng.integers(-30, 30, n), unit="D"),
        }
    )
    people = pd.DataFrame({"uid": np.arange(60), "age": rng.integers(18, 90, 60)})
    regions = pd.DataFrame({"region_id": [0, 1, 2, 3], "region": ["n", "s", "e", "w"]})
    return {"visits": visits, "people": people, "regions": regions}


def _session(budget: dp.Guarantee | None = None) -> dp.Session:
    f = _frames()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        return dp.Session.from_tables(
            {"visits": f["visits"], "people": f["people"]},
            privacy_unit="uid",
            public={"regions": f["regions"]},
            budget=budget or dp.ApproxDP(10.0, 1e-5),
            rng=11,
        )


def _plan(session: dp.Session, query: Query, budget: Any) -> Any:
    view, stripped = session._view_for(query, 99)
    compiled = view._compile(stripped, budget, 99)
    assert view._view is not None
    return compiled.plan, compiled.charge, view._view.relation, view._view.params


HEADER = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6"

TWINS = [
    (
        HEADER + ", max_groups_contributed = 2, max_rows_contributed = 5) "
        "region, COUNT(*) AS visits, AVG(duration, contribution_bounds_per_row => (0, 3600))"
        " AS avg_duration FROM visits JOIN regions USING (region_id) GROUP BY region",
        Query.from_table("visits")
        .join("regions", {"region_id": "region_id"})
        .group_by("region", keys=KeySet.from_table("regions", "region"))
        .bound(max_groups=2, max_rows=5)
        .count(name="visits")
        .mean("duration", bounds=(0.0, 3600.0), name="avg_duration"),
    ),
    (
        HEADER + ", max_rows_contributed = 3, join_truncate = 1) "
        "COUNT(DISTINCT uid) AS persons, SUM(duration * 2, contribution_bounds_per_row => "
        "(0, 100)) AS s FROM visits v JOIN people p ON v.uid = p.uid WHERE p.age >= 30",
        Query.from_table("visits")
        .join("people", {"uid": "uid"}, truncate=1)
        .with_column("s_value", '"duration" * 2')
        .filter('"age" >= 30')
        .bound(max_rows=3)
        .count_distinct(name="persons")
        .sum("s_value", bounds=(0.0, 100.0), name="s"),
    ),
    (
        HEADER + ") PERCENTILE_CONT(duration, 0.5, contribution_bounds_per_row => (0, 3600))"
        " AS median_duration, MAX(duration, contribution_bounds_per_row => (0, 3600)) AS top"
        " FROM visits",
        Query.from_table("visits")
        .bound(max_rows=1)
        .quantile("duration", 0.5, bounds=(0.0, 3600.0), name="median_duration")
        .max("duration", bounds=(0.0, 3600.0), name="top"),
    ),
    (
        HEADER + ", max_groups_contributed = 3) region_id, "
        "VAR_POP(duration, contribution_bounds_per_row => (0, 3600)) AS v "
        "FROM visits GROUP BY region_id",
        Query.from_table("visits")
        .group_by("region_id", keys="private")
        .bound(max_groups=3, max_rows=1)
        .variance("duration", bounds=(0.0, 3600.0), name="v"),
    ),
]


@pytest.mark.parametrize(
    ("sql", "twin"), TWINS, ids=["public join", "private join", "order", "selection"]
)
def test_sql_and_its_builder_twin_compile_to_the_same_plan(sql: str, twin: Query) -> None:
    session = _session()
    statement = session.sql_query(sql)
    assert statement.query is not None
    budget = dp.ApproxDP(1.0, 1e-6)
    assert statement.budget == budget
    assert _plan(session, statement.query, budget) == _plan(session, twin, budget)


def test_a_statement_runs_charges_its_options_and_orders_its_rows() -> None:
    session = _session(dp.PureDP(10.0))
    result = session.sql(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 2, max_groups_contributed = 1,"
        " max_rows_contributed = 10) region AS place, COUNT(*) AS n, "
        "STDDEV(duration, contribution_bounds_per_row => (0, 3600)) AS sd "
        "FROM visits JOIN regions USING (region_id) GROUP BY region ORDER BY n DESC LIMIT 3"
    )
    frame = result.dataframe
    assert list(frame.columns[:2]) == ["place", "n"] and len(frame) == 3
    assert (np.diff(frame["n"].to_numpy()) <= 0).all()
    # A standard deviation: the square root of the released variance, never negative.
    assert (frame["sd"] >= 0).all() and (frame["sd_low"] <= frame["sd_high"]).all()
    assert session.spent == dp.PureDP(2.0)
    assert len(session.history) == 1 and "regions" in session.history[0].description


def test_budget_in_python_replaces_the_options() -> None:
    session = _session(dp.PureDP(5.0))
    session.sql(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 3) COUNT(*) AS n FROM visits",
        budget=dp.PureDP(0.5),
    )
    assert session.spent == dp.PureDP(0.5)


def test_explain_spends_nothing_and_shows_the_joins() -> None:
    session = _session()
    sql = (
        "EXPLAIN SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, join_truncate = 1) "
        "COUNT(*) AS n FROM visits JOIN people USING (uid) JOIN regions USING (region_id)"
    )
    explained = session.sql(sql)
    assert isinstance(explained, Explanation)
    assert "join people" in str(explained) and "join regions" in str(explained)
    assert str(session.explain_sql(sql[len("EXPLAIN ") :])) == str(explained)
    assert not session.history


def test_a_select_over_public_tables_only_is_exact_and_free() -> None:
    session = _session()
    frame = session.sql("SELECT region FROM regions WHERE region_id >= 2 ORDER BY region")
    assert frame["region"].tolist() == ["e", "w"]
    assert not session.history


@pytest.mark.parametrize(
    ("sql", "match", "at"),
    [
        ("SELECT COUNT(*) FROM visits", "must be SELECT WITH DIFFERENTIAL_PRIVACY", "visits"),
        (
            HEADER + ")\n  SUM(nope, contribution_bounds_per_row => (0, 1)) FROM visits",
            "Unknown column 'nope'",
            "nope",
        ),
        (HEADER + ")\n  SUM(duration) FROM visits", "needs bounds", "SUM"),
        (HEADER + ")\n  COUNT(*) FROM (SELECT * FROM visits)", "subquery", "* FROM visits"),
        (HEADER + ", colour = 1) COUNT(*) FROM visits", "Unknown option 'colour'", "colour"),
        (
            HEADER + ") COUNT(*) FROM visits JOIN people USING (uid)",
            "join_truncate",
            "people",
        ),
        (HEADER + ") region_id FROM visits", "must be in GROUP BY", "region_id"),
        (HEADER + ") COUNT(*) FROM nowhere", "Unknown table 'nowhere'", "nowhere"),
        (HEADER + ") COUNT(*) FROM regions", "is public", "regions"),
        (
            HEADER + ", privacy_unit_column = person) COUNT(*) FROM visits",
            "privacy unit",
            "privacy_unit_column",
        ),
        (
            HEADER + ") VAR_SAMP(duration, contribution_bounds_per_row => (0, 1)) FROM visits",
            "use VAR_POP",
            "VAR_SAMP",
        ),
        (HEADER + ") COUNT(*) FROM visits ORDER BY uid", "not an output column", "uid"),
        (
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1 COUNT(*) FROM visits",
            "Expected ',' or '\\)'",
            "COUNT",
        ),
        (HEADER + ") COUNT(*) FROM visits\nWHERE day >= 5", "cannot type this", "day >= 5"),
        (HEADER + ") COUNT(*) FROM visits WHERE duration", "WHERE takes a condition", "duration"),
        (
            HEADER + ") SUM(region, contribution_bounds_per_row => (0, 1)) "
            "FROM visits JOIN regions USING (region_id)",
            "SUM needs a number; this is of type VARCHAR",
            "region, contribution",
        ),
        (
            HEADER + ") MAX(day, contribution_bounds_per_row => (0, 1)) FROM visits",
            "MAX needs a number",
            "day, contribution",
        ),
        (
            HEADER + ") COUNT(*) FROM (SELECT uid, SUM(region) AS s FROM visits "
            "JOIN regions USING (region_id) GROUP BY uid) AS p",
            "SUM needs a number",
            "SUM(region)",
        ),
        (
            HEADER + ") COUNT(*) FROM (SELECT uid, COUNT(*) AS c FROM visits "
            "WHERE upper(duration) = 'A' GROUP BY uid) AS p",
            "cannot type this",
            "upper(duration)",
        ),
    ],
    ids=[
        "non-DP select over a private table",
        "unknown column",
        "bounds missing",
        "subquery",
        "unknown option",
        "private join without join_truncate",
        "column outside GROUP BY",
        "unknown table",
        "public base table",
        "another privacy unit",
        "sample variance",
        "order by a non-output column",
        "options not closed",
        "a type error in WHERE",
        "WHERE without a condition",
        "SUM of text",
        "MAX of a timestamp",
        "a person's SUM of text",
        "a type error in a subquery's WHERE",
    ],
)
def test_errors_are_sql_errors_with_a_position(sql: str, match: str, at: str) -> None:
    session = _session()
    with pytest.raises(SqlError, match=match) as caught:
        session.sql(sql)
    # The position of the offending text (its last occurrence), 1-based.
    start = sql.rindex(at)
    line = sql[:start].count("\n") + 1
    column = start - (sql[:start].rfind("\n") + 1) + 1
    assert (caught.value.line, caught.value.column) == (line, column)
    assert not session.history


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_type_errors_are_located_by_the_engine_that_runs_the_query(
    engine: str, request: pytest.FixtureRequest
) -> None:
    if engine == "spark":
        request.getfixturevalue("spark")
    frame = pd.DataFrame(
        {
            "uid": [1, 2, 3],
            "name": ["a", "b", "c"],
            "x": [1.0, 2.0, 3.0],
            "day": pd.to_datetime(["2024-01-01"] * 3),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_tables(
            {"t": frame}, privacy_unit="uid", budget=dp.PureDP(1.0), rng=3, engine=engine
        )
    head = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5)\n"
    cases = [
        ("COUNT(*) FROM t WHERE day >= 5", "cannot type this expression", "day >= 5"),
        ("COUNT(*) FROM t WHERE x", "WHERE takes a condition", "x"),
        ("SUM(name, contribution_bounds_per_row => (0, 1)) FROM t", "needs a number", "name,"),
    ]
    for tail, match, at in cases:
        with pytest.raises(SqlError, match=match) as caught:
            session.sql(head + tail)
        assert (caught.value.line, caught.value.column) == (2, tail.rindex(at) + 1)
    assert not session.history


def test_group_by_a_select_alias_groups_by_its_expression() -> None:
    # GROUP BY may name a SELECT alias, as in BigQuery; a column of that name wins.
    session = _session()
    by_alias = session.sql_query(
        HEADER + ") region_id + 1 AS r, COUNT(*) AS n FROM visits GROUP BY r"
    )
    by_expression = session.sql_query(
        HEADER + ") region_id + 1 AS r, COUNT(*) AS n FROM visits GROUP BY region_id + 1"
    )
    assert by_alias.query == by_expression.query
    assert by_alias.renames == by_expression.renames and by_alias.columns == ("r", "n")
    shadowed = HEADER + ") duration AS uid, COUNT(*) AS n FROM visits GROUP BY uid"
    with pytest.raises(SqlError, match="must be in GROUP BY"):
        session.sql(shadowed)
    assert not session.history


def test_a_single_table_session_takes_any_table_name() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_pandas(
            _frames()["visits"], privacy_unit="uid", budget=dp.PureDP(1.0), rng=2
        )
    statement = session.sql_query(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, max_rows_contributed = 4) "
        "COUNT(*) AS n FROM visits WHERE duration > 10"
    )
    twin = Query().filter('"duration" > 10').bound(max_rows=4).count(name="n")
    assert statement.query == twin
    with pytest.raises(SqlError, match="joins need"):
        session.sql_query(
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM a JOIN b "
            "USING (x)"
        )


def test_an_inner_join_key_is_its_left_value_and_ambiguous_on_columns_are_refused() -> None:
    session = _session()
    written = session.sql_query(
        HEADER + ", join_truncate = 1) COUNT(*) AS n FROM visits JOIN regions "
        "ON visits.region_id = regions.region_id WHERE regions.region_id >= 2"
    )
    qualified = session.sql_query(
        HEADER + ", join_truncate = 1) COUNT(*) AS n FROM visits v JOIN regions r "
        "ON v.region_id = r.region_id WHERE v.region_id >= 2"
    )
    assert written.query == qualified.query
    with pytest.raises(SqlError, match="ambiguous or unknown"):
        session.sql_query(
            HEADER + ") COUNT(*) AS n FROM visits JOIN regions ON region_id = region_id"
        )


def test_unambiguous_on_columns_may_be_unqualified() -> None:
    frames = _frames()
    people = frames["people"].rename(columns={"uid": "person"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_tables(
            {"visits": frames["visits"], "people": people},
            privacy_unit={"visits": "uid", "people": "person"},
            budget=dp.PureDP(1.0),
            rng=1,
        )
    written = session.sql_query(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, join_truncate = 1) COUNT(*) "
        "AS n FROM visits JOIN people ON uid = person WHERE person > 3"
    )
    twin = (
        Query.from_table("visits")
        .join("people", {"uid": "person"}, truncate=1)
        .filter('"uid" > 3')
        .bound(max_rows=1)
        .count(name="n")
    )
    assert written.query == twin


def test_post_processing_never_loses_a_charged_release(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpkit.analytics.session as session_module

    def broken(result: Any, statement: Any) -> Any:
        raise TypeError("ordering failed")

    monkeypatch.setattr(session_module, "finish_result", broken)
    session = _session(dp.PureDP(5.0))
    result = session.sql(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) AS n FROM visits "
        "ORDER BY n"
    )
    assert "n" in result.dataframe and any("could not be applied" in n for n in result.notes)
    assert session.spent == dp.PureDP(1.0)
