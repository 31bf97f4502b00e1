"""A Session over several tables: construction, joins, public tables, refusals.

The stability of each join kind on neighbouring databases is tested in
test_join_stability.py; attacks are in tests/adversarial/test_join_attacks.py.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
from tests._describes import (
    assert_integers_of_a_fresh_session,
    compile_at_every_salt,
    recorded_describes,
)

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.errors import DataError, InvalidParameter


def _tables(seed: int = 0) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    n = 600
    visits = pd.DataFrame(
        {
            "uid": rng.integers(0, 80, n),
            "region_id": rng.integers(0, 6, n),  # region 5 is in no public row
            "duration": rng.uniform(0, 100, n),
        }
    )
    people = pd.DataFrame({"uid": np.arange(80), "age": rng.integers(18, 90, 80)})
    regions = pd.DataFrame(
        {"region_id": [0, 1, 2, 3, 4, 4], "region": ["n", "s", "e", "w", "c", "c2"]}
    )
    return {"visits": visits, "people": people, "regions": regions}


def _session(tables: dict[str, Any] | None = None, **kwargs: Any) -> dp.Session:
    t = tables or _tables()
    options: dict[str, Any] = {"budget": dp.PureDP(10.0), "rng": 7}
    options.update(kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        return dp.Session.from_tables(
            {"visits": t["visits"], "people": t["people"]},
            privacy_unit="uid",
            public={"regions": t["regions"]},
            **options,
        )


def _exact(session: dp.Session, query: Query) -> dict[tuple[Any, ...], list[int]]:
    """The engine's exact integers for ``query`` (nothing spent)."""
    view, stripped = session._view_for(query, 123)
    compiled = view._compile(stripped, 1.0, 123)
    return view._engine.aggregate(compiled.plan)


def test_tables_lists_private_and_public_tables() -> None:
    session = _session()
    tables = session.tables
    assert set(tables) == {"visits", "people", "regions"}
    assert tables["regions"]["public"] and tables["regions"]["privacy_unit"] is None
    assert tables["visits"]["privacy_unit"] == "uid"
    assert session.privacy_unit == "uid"


def test_public_inner_join_counts_equal_a_pandas_merge() -> None:
    t = _tables()
    session = _session(t)
    query = (
        Query.from_table("visits")
        .join("regions", on="region_id")
        .group_by("region", keys=KeySet.from_table("regions", "region"))
        .bound(max_groups=10, max_rows=1000)
        .count()
    )
    merged = t["visits"].merge(t["regions"], on="region_id")
    expected = merged.groupby("region").size().to_dict()
    exact = _exact(session, query)
    assert {k[0]: v[0] for k, v in exact.items()} == expected


def test_left_join_keeps_rows_without_a_match() -> None:
    t = _tables()
    session = _session(t)
    query = (
        Query.from_table("visits")
        .join("regions", on="region_id", how="left")
        .bound(max_rows=1000)
        .count()
    )
    merged = t["visits"].merge(t["regions"], on="region_id", how="left")
    assert _exact(session, query)[()] == [len(merged)]
    inner = Query.from_table("visits").join("regions", on="region_id").bound(max_rows=1000).count()
    assert _exact(session, inner)[()][0] < len(merged)


def test_private_join_on_the_unit_matches_same_person_rows_only() -> None:
    t = _tables()
    session = _session(t)
    query = (
        Query.from_table("visits")
        .join("people", on="uid", truncate=1)
        .filter("age >= 50")
        .bound(max_rows=1000)
        .sum("duration", bounds=(0.0, 100.0))
        .count()
    )
    merged = t["visits"].merge(t["people"], on="uid")
    kept = merged[merged["age"] >= 50]
    exact = _exact(session, query)[()]
    assert exact[-1] == len(kept)


def test_truncation_keeps_at_most_truncate_rows_per_person() -> None:
    t = _tables()
    # Every person has three rows in `people`: a row meets at most `truncate` of them.
    t["people"] = pd.concat([t["people"]] * 3, ignore_index=True)
    session = _session(t)
    for cap in (1, 2, 3):
        query = (
            Query.from_table("visits").join("people", on="uid", truncate=cap).bound(max_rows=10**6)
        )
        assert _exact(session, query.count())[()] == [cap * len(t["visits"])]


