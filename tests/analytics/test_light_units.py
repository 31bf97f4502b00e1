"""Units with few rows skip the pair step (``SqlEngine._light_rows``), and pairs with few
distinct values skip the ranking of their values (``SqlEngine._distinct_values``).

Where a grouped plan ranks no groups (its public keys are at most ``max_groups``) and
asks counts of rows, counts of values and sums, a unit with at most ``L = min(max_rows,
max_total_rows)`` rows is bounded by nothing: its rows are added one by one instead of
pair by pair, and only the other units' rows go through the pairs, step 2's scaling and
the total bound. The claim is that the exact integers are those of the pair step on
every table; here they are compared with the statement that sends every unit through
it, on tables with units at, below and above ``L``, missing values, a filter, bins and a
total bound, on DuckDB and Spark; and one person's contribution stays within the norms
the noise is calibrated to. Distinct values: each person above the bound keeps exactly
``m``, each below keeps all, whatever the engine.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics._accounting import contribution_norms

GROUPS = [f"g{i}" for i in range(4)]
KEYS = KeySet.from_values(g=GROUPS)
SALT = 11


def _table(seed: int, people: int = 60) -> pd.DataFrame:
    """Persons of 1 to 40 rows (many at and just above the bounds below), half of them
    with every row in one group (so one more row than a bound is a pair above it), a
    quarter of the values missing."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 40], size=people)
    users = np.repeat(np.arange(people), sizes)
    one_group = np.repeat(rng.random(people) < 0.5, sizes)
    groups = np.where(
        one_group,
        np.repeat(rng.choice(GROUPS, people), sizes),
        rng.choice(GROUPS, len(users)),
    )
    x = rng.uniform(-2.0, 5.0, len(users))
    x[rng.random(len(users)) < 0.25] = np.nan
    return pd.DataFrame({"user": users, "g": groups, "x": x})


def _session(frame: pd.DataFrame, engine: str = "duckdb", spark: Any = None) -> dp.Session:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        if engine == "spark":
            return dp.Session.from_spark(
                spark.createDataFrame(frame), privacy_unit="user", budget=dp.PureDP(1.0), rng=3
            )
        return dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.PureDP(1.0), rng=3)


QUERIES = {
    "counts and sums": Query()
    .group_by("g", keys=KEYS)
    .bound(max_groups=4, max_rows=4)
    .count()
    .sum("x", bounds=(-1.0, 3.0))
    .mean("x", bounds=(-2.0, 5.0)),
    "a total bound": Query()
    .group_by("g", keys=KEYS)
    .bound(max_groups=4, max_rows=5, max_total_rows=8)
    .count()
    .sum("x", bounds=(0.0, 4.0)),
    "a total below the rows per group": Query()
    .group_by("g", keys=KEYS)
    .bound(max_groups=4, max_rows=8, max_total_rows=5)
    .count()
    .sum("x", bounds=(-2.0, 5.0)),
    "a filter and bins": Query()
    .filter("x > 0 OR x IS NULL")
    .group_by_bins("x", [0.0, 1.0, 2.0, 4.0])
    .bound(max_groups=3, max_rows=7, max_total_rows=16)
    .count()
    .mean("x", bounds=(0.0, 4.0)),
}


def _exact(session: dp.Session, query: Query, split: bool) -> tuple[str, Any]:
    compiled = session._compile(query, 1.0, salt=SALT)
    engine = session._engine
    if not split:
        engine = engine.with_relation(engine.relation, engine._relation_params)
        engine._light_rows = lambda *args: None  # every unit through the pair step
    return engine.compile(compiled.plan)[0], engine.aggregate(compiled.plan)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", list(QUERIES))
def test_light_units_give_the_pair_steps_integers(name: str, seed: int) -> None:
    session = _session(_table(seed))
    sql, split = _exact(session, QUERIES[name], split=True)
    assert "__light" in sql
    whole_sql, whole = _exact(session, QUERIES[name], split=False)
    assert "__light" not in whole_sql
    assert split == whole
    assert any(any(values) for values in whole.values())


