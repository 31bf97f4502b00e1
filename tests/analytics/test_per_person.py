"""Query.per_person and its SQL form (a subquery in FROM grouped by the privacy unit).

Stability on neighbouring databases (and DuckDB = Spark) is the property test at the end
of tests/analytics/test_join_stability.py; attacks are in
tests/adversarial/test_per_person_attacks.py. Here: the per-person rows are what the
statement means (against pandas), the SQL and the builder make one plan, refusals spend
nothing, and aggregates that could overflow on some tables do not fail.
"""

from __future__ import annotations

import decimal
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from tests._describes import (
    assert_integers_of_a_fresh_session,
    compile_at_every_salt,
    recorded_describes,
)

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.errors import DataError, InvalidParameter, SqlError

SALT = 5


def _tables() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(7)
    customers = pd.DataFrame({"c_custkey": np.arange(300), "c_nation": rng.integers(0, 5, 300)})
    orders = pd.DataFrame(
        {
            "o_custkey": rng.integers(0, 240, 1500),
            "o_orderkey": np.arange(1500),
            "o_comment": rng.choice(["fast special requests", "plain", "special"], 1500),
        }
    )
    owner = orders.set_index("o_orderkey")["o_custkey"]
    keys = rng.integers(0, 1500, 5000)
    lineitem = pd.DataFrame(
        {
            "l_orderkey": keys,
            "l_custkey": owner.loc[keys].to_numpy(),
            "l_quantity": rng.integers(1, 50, 5000),
        }
    )
    return {"customer": customers, "orders": orders, "lineitem": lineitem}


def _session(budget: dp.Guarantee | None = None, engine: str = "duckdb") -> dp.Session:
    t = _tables()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        return dp.Session.from_tables(
            t,
            privacy_unit={"customer": "c_custkey", "orders": "o_custkey", "lineitem": "l_custkey"},
            budget=budget or dp.ApproxDP(10.0, 1e-5),
            rng=3,
            engine=engine,
        )


def _exact(session: dp.Session, query: Query) -> dict[tuple[Any, ...], list[int]]:
    view, stripped = session._view_for(query, SALT)
    compiled = view._compile(stripped, 1.0, SALT)
    return dict(view._engine.aggregate(compiled.plan))


# TPC-H Q13's DP form: customers by their number of orders (whose comment does not
# match), a LEFT JOIN so that customers with no orders count at 0.
Q13 = (
    Query.from_table("customer")
    .join("orders", on={"c_custkey": "o_custkey"}, how="left", truncate=30)
    .per_person(
        c_count=("count", "CASE WHEN o_comment NOT LIKE '%special%requests%' THEN o_orderkey END")
    )
    .group_by("c_count", keys=KeySet.from_values(c_count=list(range(25))))
    .bound(max_groups=1, max_rows=1)
    .count(name="custdist")
)
Q13_SQL = """SELECT WITH DIFFERENTIAL_PRIVACY
  OPTIONS (epsilon = 1, delta = 1e-6, join_truncate = 30)
  c_count, COUNT(*) AS custdist
FROM (SELECT c_custkey,
             COUNT(CASE WHEN o_comment NOT LIKE '%special%requests%' THEN o_orderkey END)
               AS c_count
      FROM customer LEFT JOIN orders ON c_custkey = o_custkey
      GROUP BY c_custkey) AS c_orders
GROUP BY c_count"""


def test_per_person_counts_are_the_statements_meaning() -> None:
    t = _tables()
    kept = t["orders"][~t["orders"]["o_comment"].str.contains("special.*requests")]
    per_customer = t["customer"].merge(kept, left_on="c_custkey", right_on="o_custkey", how="left")
    truth = per_customer.groupby("c_custkey")["o_orderkey"].count().value_counts()
    exact = _exact(_session(), Q13)
    assert {k[0]: v[0] for k, v in exact.items() if v[0]} == truth.to_dict()
    assert truth.get(0, 0) > 0  # customers with no (kept) order count at 0


