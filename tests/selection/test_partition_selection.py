"""Partition selection (Google's three strategies): golden values and privacy checks.

Golden values transcribed from google/differential-privacy,
cc/algorithms/partition-selection_test.cc (values, not code), at the tolerances that
file uses (0.05 for thresholds, 0.001 for deltas unless a row says otherwise).
"""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import pytest

import dpkit as dp
from dpkit.accounting._math.gaussian import gaussian_delta
from dpkit.analytics._accounting import Noise, selection_threshold
from dpkit.mechanisms._tails import discrete_laplace_tail
from dpkit.selection import PartitionSelection, laplace_partition_delta

LN3 = math.log(3.0)
DBL_MIN = 2.2250738585072014e-308  # the C++ tests' kDoubleMinPos (smallest normal)

# ------------------------------------------------------------------ truncated geometric


def test_truncated_geometric_golden() -> None:
    s = PartitionSelection("truncated_geometric", epsilon=0.5, delta=0.02)
    assert (s.first_crossover, s.second_crossover) == (6, 11)
    assert s.keep_probability(0) == 0.0
    assert s.keep_probability(1) == pytest.approx(0.02, abs=1e-12)
    assert s.keep_probability(6) == pytest.approx(0.58840484458, abs=1e-10)
    assert s.keep_probability(8) == pytest.approx(0.86807080625, abs=1e-10)
    assert s.keep_probability(15) == 1.0
    tiny = PartitionSelection(epsilon=1e-20, delta=0.02)  # p(n) ~ n delta
    assert tiny.keep_probability(6) == pytest.approx(0.12, abs=1e-10)
    assert tiny.keep_probability(40) == pytest.approx(0.8, abs=1e-10)
    assert PartitionSelection(epsilon=1e-20, delta=0.15).keep_probability(3) == pytest.approx(
        0.45, abs=1e-10
    )


def _violation(p: list[float], epsilon: float, delta: float) -> float:
    """Largest excess over the (eps, delta)-DP constraints between n and n + 1, both ways."""
    worst = -math.inf
    e = math.exp(epsilon)
    for a, b in itertools.pairwise(p):
        for x, y in ((a, b), (b, a)):
            worst = max(worst, y - (e * x + delta), (1 - y) - (e * (1 - x) + delta))
    return worst


CASES = [(0.5, 0.02, 1), (1.0, 1e-6, 1), (0.1, 1e-8, 1), (3.0, 1e-9, 1), (1.0, 1e-5, 4)]


@pytest.mark.parametrize(("epsilon", "delta", "k"), CASES)
def test_truncated_geometric_is_private_and_optimal(epsilon: float, delta: float, k: int) -> None:
    s = PartitionSelection(epsilon=epsilon, delta=delta, max_partitions_contributed=k)
    e, d = s.adjusted_epsilon, s.adjusted_delta
    assert -math.expm1(k * math.log1p(-d)) <= delta * (1 + 1e-12)  # k-fold composition
    p = list(s.keep_probabilities(s.second_crossover + 3))
    assert p[-1] == 1.0 and p[0] == 0.0
    # Every per-partition constraint holds (up to float rounding) for all n to saturation...
    assert _violation(p, e, d) <= 1e-12
    # ... and is tight: p(n) is the largest value the constraints allow (Thm 1).
    for n in range(1, len(p)):
        bound = min(math.exp(e) * p[n - 1] + d, 1 - math.exp(-e) * (1 - p[n - 1] - d), 1.0)
        assert p[n] == pytest.approx(bound, rel=1e-9, abs=1e-15)


def test_truncated_geometric_planted_bugs_fail() -> None:
    s = PartitionSelection(epsilon=0.5, delta=0.02)
    s.first_crossover += 1  # crossover one too late: the rising branch overshoots
    p = list(s.keep_probabilities(20))
    assert _violation(p, 0.5, 0.02) > 1e-3
    # The unadjusted delta for k = 3 partitions: the composed delta exceeds the target.
    s = PartitionSelection(epsilon=1.0, delta=0.01, max_partitions_contributed=3)
    assert 1 - (1 - 0.01) ** 3 > 0.01 >= 1 - (1 - s.adjusted_delta) ** 3 - 1e-15


