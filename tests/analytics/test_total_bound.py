"""A bound on a person's rows over all groups: ``Query.bound(max_total_rows=T)``.

The rule (dpkit.analytics.engines._sql, step 3b): after the per-group bounds, a person
whose kept rows number ``C > T`` has every kept (person, group) pair scaled by
``T / C``. The calibration (dpkit.analytics._accounting.contribution_norms) then uses
L1 = min(T, k m) rows' worth and the largest L2 that such a contribution can have.
These tests check each piece against its statement: the norms against brute force, the
engine's integers against the bounds on neighbouring tables (exactly: the rule is
local, so a person's contribution is what the table with them minus the table without
them gives), the noise against the norms, and the refusals before the charge.
"""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics._accounting import contribution_norms
from dpkit.errors import SqlError

GROUPS = [f"g{i}" for i in range(6)]
KEYS = KeySet.from_values(g=GROUPS)


def _session(frame: pd.DataFrame, budget: dp.Guarantee | None = None) -> dp.Session:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        return dp.Session.from_pandas(
            frame, privacy_unit="user", budget=budget or dp.PureDP(1.0), rng=3
        )


def person(user: int, rows_per_group: dict[str, int], seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    groups = [g for g, n in rows_per_group.items() for _ in range(n)]
    return pd.DataFrame({"user": user, "g": groups, "x": rng.uniform(-1.0, 3.0, len(groups))})


def crowd(seed: int, people: int = 25) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frames = []
    for user in range(people):
        chosen = rng.choice(GROUPS, size=int(rng.integers(1, 5)), replace=False)
        frames.append(
            person(user, {str(g): int(rng.integers(1, 12)) for g in chosen}, seed * 100 + user)
        )
    return pd.concat(frames, ignore_index=True)


def query(k: int, m: int | None, t: int | None) -> Query:
    return (
        Query()
        .group_by("g", keys=KEYS)
        .bound(max_groups=k, max_rows=m, max_total_rows=t)
        .count()
        .sum("x", bounds=(-1.0, 3.0))
        .mean("x", bounds=(-1.0, 3.0))
        .count_distinct()
    )


def exact(session: dp.Session, q: Query, salt: int = 77) -> dict[tuple[object, ...], list[int]]:
    compiled = session._compile(q, 1.0, salt=salt)
    return session._engine.aggregate(compiled.plan)


# ------------------------------------------------------------------------- the norms
@pytest.mark.parametrize(
    ("s", "k", "total"), [(3, 4, 7), (2, 3, 5), (5, 2, 6), (4, 3, 12), (3, 5, 1)]
)
def test_norms_are_the_largest_over_every_allowed_contribution(s: int, k: int, total: int) -> None:
    """Brute force over integer contributions: at most k non-zero coordinates among
    k + 2, each in [0, s], summing to at most ``total`` (the maximum of a convex norm
    over this polytope is at a vertex, and the vertices are integer points)."""
    best_l1 = best_l2 = 0
    for x in itertools.product(range(s + 1), repeat=k + 2):
        if sum(1 for v in x if v) <= k and sum(x) <= total:
            best_l1 = max(best_l1, sum(x))
            best_l2 = max(best_l2, sum(v * v for v in x))
    assert contribution_norms(s, k, total) == (best_l1, best_l2)
    assert contribution_norms(s, k, None) == (k * s, k * s * s)


# ----------------------------------------------------------------- the engine's rule
@pytest.mark.parametrize(("k", "m", "t"), [(3, 30, 12), (2, 8, 9), (6, 5, 7), (4, 40, 4)])
def test_one_person_keeps_at_most_the_total(k: int, m: int, t: int) -> None:
    alone = person(7, {"g0": 30, "g1": 5, "g2": 1, "g3": 9, "g4": 2}, seed=1)
    out = exact(_session(alone), query(k, m, t))
    assert len(out) <= k
    rows = [v[0] for v in out.values()]
    assert sum(rows) <= t and max(rows) <= m
    # Sums (integer fixed point, one row at most `bound` in absolute value): within
    # the total in all and within m rows in each group.
    compiled = _session(alone)._compile(query(k, m, t), 1.0, salt=77)
    bound = compiled.plan.statistics[1].row_bound()
    assert compiled.plan.statistics[1].op == "fixed_sum"
    sums = [abs(v[1]) for v in out.values()]
    assert sum(sums) <= t * bound and max(sums) <= m * bound


def test_a_person_under_the_total_keeps_every_row() -> None:
    alone = person(7, {"g0": 3, "g1": 2}, seed=2)
    with_total = exact(_session(alone), query(3, 10, 5))
    without = exact(_session(alone), query(3, 10, None))
    # Rows, values and units are equal (the sums' fixed-point grids differ: each is
    # chosen from its own noise scale).
    assert {k: v[0::2] for k, v in with_total.items()} == {k: v[0::2] for k, v in without.items()}
    assert sum(v[0] for v in with_total.values()) == 5


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("k", "m", "t"), [(3, 6, 8), (4, 10, 10), (2, 3, 4)])
def test_neighbouring_tables_differ_by_at_most_the_norms(seed: int, k: int, m: int, t: int) -> None:
    """The attacker adds one person with many rows spread over every group. Adding
    them changes each statistic's vector over the groups by exactly their own
    contribution (the rule is local), whose L1 and squared L2 norms are within
    contribution_norms -- the numbers the noise is calibrated to."""
    rng = np.random.default_rng(seed)
    base = crowd(seed)
    victim = person(999, {g: int(rng.integers(1, 40)) for g in GROUPS}, seed=seed + 50)
    q = query(k, m, t)
    without = exact(_session(base), q)
    with_victim = exact(_session(pd.concat([base, victim], ignore_index=True)), q)
    alone = exact(_session(victim), q)
    compiled = _session(victim)._compile(q, 1.0, salt=77)
    for i, statistic in enumerate(compiled.plan.statistics):
        diff = [
            with_victim.get((g,), [0] * len(compiled.plan.statistics))[i]
            - without.get((g,), [0] * len(compiled.plan.statistics))[i]
            for g in GROUPS
        ]
        assert diff == [alone.get((g,), [0] * len(compiled.plan.statistics))[i] for g in GROUPS]
        if statistic.op == "units":
            assert sum(abs(d) for d in diff) <= k
            continue
        l1, l2_squared = contribution_norms(m * statistic.row_bound(), k, t * statistic.row_bound())
        assert sum(abs(d) for d in diff) <= l1
        assert sum(d * d for d in diff) <= l2_squared


