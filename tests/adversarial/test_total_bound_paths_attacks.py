"""Attacks on every path of the total bound (``Query.bound(max_total_rows=T)``, SQL
``max_total_rows_contributed``), written as an attacker would: an analyst who knows the
schema and every public parameter, adds one person (the victim) to a table and measures
how far every exact integer the engine returns moves.

What must hold (docs/analytics.md, "A total over all groups"; DESIGN.md's threat model):

* per statistic, the victim's change over the groups has L1 norm at most
  ``min(T, k m)`` rows' worth and squared L2 norm at most ``q (m b)^2 + (r b)^2``
  (``contribution_norms``), moves at most ``k`` groups and at most ``m`` rows' worth
  in one; distinct counts of persons at most 1 per group; and the noise is calibrated
  to at least those norms -- on every path a Plan with a total can take (filters,
  derived columns, NULL/NaN values and keys, several key columns, bins, private keys,
  few and many public keys, private clamping bounds, partitions, per-person rows,
  joins) and on Spark;
* the engine's arithmetic never fails (nor wraps) at the public extremes the
  overflow comment of ``SqlEngine._total_bounded`` claims to cover;
* every refusal comes before the charge and depends on public parameters only.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics._accounting import contribution_norms
from dpkit.analytics._compile import CompiledQuery
from dpkit.errors import SqlError

GROUPS = [f"g{i}" for i in range(6)]
KEYS = KeySet.from_values(g=GROUPS)
VICTIM = 9_001
SALT = 4_242


# --------------------------------------------------------------------------- tables
def crowd(seed: int, people: int = 30) -> pd.DataFrame:
    """Other persons: a few rows each, in a few groups; values of both signs, some
    NULL and NaN values, some NULL group keys. A fresh copy (callers may change it) of
    the table built once per ``(seed, people)``: building it is ~35 ms, a seventh of
    a neighbours test."""
    return _crowd(seed, people).copy()


@functools.cache
def _crowd(seed: int, people: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frames = []
    for user in range(people):
        n = int(rng.integers(1, 15))
        g: list[Any] = list(rng.choice(GROUPS[: int(rng.integers(1, 7))], n))
        x: list[Any] = list(rng.uniform(-8.0, 8.0, n))
        if n > 3:
            x[0], x[1], g[2] = np.nan, None, None
        frames.append(
            pd.DataFrame(
                {
                    "user": user,
                    "g": g,
                    "h": rng.choice(["p", "q"], n),
                    "x": pd.array(x, dtype="Float64"),
                    "region": rng.choice([1, 2], n),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def victim(spread: dict[str, int], value: float, region: int = 1) -> pd.DataFrame:
    """The victim: ``spread[g]`` rows in group g (very uneven), at an extreme value,
    plus rows the bounding must ignore or count as rows only (NULL key, NaN, NULL)."""
    groups: list[Any] = [g for g, n in spread.items() for _ in range(n)]
    values: list[Any] = [value if i % 3 else -value for i in range(len(groups))]
    groups += [None, None, GROUPS[0], GROUPS[1], GROUPS[2]]
    values += [value, value, np.nan, None, value]
    n = len(groups)
    return pd.DataFrame(
        {
            "user": VICTIM,
            "g": groups,
            "h": ["p" if i % 2 else "q" for i in range(n)],
            "x": pd.array(values, dtype="Float64"),
            "region": region,
        }
    )


UNEVEN = {"g0": 60, "g1": 1, "g2": 9, "g3": 3, "g4": 25, "g5": 2}


def session_of(
    frame: pd.DataFrame, budget: Any, engine: str = "duckdb", spark: Any = None
) -> dp.Session:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        if engine == "spark":
            return dp.Session.from_spark(
                spark.createDataFrame(frame), privacy_unit="user", budget=budget, rng=3
            )
        return dp.Session.from_pandas(frame, privacy_unit="user", budget=budget, rng=3)


# ---------------------------------------------------------------------- the checker
def exact(
    session: dp.Session, query: Query, budget: object
) -> tuple[CompiledQuery, dict[Any, list[int]]]:
    view, stripped = session._view_for(query, SALT)
    compiled = view._compile(stripped, budget, SALT)
    return compiled, view._engine.aggregate(compiled.plan)


def check_victim_within_norms(
    compiled: CompiledQuery,
    with_victim: dict[Any, list[int]],
    without: dict[Any, list[int]],
    k: int,
    m: int,
    t: int,
) -> None:
    """The attacker's measurement against the calibration, statistic by statistic."""
    width = len(compiled.specs)
    zero = [0] * width
    keys = set(with_victim) | set(without)
    assert compiled.plan.max_total_rows == (t if t < k * m else None)
    moved_any = False
    for i, spec in enumerate(compiled.specs):
        diff = [int(with_victim.get(key, zero)[i]) - int(without.get(key, zero)[i]) for key in keys]
        moved_any |= any(diff)
        assert sum(1 for d in diff if d) <= k, (spec.role, diff)
        if spec.statistic.op == "units":
            assert max(map(abs, diff), default=0) <= 1
            l1, l2 = k, k
        else:
            b = spec.statistic.row_bound()
            # The claim, from public parameters alone (not from the spec).
            l1, l2 = contribution_norms(m * b, k, t * b)
            assert max(map(abs, diff), default=0) <= m * b, (spec.role, diff)
        assert sum(abs(d) for d in diff) <= l1, (spec.role, diff, l1)
        assert sum(d * d for d in diff) <= l2, (spec.role, diff, l2)
        # The noise covers at least these norms at the statistic's share.
        noise = spec.noise
        if noise.kind == "laplace":
            assert Fraction(l1) / Fraction(noise.scale) <= spec.share
        else:
            assert Fraction(l2) / (2 * Fraction(noise.scale) ** 2) <= spec.share
    assert moved_any  # the victim was seen at all (the test is not vacuous)


