"""DiscreteGaussian error bounds from the exact tail (issue 20, defect 3).

The half-width is the smallest integer ``h`` with ``P(|Z| > h) <= 1 - c``, from a
certified upper bound within 1e-9 of the exact tail. Checked three ways:

- exactly: against the tail summed directly (``math.fsum`` over all integers that
  matter), ``h`` is minimal and valid;
- statistically: the miss rate of seeded releases is not above ``1 - c`` (one-sided
  binomial bound at 1e-7 per case, six cases: false-failure rate below 1e-6), and the
  same check rejects an interval 30% narrower (power);
- against OpenDP's golden values (its ``discrete_gaussian_scale_to_accuracy`` and
  ``accuracy_to_discrete_gaussian_scale`` tests).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpkit as dp
from dpkit.mechanisms._tails import discrete_gaussian_tail_upper, symmetric_half_width
from dpkit.testing import seeded

N = 400_000
PER_CASE_ALPHA = 1e-7


def _exact_two_sided(h: int, sigma: float) -> float:
    """``P(|Z| > h)`` summed directly over ``|z| <= 60 sigma + 60`` (the rest < 1e-700).

    Sums of positive terms (pairwise: relative error ~1e-15, far below the 1e-9 checked).
    """
    span = int(60 * sigma) + 60
    z = np.arange(-span, span + 1, dtype=np.float64)
    weights = np.exp(-(z * z) / (2.0 * sigma * sigma))
    return float(np.sum(weights[np.abs(z) > h])) / float(np.sum(weights))


@pytest.mark.parametrize("sigma", [0.4, 1.0, 2.5, 7.0, 30.0, 150.0])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99])
def test_half_width_is_the_exact_quantile(sigma: float, confidence: float) -> None:
    h = symmetric_half_width("gaussian", sigma, confidence)
    alpha = 1.0 - confidence
    assert _exact_two_sided(h, sigma) <= alpha
    if h > 0:  # minimal: one less would miss too often
        assert _exact_two_sided(h - 1, sigma) > alpha


@pytest.mark.parametrize("sigma", [0.3, 1.0, 3.0, 20.0, 2000.0])
def test_tail_bound_is_safe_and_tight(sigma: float) -> None:
    for t in (1, 2, math.ceil(sigma), math.ceil(3 * sigma), math.ceil(6 * sigma)):
        exact = _exact_two_sided(t - 1, sigma) / 2.0  # P(Z >= t) by symmetry
        upper = discrete_gaussian_tail_upper(t, sigma)
        assert exact <= upper <= exact * (1 + 1e-9)


def test_narrower_than_the_sub_gaussian_width() -> None:
    # The sub-Gaussian bound of CKS20 Cor. 9 the docstring used to state.
    for sigma, confidence in ((10.0, 0.95), (100.0, 0.95), (100.0, 0.99)):
        h = symmetric_half_width("gaussian", sigma, confidence)
        sub_gaussian = sigma * math.sqrt(2.0 * math.log(2.0 / (1.0 - confidence)))
        assert h <= 0.8 * sub_gaussian


def _miss_threshold(confidence: float) -> int:
    # Largest miss count consistent with a miss rate of at most 1 - c at PER_CASE_ALPHA.
    return int(stats.binom.isf(PER_CASE_ALPHA, N, 1.0 - confidence))


@pytest.mark.parametrize(
    ("sigma", "confidence"),
    [(1.0, 0.95), (4.0, 0.9), (4.0, 0.95), (25.0, 0.9), (25.0, 0.99), (200.0, 0.95)],
)
def test_interval_coverage_with_power(sigma: float, confidence: float) -> None:
    mechanism = dp.DiscreteGaussian(sigma=sigma)
    release = mechanism.release(np.zeros(N, dtype=np.int64), confidence=confidence, rng=seeded(11))
    assert release.error is not None
    noise = np.abs(release.value)
    threshold = _miss_threshold(confidence)
    assert int(np.count_nonzero(noise > release.error.half_width)) <= threshold
    # Power: the same check rejects an interval 30% narrower.
    narrow = math.floor(0.7 * release.error.half_width)
    assert int(np.count_nonzero(noise > narrow)) > threshold


# OpenDP (opendp/python/test/test_accuracy.py): discrete_gaussian_scale_to_accuracy(1.0,
# 0.5) == 2.0 (its accuracy a bounds |Z| < a, so our half-width is a - 1 = 1), and
# accuracy_to_discrete_gaussian_scale(1.0, 0.5) == 0.797878994872694: the scale at
# which P(|Z| >= 1) = 0.5, i.e. where our half-width at c = 0.5 steps from 0 to 1.
OPENDP_SCALE_AT_ONE = 0.797878994872694


def test_opendp_golden_values() -> None:
    assert symmetric_half_width("gaussian", 1.0, 0.5) == 2 - 1
    below = symmetric_half_width("gaussian", OPENDP_SCALE_AT_ONE * (1 - 1e-7), 0.5)
    above = symmetric_half_width("gaussian", OPENDP_SCALE_AT_ONE * (1 + 1e-7), 0.5)
    assert (below, above) == (0, 1)
