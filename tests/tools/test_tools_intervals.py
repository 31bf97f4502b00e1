"""The array tools' intervals cover at their stated rate; the noise is calibrated.

Coverage: 500 releases (seeds 0..499) at confidence 0.8 on 40 records; the test fails
when the misses exceed the 1 - 1e-6 quantile of Binomial(500, 0.2) (a false-failure
rate below 1e-6 for a valid interval, more conservative intervals miss less). Power: the
same test rejects the interval shrunk about its centre (to half its width for a single
noisy release; to a quarter or a fifth for the add/remove mean and variance, whose
intervals are conservative: a union bound over the components and interval arithmetic).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

import dpkit as dp
from dpkit.accounting.events import DiscreteLaplaceEvent
from dpkit.testing import assert_pmf, seeded

RELEASES, CONFIDENCE = 500, 0.8
MAX_MISSES = int(stats.binom.isf(1e-6, RELEASES, 1 - CONFIDENCE))
DATA = np.round(np.random.default_rng(0).uniform(0, 10, 40) ** 1.3, 2)
BOUNDS = (0.0, 25.0)
CLAMPED = np.clip(DATA, *BOUNDS)
TRUTH = {
    "count": float(DATA.size),
    "sum": float(CLAMPED.sum()),
    "mean": float(CLAMPED.mean()),
    "var": float(CLAMPED.var()),
    "std": float(CLAMPED.std()),
}
CASES = [
    ("count", "add_remove", 0.5),
    ("sum", "add_remove", 0.5),
    ("sum", "replace", 0.5),
    ("mean", "add_remove", 0.25),
    ("mean", "replace", 0.5),
    ("var", "add_remove", 0.2),
    ("var", "replace", 0.5),
    ("std", "add_remove", 0.5),
    ("std", "replace", 0.5),
]


def _misses(name: str, relation: str, shrink: float) -> int:
    tool: Any = getattr(dp, name)
    kwargs: dict[str, Any] = {} if name == "count" else {"bounds": BOUNDS, "neighbouring": relation}
    misses = 0
    for seed in range(RELEASES):
        release = tool(DATA, epsilon=1.0, confidence=CONFIDENCE, rng=seeded(seed), **kwargs)
        low, high = release.error.interval(release.value)
        centre, half = (low + high) / 2, (high - low) / 2 * shrink
        misses += not centre - half <= TRUTH[name] <= centre + half
    return misses


@pytest.mark.parametrize(
    ("name", "relation", "shrink"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES]
)
def test_interval_covers_at_its_stated_rate(name: str, relation: str, shrink: float) -> None:
    assert _misses(name, relation, 1.0) <= MAX_MISSES
    assert _misses(name, relation, shrink) > MAX_MISSES  # a narrower interval is caught


def test_histogram_intervals_cover_per_bin() -> None:
    edges = [0.0, 5.0, 10.0, 25.0]
    truth, _ = np.histogram(DATA, bins=edges)
    misses = 0
    for seed in range(RELEASES // 2):
        release = dp.histogram(
            DATA, bins=edges, epsilon=1.0, confidence=CONFIDENCE, rng=seeded(seed)
        )
        low, high = release.error.interval(release.value[0])
        misses += int(np.sum((truth < low) | (truth > high)))
    trials = RELEASES // 2 * truth.size
    assert misses <= stats.binom.isf(1e-6, trials, 1 - CONFIDENCE)


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_count_noise_is_discrete_laplace_of_scale_one_over_epsilon(epsilon: float) -> None:
    release = dp.count(DATA, epsilon=epsilon, rng=seeded(1))
    assert release.event == DiscreteLaplaceEvent(scale=1 / epsilon, sensitivity=1)
    assert release.guarantee == dp.PureDP(epsilon)
    # The released noise follows that law (values far above 0: no clamping).
    big = np.arange(10_000, dtype=np.float64)
    draws = [dp.count(big, epsilon=epsilon, rng=seeded(s)).value - 10_000 for s in range(3000)]
    r = np.exp(-epsilon)
    assert_pmf(draws, lambda k: (1 - r) / (1 + r) * r ** np.abs(k))
    with pytest.raises(AssertionError):  # a 30% larger scale is rejected
        r_wrong = np.exp(-epsilon / 1.3)
        assert_pmf(draws, lambda k: (1 - r_wrong) / (1 + r_wrong) * r_wrong ** np.abs(k))


def test_sum_and_mean_noise_scales_follow_the_sensitivity() -> None:
    # add/remove sum: sensitivity max(|L|, |U|) = 25; replace: U - L = 25; the mean's
    # centred sum under add/remove: 12.5 at half the epsilon.
    for relation, expected in (("add_remove", 25.0), ("replace", 25.0)):
        release = dp.sum(DATA, bounds=BOUNDS, epsilon=1.0, neighbouring=relation, rng=seeded(2))
        assert release.error.standard_deviation == pytest.approx(np.sqrt(2) * expected, rel=1e-6)
    mean = dp.mean(DATA, bounds=BOUNDS, epsilon=1.0, rng=seeded(3))
    count_event, sum_event = mean.event.events  # type: ignore[attr-defined]
    assert count_event == DiscreteLaplaceEvent(scale=2.0, sensitivity=1)
    assert sum_event.sensitivity / sum_event.scale == pytest.approx(0.5, rel=1e-8)
    accountant = dp.accounting.PureAccountant()
    accountant.compose(mean.event)
    assert accountant.get_epsilon(0.0) <= 1.0