def neighbours(
    build: Any,
    base: pd.DataFrame,
    extra: pd.DataFrame,
    query: Query,
    budget: object,
    k: int,
    m: int,
    t: int,
) -> CompiledQuery:
    with_s = build(pd.concat([base, extra], ignore_index=True))
    without_s = build(base)
    return sessions_within_norms(with_s, without_s, query, budget, k, m, t)


def sessions_within_norms(
    with_s: dp.Session,
    without_s: dp.Session,
    query: Query,
    budget: object,
    k: int,
    m: int,
    t: int,
) -> CompiledQuery:
    """``neighbours`` on Sessions already open (with and without the victim)."""
    compiled, a = exact(with_s, query, budget)
    compiled_b, b = exact(without_s, query, budget)
    assert compiled.plan == compiled_b.plan  # public parameters only
    check_victim_within_norms(compiled, a, b, k, m, t)
    return compiled


def stats(q: Query, bounds: tuple[float, float] = (-5.0, 3.0), column: str = "x") -> Query:
    return (
        q.count()
        .sum(column, bounds=bounds)
        .mean(column, bounds=bounds)
        .variance(column, bounds=bounds)
        .count_distinct()
    )


# ------------------------------------------------------------- neighbours, DuckDB
@functools.cache
def crowd_session(budget: Any, victim_value: float | None) -> dp.Session:
    """``session_of`` crowd(1), with the victim at ``victim_value`` (None: without):
    opened once per process for the cases below (the Session without the victim serves
    all 30 of a budget, the one with it the 6 (k, m, t) of a value). They read exact
    integers only (``exact`` compiles and runs the plan: nothing spent, no state), and
    opening a Session was ~40% of a case."""
    frame = crowd(1)
    if victim_value is not None:
        frame = pd.concat([frame, victim(UNEVEN, victim_value)], ignore_index=True)
    return session_of(frame, budget)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize(
    ("k", "m", "t"), [(3, 6, 8), (6, 40, 7), (4, 2, 5), (2, 100, 101), (6, 1, 3), (5, 10, 1)]
)
@pytest.mark.parametrize(
    "bounds", [(-5.0, 3.0), (2.0, 7.0), (-9.0, -4.0), (-1e6, 1e6), (-3e-9, 5e-9)]
)
def test_victim_moves_every_statistic_within_the_calibrated_norms(
    noise: str, k: int, m: int, t: int, bounds: tuple[float, float]
) -> None:
    budget = dp.PureDP(1.0) if noise == "laplace" else dp.ZCDP(0.5)
    q = stats(
        Query().group_by("g", keys=KEYS).bound(max_groups=k, max_rows=m, max_total_rows=t), bounds
    )
    value = bounds[1] * 1e3 if bounds[1] > 0 else bounds[0] * 1e3
    sessions_within_norms(
        crowd_session(budget, value),
        crowd_session(budget, None),
        q,
        1.0 if noise == "laplace" else 0.5,
        k,
        m,
        t,
    )