def test_filters_on_the_joined_private_table_apply_before_truncation() -> None:
    t = _tables()
    # Each person has two rows in `people`: an old one (age 95) and their own.
    old = t["people"].assign(age=95)
    t["people"] = pd.concat([old, t["people"]], ignore_index=True)
    session = _session(t)
    young = t["people"][t["people"]["age"] < 60]["uid"]
    expected = int(t["visits"]["uid"].isin(young).sum())
    base = Query.from_table("visits")
    # Inner join: "age < 60" reads `people` alone, so it picks the rows truncation keeps
    # among (each visit meets the person's young row, whatever the salt).
    for salt_query in range(3):
        query = (
            base.join("people", on="uid", truncate=1)
            .filter("age < 60")
            .bound(max_rows=10**6)
            .count()
        )
        view, stripped = session._view_for(query, 100 + salt_query)
        compiled = view._compile(stripped, 1.0, 100 + salt_query)
        assert view._engine.aggregate(compiled.plan)[()] == [expected]
    # A condition that reads both tables, or a LEFT JOIN, applies after truncation: the
    # kept row is the salt's choice, so some visits lose their young row.
    for query in (
        base.join("people", on="uid", truncate=1).filter("age < 60 OR duration < -1"),
        base.join("people", on="uid", how="left", truncate=1).filter("age < 60"),
    ):
        counts = set()
        for salt in range(100, 110):
            view, stripped = session._view_for(query.bound(max_rows=10**6).count(), salt)
            compiled = view._compile(stripped, 1.0, salt)
            counts.add(view._engine.aggregate(compiled.plan)[()][0])
        assert max(counts) <= expected and min(counts) < expected


def test_contribution_bound_applies_after_the_join() -> None:
    t = _tables()
    # One person, one visit, region 4 twice in the public table: two joined rows.
    t["visits"] = pd.DataFrame({"uid": [1], "region_id": [4], "duration": [1.0]})
    session = _session(t)
    query = Query.from_table("visits").join("regions", on="region_id")
    assert _exact(session, query.bound(max_rows=5).count())[()] == [2]
    assert _exact(session, query.bound(max_rows=1).count())[()] == [1]


def test_explain_shows_the_joins_and_their_multiplicities() -> None:
    session = _session()
    query = (
        Query.from_table("visits")
        .join("regions", on="region_id")
        .join("people", on="uid", truncate=2)
        .bound(max_rows=3)
        .count()
    )
    text = str(session.explain(query, budget=0.1))
    assert "join regions" in text and "at most 2 row(s) per key" in text
    assert "join people" in text and "at most 2 row(s) per person" in text
    assert "at most 4 joined row(s)" in text
    assert session.spent == dp.PureDP(0.0)


def test_evaluate_charges_once_and_records_the_query_as_written() -> None:
    session = _session()
    query = Query.from_table("visits").join("regions", on="region_id").bound(max_rows=3).count()
    result = session.evaluate(query, budget=0.25)
    assert session.spent.epsilon == pytest.approx(2.5)
    assert len(session.history) == 1
    assert "regions" in session.history[0].description
    assert np.isfinite(result.dataframe["count"].iloc[0])


def test_a_single_private_table_is_the_default() -> None:
    t = _tables()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_tables(
            {"visits": t["visits"]},
            privacy_unit="uid",
            public={"regions": t["regions"]},
            budget=dp.PureDP(1.0),
            rng=1,
        )
    assert set(session.columns) == {"uid", "region_id", "duration"}
    query = Query().join("regions", on="region_id").bound(max_rows=3).count()
    assert _exact(session, query)[()][0] > 0