def test_pre_threshold_shifts_the_curve() -> None:
    plain = PartitionSelection(epsilon=0.5, delta=0.02)
    shifted = PartitionSelection(epsilon=0.5, delta=0.02, pre_threshold=5)
    assert [shifted.keep_probability(n) for n in range(5)] == [0.0] * 5
    for n in range(1, 15):
        assert shifted.keep_probability(n + 4) == pytest.approx(plain.keep_probability(n))
    laplace = PartitionSelection("laplace", epsilon=0.5, delta=0.02, pre_threshold=3)
    assert laplace.threshold == pytest.approx(7.43775164974 + 2, abs=1e-9)
    assert laplace.keep_probability(2) == 0.0


# ---------------------------------------------------------------------------- Laplace

LAPLACE_THRESHOLDS = [  # (epsilon, delta, k, threshold, tolerance)
    (LN3, DBL_MIN, 1, 645.17900, 0.05),
    (LN3, 1e-308, 1, 645.90700, 0.05),
    (LN3, 1e-128, 1, 268.64500, 0.05),
    (LN3, 2.0894334e-24, 1, 50.0, 0.05),
    (LN3, 1e-8, 1, 17.13630, 0.05),
    (LN3, 1e-4, 1, 8.75268, 0.05),
    (LN3, 0.1, 1, 2.46497, 0.05),
    (LN3, 0.5, 1, 1.0, 0.05),
    (LN3, 0.7, 1, 0.53503, 0.05),
    (LN3, 0.9, 1, -0.46497, 0.05),
    (1e9, 1e-8, 1, 1.0, 0.05),
    (1e-5, 2.0894334e-24, 1, 5.3832e6, 1.3),
    (0.1, 2.0894334e-24, 1, 539.3200, 0.05),
    (1.0, 2.0894334e-24, 1, 54.8320, 0.05),
    (5.0, 2.0894334e-24, 1, 11.7664, 0.05),
    (1e5, 2.0894334e-24, 1, 1.00054, 0.05),
    (LN3, 2.0894334e-24, 2, 100.262, 0.05),
    (LN3, 2.0894334e-24, 5, 253.325, 0.05),
    (LN3, 2.0894334e-24, 10, 511.959, 0.05),
    (LN3, 2.0894334e-24, 1000, 55288.700, 0.05),
    (LN3, 2.0894334e-24, 10000, 573837.000, 0.131),
    (0.001, 0.99999999999, 1, -24634.3, 0.05),
    (0.5, 0.02, 1, 7.43775164974, 0.001),
]


@pytest.mark.parametrize(("epsilon", "delta", "k", "expected", "tol"), LAPLACE_THRESHOLDS)
def test_laplace_threshold_golden(
    epsilon: float, delta: float, k: int, expected: float, tol: float
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.WeakGuaranteeWarning)  # epsilon > 10 rows
        s = PartitionSelection(
            "laplace", epsilon=epsilon, delta=delta, max_partitions_contributed=k
        )
    assert s.threshold == pytest.approx(expected, abs=tol)
    assert s.scale == pytest.approx(k / epsilon)


LAPLACE_DELTAS = [  # (epsilon, threshold, k, delta, tolerance)
    (LN3, 1, 1, 0.5, 1e-3),
    (LN3, 2, 1, 0.16666667, 1e-3),
    (LN3, 5, 1, 0.00617283960, 1e-6),
    (LN3, 10, 1, 2.5402631e-05, 1e-8),
    (LN3, 50, 1, 2.0894334e-24, 1e-27),
    (LN3, 100, 1, 2.9104900e-48, 1e-51),
    (LN3, 1000, 1, 0.0, 1e-100),
    (1e-5, 50, 1, 0.49975505, 1e-3),
    (1e-2, 50, 1, 0.30631319, 1e-3),
    (0.5, 50, 1, 1.1448674e-11, 1e-14),
    (2.0, 50, 1, 1.3732725e-43, 1.2e-46),
    (LN3, 50, 2, 2.0442300e-12, 1e-15),
    (LN3, 50, 5, 5.2740300e-05, 1e-08),
    (LN3, 50, 10, 0.0227296, 1e-05),
    (LN3, 50, 100, 1.0, 1e-3),
]