def test_the_total_removes_the_bias_of_per_group_rows_at_the_same_l1() -> None:
    """Each person has 30 rows in g0 and 2 in g1. Per-group bounds (2 groups, 16 rows)
    and a total of 32 rows (2 groups, up to 32 in one) have the same L1 sensitivity
    (32 rows), but only the total keeps every row."""
    frame = pd.concat([person(u, {"g0": 30, "g1": 2}, seed=u) for u in range(20)])
    truth = {("g0",): 600, ("g1",): 40}
    per_group = exact(_session(frame), query(2, 16, None))
    total = exact(_session(frame), query(2, 32, 32))
    assert {key: v[0] for key, v in total.items()} == truth
    assert per_group[("g0",)][0] == 20 * 16
    session = _session(frame)
    a = session._compile(query(2, 16, None), 1.0, salt=1).specs[0].noise
    b = session._compile(query(2, 32, 32), 1.0, salt=1).specs[0].noise
    assert a.scale == b.scale


# ------------------------------------------------------------------ the calibration
@pytest.mark.parametrize(("k", "m", "t"), [(3, 30, 12), (4, 10, 25), (2, 5, 10), (5, 7, 1)])
def test_noise_is_calibrated_to_the_total(k: int, m: int, t: int) -> None:
    frame = person(1, {"g0": 1}, seed=0)
    q = Query().group_by("g", keys=KEYS).bound(max_groups=k, max_rows=m, max_total_rows=t)
    q = q.count().count_distinct()
    pure = _session(frame, dp.PureDP(1.0))._compile(q, 1.0, salt=1)
    rows, units = pure.specs
    # Laplace: the count's L1 is min(t, k m) rows; a person's units stay k groups.
    assert rows.noise.scale == pytest.approx(min(t, k * m) / float(rows.share), rel=1e-12)
    assert rows.noise.scale >= min(t, k * m) / float(rows.share)
    assert units.noise.scale == pytest.approx(k / float(units.share), rel=1e-12)
    # zCDP: sigma^2 = L2^2 / (2 rho) with L2^2 = q m^2 + r^2 (rounded up).
    gauss = _session(frame, dp.ZCDP(0.5))._compile(q, 0.5, salt=1)
    rows = gauss.specs[0]
    _, l2_squared = contribution_norms(m, k, t)
    assert l2_squared == min(k, t // m) * m * m + (0 if t // m >= k else (t - (t // m) * m) ** 2)
    sigma = rows.noise.scale
    assert Fraction(l2_squared) / (2 * Fraction(sigma) ** 2) <= rows.share
    assert sigma == pytest.approx(math.sqrt(l2_squared / (2 * float(rows.share))), rel=1e-3)


def test_a_total_that_cannot_bind_changes_nothing() -> None:
    frame = crowd(1)
    session = _session(frame)
    plain = session._compile(query(2, 4, None), 1.0, salt=5)
    loose = session._compile(query(2, 4, 8), 1.0, salt=5)
    assert loose.plan == plain.plan
    assert [s.noise for s in loose.specs] == [s.noise for s in plain.specs]
    # Ungrouped, or one group per person: the total is a per-group bound.
    one = session._compile(Query().bound(max_rows=10, max_total_rows=3).count(), 1.0, salt=5).plan
    assert (one.max_rows, one.max_total_rows) == (3, None)
    single = session._compile(query(1, 10, 4), 1.0, salt=5).plan
    assert (single.max_rows, single.max_total_rows) == (4, None)
    only_total = session._compile(query(3, None, 6), 1.0, salt=5).plan
    assert (only_total.max_rows, only_total.max_total_rows) == (6, 6)


# ------------------------------------------------------------------ the Session
def test_order_statistics_with_a_binding_total_are_refused_before_the_charge() -> None:
    session = _session(crowd(2))
    refused = [
        Query()
        .group_by("g", keys=KEYS)
        .bound(max_groups=3, max_rows=5, max_total_rows=6)
        .count()
        .median("x", bounds=(-1.0, 3.0)),
        Query()
        .group_by("g", keys=KEYS)
        .bound(max_groups=3, max_rows=5, max_total_rows=6)
        .max("x", bounds=(-1.0, 3.0)),
        Query()
        .group_by("g", keys=KEYS)
        .bound(max_groups=3, max_rows=5, max_total_rows=6)
        .count_distinct("x"),
    ]
    for q in refused:
        with pytest.raises(dp.InvalidParameter, match="max_total_rows"):
            session.evaluate(q, budget=dp.PureDP(0.1))
    assert session.spent == dp.PureDP(0.0) and not session.history
    # Not binding (t >= k m): allowed, the per-group bounds imply it.
    ok = (
        Query()
        .group_by("g", keys=KEYS)
        .bound(max_groups=3, max_rows=2, max_total_rows=6)
        .median("x", bounds=(-1.0, 3.0))
    )
    session.evaluate(ok, budget=dp.PureDP(0.1))
    assert session.spent == dp.PureDP(0.1)


def test_evaluate_and_explain_state_the_total() -> None:
    session = _session(crowd(3))
    q = query(3, 10, 12)
    explanation = session.explain(q, budget=dp.PureDP(0.5))
    assert any("at most 12 rows over all groups" in note for note in explanation.notes)
    count = next(s for s in explanation.statistics if s.role == "count")
    assert count.total_sensitivity == 12 and count.sensitivity == 10 and count.max_groups == 3
    result = session.evaluate(q, budget=dp.PureDP(0.5))
    assert set(result.dataframe["g"]) == set(GROUPS)
    assert session.spent == dp.PureDP(0.5)


# ------------------------------------------------------------------------- SQL
def test_sql_option_is_the_builders_bound() -> None:
    session = _session(crowd(4))
    statement = session.sql_query(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_groups_contributed = 3, "
        "max_total_rows_contributed = 12, group_keys = ['g0', 'g1', 'g2', 'g3', 'g4', 'g5']) "
        "g, COUNT(*) AS n, SUM(x, contribution_bounds_per_row => (-1, 3)) AS total "
        "FROM data GROUP BY g"
    )
    assert statement.query.max_total_rows == 12
    assert statement.query.max_rows is None and statement.query.max_groups == 3
    builder = (
        Query()
        .group_by("g", keys=KEYS)
        .bound(max_groups=3, max_total_rows=12)
        .count(name="n")
        .sum("x", bounds=(-1.0, 3.0), name="total")
    )
    one = session._compile(statement.query, 1.0, salt=9)
    two = session._compile(builder, 1.0, salt=9)
    assert one.plan == two.plan


def test_sql_refuses_a_percentile_under_a_binding_total_at_its_position() -> None:
    session = _session(crowd(5))
    text = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_groups_contributed = 3, "
        "max_rows_contributed = 5, max_total_rows_contributed = 6) g, "
        "PERCENTILE_CONT(x, 0.5, contribution_bounds_per_row => (-1, 3)) AS med "
        "FROM data GROUP BY g"
    )
    with pytest.raises(SqlError, match="max_total_rows_contributed = 6") as caught:
        session.sql(text)
    start = text.index("PERCENTILE_CONT")
    assert (caught.value.line, caught.value.column) == (1, start + 1)
    assert session.spent == dp.PureDP(0.0) and not session.history