def test_q18_counts_orders_above_a_quantity_with_having() -> None:
    t = _tables()
    quantity = t["lineitem"].groupby("l_orderkey")["l_quantity"].sum()
    truth = int((quantity > 100).sum())
    sql = """SELECT WITH DIFFERENTIAL_PRIVACY
      OPTIONS (epsilon = 1, join_truncate = 100, max_rows_contributed = 40)
      COUNT(*) AS big_orders
    FROM (SELECT o_custkey, o_orderkey FROM orders JOIN lineitem ON o_orderkey = l_orderkey
          GROUP BY o_custkey, o_orderkey HAVING SUM(l_quantity) > 100) AS big"""
    session = _session()
    statement = session.sql_query(sql)
    assert statement.query is not None
    assert _exact(session, statement.query) == {(): [truth]}
    result = session.sql(sql)
    assert abs(float(result.dataframe["big_orders"].iloc[0]) - truth) < 200


def test_sql_and_builder_make_one_plan() -> None:
    session = _session()
    statement = session.sql_query(Q13_SQL)
    assert statement.query is not None
    budget = dp.ApproxDP(1.0, 1e-6)

    def plan(query: Query) -> Any:
        view, stripped = session._view_for(query, 9)
        compiled = view._compile(stripped, budget, 9)
        return compiled.plan, compiled.charge, view._engine.relation, view._engine._relation_params

    twin = (
        Query.from_table("customer")
        .join("orders", on={"c_custkey": "o_custkey"}, how="left", truncate=30)
        .per_person(
            c_count=(
                "count",
                'CASE WHEN "o_comment" NOT LIKE \'%special%requests%\' THEN "o_orderkey" END',
            )
        )
        .group_by("c_count", keys="private")
        .bound(max_groups=1, max_rows=1)
        .count(name="custdist")
    )
    assert plan(statement.query) == plan(twin)