@pytest.mark.parametrize(("k", "m", "t"), [(3, 6, 8), (6, 40, 7), (4, 20, 30), (2, 100, 50)])
def test_victim_change_is_exactly_the_documented_rule(k: int, m: int, t: int) -> None:
    """Beyond the norms: the victim's rows per group are exactly step 2 then step 3b
    (w = min(c, m) in the groups it keeps -- read off the units statistic -- then
    floor(w T / C) when C = sum w > T), so the rule the proof is about is the rule
    that runs."""
    q = Query().group_by("g", keys=KEYS).bound(max_groups=k, max_rows=m, max_total_rows=t)
    q = q.count().count_distinct()
    base, extra = crowd(21), victim(UNEVEN, 1.0)
    _, a = exact(session_of(pd.concat([base, extra]), dp.PureDP(1.0)), q, 1.0)
    _, b = exact(session_of(base, dp.PureDP(1.0)), q, 1.0)
    kept = [g for g in GROUPS if a.get((g,), [0, 0])[1] - b.get((g,), [0, 0])[1] == 1]
    assert len(kept) == min(k, len(GROUPS))
    rows = extra.dropna(subset=["g"]).groupby("g").size()
    w = {g: min(int(rows[g]), m) for g in kept}
    total = sum(w.values())
    want = {g: (w[g] if total <= t else w[g] * t // total) for g in kept}
    got = {g: a.get((g,), [0, 0])[0] - b.get((g,), [0, 0])[0] for g in GROUPS}
    assert got == {g: want.get(g, 0) for g in GROUPS}


def test_the_check_has_teeth_a_plan_run_without_step_3b_is_caught() -> None:
    """Control: the same measurement, with the engine run on the plan minus its total
    (the bypass the review looks for: calibrated to the total, executed without it),
    fails the norms check."""
    k, m, t = 4, 30, 6
    q = stats(Query().group_by("g", keys=KEYS).bound(max_groups=k, max_rows=m, max_total_rows=t))
    base, extra = crowd(22), victim(UNEVEN, 50.0)
    with_s = session_of(pd.concat([base, extra], ignore_index=True), dp.PureDP(1.0))
    without_s = session_of(base, dp.PureDP(1.0))
    compiled = with_s._compile(q, 1.0, SALT)
    bypass = dataclasses.replace(compiled.plan, max_total_rows=None)
    a, b = with_s._engine.aggregate(bypass), without_s._engine.aggregate(bypass)
    with pytest.raises(AssertionError):
        check_victim_within_norms(compiled, a, b, k, m, t)


def test_filters_derived_columns_two_key_columns() -> None:
    keys = KeySet.from_values(g=GROUPS, h=["p", "q"])
    k, m, t = 5, 20, 9
    q = (
        Query()
        .with_column("y", "x * 2 - 1")
        .filter("x IS NULL OR x > -1000000")
        .group_by("g", "h", keys=keys)
        .bound(max_groups=k, max_rows=m, max_total_rows=t)
    )
    q = stats(q, (-20.0, 20.0), column="y")
    neighbours(
        lambda f: session_of(f, dp.PureDP(1.0)), crowd(2), victim(UNEVEN, 500.0), q, 1.0, k, m, t
    )


def test_bins_as_groups() -> None:
    k, m, t = 4, 30, 10
    frame = crowd(3)
    extra = victim(UNEVEN, 2.5)
    extra["x"] = pd.array(np.linspace(-9, 9, len(extra)), dtype="Float64")
    q = (
        Query()
        .group_by_bins("x", [-10.0, -5.0, 0.0, 5.0, 10.0])
        .bound(max_groups=k, max_rows=m, max_total_rows=t)
    )
    q = q.count().sum("region", bounds=(0.0, 2.0)).mean("region", bounds=(0.0, 2.0))
    neighbours(lambda f: session_of(f, dp.PureDP(1.0)), frame, extra, q, 1.0, k, m, t)


def test_private_key_selection_units_and_threshold() -> None:
    """keys='private': the selection's units statistic stays one per group (not the
    total's rows), and the rows and sums are within the total."""
    k, m, t = 4, 20, 6
    q = stats(
        Query().group_by("g", keys="private").bound(max_groups=k, max_rows=m, max_total_rows=t)
    )
    compiled = neighbours(
        lambda f: session_of(f, dp.ApproxDP(2.0, 1e-6)),
        crowd(4),
        victim(UNEVEN, 99.0),
        q,
        dp.ApproxDP(1.0, 1e-7),
        k,
        m,
        t,
    )
    selection = [s for s in compiled.specs if s.aggregation == "__selection"]
    assert len(selection) == 1 and selection[0].noise.total is None
    assert selection[0].noise.groups == k and selection[0].noise.sensitivity == 1


@pytest.mark.parametrize("n_keys", [2, 300])
def test_few_and_many_public_keys(n_keys: int) -> None:
    """Two public keys (<= max_groups: step 3 is skipped, __bounded) and 300 keys
    (above FEW_KEYS: the keys are bound once, groups scanned from the rows)."""
    names = [f"k{i}" for i in range(n_keys)]
    rng = np.random.default_rng(5)
    base = pd.DataFrame(
        {"user": rng.integers(0, 50, 400), "g": rng.choice(names, 400), "x": rng.normal(size=400)}
    )
    spread = {names[i % n_keys]: 1 + (7 * i) % 23 for i in range(min(n_keys, 120))}
    extra = pd.DataFrame(
        {"user": VICTIM, "g": [g for g, c in spread.items() for _ in range(c)], "x": 50.0}
    )
    k, m, t = (3, 40, 12) if n_keys == 2 else (80, 10, 37)
    q = stats(
        Query()
        .group_by("g", keys=KeySet.from_values(g=names))
        .bound(max_groups=k, max_rows=m, max_total_rows=t)
    )
    neighbours(lambda f: session_of(f, dp.ZCDP(1.0)), base, extra, q, 1.0, k, m, t)


def test_private_clamping_bounds_both_stages() -> None:
    """bounds='private': the aggregate's plan (search range) is within the total, and
    the ungrouped bounds histogram keeps at most min(m, T) values of the victim."""
    k, m, t = 3, 30, 7
    q = (
        Query()
        .group_by("g", keys=KEYS)
        .bound(max_groups=k, max_rows=m, max_total_rows=t)
        .count()
        .sum("x", bounds="private", search_range=(-1000.0, 1000.0))
        .mean("x", bounds="private", search_range=(-1000.0, 1000.0))
    )
    build = lambda f: session_of(f, dp.PureDP(1.0))  # noqa: E731
    base, extra = crowd(6), victim(UNEVEN, 700.0)
    compiled = neighbours(build, base, extra, q, 1.0, k, m, t)
    assert compiled.bounds_plan is not None and compiled.bounds_plan.max_rows == min(m, t)
    a, b = build(pd.concat([base, extra], ignore_index=True)), build(base)
    for spec in compiled.bound_orders:
        ha = a._engine.histograms(compiled.bounds_plan, spec).get((), {})
        hb = b._engine.histograms(compiled.bounds_plan, spec).get((), {})
        moved = sum(abs(ha.get(i, 0) - hb.get(i, 0)) for i in set(ha) | set(hb))
        assert 0 < moved <= min(m, t)


def test_partition_part_keeps_the_total() -> None:
    k, m, t = 4, 25, 6

    def build(frame: pd.DataFrame) -> dp.Session:
        session = session_of(frame, dp.PureDP(2.0))
        return session.partition("region", [1, 2], budgets=dp.PureDP(1.0))[1]

    q = stats(Query().group_by("g", keys=KEYS).bound(max_groups=k, max_rows=m, max_total_rows=t))
    compiled = neighbours(build, crowd(7), victim(UNEVEN, -60.0, region=1), q, 0.5, k, m, t)
    assert compiled.plan.partitions


def test_per_person_rows_keep_the_total() -> None:
    """Query.per_person(by='g'): one row per (person, group); the total then bounds
    the person's per-person rows over groups (here at most T of their groups' rows)."""
    k, m, t = 5, 3, 2
    q = (
        Query()
        .per_person(by="g", n="count", total=("sum", "x"))
        .group_by("g", keys=KEYS)
        .bound(max_groups=k, max_rows=m, max_total_rows=t)
        .count()
        .sum("n", bounds=(0.0, 50.0))
        .mean("total", bounds=(-100.0, 100.0))
        .count_distinct()
    )
    neighbours(
        lambda f: session_of(f, dp.PureDP(1.0)), crowd(8), victim(UNEVEN, 77.0), q, 1.0, k, m, t
    )


def test_joins_public_duplicate_keys_and_private_truncation() -> None:
    """A public table with duplicate keys (M = 3: a person's rows tripled before the
    bound) and a private table joined with truncation: the total applies after the
    joins, to the joined rows."""
    k, m, t = 4, 50, 9
    regions = pd.DataFrame({"region": [1, 1, 1, 2], "label": ["a", "b", "c", "d"]})

    def build(frame: pd.DataFrame) -> dp.Session:
        people = frame.drop_duplicates("user")[["user"]].assign(age=40.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dp.InsecureRandomWarning)
            return dp.Session.from_tables(
                {"visits": frame, "people": people},
                privacy_unit="user",
                public={"regions": regions},
                budget=dp.PureDP(1.0),
                rng=3,
            )

    q = (
        Query.from_table("visits")
        .join("regions", on="region")
        .join("people", on="user", truncate=1)
        .group_by("g", keys=KEYS)
        .bound(max_groups=k, max_rows=m, max_total_rows=t)
    )
    q = stats(q).sum("age", bounds=(0.0, 100.0))
    neighbours(build, crowd(9), victim(UNEVEN, 300.0), q, 1.0, k, m, t)


def test_shared_scan_batches_run_step_3b() -> None:
    """Session batches (evaluate_many, describe's shared scans) share only ungrouped
    plans, whose total is folded into max_rows; a grouped plan with a total in a
    batch runs its own statement, with step 3b: the same integers as alone, and
    the batch is charged as its requests."""
    from dpkit.analytics import _shared_scan
    from dpkit.analytics.engines import _batch

    session = session_of(pd.concat([crowd(14), victim(UNEVEN, 3.0)]), dp.PureDP(4.0))
    grouped = stats(
        Query().group_by("g", keys=KEYS).bound(max_groups=4, max_rows=30, max_total_rows=5)
    )
    flat = Query().bound(max_rows=30, max_total_rows=5).count().sum("x", bounds=(-5.0, 3.0))
    flat2 = Query().bound(max_rows=2, max_total_rows=50).count().mean("x", bounds=(-5.0, 3.0))
    plans = [session._compile(q, 1.0, SALT).plan for q in (grouped, flat, flat2, flat)]
    assert plans[0].max_total_rows == 5
    assert [p.max_total_rows for p in plans[1:]] == [None, None, None]
    assert [p.max_rows for p in plans[1:]] == [5, 2, 5]
    assert _batch.share_aggregates(plans) == [1, 2, 3]
    engine: Any = session._engine
    assert _batch.aggregate_many(engine, plans) == [session._engine.aggregate(p) for p in plans]
    results = _shared_scan.evaluate_many(
        session, [(grouped, dp.PureDP(0.5)), (flat, dp.PureDP(0.5)), (flat2, dp.PureDP(0.5))]
    )
    assert len(results) == 3 and session.spent == dp.PureDP(1.5)


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_double_unit_with_signed_zeros_is_one_person_in_every_step(
    engine: str, request: pytest.FixtureRequest
) -> None:
    """The engine's equality is the only equality: a DOUBLE privacy unit 0.0 / -0.0
    (one person to both engines' GROUP BY) is one person in step 3b's PARTITION BY
    too -- its total is over all its rows, not over each spelling's."""
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    keys = KeySet.from_values(g=["a", "b", "c", "d"])
    base = pd.DataFrame(
        {"user": [1.0, 1.0, 2.0, 2.0, 3.5], "g": ["a", "b", "a", "c", "d"], "x": [1.0, 2, 3, 4, 5]}
    )
    extra = pd.DataFrame(
        {
            "user": [0.0] * 10 + [-0.0] * 10 + [float("nan")] * 3,
            "g": ["a"] * 5 + ["b"] * 5 + ["c"] * 5 + ["d"] * 5 + ["a"] * 3,
            "x": 1.0,
        }
    )
    q = (
        Query()
        .group_by("g", keys=keys)
        .bound(max_groups=4, max_rows=10, max_total_rows=4)
        .count()
        .sum("x", bounds=(0.0, 1.0))
        .count_distinct()
    )
    _, a = exact(
        session_of(pd.concat([base, extra], ignore_index=True), dp.PureDP(1.0), engine, spark),
        q,
        1.0,
    )
    _, b = exact(session_of(base, dp.PureDP(1.0), engine, spark), q, 1.0)
    rows = {key: a[key][0] - b.get(key, [0, 0, 0])[0] for key in a}
    units = {key: a[key][2] - b.get(key, [0, 0, 0])[2] for key in a}
    assert units == {(g,): 1 for g in "abcd"}  # one person (NaN units dropped)
    assert rows == {(g,): 1 for g in "abcd"}  # C = 20 > T = 4: floor(5 * 4 / 20) each


# ------------------------------------------------------------------- the engine's math
def test_contribution_norms_hold_for_non_integer_scaled_values() -> None:
    """The vertex argument needs no integrality: random real contributions (at most k
    non-zero, each |x| <= s, sum |x| <= L) never exceed the stated norms, and the
    vertex (q coordinates at s, one at the remainder) attains them."""
    rng = np.random.default_rng(0)
    for _ in range(3000):
        k = int(rng.integers(1, 8))
        s = int(rng.integers(1, 50))
        total = int(rng.integers(1, k * s + 1))
        l1, l2 = contribution_norms(s, k, total)
        x = rng.uniform(0, s, k) * (rng.uniform(size=k) < 0.8)
        if x.sum() > total:
            x *= total / x.sum()
        assert x.sum() <= l1 + 1e-9 and float((x * x).sum()) <= l2 + 1e-6
        q = min(k, total // s)
        vertex = [s] * q + ([total - q * s] if q < k else [])
        assert (sum(vertex), sum(v * v for v in vertex)) == (min(total, k * s), l2)


EXTREMES = [
    (2**93 - 1, 2**31, 2**31, 2**31 - 1),
    (-(2**93) + 1, 2**31, 2**31, 2**31 - 1),
    (2**93 - 1, 2**31, 2**62, 2**31),
    (-(2**92) - 12345, 2**31 - 5, 2**61 + 3, 2**31),
    (2**62, 2**31, 2**62, 2**31),
    (123456789, 3, 7, 5),
    (-123456789, 3, 7, 5),
]


def step_3b_on(session: dp.Session, s_value: int, c: int, c_total: int, t: int) -> None:
    """The overflow comment of _total_bounded: with a pair's (step-2) sum up to
    m 2^62 (m = 2^31), its count up to 2^31 and the person's kept rows up to k m =
    2^62, step 3b's count floor(c T / C) and sum trunc(S T / C) are exact in the
    engine's types -- the SQL the engine writes, run on the public extremes."""
    q = (
        Query()
        .group_by("g", keys=KEYS)
        .bound(max_groups=2**31, max_rows=2**31, max_total_rows=t)
        .count()
        .sum("x", bounds=(-1e18, 1e18))
    )
    plan = session._compile(q, 1.0, salt=1).plan
    assert plan.max_total_rows == t
    # The finest grid a large budget can give: one row's summand near 2^61 (the
    # magnitude cap), so the pair sums are not narrowed (m * row bound > 2^62).
    fine = dataclasses.replace(plan.statistics[1], inv=2.0)
    plan = dataclasses.replace(plan, statistics=(plan.statistics[0], fine))
    engine: Any = session._engine
    assert fine.row_bound() >= 2**60 and not engine._narrow(plan, 1)
    count = f"CASE WHEN __ct <= {t} THEN __c ELSE {engine.int_div(f'__c * {t}', '__ct')} END"
    summed = engine._scaled_sum(plan, 1, "__s1", "__ct", t)
    text = engine.text
    sql = (
        f"SELECT CAST({count} AS {text}), CAST({summed} AS {text}) FROM (SELECT "
        f"CAST({c} AS BIGINT) AS __c, CAST('{s_value}' AS {engine.wide}) AS __s1, "
        f"CAST({c_total} AS BIGINT) AS __ct) AS __one"
    )
    [(got_count, got_sum)] = list(engine._execute(sql, []))
    if c_total <= t:
        want_count, want_sum = c, s_value
    else:
        want_count = c * t // c_total
        want_sum = abs(s_value) * t // c_total * (1 if s_value >= 0 else -1)
    assert (got_count, got_sum) != (None, None)
    assert (int(got_count), int(got_sum)) == (want_count, want_sum)


@pytest.mark.parametrize(("s_value", "c", "c_total", "t"), EXTREMES)
def test_step_3b_arithmetic_at_the_public_extremes_duckdb(
    s_value: int, c: int, c_total: int, t: int
) -> None:
    step_3b_on(session_of(crowd(0), dp.PureDP(1.0)), s_value, c, c_total, t)


def test_step_3b_arithmetic_at_the_public_extremes_spark(spark: Any) -> None:
    """The same on Spark (ANSI off: an overflow would wrap or turn NULL silently;
    DECIMAL(38,0) and DIV's cast to BIGINT)."""
    frame = crowd(0)
    frame["x"] = frame["x"].astype("float64")
    session = session_of(frame, dp.PureDP(1.0), "spark", spark)
    for case in EXTREMES:
        step_3b_on(session, *case)


# --------------------------------------------------------- extremes through the Session
@pytest.mark.parametrize(
    ("bounds", "k", "m", "t", "kind", "eps"),
    [
        # Wide pair sums (not narrowed: m * row bound > 2^62), answered end to end.
        ((-1e18, 1e18), 2**31, 2**31, 3, "variance", 1e4),
        ((-1e18, 1e18), 2**31, 2**31, 1, "mean", 1e8),
        ((-1e18, 1e18), 2**31, 2**31, 2**31, "sum", 1e6),
        ((-1e18, 1e18), 2, 2**31, 2**31 - 1, "variance", 1.0),
        ((-(2.0**62), 2.0**62), 7, 2**31, 3, "variance", 1.0),
        ((0.0, 1e-300), 2**31, 1, 2, "mean", 1.0),
        ((-1e300, 1e300), 2**31, 2**31, 2**31, "sum", 1.0),  # refused, before
    ],
)
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_extreme_public_parameters_never_fail_after_the_charge(
    bounds: tuple[float, float], k: int, m: int, t: int, kind: str, eps: float, noise: str
) -> None:
    """Answered or refused before the charge -- and the same way on the victim's
    table, an empty one and a one-row one (a refusal depends on public parameters
    only)."""
    full = pd.concat([crowd(11), victim(UNEVEN, bounds[1])], ignore_index=True)
    full["x"] = full["x"].fillna(bounds[0])
    outcomes = set()
    for frame in (full, full.iloc[:0], full.iloc[:1]):
        budget = dp.PureDP(eps) if noise == "laplace" else dp.ZCDP(eps)
        session = session_of(frame, budget)
        q = Query().group_by("g", keys=KEYS).bound(max_groups=k, max_rows=m, max_total_rows=t)
        q = getattr(q.count(), kind)("x", bounds=bounds)
        try:
            result = session.evaluate(q, budget=budget)
        except (dp.InvalidParameter, dp.DataError, dp.BudgetExceeded) as err:
            assert session.spent == type(budget)(0.0) and not session.history
            outcomes.add(str(err))
            continue
        assert len(session.history) == 1
        assert np.isfinite(result.dataframe["count"]).all()
        outcomes.add("answered")
    assert len(outcomes) == 1, outcomes


# ------------------------------------------------------------------------ SQL front door
def _sql_session() -> dp.Session:
    return session_of(crowd(12), dp.ApproxDP(2.0, 1e-6))


def test_sql_total_with_default_groups_is_a_per_group_bound_everywhere() -> None:
    """max_groups_contributed defaults to 1: the total is then the per-group bound
    min(m, T) and a percentile is allowed; the plan is the builder's."""
    session = _sql_session()
    statement = session.sql_query(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_rows_contributed = 9, "
        "max_total_rows_contributed = 4, group_keys = ['g0', 'g1']) g, COUNT(*) AS n, "
        "PERCENTILE_CONT(x, 0.5, contribution_bounds_per_row => (-5, 5)) AS med "
        "FROM data GROUP BY g"
    )
    assert statement.query is not None
    compiled = session._compile(statement.query, dp.PureDP(1.0), SALT)
    builder = (
        Query()
        .group_by("g", keys=KeySet.from_values(g=["g0", "g1"]))
        .bound(max_groups=1, max_rows=9, max_total_rows=4)
        .count(name="n")
        .median("x", bounds=(-5.0, 5.0), name="med")
    )
    assert compiled.plan == session._compile(builder, dp.PureDP(1.0), SALT).plan
    assert (compiled.plan.max_groups, compiled.plan.max_rows, compiled.plan.max_total_rows) == (
        1,
        4,
        None,
    )


def test_sql_per_person_subquery_with_a_total() -> None:
    session = _sql_session()
    text = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_groups_contributed = 4, "
        "max_total_rows_contributed = 2, group_keys = ['g0', 'g1', 'g2', 'g3']) g, COUNT(*) AS n, "
        "SUM(s, contribution_bounds_per_row => (-50, 50)) AS total "
        "FROM (SELECT user, g, SUM(x) AS s FROM data GROUP BY user, g) AS per_person GROUP BY g"
    )
    statement = session.sql_query(text)
    assert statement.query is not None
    assert statement.query.max_total_rows == 2 and statement.query.max_rows is None
    base = crowd(12)
    extra = victim(UNEVEN, 10.0)
    build = lambda f: session_of(f, dp.PureDP(1.0))  # noqa: E731
    neighbours(build, base, extra, statement.query, 1.0, 4, 2, 2)


def test_sql_refusal_position_and_nothing_spent_under_explain() -> None:
    session = _sql_session()
    text = (
        "EXPLAIN SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, "
        "max_groups_contributed = 2, max_total_rows_contributed = 3) g,\n  COUNT(*) AS n,\n"
        "  MAX(x, contribution_bounds_per_row => (0, 1)) AS top FROM data GROUP BY g"
    )
    with pytest.raises(SqlError, match="max_total_rows_contributed = 3") as caught:
        session.sql(text)
    assert (caught.value.line, caught.value.column) == (3, 3)
    assert session.spent == dp.ZCDP(0.0) and not session.history


@pytest.mark.parametrize("key", ["max_total_rows_contributed", "max_rows_contributed"])
@pytest.mark.parametrize("value", ["2147483649", "NULL"])
def test_sql_bound_out_of_range_is_an_sql_error_at_its_option(key: str, value: str) -> None:
    """A bound above 2^31, or NULL (GoogleSQL's "no bounding"), is refused before the
    charge -- like 0 or 1.5 -- as an SqlError at the option's position naming it."""
    session = _sql_session()
    text = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_groups_contributed = 2, "
        f"{key} = {value}, group_keys = ['g0']) g, COUNT(*) AS n "
        "FROM data GROUP BY g"
    )
    with pytest.raises(SqlError, match=key) as caught:
        session.sql(text)
    assert session.spent == dp.ZCDP(0.0) and not session.history
    assert caught.value.column == text.index(key) + 1


# --------------------------------------------------------------------------- Spark
def test_spark_computes_the_same_integers_and_keeps_the_norms(spark: Any) -> None:
    """Spark runs the same step 3b: the exact integers equal DuckDB's, bit for bit, on
    the victim's table (NULL/NaN values, NULL keys, mixed signs), and the victim's
    change is within the norms; one extreme-bounds query answers or is refused
    before the charge."""
    k, m, t = 4, 30, 9
    q = stats(
        Query()
        .with_column("y", "x * 3")
        .group_by("g", keys=KEYS)
        .bound(max_groups=k, max_rows=m, max_total_rows=t),
        (-7.0, 4.0),
        column="y",
    )
    base = crowd(13)
    extra = victim(UNEVEN, -400.0)
    both = pd.concat([base, extra], ignore_index=True)
    for frame in (base, both):
        frame["x"] = frame["x"].astype("float64")  # Spark takes NaN for NULL too
    spark_with = session_of(both, dp.PureDP(1.0), "spark", spark)
    spark_without = session_of(base, dp.PureDP(1.0), "spark", spark)
    compiled, a = exact(spark_with, q, 1.0)
    _, b = exact(spark_without, q, 1.0)
    check_victim_within_norms(compiled, a, b, k, m, t)
    _, duck = exact(session_of(both, dp.PureDP(1.0)), q, 1.0)
    assert {key: [int(v) for v in row] for key, row in a.items()} == {
        key: [int(v) for v in row] for key, row in duck.items()
    }
    extreme = (
        Query()
        .group_by("g", keys=KEYS)
        .bound(max_groups=2**31, max_rows=2**31, max_total_rows=2**31)
        .count()
        .variance("x", bounds=(-1e300, 1e300))
    )
    try:
        spark_with.evaluate(extreme, budget=dp.PureDP(0.5))
    except (dp.InvalidParameter, dp.DataError):
        assert spark_with.spent == dp.PureDP(0.0) and not spark_with.history
    else:
        assert len(spark_with.history) == 1
