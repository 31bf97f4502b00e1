"""Contribution bounding in the engine: bounds hold, and the rule is local to a person.

The rule (dpkit.analytics.engines): per (person, group) pair with c rows, count
min(c, m) and sums trunc(S m / c); each person keeps k groups by keyed hash.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query

GROUPS = [f"g{i}" for i in range(20)]


def heavy_person(user: int, groups: list[str], rows_per_group: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "user": user,
            "g": np.repeat(groups, rows_per_group),
            "x": rng.uniform(0, 1, len(groups) * rows_per_group),
        }
    )


def bounded_query(max_groups: int, max_rows: int) -> Query:
    return (
        Query()
        .group_by("g", keys=KeySet.from_values(g=GROUPS))
        .bound(max_groups=max_groups, max_rows=max_rows)
        .count()
        .sum("x", bounds=(0.0, 1.0))
        .count_distinct()
    )


def run(
    df: pd.DataFrame, max_groups: int, max_rows: int, salt: int = 99
) -> dict[tuple[object, ...], list[int]]:
    session = dp.Session.from_pandas(df, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    compiled = session._compile(bounded_query(max_groups, max_rows), 1.0, salt=salt)
    return session._engine.aggregate(compiled.plan)


@pytest.mark.parametrize(("max_groups", "max_rows"), [(1, 1), (3, 2), (5, 10), (20, 50)], ids=str)
def test_one_person_within_bounds(max_groups: int, max_rows: int) -> None:
    df = heavy_person(7, GROUPS[:12], rows_per_group=30, seed=1)
    out = run(df, max_groups, max_rows)
    assert len(out) == min(max_groups, 12)
    assert all(v[0] == min(max_rows, 30) for v in out.values())
    assert all(v[2] == 1 for v in out.values())


def test_rule_depends_only_on_the_persons_rows() -> None:
    first = heavy_person(7, GROUPS[:12], rows_per_group=30, seed=1)
    alone = run(first, 4, 3)
    for seed in range(3):
        others = pd.concat(
            [
                heavy_person(
                    100 + i,
                    list(np.random.default_rng(seed + i).choice(GROUPS[12:], 4)),
                    25,
                    seed + i,
                )
                for i in range(10)
            ]
        )
        together = run(pd.concat([first, others]), 4, 3)
        # The first person's groups are disjoint from the others': the kept groups,
        # row counts and (exact integer) sums of the first person are unchanged.
        assert {k: v for k, v in together.items() if k[0] in GROUPS[:12]} == alone


def test_salt_changes_the_kept_rows() -> None:
    first = heavy_person(7, GROUPS[:12], rows_per_group=30, seed=1)
    kept = {
        tuple(sorted((k, tuple(v)) for k, v in run(first, 4, 3, salt=s).items())) for s in range(6)
    }
    assert len(kept) > 1  # with one fixed rule, every salt would keep the same rows


def test_scaled_pair_is_the_average_m_times() -> None:
    # One person, one group, 30 rows: count m, sum = trunc(S * m / c) in fixed point.
    df = heavy_person(7, GROUPS[:1], rows_per_group=30, seed=3)
    session = dp.Session.from_pandas(df, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    query = (
        Query()
        .group_by("g", keys=KeySet.from_values(g=GROUPS))
        .bound(max_groups=1, max_rows=4)
        .count()
        .sum("x", bounds=(0.0, 1.0))
    )
    compiled = session._compile(query, 1.0, salt=3)
    out = session._engine.aggregate(compiled.plan)
    inv = compiled.specs[1].statistic.inv
    exact = int(np.round(df["x"].to_numpy() * inv).sum())
    assert out[("g0",)] == [4, (exact * 4) // 30]


def test_sensitivity_holds_for_adversarial_persons() -> None:
    # Persons with many rows in many groups, values at the bounds (the worst case):
    # adding one changes every group by at most the per-group sensitivity, and at
    # most max_groups groups change.
    rng = np.random.default_rng(5)
    base = pd.DataFrame(
        {
            "user": rng.integers(0, 40, 600),
            "g": rng.choice(GROUPS, 600),
            "x": rng.uniform(0, 1, 600),
        }
    )
    k, m = 3, 4
    before = run(base, k, m)
    session = dp.Session.from_pandas(base, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    row_bound = session._compile(bounded_query(k, m), 1.0, salt=1).specs[1].statistic.row_bound()
    # The bound is tight: a heavy person at the upper bound adds exactly m * row_bound
    # to each kept group (checked below), so a looser rule would fail.
    tight = False
    for user, value in [(1000, 1.0), (1001, 0.0), (1002, 0.999)]:
        heavy = heavy_person(user, GROUPS, rows_per_group=25, seed=user)
        heavy["x"] = value
        after = run(pd.concat([base, heavy]), k, m)
        changed = 0
        for key in GROUPS:
            old = before.get((key,), [0, 0, 0])
            new = after.get((key,), [0, 0, 0])
            if old != new:
                changed += 1
            assert 0 <= new[0] - old[0] <= m  # rows
            assert 0 <= new[2] - old[2] <= 1  # persons
            assert abs(new[1] - old[1]) <= m * row_bound  # fixed-point sum
            tight = tight or abs(new[1] - old[1]) == m * row_bound
        assert changed <= k
    assert tight


# ------------------------------------------------- count of distinct values per person


def distinct_query(max_groups: int, max_rows: int) -> Query:
    return (
        Query()
        .group_by("g", keys=KeySet.from_values(g=GROUPS))
        .bound(max_groups=max_groups, max_rows=max_rows)
        .count()
        .count_distinct("v")
    )


def run_distinct(df: pd.DataFrame, max_groups: int, max_rows: int) -> dict:
    session = dp.Session.from_pandas(df, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    compiled = session._compile(distinct_query(max_groups, max_rows), 1.0, salt=5)
    return session._engine.aggregate(compiled.plan)


def person_values(user: int, groups: list[str], distinct: int, repeats: int) -> pd.DataFrame:
    values = [f"{user}-{i}" for i in range(distinct)] * repeats
    return pd.DataFrame(
        {"user": user, "g": np.repeat(groups, len(values)), "v": values * len(groups)}
    )


@pytest.mark.parametrize(("max_groups", "max_rows"), [(1, 1), (3, 4), (12, 50)], ids=str)
def test_distinct_values_bounded_per_person_and_group(max_groups: int, max_rows: int) -> None:
    # One person with 9 distinct values (each on 3 rows) in 12 groups: each kept group
    # counts min(9, m) distinct values, in min(k, 12) groups.
    out = run_distinct(person_values(3, GROUPS[:12], distinct=9, repeats=3), max_groups, max_rows)
    assert len(out) == min(max_groups, 12)
    assert all(v[1] == min(9, max_rows) for v in out.values())


def test_distinct_values_shared_between_persons_count_once() -> None:
    shared = pd.concat(
        [person_values(u, GROUPS[:1], distinct=4, repeats=2) for u in (1, 2)], ignore_index=True
    )
    shared["v"] = shared["v"].str.split("-").str[1]  # both persons hold values 0..3
    out = run_distinct(shared, max_groups=1, max_rows=10)
    assert out[(GROUPS[0],)][1] == 4


def test_distinct_sensitivity_of_one_person_is_max_rows() -> None:
    # Adding a person changes every group's distinct count by at most m, in at most k
    # groups, whatever the others hold (the rule is local to the person).
    others = pd.concat(
        [person_values(u, GROUPS[:6], distinct=5, repeats=2) for u in range(4)], ignore_index=True
    )
    newcomer = person_values(99, GROUPS[:6], distinct=30, repeats=1)
    before = run_distinct(others, max_groups=2, max_rows=7)
    after = run_distinct(pd.concat([others, newcomer], ignore_index=True), 2, 7)
    changes = [after[key][1] - before.get(key, [0, 0])[1] for key in after]
    assert all(0 <= c <= 7 for c in changes)
    assert sum(c > 0 for c in changes) <= 2
    assert sum(changes) == 2 * 7  # the newcomer's kept values are all new


def test_distinct_noise_is_calibrated_to_max_rows() -> None:
    session = dp.Session.from_pandas(
        person_values(1, GROUPS[:2], 3, 1), privacy_unit="user", budget=dp.PureDP(1.0)
    )
    compiled = session._compile(distinct_query(2, 7), 1.0, salt=5)
    count_spec, distinct_spec = compiled.specs
    # Same per-person reach as the row count: k groups times m rows or values.
    assert distinct_spec.noise == count_spec.noise