def test_per_person_rows_are_described_once_for_every_salt() -> None:
    # The per-person rows of a query have the same columns and types whatever the salt
    # (it orders the join's truncation only): every view of them shares one schema
    # cache, so translating a statement and running it again describe nothing more,
    # and the integers are those of a Session that never saw the rows.
    session = _session()
    with recorded_describes(session) as described:
        session.sql_query(Q13_SQL)
        _exact(session, Q13)
        after_first = len(described)
        compile_at_every_salt(session, Q13, (0, 5, 2**40))
        session.sql_query(Q13_SQL)
        assert len(described) == after_first
    assert after_first > 0
    assert_integers_of_a_fresh_session(session, _session, Q13, (123, 5))
    # Another step over the same joined view (the same columns read) has its own cache.
    other = (
        Query.from_table("customer")
        .join("orders", on={"c_custkey": "o_custkey"}, how="left", truncate=30)
        .per_person(
            renamed=(
                "count",
                "CASE WHEN o_comment NOT LIKE '%special%requests%' THEN o_orderkey END",
            )
        )
        .bound(max_rows=1)
        .count()
    )
    other_view = session._view_for(other, 0)[0]
    assert (
        other_view._engine._schema_cache is not session._view_for(Q13, 0)[0]._engine._schema_cache
    )
    assert "renamed" in other_view._schema
    # Over one table, by the relation itself.
    frame = pd.DataFrame({"uid": [1, 1, 2], "amount": [1.0, 2.0, 3.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        single = dp.Session.from_pandas(frame, privacy_unit="uid", budget=dp.PureDP(1.0), rng=2)
    step = Query().per_person(rows="count").bound(max_rows=1).count()
    assert (
        single._view_for(step, 0)[0]._engine._schema_cache
        is single._view_for(step, 7)[0]._engine._schema_cache
    )


def test_single_table_sessions_filters_before_and_after_and_explain() -> None:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"uid": rng.integers(0, 400, 4000), "amount": rng.exponential(40.0, 4000)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_pandas(frame, privacy_unit="uid", budget=dp.PureDP(5.0), rng=2)
    query = (
        Query()
        .filter("amount > 5")
        .per_person(rows="count", total=("sum", "amount"))
        .filter("rows >= 3")
        .bound(max_rows=1)
        .count()
        .sum("total", bounds=(0.0, 1e4))
    )
    kept = frame[frame["amount"] > 5].groupby("uid")["amount"].agg(["count", "sum"])
    kept = kept[kept["count"] >= 3]
    view, stripped = session._view_for(query, SALT)
    compiled = view._compile(stripped, 1.0, SALT)
    exact = view._engine.aggregate(compiled.plan)[()]
    assert exact[0] == len(kept)
    scale = compiled.plan.statistics[1].inv
    assert abs(exact[1] / scale - kept["sum"].clip(0, 1e4).sum()) < 1e-6 * len(kept) * 1e4
    text = str(session.explain(query, budget=dp.PureDP(1.0)))
    assert "per person ('uid'): one row per person" in text
    result = session.evaluate(query, budget=dp.PureDP(1.0))
    assert any("aggregated per person" in note for note in result.notes)


def test_partitions_apply_to_the_rows_before_the_step() -> None:
    frame = pd.DataFrame(
        {"uid": [1, 1, 2, 2, 3, 3, 3], "region": ["a", "b", "a", "a", "b", "b", "b"]}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_pandas(frame, privacy_unit="uid", budget=dp.PureDP(2.0), rng=4)
    parts = session.partition("region", ["a", "b"], [dp.PureDP(1.0), dp.PureDP(1.0)])
    query = Query().per_person(rows="count").bound(max_rows=1).sum("rows", bounds=(0.0, 10.0))
    totals = {}
    for key, part in parts.items():
        view, stripped = part._view_for(query, SALT)
        compiled = view._compile(stripped, 1.0, SALT)
        exact = view._engine.aggregate(compiled.plan)[()][0]
        totals[key] = exact / compiled.plan.statistics[0].inv
    # Each person is in one part (uid 1: a or b by the keyed hash), with that part's rows.
    assert sum(totals.values()) <= 7
    assert totals["a"] >= 2 and totals["b"] >= 3


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda q: q.per_person(n="count").per_person(m="count"), InvalidParameter, "already"),
        (lambda q: q.bound(max_rows=1).per_person(n="count"), InvalidParameter, "before bound"),
        (lambda q: q.count().per_person(n="count"), InvalidParameter, "before an aggregation"),
        (lambda q: q.per_person(n="count").join("orders", "x"), InvalidParameter, "joins come"),
        (lambda q: q.per_person(), InvalidParameter, "at least one aggregate"),
        (lambda q: q.per_person(n=("median", "x")), InvalidParameter, "kind one of"),
        (lambda q: q.per_person(n=("sum", "")), InvalidParameter, "kind one of"),
        (lambda q: q.per_person(by="n", n="count"), InvalidParameter, "must differ"),
        (lambda q: q.per_person(by=["a", "A"], n="count"), InvalidParameter, "distinct"),
        (lambda q: q.per_person(__n="count"), InvalidParameter, "not starting with '__'"),
    ],
)
def test_the_builder_refuses_misuse(build: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        build(Query.from_table("customer"))


@pytest.mark.parametrize(
    ("step", "error", "match"),
    [
        ({"by": "nope", "n": "count"}, DataError, "unknown column 'nope'"),
        ({"by": "o_custkey", "n": "count"}, InvalidParameter, "is the privacy unit"),
        ({"s": ("sum", "o_comment")}, DataError, "a number is needed"),
        ({"s": ("sum", "nope + 1")}, DataError, "nope"),
        ({"o_custkey": "count"}, InvalidParameter, "also the unit"),
    ],
)
def test_the_session_refuses_on_the_schema_and_spends_nothing(
    step: dict[str, Any], error: type, match: str
) -> None:
    session = _session()
    by = step.pop("by", ())
    query = Query.from_table("orders").per_person(by=by, **step).bound(max_rows=1).count()
    with pytest.raises(error, match=match):
        session.evaluate(query, budget=dp.ApproxDP(1.0, 1e-6))
    assert not session.history


def test_a_session_without_a_privacy_unit_refuses() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_pandas(pd.DataFrame({"x": [1, 2]}), budget=dp.PureDP(1.0))
    query = Query().per_person(n="count").count()
    with pytest.raises(InvalidParameter, match="no privacy unit"):
        session.evaluate(query, budget=dp.PureDP(1.0))
    assert not session.history


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_sums_that_would_overflow_their_type_do_not_fail(engine: str, request: Any) -> None:
    if engine == "spark":
        request.getfixturevalue("spark")
    big = 2**63 - 1
    table = pa.table(
        {
            "uid": pa.array([1, 1, 1, 2], pa.int64()),
            "n": pa.array([big, big, big, -big], pa.int64()),
            "d": pa.array(
                [decimal.Decimal("9" * 37)] * 3 + [decimal.Decimal("-1")], pa.decimal128(38, 0)
            ),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_tables(
            {"t": table}, privacy_unit="uid", budget=dp.PureDP(2.0), rng=1, engine=engine
        )
    query = (
        Query.from_table("t")
        .per_person(s=("sum", "n"), m=("mean", "d"), top=("max", "n"))
        .bound(max_rows=1)
        .sum("s", bounds=(0.0, 10.0))
        .mean("m", bounds=(0.0, 10.0))
        .sum("top", bounds=(0.0, 10.0))
    )
    result = session.evaluate(query, budget=dp.PureDP(1.0))
    assert len(result.releases) >= 3
    assert session.spent == dp.PureDP(1.0)


def test_sql_errors_have_positions_and_spend_nothing() -> None:
    session = _session()
    head = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6) "
    cases = [
        (
            head + "COUNT(*) AS n FROM (SELECT o_orderkey FROM orders GROUP BY o_orderkey) AS t",
            "must GROUP BY the privacy unit",
            "o_orderkey) AS t",
        ),
        (
            head
            + "COUNT(*) AS n FROM (SELECT o_custkey, COUNT(*) FROM orders GROUP BY o_custkey) t",
            "Name each aggregate",
            "COUNT(*) FROM orders",
        ),
        (
            head + "COUNT(*) AS n FROM (SELECT o_custkey, STDDEV(o_orderkey) AS s FROM orders "
            "GROUP BY o_custkey) t",
            "not an aggregate of one person",
            "STDDEV",
        ),
        (
            head + "COUNT(*) AS n FROM (SELECT o_custkey, COUNT(*) AS c FROM orders GROUP BY "
            "o_custkey LIMIT 3) t",
            "LIMIT is not supported",
            "3) t",
        ),
        (
            head + "COUNT(*) AS n FROM (SELECT o_custkey, COUNT(*) AS c FROM (SELECT * FROM "
            "orders) x GROUP BY o_custkey) t",
            "nest one level",
            "* FROM orders) x",
        ),
        (
            head + "COUNT(*) AS n FROM (SELECT o_custkey, COUNT(*) AS c FROM orders GROUP BY "
            "o_custkey) t JOIN customer ON c = c_custkey",
            "JOIN after a subquery",
            "customer ON c",
        ),
        (
            head + "COUNT(*) AS n FROM (SELECT o_custkey, o_comment, COUNT(*) AS c FROM orders "
            "GROUP BY o_custkey) t",
            "must be in GROUP BY",
            "o_comment,",
        ),
        (
            head + "COUNT(*) AS n FROM (SELECT o_custkey, SUM(o_comment) AS s FROM orders "
            "GROUP BY o_custkey) t",
            "SUM needs a number; this is of type VARCHAR",
            "SUM(o_comment)",
        ),
    ]
    for sql, match, at in cases:
        with pytest.raises(SqlError, match=match) as caught:
            session.sql(sql)
        start = sql.index(at)
        assert caught.value.column == start + 1, (sql, caught.value.column, start + 1)
    assert not session.history


def test_having_reuses_a_selected_aggregate_or_adds_one() -> None:
    session = _session()
    head = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_rows_contributed = 9) "
    reuse = session.sql_query(
        head + "COUNT(*) AS n FROM (SELECT o_custkey, COUNT(*) AS c FROM orders "
        "GROUP BY o_custkey HAVING COUNT(*) > 6) t"
    )
    added = session.sql_query(
        head + "COUNT(*) AS n FROM (SELECT o_custkey, COUNT(*) AS c FROM orders "
        "GROUP BY o_custkey HAVING MAX(o_orderkey) > 100) t"
    )
    assert reuse.query is not None and added.query is not None
    assert reuse.query.per_person_step is not None and added.query.per_person_step is not None
    assert [a[0] for a in reuse.query.per_person_step.aggregates] == ["c"]
    assert reuse.query.filters == ('"c" > 6',)
    assert [a[:2] for a in added.query.per_person_step.aggregates] == [
        ("c", "count"),
        ("having_1", "max"),
    ]
    t = _tables()["orders"]
    counts = t.groupby("o_custkey")["o_orderkey"].agg(["count", "max"])
    assert _exact(session, reuse.query) == {(): [int((counts["count"] > 6).sum())]}
    assert _exact(session, added.query) == {(): [int((counts["max"] > 100).sum())]}


def test_the_keys_hint_lists_public_groups_in_the_statement() -> None:
    session = _session(dp.PureDP(4.0))
    head = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, join_truncate = 30, "
    histogram = (
        head + "group_keys = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]) c_count, "
        "COUNT(*) AS custdist FROM (SELECT c_custkey, COUNT(o_orderkey) AS c_count FROM "
        "customer LEFT JOIN orders ON c_custkey = o_custkey GROUP BY c_custkey) AS c "
        "GROUP BY c_count ORDER BY c_count"
    )
    statement = session.sql_query(histogram)
    assert statement.query is not None
    assert statement.query.keys == KeySet.from_values(c_count=list(range(13)))
    frame = session.sql(histogram).dataframe  # a pure-DP budget: no private selection
    assert list(frame["c_count"]) == list(range(13))
    pairs = session.sql_query(
        head + "max_groups_contributed = 2, group_keys = [(0, 'plain'), (1, 'special')]) "
        "c_nation, o_comment, COUNT(*) AS n FROM customer JOIN orders ON c_custkey = "
        "o_custkey GROUP BY c_nation, o_comment"
    )
    assert pairs.query is not None
    assert pairs.query.keys == KeySet.from_tuples(
        ("c_nation", "o_comment"), [(0, "plain"), (1, "special")]
    )
    for bad, match in [
        ("group_keys = [0, x]", "a number, a string or a boolean"),
        ("group_keys = [(0, 1)]", "lists the groups"),
        ("group_keys = [0", "Expected"),
    ]:
        with pytest.raises(SqlError, match=match):
            session.sql(
                histogram.replace("group_keys = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]", bad)
            )
    assert len(session.history) == 1


@pytest.mark.parametrize(
    ("unit", "by", "claimed"),
    [
        ("integer", (), True),
        ("text", (), False),  # a canonical class's spelling, not the group key itself
        ("double", (), False),
        ("integer", ("kind",), False),  # several rows per person
    ],
)
def test_one_row_per_person_skips_the_ranking_and_keeps_the_same_pairs(
    unit: str, by: tuple[str, ...], claimed: bool
) -> None:
    # Per-person rows grouped by an integer unit alone hold one row per unit in the
    # engine's own equality, so ranking a unit's groups has nothing to drop: the engine
    # skips it, and the integers are those the ranking gives. Elsewhere (by, a unit
    # whose output is a spelling) the ranking stays.
    rng = np.random.default_rng(9)
    ids = rng.integers(0, 300, 3000)
    frame = pd.DataFrame(
        {
            "uid": {
                "integer": pd.Series(ids, dtype="int64"),
                "text": pd.Series([f"p{i}" for i in ids]),
                "double": pd.Series(ids.astype(np.float64) / 4.0),
            }[unit],
            "amount": rng.exponential(40.0, len(ids)),
            "kind": rng.choice(["a", "b", "c"], len(ids)),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_pandas(
            frame, privacy_unit="uid", budget=dp.ApproxDP(10.0, 1e-5), rng=2
        )
    query = (
        Query()
        .per_person(by=by, low=("min", "amount"), rows="count")
        .group_by_bins("low", [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
        .bound(max_groups=1, max_rows=1)
        .count()
        .sum("rows", bounds=(0.0, 20.0))
    )
    view, stripped = session._view_for(query, SALT)
    assert view._engine._one_row_per_unit is claimed
    plan = view._compile(stripped, 1.0, SALT).plan
    assert ("PARTITION BY __u" in view._engine.compile(plan)[0]) is not claimed
    ranked = view._engine.with_relation(
        view._engine.relation, view._engine._relation_params, one_row_per_unit=False
    )
    assert "PARTITION BY __u" in ranked.compile(plan)[0]
    exact = view._engine.aggregate(plan)
    assert exact == ranked.aggregate(plan)
    # Every person is counted once (in one of the bins its rows fall in, with by).
    assert sum(v[0] for v in exact.values()) == len(set(ids))