@pytest.mark.parametrize(
    ("query", "error", "match"),
    [
        (Query.from_table("visits").join("people", on="uid"), InvalidParameter, "truncate="),
        (
            Query.from_table("visits").join("regions", on="region_id", truncate=1),
            InvalidParameter,
            "public",
        ),
        (Query.from_table("regions"), InvalidParameter, "public table"),
        (Query.from_table("nowhere"), DataError, "no table"),
        (Query.from_table("visits").join("nowhere", on="x"), DataError, "no table"),
        (Query.from_table("visits").join("regions", on="nope"), DataError, "unknown"),
        (
            Query.from_table("visits").join("regions", on={"region_id": "region"}),
            InvalidParameter,
            "cannot compare",
        ),
        (
            Query.from_table("visits")
            .join("regions", on="region_id")
            .join("regions", on="region_id"),
            InvalidParameter,
            "joins once",
        ),
        (
            Query.from_table("visits").join("people", on="uid", truncate=1, columns=["uid"]),
            InvalidParameter,
            "privacy unit",
        ),
        (Query(), InvalidParameter, "several private tables"),
    ],
    ids=[
        "private join without truncate",
        "truncate on a public table",
        "query from a public table",
        "unknown base table",
        "unknown joined table",
        "unknown join column",
        "keys of different kinds",
        "a table joined twice",
        "the other table's unit brought in",
        "no table named with two private tables",
    ],
)
def test_refusals_spend_nothing(query: Query, error: type[Exception], match: str) -> None:
    session = _session()
    with pytest.raises(error, match=match):
        session.evaluate(query.bound(max_rows=2).count(), budget=0.1)
    assert session.spent == dp.PureDP(0.0) and not session.history


def test_clashing_column_names_are_refused_until_columns_are_chosen() -> None:
    t = _tables()
    t["regions"] = t["regions"].assign(Duration=1.0)
    session = _session(t)
    clash = Query.from_table("visits").join("regions", on="region_id").bound(max_rows=2).count()
    with pytest.raises(InvalidParameter, match="clashes"):
        session.explain(clash, budget=0.1)
    chosen = (
        Query.from_table("visits")
        .join("regions", on="region_id", columns=["region"])
        .bound(max_rows=2)
        .count()
    )
    session.explain(chosen, budget=0.1)


def test_keyset_from_a_private_table_is_refused() -> None:
    session = _session()
    query = (
        Query.from_table("visits")
        .join("people", on="uid", truncate=1)
        .group_by("age", keys=KeySet.from_table("people", "age"))
        .bound(max_groups=1, max_rows=2)
        .count()
    )
    with pytest.raises(InvalidParameter, match="private table"):
        session.evaluate(query, budget=0.1)
    assert not session.history


def test_table_features_need_a_session_over_several_tables() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        single = dp.Session.from_pandas(
            _tables()["visits"], privacy_unit="uid", budget=dp.PureDP(1.0), rng=1
        )
    for query in (
        Query.from_table("visits").bound(max_rows=1).count(),
        Query().join("regions", on="region_id").bound(max_rows=1).count(),
        Query()
        .group_by("region_id", keys=KeySet.from_table("regions", "region_id"))
        .bound(max_groups=1, max_rows=1)
        .count(),
    ):
        with pytest.raises(InvalidParameter, match="several tables"):
            single.evaluate(query, budget=0.1)
    with pytest.raises(InvalidParameter, match="several tables"):
        single.partition("region_id", [1], 0.5, table="visits")
    assert not single.history


def test_public_query_and_keyset_read_public_tables_only() -> None:
    session = _session()
    frame = session.public_query("SELECT region_id, count(*) AS n FROM regions GROUP BY 1")
    assert frame.set_index("region_id")["n"].to_dict() == {0: 1, 1: 1, 2: 1, 3: 1, 4: 2}
    keys = session.public_keyset("SELECT DISTINCT region FROM regions WHERE region_id < 2")
    assert keys.columns == ("region",) and set(keys.keys) == {("n",), ("s",)}
    with pytest.raises(DataError):
        session.public_query("SELECT * FROM visits")
    for statement in (
        "DROP TABLE regions",
        "SELECT 1; DROP TABLE regions",
        "INSERT INTO regions VALUES (9, 'x')",
    ):
        with pytest.raises(InvalidParameter):
            session.public_query(statement)
    assert len(session.public_query("SELECT * FROM regions")) == 6