@pytest.mark.parametrize(("epsilon", "threshold", "k", "expected", "tol"), LAPLACE_DELTAS)
def test_laplace_delta_golden(
    epsilon: float, threshold: float, k: int, expected: float, tol: float
) -> None:
    delta = laplace_partition_delta(
        epsilon=epsilon, threshold=threshold, max_partitions_contributed=k
    )
    assert delta == pytest.approx(expected, abs=tol)


def test_laplace_keep_probabilities_golden_and_private() -> None:
    s = PartitionSelection("laplace", epsilon=0.5, delta=0.06766764161)
    assert s.keep_probability(5) == pytest.approx(0.5, abs=1e-10)
    for epsilon, delta, k in CASES:
        s = PartitionSelection(
            "laplace", epsilon=epsilon, delta=delta, max_partitions_contributed=k
        )
        assert s.keep_probability(1) <= s.adjusted_delta  # present on one side only
        assert -math.expm1(k * math.log1p(-s.keep_probability(1))) <= delta
        # n vs n + 1 both present: post-processing of epsilon / k per partition.
        p = [s.keep_probability(n) for n in range(1, int(s.threshold or 0) + 50)]
        assert _violation(p, epsilon / k, 0.0) <= 1e-12
    # Planted bug: a threshold one lower keeps one-unit partitions too often.
    assert laplace_partition_delta(epsilon=0.5, threshold=7.43775164974 - 1) > 0.02 * 1.5


# --------------------------------------------------------------------------- Gaussian

# Google's sigma is bisected to a relative 1e-3 and rounded up there; dpkit's is the
# analytic root (rounded up), so dpkit's threshold T satisfies
# (T_google - 1) / (1 + 1e-3) - tol <= T - 1 <= T_google - 1 + tol.
GAUSSIAN_THRESHOLDS = [  # (epsilon, delta, k, threshold, tolerance)
    (LN3, DBL_MIN, 1, 1278.4594, 0.05),
    (LN3, 1e-308, 1, 1279.1838, 0.05),
    (LN3, 1e-256, 1, 1061.4645, 0.05),
    (LN3, 1e-64, 1, 259.1447, 0.05),
    (LN3, 1e-16, 1, 60.5608, 0.05),
    (LN3, 1e-8, 1, 28.3774, 0.05),
    (LN3, 1e-4, 1, 13.0061, 0.05),
    (LN3, 1e-2, 1, 6.02085, 0.05),
    (LN3, 0.1, 1, 3.06731, 0.05),
    (LN3, 0.5, 1, 1.49072, 0.05),
    (LN3, 0.9, 1, 1.06663, 0.05),
    (1e9, 1e-8, 1, 1.0, 0.05),
    (1e-2, 2.0894334e-14, 1, 4958.78, 0.05),
    (0.1, 2.0894334e-14, 1, 521.815, 0.05),
    (1.0, 2.0894334e-14, 1, 55.9185, 0.05),
    (LN3, 2.0894334e-14, 1, 51.1404, 0.05),
    (5.0, 2.0894334e-14, 1, 12.6840, 0.05),
    (1e2, 2.0894334e-14, 1, 1.87689, 0.05),
    (LN3, 2.0894334e-14, 2, 72.7319, 0.05),
    (LN3, 2.0894334e-14, 10, 165.5916, 0.05),
    (LN3, 2.0894334e-14, 100, 539.9088, 0.05),
    (LN3, 2.0894334e-14, 1000, 1761.5664, 0.05),
    (LN3, 2.0894334e-14, 1000000, 60718.2913, 0.05),
]


