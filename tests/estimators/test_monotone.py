"""dp.max / dp.min / dp.user_sum / dp.user_count / dp.count_distinct: exact losses against
brute force over all subsets, the sensitivity-1 property on neighbours, grids and bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

import dpkit as dp
from dpkit.errors import DataError, InvalidParameter
from dpkit.estimators import _monotone_losses as ml
from dpkit.testing import seeded

GRID = ml.with_sentinel(np.array([0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0]))


def _floor(v: float, grid: np.ndarray) -> float:
    return float(grid[np.searchsorted(grid, v, side="right") - 1])


def brute_losses(persons: list, g, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    """l and lbar of f_Y = floor_grid(g) by enumerating every subset of persons."""
    n = len(persons)
    loss = np.full(grid.size, np.inf)
    strict = np.full(grid.size, np.inf)
    for r in range(n + 1):
        for kept in itertools.combinations(range(n), n - r):
            value = _floor(g([persons[i] for i in kept]), grid)
            for j, y in enumerate(grid):
                if value <= y:
                    loss[j] = min(loss[j], r)
                if value < y:
                    strict[j] = min(strict[j], r)
    return loss, strict


def g_max(persons: list) -> float:  # type: ignore[type-arg]
    return min(max([max(p) for p in persons], default=0.0), 8.0)


def g_sum(persons: list) -> float:  # type: ignore[type-arg]
    return min(sum(sum(p) for p in persons), 8.0)


def g_distinct(persons: list) -> float:  # type: ignore[type-arg]
    return min(len({p[0] for p in persons}), 8.0)


def fast_losses(kind: str, persons: list, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[type-arg]
    if kind == "max":
        m = np.clip(np.array([max(p) for p in persons]), grid[1], grid[-1])
        strict = ml.max_strict_loss(m, grid)
    elif kind == "sum":
        strict = ml.sum_strict_loss(np.array([sum(p) for p in persons], dtype=float), grid)
    else:
        _, counts = np.unique([p[0] for p in persons], return_counts=True)
        strict = ml.distinct_strict_loss(counts.astype(float), grid)
    return ml.snapped_loss(strict), strict


def random_persons(kind: str, rng: np.random.Generator, n: int) -> list:  # type: ignore[type-arg]
    if kind == "distinct":
        return [[float(rng.integers(0, 4))] for _ in range(n)]
    values = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 9.0]
    return [list(rng.choice(values, size=rng.integers(1, 4))) for _ in range(n)]


KINDS = {"max": g_max, "sum": g_sum, "distinct": g_distinct}


@pytest.mark.parametrize("kind", list(KINDS))
def test_fast_losses_equal_brute_force(kind: str) -> None:
    rng = np.random.default_rng(5)
    grid = GRID if kind != "distinct" else ml.with_sentinel(np.arange(0.0, 9.0))
    for trial in range(60):
        persons = random_persons(kind, rng, int(rng.integers(0, 7)))
        loss, strict = fast_losses(kind, persons, grid)
        b_loss, b_strict = brute_losses(persons, KINDS[kind], grid)
        np.testing.assert_array_equal(loss, b_loss, err_msg=f"{kind} trial {trial}")
        np.testing.assert_array_equal(strict, b_strict, err_msg=f"{kind} trial {trial}")


@pytest.mark.parametrize("kind", list(KINDS))
def test_losses_have_sensitivity_one(kind: str) -> None:
    rng = np.random.default_rng(6)
    grid = GRID if kind != "distinct" else ml.with_sentinel(np.arange(0.0, 9.0))
    for _ in range(200):
        persons = random_persons(kind, rng, int(rng.integers(0, 9)))
        extra = random_persons(kind, rng, 1)
        a = fast_losses(kind, persons, grid)
        b = fast_losses(kind, persons + extra, grid)
        for x, y in zip(a, b, strict=True):
            assert np.array_equal(np.isinf(x), np.isinf(y))  # infinities are data-independent
            finite = np.isfinite(x)
            assert np.all(np.abs(x[finite] - y[finite]) <= 1)
            assert np.all(y[finite] >= x[finite])  # adding a person never lowers the loss


def test_float_prefix_sums_keep_sensitivity_one() -> None:
    # Amounts whose float sums round: the computed loss must still interlace.
    rng = np.random.default_rng(7)
    grid = ml.with_sentinel(ml.grid_points((0, 1e6), "geometric", 0.001, "t"))
    for _ in range(100):
        totals = rng.choice([0.1, 0.2, 0.3, 1e-7, 333.33, 1e5 / 3], size=rng.integers(1, 40))
        extra = rng.choice([0.1, 0.7, 1e5 / 7])
        a = ml.sum_strict_loss(totals, grid)
        b = ml.sum_strict_loss(np.append(totals, extra), grid)
        finite = np.isfinite(a)
        assert np.all((b[finite] - a[finite] >= 0) & (b[finite] - a[finite] <= 1))


def test_greedy_sum_is_optimal_on_unequal_totals() -> None:
    # Removing the largest totals first: checked against every subset.
    rng = np.random.default_rng(8)
    for _ in range(100):
        totals = list(rng.integers(0, 10, size=rng.integers(1, 8)).astype(float))
        for y in (0.5, 1.0, 3.0, 7.0, 12.0, 30.0):
            best = min(
                len(totals) - len(kept)
                for r in range(len(totals) + 1)
                for kept in itertools.combinations(totals, r)
                if sum(kept) < y
            )
            assert ml.sum_strict_loss(np.array(totals), np.array([y]))[0] == best


# ------------------------------------------------------------------ estimators


def test_person_maxima_paths_agree() -> None:
    rng = np.random.default_rng(9)
    ids = rng.integers(0, 50, 500)
    values = rng.lognormal(2, 1, 500)
    dense, sparse, strings = ids, ids * 10**12, np.array([f"p{i}" for i in ids])
    results = {
        dp.max(values, privacy_unit=u, bounds=(0, 1e4), epsilon=1.0, rng=seeded(1)).value
        for u in (dense, sparse, strings, ids.astype(float))
    }
    assert len(results) == 1


def test_max_with_many_rows_per_person_is_accurate() -> None:
    rng = np.random.default_rng(10)
    ids = np.repeat(np.arange(2000), 5)
    values = rng.uniform(0, 100, ids.size)
    release = dp.max(values, privacy_unit=ids, bounds=(0, 1e9), rho=1.0, rng=seeded(2))
    assert 90 <= release.value <= values.max()


def test_min_mirrors_max() -> None:
    values = np.arange(1.0, 1001.0)
    release = dp.min(values, bounds=(0, 1e4), epsilon=1.0, rng=seeded(3))
    assert 1.0 <= release.value <= 60.0
    mirrored = dp.max(
        -values,
        grid=-ml.grid_points((0, 1e4), "geometric", None, "t")[::-1],
        epsilon=1.0,
        rng=seeded(3),
    )
    assert release.value == -mirrored.value


def test_user_sum_and_count_under_estimate() -> None:
    rng = np.random.default_rng(11)
    ids = rng.integers(0, 3000, 30000)
    spend = rng.exponential(20, ids.size)
    s = dp.user_sum(spend, ids, upper=1e12, epsilon=1.0, rng=seeded(4))
    c = dp.user_count(ids, epsilon=1.0, rng=seeded(4))
    assert 0.8 * spend.sum() <= s.value <= spend.sum()
    assert isinstance(c.value, int) and 0.8 * ids.size <= c.value <= ids.size


def test_count_distinct_one_row_per_person() -> None:
    values = np.repeat(np.arange(300), 20)
    release = dp.count_distinct(values, epsilon=1.0, rng=seeded(5))
    assert 280 <= release.value <= 300
    words = np.array(["a", "b", "b", None, "c"], dtype=object)
    assert dp.count_distinct(words, epsilon=1.0, rng=seeded(5)).value <= 3


def test_count_distinct_refuses_privacy_unit() -> None:
    with pytest.raises(InvalidParameter, match="not supported"):
        dp.count_distinct([1, 2], [1, 1], epsilon=1.0)


@pytest.mark.parametrize("method", ["binary_search", "exponential"])
def test_empty_data_gets_a_private_answer(method: str) -> None:
    # Empty data is a neighbour like any other: the answer is the empty dataset's
    # statistic (lo for max, 0 for sums, hi for min) unless the beta-probability
    # failure event happens. Binomial test over seeds, false-failure 1e-6.
    runs, beta, misses = 40, 0.05, 0
    for seed in range(runs):
        kw = {"epsilon": 1.0, "beta": beta, "rng": seeded(seed)}
        misses += dp.max([], bounds=(0, 100), method=method, **kw).value != 0.0  # type: ignore[arg-type]
        misses += dp.user_sum([], [], upper=100, method=method, **kw).value != 0.0  # type: ignore[arg-type]
        misses += dp.min([], bounds=(0, 100), method=method, **kw).value != 100.0  # type: ignore[arg-type]
    assert stats.binom.sf(misses - 1, 3 * runs, beta) >= 1e-6


def test_nan_dropped_inf_and_negative_clamped() -> None:
    values = np.array([np.nan, 5.0, np.inf, -np.inf] + [3.0] * 50)
    assert (
        dp.max(
            values, bounds=(0, 10), grid="linear", resolution=1.0, epsilon=2.0, rng=seeded(7)
        ).value
        <= 10.0
    )
    a = dp.user_sum([1.0, -5.0, np.nan] * 40, upper=1e3, epsilon=1.0, rng=seeded(8))
    b = dp.user_sum([1.0, 0.0] * 40, upper=1e3, epsilon=1.0, rng=seeded(8))
    assert a.value == b.value


def test_grids() -> None:
    geo = ml.grid_points((0, 1e12), "geometric", None, "t")
    assert geo[0] == 0 and geo[-1] == 1e12 and np.all(np.diff(geo) > 0)
    assert 2000 < geo.size < 3000
    ratios = geo[2:] / geo[1:-1]
    assert np.all(ratios <= 1.01 + 1e-9)
    lin = ml.grid_points((-5, 5), "linear", 0.5, "t")
    np.testing.assert_allclose(lin, np.arange(-5, 5.5, 0.5))
    ints = ml.grid_points((0, 2**40), "geometric", None, "t", integer=True)
    assert np.array_equal(ints[:101], np.arange(101))


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: dp.max([1.0], bounds=(5, 1), epsilon=1.0), InvalidParameter),
        (lambda: dp.max([1.0], bounds=(0, np.inf), epsilon=1.0), InvalidParameter),
        (lambda: dp.max([1.0], epsilon=1.0), InvalidParameter),
        (lambda: dp.max([1.0], bounds=(0, 1), grid="cubic", epsilon=1.0), InvalidParameter),
        (
            lambda: dp.max([1.0], bounds=(0, 1), grid="linear", resolution=1e-9, epsilon=1.0),
            InvalidParameter,
        ),
        (lambda: dp.max([1.0], bounds=(0, 1), grid=[0, 2, 1], epsilon=1.0), InvalidParameter),
        (lambda: dp.max([1.0], bounds=(0, 1)), InvalidParameter),
        (lambda: dp.max([1.0], bounds=(0, 1), epsilon=1.0, rho=1.0), InvalidParameter),
        (lambda: dp.max([1.0], bounds=(0, 1), epsilon=0.0), InvalidParameter),
        (lambda: dp.max([1.0], bounds=(0, 1), rho=-1.0), InvalidParameter),
        (lambda: dp.max([1.0], bounds=(0, 1), epsilon=1.0, beta=1.5), InvalidParameter),
        (lambda: dp.max([1.0], bounds=(0, 1), rho=1.0, method="exponential"), InvalidParameter),
        (lambda: dp.max([1.0], bounds=(0, 1), epsilon=1.0, method="gumbel"), InvalidParameter),
        (lambda: dp.max(["a"], bounds=(0, 1), epsilon=1.0), DataError),
        (lambda: dp.max([[1.0]], bounds=(0, 1), epsilon=1.0), DataError),
        (lambda: dp.max([1.0, 2.0], privacy_unit=[1], bounds=(0, 1), epsilon=1.0), DataError),
        (
            lambda: dp.max(
                [1.0, 2.0],
                privacy_unit=np.array([1, None], dtype=object),
                bounds=(0, 1),
                epsilon=1.0,
            ),
            DataError,
        ),
        (
            lambda: dp.max([1.0, 2.0], privacy_unit=[1.0, np.nan], bounds=(0, 1), epsilon=1.0),
            DataError,
        ),
        (lambda: dp.user_sum([1.0], epsilon=1.0), InvalidParameter),
        (lambda: dp.user_sum([1.0], upper=-1.0, epsilon=1.0), InvalidParameter),
        (lambda: dp.user_sum([1.0], grid=[1.0, 2.0], epsilon=1.0), InvalidParameter),
        (lambda: dp.user_count([1, 2], upper=10, grid=[0.0, 5.0], epsilon=1.0), InvalidParameter),
    ],
    ids=[
        "bounds-reversed",
        "bounds-inf",
        "no-bounds",
        "grid-name",
        "grid-too-big",
        "grid-unsorted",
        "no-budget",
        "both-budgets",
        "eps-0",
        "rho-neg",
        "beta",
        "exp-rho",
        "method",
        "strings",
        "2-d",
        "length-mismatch",
        "id-none",
        "id-nan",
        "sum-no-upper",
        "sum-neg-upper",
        "sum-grid-not-0",
        "count-upper-and-grid",
    ],
)
def test_bad_input(call, error) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error):
        call()


def test_messages_do_not_leak_values() -> None:
    with pytest.raises(DataError) as info:
        dp.max([123.456, 2.0], privacy_unit=[7777], bounds=(0, 1), epsilon=1.0)
    assert "123.456" not in str(info.value) and "7777" not in str(info.value)
