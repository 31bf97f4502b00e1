"""BucketedNoise: the proven per-group guarantee, the relative-error target, the law.

KS thresholds: DKW with Massart's constant at a false-failure rate of 1e-6; power:
the same test rejects a noise scale 30% off.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import ndtr

import dpkit as dp
from dpkit.accounting._math.gaussian import gaussian_epsilon
from dpkit.accounting.events import ComposedEvent, GaussianEvent, TruncatedLaplaceEvent
from dpkit.errors import DataError, InvalidParameter
from dpkit.groupwise import BucketedNoise
from dpkit.testing import check_mechanism, seeded

FALSE_FAILURE = 1e-6


def mechanism() -> BucketedNoise:
    return BucketedNoise(rho=0.005, relative_error=0.3)


def test_event_and_whole_release_guarantee() -> None:
    m = mechanism()
    assert m.event == ComposedEvent(
        (TruncatedLaplaceEvent(epsilon=0.1, delta=1e-9), GaussianEvent(noise_multiplier=m.sigma))
    )
    expected = 0.1 + gaussian_epsilon(m.sigma, 1e-6 - 1e-9)
    assert m.guarantee.delta == 1e-6 and m.guarantee.epsilon == pytest.approx(expected, rel=1e-12)
    assert m.guarantee.epsilon >= expected
    release = m.release([0, 50, 10_000], rng=seeded(0))
    assert release.event == m.event and release.guarantee == m.guarantee and release.error is None


def test_contract() -> None:
    check_mechanism(mechanism(), np.array([3, 500, 20_000]))


def test_group_guarantee_is_nonincreasing_and_improves_for_large_groups() -> None:
    m = mechanism()
    counts = [0, 1, 10, 100, 300, 400, 500, 1000, 5000, 10**4, 10**5, 10**6]
    eps = [m.group_guarantee(x).epsilon for x in counts]
    assert all(a >= b for a, b in itertools.pairwise(eps))
    assert eps[0] == pytest.approx(m.guarantee.epsilon)  # small groups: the whole release's
    assert eps[-1] < 0.1 + 1e-5  # large groups: the bucketing cost and almost nothing else
    rhos = [m.group_rho(x) for x in counts]
    assert all(a >= b for a, b in itertools.pairwise(rhos)) and rhos[0] <= 0.005


def test_the_level_never_drops_below_the_one_the_guarantee_uses() -> None:
    """Every bucketing count a neighbour can produce ([x - 1 - A, x + 1 + A]) gets a level
    at least the one group_guarantee assumes (level(x - 2 - A)): the proof's key step."""
    m = mechanism()
    sizes = np.linspace(-500, 50_000, 200_001)
    levels = m.level(sizes)
    assert np.all(np.diff(levels) >= 0)  # non-decreasing in the bucketing count
    # sigma_j <= kappa (S - A - 1) whenever j >= 1 (the accuracy step)
    j = levels > 0
    assert np.all(
        m.level_sigma(levels[j]) <= 0.3 * math.sqrt(math.pi / 2) * (sizes[j] - m.bound - 1)
    )
    draws = m._bucketing.release(np.zeros(100_000), rng=seeded(4)).value
    assert np.max(np.abs(draws)) <= m.bound + 1e-6  # bounded support, as the proof needs


def test_relative_error_target_is_met() -> None:
    m = mechanism()
    threshold = m.sigma * math.sqrt(2 / math.pi) / 0.3
    for x in [math.ceil(threshold), 100, 400, 1000, 10**4, 10**5, 10**7]:
        assert m.expected_absolute_error(x) < 0.3 * x
    assert m.expected_absolute_error(10) > 0.3 * 10  # impossible below the threshold


@pytest.mark.parametrize("count", [250, 1000])
def test_expected_absolute_error_matches_monte_carlo(count: int) -> None:
    n = 400_000
    errors = np.abs(mechanism().release(np.full(n, count), rng=seeded(count)).value - count)
    # 5.3 standard errors: two-sided false-failure rate ~1e-7 (CLT)
    assert abs(
        errors.mean() - mechanism().expected_absolute_error(count)
    ) < 5.3 * errors.std() / math.sqrt(n)


def test_single_level_law_is_the_calibrated_gaussian_with_power() -> None:
    m = mechanism()
    count = next(
        x for x in range(5000, 20000, 7) if m.level(x - m.bound - 1) == m.level(x + m.bound + 1)
    )
    sigma = float(m.level_sigma(m.level(count)))
    n = 10**6
    y = np.sort(m.release(np.full(n, count), rng=seeded(9)).value)
    threshold = math.sqrt(math.log(2 / FALSE_FAILURE) / (2 * n))
    grid = np.quantile(y, np.linspace(0.001, 0.999, 999))
    empirical = np.searchsorted(y, grid, side="right") / n

    def ks(scale: float) -> float:
        return float(np.max(np.abs(empirical - ndtr((grid - count) / scale))))

    assert ks(sigma) < threshold
    assert ks(1.3 * sigma) > threshold and ks(sigma / 1.3) > threshold


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"rho": 0.0, "relative_error": 0.3}, "rho"),
        ({"rho": 0.5, "relative_error": 0.0}, "relative_error"),
        ({"rho": 0.5, "relative_error": -0.3}, "relative_error"),
        ({"rho": 0.5, "relative_error": 0.3, "growth": 1.0}, "growth"),
        ({"rho": 0.5, "relative_error": 0.3, "size_epsilon": -1.0}, "epsilon"),
        ({"rho": 0.5, "relative_error": 0.3, "size_delta": 0.0}, "delta"),
        ({"rho": 0.5, "relative_error": 0.3, "delta": 1e-10}, "delta"),
    ],
    ids=["rho0", "r0", "r-neg", "growth1", "eps-neg", "size-delta0", "delta-small"],
)
def test_bad_parameters(kwargs: dict[str, float], name: str) -> None:
    with pytest.raises(InvalidParameter, match=name):
        BucketedNoise(**kwargs)


@pytest.mark.parametrize(
    "counts", [[-1], [0.5], [], [math.nan]], ids=["neg", "frac", "empty", "nan"]
)
def test_bad_counts(counts: object) -> None:
    with pytest.raises(DataError):
        mechanism().release(counts, rng=seeded(0))


def test_group_methods_refuse_bad_counts() -> None:
    for call in (
        mechanism().group_guarantee,
        mechanism().group_rho,
        mechanism().expected_absolute_error,
    ):
        with pytest.raises(InvalidParameter):
            call(-1)
        with pytest.raises(InvalidParameter):
            call(2.5)  # type: ignore[arg-type]
    assert isinstance(dp.groupwise.BucketedNoise, type)


def test_wrapper() -> None:
    release = dp.groupwise.bucketed_noise([5, 5000], rho=0.005, relative_error=0.3, rng=seeded(3))
    assert release.guarantee == mechanism().guarantee and release.value.shape == (2,)