@pytest.mark.parametrize(("epsilon", "delta", "k", "expected", "tol"), GAUSSIAN_THRESHOLDS)
def test_gaussian_threshold_golden(
    epsilon: float, delta: float, k: int, expected: float, tol: float
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.WeakGuaranteeWarning)  # epsilon > 10 rows
        s = PartitionSelection(
            "gaussian", epsilon=epsilon, delta=delta, max_partitions_contributed=k
        )
    assert s.threshold is not None and s.scale is not None
    assert (expected - 1) / (1 + 1e-3) - tol <= s.threshold - 1 <= expected - 1 + tol
    # Its own privacy: sigma pays delta / 2 ...
    assert gaussian_delta(s.scale, epsilon, math.sqrt(k)) <= delta / 2
    # ... and one-unit partitions the other half.
    one = s.keep_probability(1)
    assert -math.expm1(k * math.log1p(-one)) <= delta / 2 * (1 + 1e-9)


# ---------------------------------------------------------------- validation and API


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": 0.0, "delta": 0.1}, "epsilon"),
        ({"epsilon": math.inf, "delta": 0.1}, "epsilon"),
        ({"epsilon": 1.0, "delta": 0.0}, "delta"),
        ({"epsilon": 1.0, "delta": 1.0}, "delta"),
        ({"epsilon": 1.0, "delta": math.nan}, "delta"),
        ({"epsilon": 1.0, "delta": 0.1, "max_partitions_contributed": 0}, "max_partitions"),
        ({"epsilon": 1.0, "delta": 0.1, "pre_threshold": 0}, "pre_threshold"),
    ],
)
def test_rejects_bad_parameters(kwargs: dict[str, float], name: str) -> None:
    with pytest.raises(dp.InvalidParameter, match=name):
        PartitionSelection("laplace", **kwargs)  # type: ignore[arg-type]


def test_rejects_unknown_strategy_and_bad_counts() -> None:
    with pytest.raises(dp.InvalidParameter, match="strategy"):
        PartitionSelection("magic", epsilon=1.0, delta=0.1)  # type: ignore[arg-type]
    with pytest.raises(dp.InvalidParameter, match="'n'"):
        PartitionSelection(epsilon=1.0, delta=0.1).keep_probability(-1)
    with pytest.raises(dp.InvalidParameter, match="threshold"):
        laplace_partition_delta(epsilon=1.0, threshold=math.nan)


def test_guarantee_and_repr() -> None:
    s = PartitionSelection("gaussian", epsilon=1.0, delta=1e-6, max_partitions_contributed=3)
    assert s.guarantee == dp.ApproxDP(1.0, 1e-6)
    assert "gaussian" in repr(s) and "max_partitions_contributed=3" in repr(s)


# ---------------------------------------- against dpkit's own key-selection threshold


def _first_n(keep: object, q: float) -> int:
    n = 0
    while keep(n) < q:  # type: ignore[operator]
        n += 1
    return n


# (epsilon, delta, k) -> users needed for a 95% keep probability: truncated geometric,
# Laplace and Gaussian thresholding, dpkit's key selection (discrete Laplace, k/eps).
COMPARISON = [
    ((1.0, 1e-6, 1), (16, 17, 30, 17)),
    ((1.0, 1e-6, 4), (63, 69, 61, 69)),
    ((0.1, 1e-8, 1), (178, 202, 350, 202)),
    ((1.0, 1e-5, 10), (132, 156, 82, 156)),
]


@pytest.mark.parametrize(("params", "expected"), COMPARISON)
def test_comparison_with_key_selection(
    params: tuple[float, float, int], expected: tuple[int, ...]
) -> None:
    """The numbers quoted in docs/selection.md."""
    epsilon, delta, k = params
    found = [
        _first_n(
            PartitionSelection(
                strategy, epsilon=epsilon, delta=delta, max_partitions_contributed=k
            ).keep_probability,
            0.95,
        )
        for strategy in ("truncated_geometric", "laplace", "gaussian")
    ]
    scale = k / epsilon
    noise = Noise("laplace", 1, k, dp.DiscreteLaplace(scale=scale), Fraction(epsilon))
    t, spent = selection_threshold(noise, delta)
    assert spent <= delta

    def keep(n: int) -> float:  # P(n + Z >= t), Z discrete Laplace (symmetric)
        return (
            discrete_laplace_tail(t - n, scale)
            if t > n
            else 1 - discrete_laplace_tail(n - t + 1, scale)
        )

    found.append(_first_n(keep, 0.95))
    assert tuple(found) == expected