def test_the_split_applies_only_where_nothing_is_ranked_or_counted_per_unit() -> None:
    session = _session(_table(0))
    ranked = Query().group_by("g", keys=KEYS).bound(max_groups=2, max_rows=4).count()
    persons = Query().group_by("g", keys=KEYS).bound(max_groups=4, max_rows=4).count_distinct()
    # A plan of order statistics only has no statistics to aggregate: its pair count
    # (count(*) of the pairs) is not a sum over rows (found by the review).
    median = (
        Query()
        .group_by("g", keys=KEYS)
        .bound(max_groups=4, max_rows=4)
        .median("x", bounds=(-2.0, 5.0))
    )
    for query in (ranked, persons, median):
        compiled = session._compile(query, 1.0, salt=SALT)
        assert "__light" not in session._engine.compile(compiled.plan)[0]


@pytest.mark.parametrize("seed", [3, 4])
def test_one_persons_contribution_is_their_own_and_within_the_norms(seed: int) -> None:
    # Adding a person changes each statistic's vector by what a table of that person
    # alone gives (the rule is local), within the norms the noise is calibrated to;
    # the victim is light (3 rows) or heavy (30 rows) in turn.
    base = _table(seed)
    query = QUERIES["a total bound"]
    for rows in (3, 30):
        rng = np.random.default_rng(seed + rows)
        victim = pd.DataFrame(
            {"user": 999, "g": rng.choice(GROUPS, rows), "x": rng.uniform(0.0, 4.0, rows)}
        )
        _, without = _exact(_session(base), query, split=True)
        _, with_victim = _exact(_session(pd.concat([base, victim])), query, split=True)
        _, alone = _exact(_session(victim), query, split=True)
        plan = _session(victim)._compile(query, 1.0, salt=SALT).plan
        width = len(plan.statistics)
        for i, statistic in enumerate(plan.statistics):
            diff = [
                with_victim.get((g,), [0] * width)[i] - without.get((g,), [0] * width)[i]
                for g in GROUPS
            ]
            assert diff == [alone.get((g,), [0] * width)[i] for g in GROUPS]
            l1, l2_squared = contribution_norms(
                plan.max_rows * statistic.row_bound(),
                plan.max_groups,
                (plan.max_total_rows or 0) * statistic.row_bound(),
            )
            assert sum(abs(d) for d in diff) <= l1
            assert sum(d * d for d in diff) <= l2_squared


def test_spark_computes_the_same_integers(spark: Any) -> None:
    frame = _table(5)
    for query in QUERIES.values():
        _, duck = _exact(_session(frame), query, split=True)
        sql, on_spark = _exact(_session(frame, "spark", spark), query, split=True)
        assert "__light" in sql
        assert on_spark == duck


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_distinct_values_rank_only_the_persons_above_the_bound(engine: str, request: Any) -> None:
    # Persons with at most m distinct values keep them all, without their hash; those
    # with more keep exactly m. Light persons draw from a shared pool; heavy persons'
    # values are their own, so the count is the pool values the light ones used plus m
    # per heavy person -- at m + 1 values as at 40.
    m = 4
    rng = np.random.default_rng(8)
    rows = []
    for user in range(50):
        distinct = int(rng.choice([1, 2, 3, 4, 5, 40]))
        if distinct <= m:
            values = [f"pool-{v}" for v in rng.choice(12, distinct, replace=False)]
        else:
            values = [f"{user}-{i}" for i in range(distinct)]
        rows += [(user, value) for value in values for _ in range(int(rng.integers(1, 3)))]
    frame = pd.DataFrame(rows, columns=["user", "v"])
    light = {v for _, v in rows if v.startswith("pool-")}
    heavy = {u for u, v in rows if not v.startswith("pool-")}
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    session = _session(frame, engine, spark)
    query = Query().bound(max_rows=m).count_distinct("v", name="values")
    compiled = session._compile(query, 1.0, salt=SALT)
    assert session._engine.aggregate(compiled.plan) == {(): [len(light) + m * len(heavy)]}