def test_public_tables_are_read_once(tmp_path: Path) -> None:
    t = _tables()
    regions = tmp_path / "regions.csv"
    t["regions"].to_csv(regions, index=False)
    visits = tmp_path / "visits.parquet"
    t["visits"].to_parquet(visits)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_tables(
            {"visits": visits},
            privacy_unit="uid",
            public={"regions": regions},
            budget=dp.PureDP(1.0),
            rng=1,
        )
    query = Query().join("regions", on="region_id").bound(max_rows=10**6).count()
    before = _exact(session, query)
    # The file changes (every region now appears three times): the Session still
    # reads the rows it read at creation.
    pd.concat([t["regions"]] * 3).to_csv(regions, index=False)
    assert _exact(session, query) == before
    assert len(session.public_query("SELECT * FROM regions")) == 6


def test_from_duckdb_over_several_tables() -> None:
    t = _tables()
    connection = duckdb.connect()
    for name, frame in t.items():
        connection.register("frame", frame)
        connection.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
        connection.unregister("frame")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_duckdb(
            connection,
            ["visits", "people"],
            privacy_unit="uid",
            public=["regions"],
            budget=dp.PureDP(1.0),
            rng=1,
        )
    query = Query.from_table("visits").join("regions", on="region_id").bound(max_rows=10**6)
    merged = t["visits"].merge(t["regions"], on="region_id")
    assert _exact(session, query.count())[()] == [len(merged)]


def test_partition_by_a_column_of_one_private_table() -> None:
    t = _tables()
    session = _session(t)
    with pytest.raises(InvalidParameter, match="name the"):
        session.partition("age", [30], 0.5)
    with pytest.raises(InvalidParameter, match="public"):
        session.partition("region", ["n"], 0.5, table="regions")
    ages = sorted(t["people"]["age"].unique())[:3]
    parts = session.partition("age", ages, 0.5, table="people")
    query = Query.from_table("visits").join("people", on="uid", truncate=1).bound(max_rows=10**6)
    merged = t["visits"].merge(t["people"], on="uid")
    for age, part in parts.items():
        # One row per person in `people`: the part of a person is their age.
        expected = int((merged["age"] == age).sum())
        assert _exact(part, query.count())[()] == [expected]
    # Visits alone see only the part's persons too.
    for age, part in parts.items():
        persons = set(t["people"].loc[t["people"]["age"] == age, "uid"])
        expected = int(t["visits"]["uid"].isin(persons).sum())
        assert _exact(part, Query.from_table("visits").bound(max_rows=10**6).count())[()] == [
            expected
        ]


def test_spark_gives_the_duckdb_integers(spark: Any) -> None:
    t = _tables()
    query = (
        Query.from_table("visits")
        .join("regions", on="region_id", how="left")
        .join("people", on="uid", truncate=1)
        .filter("age >= 40")
        .group_by("region", keys=KeySet.from_table("regions", "region"))
        .bound(max_groups=2, max_rows=3)
        .count()
        .sum("duration", bounds=(0.0, 100.0))
    )
    on_duckdb = _exact(_session(t), query)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        on_spark = dp.Session.from_spark(
            {
                "visits": spark.createDataFrame(t["visits"]),
                "people": spark.createDataFrame(t["people"]),
            },
            privacy_unit="uid",
            public={"regions": spark.createDataFrame(t["regions"])},
            budget=dp.PureDP(10.0),
            rng=7,
        )
    assert _exact(on_spark, query) == on_duckdb


def test_joined_rows_take_bins_order_statistics_and_private_bounds() -> None:
    session = _session(budget=dp.ApproxDP(50.0, 1e-5))
    joined = Query.from_table("visits").join("people", on="uid", truncate=1)
    histogram = (
        joined.group_by_bins("age", [18, 40, 65, 90])
        .bound(max_groups=3, max_rows=20)
        .count()
        .median("duration", bounds=(0.0, 100.0))
    )
    result = session.evaluate(histogram, budget=0.2)
    assert list(result.dataframe["age_bin"]) == [0, 1, 2]
    assert result.dataframe["median_duration"].between(0.0, 100.0).all()
    private = joined.bound(max_rows=20).mean(
        "duration", bounds="private", search_range=(0.0, 1000.0)
    )
    clamped = session.evaluate(private, budget=0.2).dataframe
    assert 0.0 <= clamped["mean_duration_clamp_low"][0] < clamped["mean_duration_clamp_high"][0]
    selected = (
        Query.from_table("visits")
        .join("regions", on="region_id")
        .group_by("region", keys="private")
        .bound(max_groups=2, max_rows=5)
        .count()
    )
    released = session.evaluate(selected, budget=0.2).dataframe
    assert set(released["region"]) <= {"n", "s", "e", "w", "c", "c2"}
    assert len(session.history) == 3


