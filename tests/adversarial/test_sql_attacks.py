"""The SQL front door (``Session.sql``, ``explain_sql``, ``sql_query``): attacks written
as an analyst who knows the schema and the public tables but no row would write them.

The threat model (docs/analytics.md, "Threat model"; DESIGN.md) applies unchanged to
SQL text: (1) nothing fails after the charge -- every refusal comes before it and
depends on the statement, the schema and the public parameters only; (2) the engine's
equality is the only equality; (3) per-row cost is bounded by public constants. On top,
the front door's own promise (``dpkit.analytics._sql_query``): the analyst's SQL text
never reaches the private engine -- a statement becomes the same ``Query`` the Python
builder makes, so every expression passes the allowlisted-expression validator, and a
plain ``SELECT`` runs only on the connection that holds the public tables.

Each test states the attack, then what must hold. An attack that still works is kept,
marked ``xfail(strict=True)`` with the defect as its reason, so that the fix turns it
green and the marker must then be removed.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.errors import SqlError

#: The secret the attacker wants: a value present in the private tables only.
SECRET_ID = 987_654_321
SECRET_AMOUNT = 31_337.25
#: Refusals the threat model allows before the charge (SqlError is an InvalidParameter;
#: BudgetExceeded depends on public parameters only).
REFUSALS = (dp.InvalidParameter, dp.DataError, dp.BudgetExceeded)
DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6) "
CHEAP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.01, delta = 1e-9) "
DP_KEYS = DP.replace("1e-6)", "1e-6, group_keys = regions)")


# --------------------------------------------------------------------------- helpers
def staff(salary_of_alice: float = 52_000.0, n_others: int = 0) -> pd.DataFrame:
    rows = [
        (SECRET_ID, "n", salary_of_alice, 30),
        (2, "s", 41_000.0, 40),
        (3, "n", 58_000.0, 50),
        (4, "e", 36_500.0, 60),
    ]
    rows += [(10 + i, ("n", "s")[i % 2], 30_000.0 + i, 20 + i % 50) for i in range(n_others)]
    return pd.DataFrame(rows, columns=["uid", "region", "salary", "age"])


def visits(n: int = 4, region_of_first: str = "n") -> pd.DataFrame:
    regions = [region_of_first] + [("n", "s", "e", "w")[i % 4] for i in range(1, n)]
    return pd.DataFrame(
        {
            "uid": [SECRET_ID, *range(1, n)],
            "region": regions,
            "amount": [SECRET_AMOUNT, *(float(i) for i in range(1, n))],
        }
    )


REGIONS = pd.DataFrame({"region": ["n", "s", "e"], "name": ["North", "South", "East"]})


def single(frame: pd.DataFrame | None = None, **kwargs: Any) -> dp.Session:
    kwargs.setdefault("budget", dp.ApproxDP(10.0, 1e-5))
    return dp.Session.from_pandas(
        staff() if frame is None else frame, privacy_unit="uid", rng=0, **kwargs
    )


def multi(frame: pd.DataFrame | None = None) -> dp.Session:
    return dp.Session.from_tables(
        {"visits": visits() if frame is None else frame, "people": staff()},
        privacy_unit="uid",
        public={"regions": REGIONS},
        budget=dp.ApproxDP(10.0, 1e-5),
        rng=0,
    )


@functools.cache
def _opened_once(kind: str) -> tuple[dp.Session, object]:
    session = single() if kind == "single" else multi()
    return session, _left(session)


def unspent(kind: str) -> dp.Session:
    """``single()`` or ``multi()``, opened once per process, for the tests whose
    statements must all be refused before the charge (a Session costs ~40 ms (single)
    or ~90 ms (multi) to open, a refusal ~15 ms). Checked unspent before each use (its
    budget, selection delta and history as opened): a statement that ran by mistake in
    one test fails every later user of the Session too, and can never let a later
    refusal pass for want of budget."""
    session, opened = _opened_once(kind)
    assert _left(session) == opened, (kind, _left(session), opened)
    return session


def _left(session: dp.Session) -> object:
    try:
        return (session.remaining, session.remaining_selection_delta, len(session.history))
    except dp.DPError as err:
        return f"unreadable: {type(err).__name__}"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """``ok``, ``refused`` (a dpkit refusal with nothing charged), ``failed`` (anything
    after a charge, or an exception that is not a dpkit refusal)."""

    kind: str
    error: str = ""
    value: Any = dataclasses.field(default=None, compare=False)


def attempt(session: dp.Session, run: Callable[[], Any]) -> Outcome:
    before = _left(session)
    try:
        value = run()
    except Exception as err:
        text = f"{type(err).__name__}: {err}"
        if isinstance(err, REFUSALS) and _left(session) == before:
            return Outcome("refused", text)
        return Outcome("failed", text)
    return Outcome("ok", value=value)


def sql(session: dp.Session, text: str, **kwargs: Any) -> Outcome:
    return attempt(session, lambda: session.sql(text, **kwargs))


def assert_refused(session: dp.Session, text: str, kind: type[Exception] = SqlError) -> str:
    """``text`` is refused before the charge with a ``kind``; nothing spent."""
    before = _left(session)
    with pytest.raises(kind) as info:
        session.sql(text)
    assert _left(session) == before
    return str(info.value)


def assert_no_secret(frame: Any) -> None:
    values = {str(v) for v in np.asarray(frame).ravel()} if len(frame) else set()
    assert str(SECRET_ID) not in values and str(SECRET_AMOUNT) not in values


# ------------------------------------------------------------------ several statements
@pytest.mark.parametrize(
    "tail",
    [
        "; DROP TABLE data",
        "; SELECT * FROM data",
        ";\nSELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM data",
        "; PRAGMA enable_external_access",
        "\x00; SELECT 1",
    ],
)
def test_a_second_statement_is_refused(tail: str) -> None:
    session = single()
    assert_refused(session, DP + "COUNT(*) FROM data" + tail)
    # The table is intact: the honest statement still runs, charged once.
    assert sql(session, DP + "COUNT(*) FROM data").kind == "ok"
    assert len(session.history) == 1


@pytest.mark.parametrize(
    "text",
    [
        DP + "COUNT(*) AS n FROM data -- ; SELECT * FROM data",
        DP + "COUNT(*) AS n FROM data /* ; SELECT * FROM data */",
        DP + "COUNT(*) AS n /* */ FROM /* x */ data WHERE region = 'n' -- ; DROP TABLE data",
        "SELECT /* c */ WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1 /* ) , x = ( */)"
        " COUNT(*) AS n FROM data",
    ],
)
def test_comments_hide_nothing(text: str) -> None:
    # A comment is a comment to the translator and never reaches an engine: the
    # statement runs as the one DP count it shows, charged once.
    session = single()
    outcome = sql(session, text)
    assert outcome.kind == "ok", outcome
    assert set(outcome.value.columns) == {"n", "n_se", "n_low", "n_high"}
    assert len(session.history) == 1


# ------------------------------------------------------------------ subqueries, tables
SUBQUERIES = [
    DP + "COUNT(*) FROM data WHERE region IN (SELECT region FROM data)",
    DP + "COUNT(*) FROM data WHERE EXISTS (SELECT 1 FROM data WHERE uid = 987654321)",
    DP + "COUNT(*) FROM data WHERE salary > (SELECT MAX(salary) FROM data)",
    DP + "COUNT(*) FROM data WHERE salary > (SELECT 1)",
    DP + "COUNT(*) FROM (SELECT * FROM data)",
    DP + "COUNT(*) FROM (SELECT * FROM data) AS d",
    DP + "SUM(salary, contribution_bounds_per_row => (0, (SELECT MAX(age) FROM data))) FROM data",
    DP + "COUNT(*) FROM data GROUP BY (SELECT 1)",
    DP + "SUM((SELECT 1), contribution_bounds_per_row => (0, 1)) FROM data",
    DP + "COUNT(DISTINCT (SELECT uid FROM data LIMIT 1)) FROM data",
    "WITH d AS (SELECT * FROM data) " + DP + "COUNT(*) FROM d",
    DP + "COUNT(*) FROM data UNION ALL SELECT uid FROM data",
    "(" + DP + "COUNT(*) FROM data)",
    "SELECT * FROM data",
    "SELECT COUNT(*) FROM data",
    "EXPLAIN SELECT * FROM data",
    "EXPLAIN EXPLAIN " + DP + "COUNT(*) FROM data",
    "EXPLAIN ANALYZE " + DP + "COUNT(*) FROM data",
]


@pytest.mark.parametrize("text", SUBQUERIES)
def test_subqueries_and_plain_selects_over_the_private_table_are_refused(text: str) -> None:
    assert_refused(unspent("single"), text)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT * FROM regions UNION ALL SELECT region, CAST(uid AS STRING) FROM visits",
        "SELECT * FROM regions WHERE region IN (SELECT region FROM visits)",
        "SELECT * FROM regions WHERE EXISTS (SELECT 1 FROM people WHERE uid = 987654321)",
        "WITH x AS (SELECT * FROM visits) SELECT * FROM x",
        "WITH regions AS (SELECT * FROM visits) SELECT * FROM regions",
        "SELECT (SELECT MAX(amount) FROM visits) FROM regions",
        "SELECT * FROM regions JOIN visits USING (region)",
        "SELECT * FROM regions, people",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM regions, read_parquet('/tmp/x.parquet')",
        "SELECT * FROM glob('/*')",
        "SELECT * FROM query_table('visits')",
        "SELECT * FROM duckdb_tables()",
        "SELECT * FROM VISITS",
        "SELECT * FROM db.main.visits",
        "EXPLAIN SELECT * FROM regions",
        "EXPLAIN ANALYZE SELECT * FROM visits",
        "SELECT * FROM regions; SELECT * FROM visits",
    ],
)
def test_plain_selects_in_disguise_are_refused(text: str) -> None:
    # A non-DP SELECT that reads a private table anywhere -- UNION, IN, EXISTS, a CTE
    # (even one named as the public table), a scalar subquery, a join, a table
    # function, another spelling of the name -- is refused before anything runs.
    session = unspent("multi")
    outcome = sql(session, text)
    assert outcome.kind == "refused", outcome
    assert str(SECRET_AMOUNT) not in outcome.error


@pytest.mark.parametrize(
    "text",
    [
        # BigQuery reads '#' as a comment, DuckDB does not: parsed one way, run another.
        "SELECT * FROM regions # , visits",
        "SELECT * FROM regions #\nUNION ALL SELECT region, region FROM visits",
        "SELECT * FROM regions WHERE name = '\\' UNION ALL SELECT region, region FROM visits --'",
        "SELECT * FROM regions WHERE name = 'x\\'' OR 1 = 1 --'",
        "SELECT * FROM main.regions",
        "SELECT * FROM memory.main.regions",
        "SELECT current_setting('enable_external_access') FROM regions",
        "SELECT 1 FROM regions WHERE error('boom') IS NULL",
        "SELECT * FROM regions WHERE name IN (SELECT table_name FROM duckdb_tables())",
    ],
)
def test_the_public_path_reads_public_tables_only(text: str) -> None:
    # Whatever a dialect mismatch or an escape trick makes the public path run, it runs
    # on the connection that holds the public tables only: a refusal or public rows,
    # never a private value, and never a spend.
    session = multi()
    outcome = sql(session, text)
    assert outcome.kind in ("ok", "refused"), outcome
    assert str(SECRET_AMOUNT) not in outcome.error and str(SECRET_ID) not in outcome.error
    if outcome.kind == "ok":
        assert_no_secret(outcome.value)
        assert not {"visits", "people"} & {str(v) for v in np.asarray(outcome.value).ravel()}
    assert not session.history


def test_external_access_is_off_on_the_public_path(tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n987654321\n")
    session = multi()
    outcome = attempt(session, lambda: session.public_query(f"SELECT * FROM read_csv('{secret}')"))
    assert outcome.kind == "refused", outcome
    assert str(SECRET_ID) not in outcome.error


@pytest.mark.parametrize(
    "source",
    [
        "read_csv('/etc/passwd')",
        "read_parquet('/tmp/x.parquet')",
        "glob('/*')",
        "query_table('people')",
        "(SELECT * FROM visits)",
        "db.main.visits",
        "memory.main.visits",
        "UNNEST([1, 2])",
    ],
)
def test_table_functions_and_qualified_names_in_from_and_join(source: str) -> None:
    session = unspent("multi")
    assert_refused(session, DP + f"COUNT(*) FROM {source}")
    assert_refused(session, DP + f"COUNT(*) FROM visits v JOIN {source} AS r USING (region)")


@pytest.mark.parametrize(
    "source", ["read_csv('/etc/passwd')", "read_json('x')", "query_table('x')", "range(10)"]
)
# Found by the adversarial review and fixed: single-table Session: a table function in FROM
# is read as the Session's table  (translate() accepts any exp.Table whatever its name), so
# the statement silently  counts the private table instead of being refused
def test_table_function_in_from_of_a_single_table_session(source: str) -> None:
    assert_refused(unspent("single"), DP + f"COUNT(*) FROM {source}")


@pytest.mark.parametrize("source", ["db.data", "catalog.db.data", "`project.dataset.data`"])
def test_qualified_names_in_a_single_table_session(source: str) -> None:
    outcome = sql(single(), DP + f"COUNT(*) FROM {source}")
    # The single table is read whatever its name, but a qualified name is no name of it.
    assert outcome.kind in ("refused", "ok"), outcome
    if source != "`project.dataset.data`":
        assert outcome.kind == "refused"


# ------------------------------------------------------------------ expressions
@pytest.mark.parametrize(
    "where",
    [
        "random() < 0.5",
        "length(repeat(region, CAST(salary AS INT64))) > 0",
        "length(lpad(region, CAST(salary AS INT64), 'x')) > 0",
        "error('boom') IS NULL",
        "getenv('HOME') IS NULL",
        "current_setting('threads') IS NULL",
        "ROW_NUMBER() OVER () > 1",
        "SUM(salary) OVER (PARTITION BY region) > 1",
        "COUNT(*) > 1",
        "SUM(salary, contribution_bounds_per_row => (0, 1)) > 0",
        "ARRAY_LENGTH([1, 2]) = 2",
        "uid IN UNNEST([1, 2])",
        "regexp_contains(region, region)",
        "STRUCT(uid AS a).a = 1",
        "uid = @param",
        "uid = ?",
        "x.uid = 1",
        "`uid; DROP TABLE data; --` = 1",
        "CAST(uid AS STRUCT<a INT64>) IS NULL",
        "SAFE.PARSE_DATE('%Y', region) IS NULL",
        "region LIKE REPEAT('%', 1000)",
    ],
)
def test_expressions_outside_the_grammar_are_refused(where: str) -> None:
    session = unspent("single")
    outcome = sql(session, DP + f"COUNT(*) FROM data WHERE {where}")
    assert outcome.kind == "refused", outcome


@pytest.mark.parametrize(
    "item",
    [
        "COUNT(*) + 1",
        "COUNT(*) OVER ()",
        "SUM(SUM(salary), contribution_bounds_per_row => (0, 10))",
        "SUM(salary, contribution_bounds_per_row => (0, 10)) * 2",
        "salary",
        "*",
        "data.*",
        "region",
        "ANY_VALUE(salary)",
        "ARRAY_AGG(salary)",
        "STRING_AGG(region)",
        "LOGICAL_OR(salary > 1)",
        "COUNTIF(salary > 1)",
        "VAR_SAMP(salary, contribution_bounds_per_row => (0, 1))",
        "APPROX_QUANTILES(salary, 4)",
        "SUM(salary)",
        "SUM(uid, contribution_bounds_per_row => (0, 10))",
        "COUNT(DISTINCT region, salary)",
        "COUNT(region, salary)",
        "COUNT(*, contribution_bounds_per_row => (0, 1))",
        "SUM(salary, foo => (0, 1))",
        "PERCENTILE_CONT(salary, 1.5, contribution_bounds_per_row => (0, 1))",
        "PERCENTILE_CONT(salary, age, contribution_bounds_per_row => (0, 1))",
    ],
)
def test_select_items_outside_the_grammar_are_refused(item: str) -> None:
    session = unspent("single")
    outcome = sql(session, DP + f"{item} FROM data")
    assert outcome.kind == "refused", outcome


# Found by the adversarial review and fixed: PERCENTILE_CONT with a string level:
# float('abc') raises ValueError out of  the translator instead of a SqlError (before the
# charge)
def test_percentile_level_that_is_not_a_number() -> None:
    session = unspent("single")
    outcome = sql(
        session, DP + "PERCENTILE_CONT(salary, 'abc', contribution_bounds_per_row => (0, 1)) FROM t"
    )
    assert outcome.kind == "refused", outcome


@pytest.mark.parametrize(
    "clause",
    [
        "GROUP BY COUNT(*)",
        "GROUP BY 1",
        "GROUP BY SUM(salary, contribution_bounds_per_row => (0, 1))",
        "GROUP BY ROW_NUMBER() OVER ()",
        "GROUP BY ROLLUP (region)",
        "GROUP BY CUBE (region)",
        "GROUP BY GROUPING SETS ((region), ())",
        "HAVING COUNT(*) > 1",
        "QUALIFY 1 = 1",
        "WHERE COUNT(*) > 0",
    ],
)
def test_aggregates_and_grouping_extensions_outside_select_are_refused(clause: str) -> None:
    session = unspent("single")
    outcome = sql(session, DP + f"COUNT(*) FROM data {clause}")
    assert outcome.kind == "refused", outcome


# Found by the adversarial review and fixed: a WINDOW clause makes the translator raise
# AttributeError ('list' object has  no attribute 'walk') instead of a SqlError (before the
# charge)
def test_window_clause_is_a_clean_refusal() -> None:
    session = unspent("single")
    outcome = sql(session, DP + "COUNT(*) FROM data WINDOW w AS (PARTITION BY uid)")
    assert outcome.kind == "refused", outcome


# ------------------------------------------------------------------ the privacy unit
def test_count_distinct_of_the_unit_counts_persons_whatever_its_spelling() -> None:
    session = single()
    for spelling in ("uid", "`uid`", "data.uid", "d.uid"):
        source = "data d" if spelling == "d.uid" else "data"
        statement = session.sql_query(DP + f"COUNT(DISTINCT {spelling}) FROM {source}")
        assert statement.query is not None
        (aggregation,) = statement.query.aggregations
        assert aggregation.kind == "count_distinct" and aggregation.column is None
    # Another case is another (unknown) column, never a silent second unit.
    assert_refused(session, DP + "COUNT(DISTINCT UID) FROM data")
    assert_refused(session, DP + "COUNT(DISTINCT Uid) FROM data")
    assert not session.history


@pytest.mark.parametrize(
    "option",
    [
        "privacy_unit_column = UID",
        "privacy_unit_column = region",
        "privacy_unit_column = 'region'",
        "privacy_unit_column = `uid; DROP TABLE data`",
        "privacy_unit_column = 1",
    ],
)
def test_privacy_unit_column_must_be_the_sessions(option: str) -> None:
    assert_refused(
        unspent("single"),
        f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, {option}) COUNT(*) FROM t",
    )


# ------------------------------------------------------------------ options
@pytest.mark.parametrize(
    "options",
    [
        "epsilon = -1",
        "epsilon = 0",
        "epsilon = nan",
        "epsilon = inf",
        "epsilon = 'NaN'",
        "epsilon = 1e999",
        "epsilon = " + "1" * 400,
        "epsilon = uid",
        "epsilon = (SELECT 1)",
        "epsilon = 1 + 1",
        "delta = 1e-6",
        "delta = 0",
        "epsilon = 1, delta = 1",
        "epsilon = 1, delta = -1e-6",
        "epsilon = 1, delta = nan",
        "epsilon = 1, epsilon = 2",
        "epsilon = 1, EPSILON = 2",
        "epsilon = 1, max_rows_contributed = 0",
        "epsilon = 1, max_rows_contributed = 1.5",
        "epsilon = 1, max_rows_contributed = TRUE",
        "epsilon = 1, max_rows_contributed = " + "9" * 30,
        "epsilon = 1, max_groups_contributed = -1",
        "epsilon = 1, confidence = 1",
        "epsilon = 1, confidence = nan",
        "epsilon = 1, key_selection_delta = 2",
        "epsilon = 1, unknown_option = 1",
        "epsilon = 1; SELECT 1",
        "epsilon = 1",  # OPTIONS never closed: the ')' below is missing
        "",  # no budget at all
    ],
)
def test_bad_options_are_refused_before_the_charge(options: str) -> None:
    session = unspent("single")
    close = "" if options == "epsilon = 1" else ")"
    text = (
        f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS ({options}{close} region, COUNT(*) "
        "FROM data GROUP BY region"
    )
    outcome = sql(session, text)
    assert outcome.kind == "refused", outcome


@pytest.mark.parametrize(
    "value",
    ["people", "visits", "'regions; DROP TABLE visits'", "`regions`--", "nowhere", "1"],
)
def test_group_keys_names_a_public_table_only(value: str) -> None:
    # Keys from a private table would release its distinct values without selection.
    session = unspent("multi")
    outcome = sql(
        session,
        f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, group_keys = "
        f"{value}) region, COUNT(*) FROM visits GROUP BY region",
    )
    assert outcome.kind == "refused", outcome


def test_group_keys_of_the_public_table_run() -> None:
    outcome = sql(multi(), DP_KEYS + "region, COUNT(*) AS n FROM visits GROUP BY region")
    assert outcome.kind == "ok", outcome
    assert list(outcome.value.columns["region"]) == ["e", "n", "s"]


# ------------------------------------------------------------------ bounds
@pytest.mark.parametrize(
    "bounds",
    [
        "(0, salary)",
        "(0, (SELECT 1))",
        "(0, 1 + 1)",
        "((0), 1)",
        "(- -1, 2)",
        "(0x10, 20)",
        "('0', '1')",
        "(0, 1, 2)",
        "(1)",
        "[0, 1]",
        "(0, 1e999)",
        "(-1e999, 0)",
        "(-1e308, 1e308)",
        "(5, 1)",
        "(1, 1)",
        "(0, NULL)",
        "(0, CAST('nan' AS FLOAT64))",
        "(0, " + "9" * 400 + ")",
    ],
)
def test_bounds_are_two_public_numbers(bounds: str) -> None:
    session = unspent("single")
    for function in ("SUM", "AVG", "VAR_POP", "STDDEV", "MEDIAN", "MIN"):
        outcome = sql(
            session, DP + f"{function}(salary, contribution_bounds_per_row => {bounds}) FROM data"
        )
        assert outcome.kind == "refused", (function, outcome)
    assert not session.history


# ------------------------------------------------------------------ names and output
@pytest.mark.parametrize(
    "alias",
    ['`a"; SELECT 1; --`', '`x""y`', "`x\\' `", "`\u202ename`", "`" + "n" * 5000 + "`"],
)
def test_aliases_are_names_never_sql(alias: str) -> None:
    session = single()
    outcome = sql(
        session, DP + f"SUM(salary * 2, contribution_bounds_per_row => (0, 1)) AS {alias} FROM data"
    )
    assert outcome.kind == "ok", outcome
    names = [c for c in outcome.value.columns if not c.endswith(("_se", "_low", "_high"))]
    assert len(names) == 1 and len(session.history) == 1
    assert sql(session, DP + "COUNT(*) FROM data").kind == "ok"  # nothing was injected


@pytest.mark.parametrize(
    "items",
    [
        "COUNT(*) AS n, SUM(salary, contribution_bounds_per_row => (0, 1)) AS n",
        "COUNT(*), COUNT(*)",
        "COUNT(*) AS n, SUM(age, contribution_bounds_per_row => (0, 1)) AS n_se",
        "STDDEV(age, contribution_bounds_per_row => (0, 100)) AS s, COUNT(*) AS s_low",
        "region, COUNT(*) AS region",
    ],
)
def test_duplicate_output_names_are_refused_before_the_charge(items: str) -> None:
    session = unspent("multi")
    outcome = sql(session, DP_KEYS + f"{items} FROM visits GROUP BY region")
    assert outcome.kind == "refused", outcome


@pytest.mark.parametrize(
    "items",
    ["region AS n, COUNT(*) AS n", "region AS count, COUNT(*)", "region AS N, COUNT(*) AS n"],
)
# Found by the adversarial review and fixed: a group column renamed to an aggregation's
# output name is not refused: the  statement is charged and finish_result's rename
# overwrites the group column with  the aggregate (a released column silently lost)
def test_group_alias_clashing_with_an_aggregate_is_refused(items: str) -> None:
    session = unspent("multi")
    # (``N`` and ``n`` differ in Python, but SQL names ignore case: refused too.)
    outcome = sql(session, DP_KEYS + f"{items} FROM visits GROUP BY region")
    assert outcome.kind == "refused", outcome


@pytest.mark.parametrize(
    "tail",
    [
        "ORDER BY salary",
        "ORDER BY 1",
        "ORDER BY COUNT(*)",
        "ORDER BY n + 1",
        "ORDER BY data.n",
        "ORDER BY n_se",
        "LIMIT -1",
        "LIMIT 'x'",
        "LIMIT 1.5",
        "LIMIT n",
        "LIMIT (SELECT 1)",
    ],
)
def test_order_by_and_limit_name_outputs_and_numbers(tail: str) -> None:
    session = unspent("single")
    outcome = sql(session, DP + f"COUNT(*) AS n FROM data {tail}")
    assert outcome.kind == "refused", outcome


def test_order_by_and_limit_are_post_processing_of_the_release() -> None:
    session = multi(visits(400))
    text = "region, COUNT(*) AS n FROM visits GROUP BY region ORDER BY n DESC LIMIT 2"
    outcome = sql(session, DP_KEYS + text)
    assert outcome.kind == "ok", outcome
    values = outcome.value.columns["n"]
    assert len(values) == 2 and values[0] >= values[1]
    assert len(session.history) == 1


@pytest.mark.parametrize(
    "tail",
    [
        "LIMIT 1 OFFSET 3",
        "TABLESAMPLE SYSTEM (10 PERCENT)",
        "FOR SYSTEM_TIME AS OF '2020-01-01'",
    ],
)
# Found by the adversarial review and fixed: clauses the translator does not read (OFFSET,
# TABLESAMPLE, FOR SYSTEM_TIME AS  OF) are silently dropped: the statement is charged and
# answers another query
def test_clauses_the_translator_does_not_read_are_refused(tail: str) -> None:
    session = unspent("single")
    outcome = sql(session, DP + f"COUNT(*) AS n FROM data {tail}")
    assert outcome.kind == "refused", outcome


@pytest.mark.parametrize("form", ["AS STRUCT", "AS VALUE"])
# Found by the adversarial review and fixed: SELECT AS STRUCT / AS VALUE is silently dropped
# (charged, answered as a plain SELECT)
def test_select_as_struct_is_refused(form: str) -> None:
    session = unspent("single")
    outcome = sql(
        session, f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) {form} COUNT(*) FROM data"
    )
    assert outcome.kind == "refused", outcome


# ------------------------------------------------------------------ joins
@pytest.mark.parametrize(
    "join",
    [
        "JOIN people USING (uid)",  # a private table without join_truncate
        "CROSS JOIN regions r",
        ", regions r",
        "FULL JOIN regions r USING (region)",
        "RIGHT JOIN regions r USING (region)",
        "JOIN regions r ON v.region < r.region",
        "JOIN regions r ON v.region = r.region OR TRUE",
        "JOIN regions r ON v.region = r.region AND (SELECT 1) = 1",
        "JOIN regions r ON v.region = 'n'",
        "JOIN regions r",
        "JOIN regions v USING (region)",
        "JOIN visits USING (uid)",
        "JOIN regions r ON v.region = r.nothing",
        "JOIN regions r ON v.nothing = r.region",
        "ASOF JOIN regions r ON v.region = r.region",
        "LEFT SEMI JOIN regions r ON v.region = r.region",
    ],
)
def test_joins_outside_the_grammar_are_refused(join: str) -> None:
    session = unspent("multi")
    outcome = sql(session, DP + f"COUNT(*) FROM visits v {join}")
    assert outcome.kind == "refused", outcome


def test_a_dp_select_cannot_start_from_a_public_table() -> None:
    assert_refused(unspent("multi"), DP + "COUNT(*) FROM regions")
    assert_refused(unspent("multi"), DP + "COUNT(*) FROM regions r JOIN visits v USING (region)")


def test_a_qualified_column_of_a_left_joined_table_is_that_tables() -> None:
    # Found by this review: `r.region` after `LEFT JOIN regions r ON v.region = r.region`
    # was read as v.region (the joined rows keep the left side's key), so `r.region IS
    # NULL` counted nothing. A LEFT JOIN's right key is now refused, with the way out.
    frame = visits(2000, region_of_first="w")
    frame.loc[:999, "region"] = "w"  # 1000 rows match no public region
    session = dp.Session.from_tables(
        {"visits": frame},
        privacy_unit="uid",
        public={"regions": REGIONS},
        budget=dp.ApproxDP(100.0, 1e-5),
        rng=0,
    )
    text = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 20, delta = 1e-6) COUNT(*) AS n "
        "FROM visits v LEFT JOIN regions r ON v.region = r.region WHERE r.region IS NULL"
    )
    assert "key of a LEFT JOIN" in assert_refused(session, text)
    # Of an inner join, the key is the left side's value (equal where rows join).
    inner = text.replace("LEFT JOIN", "JOIN").replace("IS NULL", "IS NOT NULL")
    assert sql(session, inner).kind == "ok"


# ------------------------------------------------------------------ sizes, nesting
@pytest.mark.parametrize(
    "shape",
    [
        lambda n: "(" * n + "salary" + ")" * n + " > 1",
        lambda n: "abs(" * n + "salary" + ")" * n + " > 1",
        lambda n: "NOT " * n + "salary > 1",
        lambda n: "CASE WHEN salary > 1 THEN " * n + "1" + " END" * n + " = 1",
    ],
    ids=["parens", "calls", "not", "case"],
)
# Found by the adversarial review and fixed: deep nesting (from ~45 levels of parentheses)
# raises RecursionError out of  SQLGlot's parser (in the translator, or in the expression
# validator for NOT/CASE)  instead of a SqlError/InvalidParameter; it is before the charge
# and depends on the  text only, so no leak, but it is not the clean refusal th
def test_deep_nesting_is_a_clean_refusal(shape: Callable[[int], str]) -> None:
    session = unspent("single")
    outcome = sql(session, DP + "COUNT(*) FROM data WHERE " + shape(200))
    assert outcome.kind == "refused", outcome


def test_deep_nesting_never_fails_after_the_charge() -> None:
    # What the xfail above does not cover: whatever exception deep nesting raises, it
    # is before the charge, the same on every table, and the Session stays usable.
    transcripts = []
    for frame in (staff(), staff(1e9, n_others=50), staff(-0.0).iloc[:0]):
        session = single(frame)
        seen = []
        for depth in (10, 60, 1100):
            for text in (
                "(" * depth + "salary" + ")" * depth + " > 1",
                "salary" + " + 1" * depth + " > 1",
                " AND ".join(["salary > 1"] * min(depth, 200)),
            ):
                before = _left(session)
                try:
                    session.sql(CHEAP + "COUNT(*) FROM data WHERE " + text)
                    seen.append("ok")
                except Exception as err:  # any class: compared across tables below
                    assert _left(session) == before, (depth, err)
                    seen.append(type(err).__name__)
        assert sql(session, DP + "COUNT(*) FROM data").kind == "ok"
        transcripts.append(seen)
    assert transcripts[0] == transcripts[1] == transcripts[2]


def test_a_long_statement_is_refused_before_parsing() -> None:
    session = single()
    text = DP + "COUNT(*) FROM data WHERE " + " OR ".join(["region = 'n'"] * 10_000)
    assert len(text) > 100_000
    assert_refused(session, text)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT\u00a0WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM data",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1)\u2028COUNT(*)\u3000FROM data",
        "SELECT\tWITH\nDIFFERENTIAL_PRIVACY\rOPTIONS(epsilon=1)COUNT(*)FROM data",
        "\ufeffSELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM data",
        "\uff33\uff25\uff2c\uff25\uff23\uff34" + DP[6:] + "COUNT(*) FROM data",  # fullwidth
        "select with differential_privacy options (EPSILON = 1) count(*) from DATA",
        DP + "COUNT(*) FROM data WHERE region = '\u00f1\u0000'",
        DP + "COUNT(*) FROM data WHERE region = 'n\u0301'",
        DP + "COUNT(*) FROM data WHERE region = '\U0001f600'",
        "",
        "   \n\t ",
        "--",
        "/*",
        "SELECT WITH DIFFERENTIAL_PRIVACY",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon =",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM data WHERE 'unclosed",
    ],
)
def test_odd_text_runs_or_is_a_clean_refusal(text: str) -> None:
    session = single()
    outcome = sql(session, text)
    assert outcome.kind in ("ok", "refused"), outcome
    assert len(session.history) == (1 if outcome.kind == "ok" else 0)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1\n",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS\n",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1,\n",
    ],
)
# Found by the adversarial review and fixed: SqlError's position at the very end of a
# statement that ends with a newline  computes line = count('\\n') + 1, one past
# text.splitlines(): IndexError escapes  instead of the SqlError (before the charge)
def test_an_error_at_the_end_of_a_statement_ending_with_a_newline(text: str) -> None:
    outcome = sql(single(), text)
    assert outcome.kind == "refused", outcome


# ------------------------------------------------------------------ explain, charging
def test_explain_spends_nothing_and_sql_charges_once(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    frame = staff(n_others=40)
    session = single(frame, budget=dp.PureDP(1.0), ledger=ledger)
    text = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.25) COUNT(*) AS n FROM data"
    assert isinstance(session.sql("EXPLAIN " + text), dp.analytics.Explanation)
    assert isinstance(session.sql("  explain\n" + text), dp.analytics.Explanation)
    session.explain_sql(text)
    session.explain_sql("EXPLAIN " + text)
    session.sql_query(text)
    assert session.spent == dp.PureDP(0.0) and not session.history
    for refused in (
        text + " WHERE nothing = 1",
        text.replace("0.25", "2"),  # over the budget
        "EXPLAIN ANALYZE " + text,
    ):
        assert sql(session, refused).kind == "refused"
    result = session.sql(text)
    assert set(result.columns) == {"n", "n_se", "n_low", "n_high"}
    assert len(session.history) == 1 and session.spent == dp.PureDP(0.25)
    reopened = single(frame, budget=dp.PureDP(1.0), ledger=ledger)
    assert reopened.spent == dp.PureDP(0.25) and len(reopened.history) == 1
    # budget= replaces the statement's OPTIONS (one charge, of that budget).
    session.sql(text, budget=dp.PureDP(0.5))
    assert session.spent == dp.PureDP(0.75) and len(session.history) == 2


def test_explain_of_a_plain_select_is_refused() -> None:
    session = unspent("multi")
    assert sql(session, "EXPLAIN SELECT * FROM regions").kind == "refused"
    assert attempt(session, lambda: session.explain_sql("SELECT * FROM regions")).kind == "refused"
    assert attempt(session, lambda: session.explain_sql("SELECT * FROM visits")).kind == "refused"


# ------------------------------------------------------------------ neighbours
ORACLES = [
    # Error oracles: fail only when a secret predicate holds on some row.
    "COUNT(*) FROM data WHERE CASE WHEN uid = 987654321 AND salary >= {t} "
    "THEN CAST('x' AS INT64) ELSE 1 END = 1",
    "COUNT(*) FROM data WHERE CASE WHEN uid = 987654321 AND salary >= {t} "
    "THEN DIV(age, 0) ELSE 1 END = 1",
    "COUNT(*) FROM data WHERE CAST(CASE WHEN salary >= {t} THEN 'no date' "
    "ELSE '2020-01-01' END AS DATE) > DATE '2000-01-01'",
    "COUNT(*) FROM data WHERE CASE WHEN salary >= {t} THEN 9223372036854775807 + age "
    "ELSE 1 END = 1",
    "COUNT(*) FROM data WHERE regexp_contains('abc', CASE WHEN salary >= {t} THEN '(' "
    "ELSE 'a' END)",
    # In every role an expression can take in SQL.
    "SUM(CASE WHEN salary >= {t} THEN CAST('x' AS INT64) ELSE 1 END, "
    "contribution_bounds_per_row => (0, 2)) AS s FROM data",
    "COUNT(CASE WHEN salary >= {t} THEN CAST('x' AS INT64) ELSE 1 END) AS c FROM data",
    "COUNT(DISTINCT CASE WHEN salary >= {t} THEN CAST('x' AS INT64) ELSE 1 END) AS c FROM data",
    "CASE WHEN salary >= {t} THEN CAST('x' AS INT64) ELSE 1 END AS g, COUNT(*) AS n "
    "FROM data GROUP BY CASE WHEN salary >= {t} THEN CAST('x' AS INT64) ELSE 1 END",
    "MEDIAN(CASE WHEN salary >= {t} THEN salary / 0 ELSE 1 END, "
    "contribution_bounds_per_row => (0, 2)) AS m FROM data",
    "STDDEV(salary, contribution_bounds_per_row => (0, {t})) AS s FROM data ORDER BY s",
    "region, AVG(salary, contribution_bounds_per_row => (0, 1e6)) AS a FROM data "
    "GROUP BY region ORDER BY region DESC LIMIT 1",
]


@pytest.mark.parametrize("oracle", ORACLES)
def test_the_transcript_is_the_same_on_neighbours(oracle: str) -> None:
    # The attacker's loop over thresholds, on neighbouring tables (the target present
    # with a high or a low salary, or absent): the same successes and refusals in the
    # same order, and never a failure after the charge.
    transcripts = []
    for frame in (staff(52_000.0), staff(30_000.0), staff().iloc[1:]):
        session = single(frame, budget=dp.ApproxDP(10.0, 1e-5))
        seen = []
        for t in (1, 40_000, 50_000, 10**7):
            outcome = sql(
                session,
                CHEAP + oracle.format(t=t),
            )
            assert outcome.kind in ("ok", "refused"), outcome
            seen.append((outcome.kind, outcome.error))
        transcripts.append(seen)
    assert transcripts[0] == transcripts[1] == transcripts[2]


# Found by the adversarial review and fixed: LENGTH(s), GoogleSQL's string length, is re-
# rendered for DuckDB as CASE  TYPEOF(s) WHEN 'BLOB' THEN OCTET_LENGTH(...) ... and then
# refused by the expression  allowlist (TYPEOF), with a message quoting SQL the analyst
# never wrote;  CHAR_LENGTH(s) runs
def test_length_of_a_string_is_allowed() -> None:
    session = single()
    assert sql(session, DP + "COUNT(*) FROM data WHERE CHAR_LENGTH(region) > 0").kind == "ok"
    assert sql(session, DP + "COUNT(*) FROM data WHERE LENGTH(region) > 0").kind == "ok"
