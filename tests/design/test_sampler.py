"""The design's sampler: exact interval law, uniform within intervals, grid release.

Statistical thresholds: false-failure rate 1e-6 per check (chi-square quantile; the
Dvoretzky-Kiefer-Wolfowitz bound for the KS statistic), with power checks against a
design made for a delta 30% too large and a within-interval law off by 30%.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpkit as dp
from dpkit.design import design_noise

ALPHA = 1e-6
DRAWS = 40_000


def _chi_square(observed: np.ndarray, expected_probabilities: np.ndarray) -> tuple[float, float]:
    expected = expected_probabilities * observed.sum()
    keep = expected >= 5  # merge the sparse bins into one
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    obs, exp = obs[exp > 0], exp[exp > 0]
    statistic = float(np.sum((obs - exp) ** 2 / exp))
    return statistic, float(stats.chi2.isf(ALPHA, obs.size - 1))


@pytest.fixture(scope="module")
def draws(coarse_design):
    return coarse_design.sample(DRAWS, rng=20261125)


def test_interval_law_is_exact(coarse_design, too_loose_design, draws):
    edges = coarse_design.edges
    observed = np.histogram(draws, bins=edges)[0]
    statistic, threshold = _chi_square(observed, coarse_design.weights)
    assert statistic < threshold
    # power: the same draws are far from the masses of a design for delta * 1.3
    statistic, threshold = _chi_square(observed, too_loose_design.weights)
    assert statistic > threshold


def test_uniform_within_intervals(coarse_design, draws):
    beta = coarse_design.granularity
    position = np.mod(draws, beta) / beta  # grid rounding moves it by <= 2^-21
    n = position.size
    critical = math.sqrt(math.log(2 / ALPHA) / (2 * n))  # DKW: P(D_n > c) <= 2 e^{-2 n c^2}
    assert stats.kstest(position, "uniform").statistic < critical + 2.0**-20
    # power: a within-interval law U^1.3 instead of U is rejected
    assert stats.kstest(position, lambda u: np.clip(u, 0, 1) ** 1.3).statistic > critical


def test_releases_lie_on_the_power_of_two_grid(coarse_design):
    step = coarse_design._distribution.step
    assert math.frexp(step)[0] == 0.5
    for value in (0.1, 1 / 3, -7.123456789, 1e-300):
        # parallel=True: many draws at once without composing them (a grid check only)
        out = coarse_design.release(np.full(200, value), parallel=True, rng=5).value
        assert np.all(np.mod(out, step) == 0)
    # inputs that differ below the grid give the same set of possible outputs
    a = coarse_design.release(np.full(500, 0.1), parallel=True, rng=7).value
    b = coarse_design.release(np.full(500, 0.1 + 2.0**-40), parallel=True, rng=7).value
    assert np.max(np.abs(a - b)) <= step


def test_release_api(coarse_design):
    one = coarse_design.release(3.0, rng=1)
    assert isinstance(one.value, float)
    assert one.event == dp.accounting.events.ApproxEvent(1.0, 0.2)
    assert one.error.confidence == 0.95 and one.error.half_width > 0
    many = coarse_design.release(np.zeros(4), rng=1)
    assert many.event == dp.accounting.events.RepeatedEvent(coarse_design.event, 4)
    assert many.guarantee.epsilon == pytest.approx(4.0)
    histogram = coarse_design.release(np.zeros(4), parallel=True, rng=1)
    assert histogram.event == coarse_design.event
    assert coarse_design.sample(rng=3) == pytest.approx(coarse_design.sample(rng=3))
    with pytest.raises(dp.errors.DataError):
        coarse_design.release(np.array([np.nan]), rng=1)


def test_error_bound_covers_the_stated_mass(coarse_design, draws):
    error = coarse_design.error(0.9)
    inside = np.mean(np.abs(draws) <= error.half_width)
    # binomial lower tail at 1e-6: 0.9 - 5 sd
    assert inside >= 0.9 - 5 * math.sqrt(0.09 / draws.size)
    assert error.standard_deviation == pytest.approx(np.std(draws), rel=0.05)


def test_secure_default_generator(coarse_design):
    assert coarse_design.release(1.0).secure


def test_expected_loss_matches_draws(l1_design):
    sample = l1_design.sample(20_000, rng=11)
    sd = np.std(np.abs(sample))
    assert abs(np.mean(np.abs(sample)) - l1_design.expected_loss) < 5.5 * sd / math.sqrt(
        sample.size
    )


def test_large_inputs_are_exact():
    design = design_noise(epsilon=1.0, delta=0.2, granularity=0.5, support=3.0)
    out = design.release(np.array([1e300, -1e300]), rng=2).value
    assert out[0] == 1e300 and out[1] == -1e300  # far below the float spacing there


def test_composing_to_delta_one_is_refused_before_drawing(coarse_design):
    entries = int(1 / coarse_design.delta) + 1
    with pytest.raises(dp.InvalidParameter, match="delta >= 1"):
        coarse_design.release(np.zeros(entries), rng=1)