def test_a_joined_view_drawn_with_another_salt_reuses_its_schema() -> None:
    # The salt enters a joined view only through the truncation's keyed hash, so the
    # view at any salt has the columns and types described at salt 0; the Session
    # describes it once per view, and the integers are those of a fresh Session.
    t = _tables()
    t["people"] = pd.concat([t["people"]] * 2, ignore_index=True)  # truncation ranks
    query = (
        Query.from_table("visits")
        .join("people", on="uid", truncate=1)
        .with_column("older", "age + 1")
        .filter("older >= 50")
        .bound(max_rows=1000)
        .sum("duration", bounds=(0.0, 100.0))
        .count()
    )
    session = _session(t)
    with recorded_describes(session) as described:
        _exact(session, query)
        after_first = len(described)
        compile_at_every_salt(session, query, (0, 5, 2**40))
        assert len(described) == after_first  # every salt's view: no DESCRIBE
    assert after_first > 0
    # The same integers as a Session that never saw the view, at each salt.
    assert_integers_of_a_fresh_session(session, lambda: _session(t), query, (123, 5))
    # Another view (another table joined) has its own cache.
    other = Query.from_table("visits").join("regions", on="region_id").bound(max_rows=10).count()
    assert (
        session._view_for(other, 0)[0]._engine._schema_cache
        is not session._view_for(query, 0)[0]._engine._schema_cache
    )


def test_a_filtered_persons_table_restricts_the_other_tables_to_its_persons() -> None:
    # visits -> purchases (private, on the visit) -> people (private, on the unit alone,
    # filtered): the persons that pass the filter on `people` are the only ones any
    # joined row can belong to, so the other tables' rows are restricted to them before
    # truncation (_joins._selects_persons). The answer is the plain merge's.
    rng = np.random.default_rng(5)
    n = 500
    visits = pd.DataFrame(
        {"uid": rng.integers(0, 60, n), "vid": np.arange(n), "duration": rng.uniform(0, 9, n)}
    )
    purchases = (
        visits[["uid", "vid"]].assign(amount=rng.uniform(0, 50, n)).sample(300, random_state=1)
    )
    people = pd.DataFrame({"uid": np.arange(60), "age": rng.integers(18, 90, 60)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_tables(
            {"visits": visits, "purchases": purchases, "people": people},
            privacy_unit="uid",
            budget=dp.PureDP(10.0),
            rng=7,
        )
    query = (
        Query.from_table("visits")
        .join("purchases", on="vid", truncate=1)
        .join("people", on="uid", truncate=1)
        .filter("age < 40 AND duration > 2")
        .bound(max_rows=10**6)
        .count()
        .sum("amount", bounds=(0.0, 50.0))
    )
    merged = visits.merge(purchases, on=["uid", "vid"]).merge(people, on="uid")
    kept = merged[(merged["age"] < 40) & (merged["duration"] > 2)]
    assert _exact(session, query)[()][0] == len(kept)
    view, _ = session._view_for(query, 123)
    # The base and `purchases` (joined as __t1) read `people`'s persons; `people`
    # itself, joined after them, does not.
    restricted = '("uid") IN (SELECT'
    before_people, people_part = view._engine.relation.split("AS __t1 ON")
    assert before_people.count(restricted) >= 2 and restricted not in people_part
    # A LEFT JOIN keeps the rows of persons without a match: nothing is restricted.
    left = Query.from_table("visits").join("people", on="uid", how="left", truncate=1)
    left_view, _ = session._view_for(left.filter("age < 40").bound(max_rows=10**6).count(), 123)
    assert restricted not in left_view._engine.relation
