"""Attacks on the total bound (``Query.bound(max_total_rows=)``,
``max_total_rows_contributed`` in SQL), written as an analyst who knows the schema and
the public parameters but no row would write them.

What must hold (docs/analytics.md, threat model): a person's rows over all groups
count at most the total, on DuckDB and on Spark; no arithmetic on the scaled sums
fails after the charge, whatever the public bounds; every refusal comes before the
charge and is the same on every table of the schema.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.errors import SqlError

GROUPS = [f"g{i}" for i in range(8)]
KEYS = KeySet.from_values(g=GROUPS)
VICTIM = 4242


def table(victim_rows: int, others: int = 30, seed: int = 0) -> pd.DataFrame:
    """Others with a few rows each; the victim (the attacker's target) with
    ``victim_rows`` rows in every group, at the value the attacker wants to detect."""
    rng = np.random.default_rng(seed)
    frames = [
        pd.DataFrame(
            {
                "user": np.arange(others).repeat(3),
                "g": rng.choice(GROUPS, 3 * others),
                "x": rng.uniform(0.0, 1.0, 3 * others),
            }
        )
    ]
    if victim_rows:
        frames.append(pd.DataFrame({"user": VICTIM, "g": np.repeat(GROUPS, victim_rows), "x": 1e9}))
    return pd.concat(frames, ignore_index=True)


def session_on(engine: str, frame: pd.DataFrame, request: pytest.FixtureRequest) -> dp.Session:
    budget = dp.ApproxDP(4.0, 1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        if engine == "spark":
            spark: Any = request.getfixturevalue("spark")
            return dp.Session.from_spark(
                spark.createDataFrame(frame), privacy_unit="user", budget=budget, rng=5
            )
        return dp.Session.from_pandas(frame, privacy_unit="user", budget=budget, rng=5)


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_spreading_rows_over_every_group_does_not_pass_the_total(
    engine: str, request: pytest.FixtureRequest
) -> None:
    """The attacker puts 50 rows in each of 8 groups (k = 8 groups, 50 rows each
    allowed), hoping each group's count moves by 50: the total of 10 caps the victim's
    rows over all groups, so the counts move by 10 in all."""
    q = (
        Query()
        .group_by("g", keys=KEYS)
        .bound(max_groups=8, max_rows=50, max_total_rows=10)
        .count()
        .sum("x", bounds=(0.0, 1e9))
    )
    with_victim = session_on(engine, table(50), request)
    without = session_on(engine, table(0), request)
    a = with_victim._engine.aggregate(with_victim._compile(q, 1.0, salt=3).plan)
    b = without._engine.aggregate(without._compile(q, 1.0, salt=3).plan)
    moved = [a.get((g,), [0, 0])[0] - b.get((g,), [0, 0])[0] for g in GROUPS]
    assert sum(moved) <= 10 and min(moved) >= 0
    plan = with_victim._compile(q, 1.0, salt=3).plan
    bound = plan.statistics[1].row_bound()
    sums = [a.get((g,), [0, 0])[1] - b.get((g,), [0, 0])[1] for g in GROUPS]
    assert sum(abs(s) for s in sums) <= 10 * bound


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
@pytest.mark.parametrize(
    ("bounds", "k", "m", "t"),
    [
        ((-1e18, 1e18), 2, 2**31, 2**31 - 1),
        ((0.0, 2.0**60), 64, 2**25, 2**30),
        ((-5e-300, 5e-300), 3, 1000, 1500),
    ],
    ids=["huge-bounds-huge-bounds", "2^60-many-groups", "tiny-bounds"],
)
def test_extreme_public_bounds_never_fail_after_the_charge(
    engine: str,
    bounds: tuple[float, float],
    k: int,
    m: int,
    t: int,
    request: pytest.FixtureRequest,
) -> None:
    """Public bounds chosen to overflow the scaled sums (step 3b multiplies a pair's
    sum by the total): the query is refused before the charge or answered; it never
    fails after."""
    frame = table(40)
    frame.loc[frame["user"] == VICTIM, "x"] = bounds[1]
    session = session_on(engine, frame, request)
    q = (
        Query()
        .group_by("g", keys=KEYS)
        .bound(max_groups=k, max_rows=m, max_total_rows=t)
        .count()
        .sum("x", bounds=bounds)
        .mean("x", bounds=bounds)
    )
    try:
        session.evaluate(q, budget=dp.ApproxDP(4.0, 0))
    except (dp.InvalidParameter, dp.DataError, dp.BudgetExceeded):
        assert session.spent == dp.ApproxDP(0.0, 0.0) and not session.history
    else:
        assert len(session.history) == 1


@pytest.mark.parametrize(
    "build",
    [
        lambda q: q.median("x", bounds=(0.0, 1.0)),
        lambda q: q.quantile("x", [0.1, 0.9], bounds=(0.0, 1.0)),
        lambda q: q.min("x", bounds=(0.0, 1.0)),
        lambda q: q.count_distinct("x"),
    ],
    ids=["median", "quantiles", "min", "distinct"],
)
def test_a_refused_total_is_refused_on_every_table(build: Any) -> None:
    """The refusal of a per-group statistic under a binding total depends on the query
    alone: the same words with the victim, without, and on a one-row table; nothing
    spent."""
    q = build(Query().group_by("g", keys=KEYS).bound(max_groups=2, max_rows=3, max_total_rows=4))
    messages = set()
    one_row = pd.DataFrame({"user": [VICTIM], "g": ["g0"], "x": [0.5]})
    for frame in (table(5), table(0), one_row):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dp.InsecureRandomWarning)
            session = dp.Session.from_pandas(
                frame, privacy_unit="user", budget=dp.PureDP(1.0), rng=1
            )
        with pytest.raises(dp.InvalidParameter) as caught:
            session.evaluate(q, budget=dp.PureDP(0.5))
        messages.add(str(caught.value))
        assert session.spent == dp.PureDP(0.0) and not session.history
    assert len(messages) == 1


@pytest.mark.parametrize("value", ["0", "-3", "'ten'", "2.5", "4294967296", "TRUE"])
def test_bad_total_options_are_sql_errors_before_the_charge(value: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_pandas(
            table(3), privacy_unit="user", budget=dp.PureDP(1.0), rng=1
        )
    text = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, max_groups_contributed = 2, "
        f"max_total_rows_contributed = {value}, group_keys = ['g0', 'g1']) g, COUNT(*) AS n "
        "FROM data GROUP BY g"
    )
    with pytest.raises((SqlError, dp.InvalidParameter)):
        session.sql(text)
    assert session.spent == dp.PureDP(0.0) and not session.history
