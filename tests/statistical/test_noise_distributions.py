"""Exact-distribution tests of every sampler in dpkit.noise.

Each check has a false-failure rate of at most 1e-6 (the alpha of the assertion,
fixed seeds) and a power check: the same assertion must reject the distribution
with its scale 30% off. The rounded continuous samplers are tested on a coarse grid
with fractional offsets, where the probability of each grid cell is known in closed
form, so the rounding logic itself is tested exactly, not only the noise shape.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpkit import noise
from dpkit.noise import rational
from dpkit.testing import assert_binomial, assert_cdf, assert_pmf, seeded

N = 200_000
POWER_FACTORS = (0.7, 1.3)


def discrete_laplace_pmf(scale: float):
    r = math.exp(-1 / scale)
    return lambda k: (1 - r) / (1 + r) * r ** np.abs(k)


def discrete_gaussian_pmf(sigma: float):
    radius = int(40 * sigma) + 10
    grid = np.arange(-radius, radius + 1)
    normaliser = np.exp(-(grid**2) / (2 * sigma**2)).sum()
    return lambda k: np.exp(-(k.astype(float) ** 2) / (2 * sigma**2)) / normaliser


def assert_rejects(check) -> None:
    with pytest.raises(AssertionError):
        check()


@pytest.mark.parametrize("scale", [0.3, 1.0, 2.5, 40.0, 1000.0], ids=lambda s: f"t={s}")
def test_discrete_laplace_matches_pmf(scale: float) -> None:
    draws = noise.discrete_laplace(scale, size=N, rng=seeded(11))
    assert draws.dtype == np.int64
    assert_pmf(draws, discrete_laplace_pmf(scale))
    for factor in POWER_FACTORS:
        assert_rejects(lambda f=factor: assert_pmf(draws, discrete_laplace_pmf(scale * f)))


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.7, 50.0], ids=lambda s: f"sigma={s}")
def test_discrete_gaussian_matches_pmf(sigma: float) -> None:
    draws = noise.discrete_gaussian(sigma, size=N, rng=seeded(12))
    assert_pmf(draws, discrete_gaussian_pmf(sigma))
    for factor in POWER_FACTORS:
        assert_rejects(lambda f=factor: assert_pmf(draws, discrete_gaussian_pmf(sigma * f)))


@pytest.mark.parametrize("gamma", [0.0, 0.1, 0.7, 1.0, 3.3, 10.0], ids=lambda g: f"gamma={g}")
def test_bernoulli_exp_matches_probability(gamma: float) -> None:
    draws = noise.bernoulli_exp(gamma, size=N, rng=seeded(13))
    assert_binomial(int(draws.sum()), N, math.exp(-gamma))
    if 0 < gamma < 10:
        assert_rejects(lambda: assert_binomial(int(draws.sum()), N, math.exp(-1.3 * gamma)))


def cell_pmf(cdf, loc: float, step: float):
    """P(round_to_grid(loc + X) = k * step) for noise with the given CDF."""
    return lambda k: cdf((k + 0.5) * step - loc) - cdf((k - 0.5) * step - loc)


ROUNDING_CASES = [(0.0, 0.5), (0.3, 0.5), (0.3 + 2**-30, 0.25), (-7.8125, 1.0), (1e6 + 0.375, 0.5)]


@pytest.mark.parametrize(("loc", "step"), ROUNDING_CASES, ids=str)
def test_laplace_is_exact_rounding_of_loc_plus_noise(loc: float, step: float) -> None:
    scale = 2.0
    out = noise.laplace(np.full(N, loc), scale=scale, granularity=step, rng=seeded(14))
    cells = np.round(out / step)
    assert np.array_equal(cells * step, out), "releases must lie on the grid"
    assert_pmf(cells.astype(np.int64), cell_pmf(stats.laplace(scale=scale).cdf, loc, step))
    for factor in POWER_FACTORS:
        wrong = stats.laplace(scale=scale * factor).cdf
        assert_rejects(lambda w=wrong: assert_pmf(cells.astype(np.int64), cell_pmf(w, loc, step)))


@pytest.mark.parametrize(("loc", "step"), ROUNDING_CASES, ids=str)
def test_gaussian_is_exact_rounding_of_loc_plus_noise(loc: float, step: float) -> None:
    sigma = 1.5
    out = noise.gaussian(np.full(N, loc), sigma=sigma, granularity=step, rng=seeded(15))
    cells = np.round(out / step).astype(np.int64)
    assert_pmf(cells, cell_pmf(stats.norm(scale=sigma).cdf, loc, step))
    for factor in POWER_FACTORS:
        wrong = stats.norm(scale=sigma * factor).cdf
        assert_rejects(lambda w=wrong: assert_pmf(cells, cell_pmf(w, loc, step)))


def truncated_cdf(scale: float, bound: float):
    mass = 1 - math.exp(-bound / scale)

    def cdf(x):
        x = np.clip(np.asarray(x, dtype=float), -bound, bound)
        inner = (1 - np.exp(-np.abs(x) / scale)) / (2 * mass)
        return 0.5 + np.sign(x) * inner

    return cdf


@pytest.mark.parametrize(("loc", "step"), ROUNDING_CASES[:4], ids=str)
def test_truncated_laplace_is_exact_rounding(loc: float, step: float) -> None:
    scale, bound = 1.0, 3.0
    out = noise.truncated_laplace(
        np.full(N, loc), scale=scale, bound=bound, granularity=step, rng=seeded(16)
    )
    assert np.all(np.abs(out - loc) <= bound + step / 2)
    cells = np.round(out / step).astype(np.int64)
    assert_pmf(cells, cell_pmf(truncated_cdf(scale, bound), loc, step))
    for factor in POWER_FACTORS:
        wrong = truncated_cdf(scale * factor, bound)
        assert_rejects(lambda w=wrong: assert_pmf(cells, cell_pmf(w, loc, step)))


def test_default_grid_laplace_follows_continuous_cdf() -> None:
    out = noise.laplace(np.zeros(N), scale=3.0, rng=seeded(17))
    assert_cdf(out, stats.laplace(scale=3.0).cdf)
    assert_rejects(lambda: assert_cdf(out, stats.laplace(scale=3.9).cdf))


def test_default_grid_gaussian_follows_continuous_cdf() -> None:
    out = noise.gaussian(np.zeros(N), sigma=3.0, rng=seeded(18))
    assert_cdf(out, stats.norm(scale=3.0).cdf)
    assert_rejects(lambda: assert_cdf(out, stats.norm(scale=3.9).cdf))


# The integer-only CKS20 samplers of dpkit.noise.rational are slow; fewer draws, same alpha.
REFERENCE_DRAWS = 6000


def test_rational_discrete_laplace_matches_pmf() -> None:
    rng = seeded(19)
    draws = [rational.discrete_laplace(Fraction(5, 2), rng=rng) for _ in range(REFERENCE_DRAWS)]
    assert_pmf(draws, discrete_laplace_pmf(2.5))
    assert_rejects(lambda: assert_pmf(draws, discrete_laplace_pmf(2.5 * 1.6)))


@functools.cache
def rational_gaussian_draws() -> tuple[int, ...]:
    """REFERENCE_DRAWS draws of the rational discrete Gaussian, sigma^2 = 9: tested
    against the exact PMF, and the reference sample of the fast sampler's two-sample
    test (drawn once for both; each test's false-failure rate is still 1e-6)."""
    rng = seeded(20)
    return tuple(
        rational.discrete_gaussian(Fraction(9, 1), rng=rng) for _ in range(REFERENCE_DRAWS)
    )


def test_rational_discrete_gaussian_matches_pmf() -> None:
    draws = list(rational_gaussian_draws())
    assert_pmf(draws, discrete_gaussian_pmf(3.0))
    assert_rejects(lambda: assert_pmf(draws, discrete_gaussian_pmf(3.0 * 1.6)))


def test_rational_bernoulli_exp_matches_probability() -> None:
    rng = seeded(21)
    hits = sum(rational.bernoulli_exp(Fraction(7, 5), rng=rng) for _ in range(REFERENCE_DRAWS))
    assert_binomial(hits, REFERENCE_DRAWS, math.exp(-1.4))
    assert_rejects(lambda: assert_binomial(hits, REFERENCE_DRAWS, math.exp(-1.4 * 1.3)))


def test_fast_and_rational_discrete_gaussian_agree() -> None:
    fast = noise.discrete_gaussian(3.0, size=REFERENCE_DRAWS, rng=seeded(22))
    slow = np.array(rational_gaussian_draws())
    # Two-sample chi-square on the pooled table (alpha 1e-6).
    support = np.arange(-15, 16)
    table = np.array(
        [
            [np.sum(np.clip(fast, -15, 15) == k) for k in support],
            [np.sum(np.clip(slow, -15, 15) == k) for k in support],
        ]
    )
    table = table[:, table.sum(axis=0) >= 20]
    assert stats.chi2_contingency(table).pvalue > 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("scale", [0.01, 7.0, 2.0**30], ids=str)
def test_discrete_laplace_extreme_scales(scale: float) -> None:
    draws = noise.discrete_laplace(scale, size=2_000_000, rng=seeded(24))
    if scale < 0.1:
        # P(Z != 0) = 2 e^(-100) / (1 + e^(-100)) ~ 7e-44 per draw: all zeros, surely.
        assert np.all(draws == 0)
    elif scale > 1e6:
        # E|Z| = 2 r / (1 - r^2) ~ t for large t; 2e6 draws: relative sd ~ 0.0007.
        assert abs(np.mean(np.abs(draws)) / scale - 1) < 0.01
    else:
        assert_pmf(draws, discrete_laplace_pmf(scale))


# The exact decimal fallback is taken by about one draw in 10^7; force it by making
# the float filter's margin enormous, so that (almost) every draw is refined. Every
# draw then runs the decimal layer (milliseconds each), so the default run draws a
# quarter of FALLBACK_DRAWS (the Gaussian: an eighth; the Bernoulli: a half), and
# ``--runslow`` the full sizes. The default sizes are the smallest at which the power
# check (scale 1.6x; Bernoulli exponent 1.3x) misses with probability below 1e-6 (the
# test's own alpha), from the noncentral chi-square of the pooled cells, lambda =
# n sum (p - q)^2 / q, against the 1e-6 critical value (two-sided binomial for the
# Bernoulli). Miss probabilities at the default sizes (at half of them):
#   discrete Laplace 2000 draws 1.6e-26 (1000: 3.8e-9); discrete Gaussian 1000
#   draws 8.6e-20 (500: 1.2e-6); rounded Laplace / Gaussian / truncated Laplace 2000
#   draws 3.9e-23 / 8.4e-53 / 2.9e-8 (1000: 6.4e-8 / 9.4e-20 / 0.02); Bernoulli 4000
#   draws 3.4e-15 (2000: 2e-5).
FALLBACK_DRAWS = 8000
FALLBACK_SMALL = FALLBACK_DRAWS // 4


def draws_param(default: int, full: int) -> pytest.MarkDecorator:
    """The default size, and the full one under ``--runslow``."""
    return pytest.mark.parametrize(
        "n", [default, pytest.param(full, marks=pytest.mark.slow)], ids=lambda n: f"n={n}"
    )


@pytest.fixture
def fallback_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpkit.noise import _exact

    monkeypatch.setattr(_exact, "FLOAT_MARGIN", 0.5)
    monkeypatch.setattr(_exact, "_GAP_MARGIN", 1.0)  # the Gaussian's acceptance filter


@pytest.mark.usefixtures("fallback_everywhere")
@draws_param(FALLBACK_SMALL, FALLBACK_DRAWS)
def test_fallback_discrete_laplace_matches_pmf(n: int) -> None:
    draws = noise.discrete_laplace(2.5, size=n, rng=seeded(30))
    assert_pmf(draws, discrete_laplace_pmf(2.5))
    assert_rejects(lambda: assert_pmf(draws, discrete_laplace_pmf(2.5 * 1.6)))


@pytest.mark.usefixtures("fallback_everywhere")
@draws_param(FALLBACK_DRAWS // 8, FALLBACK_DRAWS // 2)
def test_fallback_discrete_gaussian_matches_pmf(n: int) -> None:
    draws = noise.discrete_gaussian(3.0, size=n, rng=seeded(31))
    assert_pmf(draws, discrete_gaussian_pmf(3.0))
    assert_rejects(lambda: assert_pmf(draws, discrete_gaussian_pmf(3.0 * 1.6)))


@pytest.mark.usefixtures("fallback_everywhere")
@draws_param(FALLBACK_DRAWS // 2, FALLBACK_DRAWS)
def test_fallback_bernoulli_exp_matches_probability(n: int) -> None:
    draws = noise.bernoulli_exp(0.9, size=n, rng=seeded(32))
    assert_binomial(int(draws.sum()), n, math.exp(-0.9))
    assert_rejects(lambda: assert_binomial(int(draws.sum()), n, math.exp(-1.3 * 0.9)))


@pytest.mark.usefixtures("fallback_everywhere")
@draws_param(FALLBACK_SMALL, FALLBACK_DRAWS)
@pytest.mark.parametrize(
    ("sampler", "make_cdf"),
    [
        (
            lambda loc, rng: noise.laplace(loc, scale=2.0, granularity=0.5, rng=rng),
            lambda factor: stats.laplace(scale=2.0 * factor).cdf,
        ),
        (
            lambda loc, rng: noise.gaussian(loc, sigma=1.5, granularity=0.5, rng=rng),
            lambda factor: stats.norm(scale=1.5 * factor).cdf,
        ),
        (
            lambda loc, rng: noise.truncated_laplace(
                loc, scale=1.0, bound=3.0, granularity=0.5, rng=rng
            ),
            lambda factor: truncated_cdf(1.0 * factor, 3.0),
        ),
    ],
    ids=["laplace", "gaussian", "truncated_laplace"],
)
def test_fallback_rounded_noise_is_exact(sampler, make_cdf, n: int) -> None:
    loc = 0.3
    out = sampler(np.full(n, loc), seeded(33))
    cells = np.round(out / 0.5).astype(np.int64)
    assert_pmf(cells, cell_pmf(make_cdf(1.0), loc, 0.5))
    assert_rejects(lambda: assert_pmf(cells, cell_pmf(make_cdf(1.6), loc, 0.5)))
