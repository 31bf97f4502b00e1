"""RDP of the exponential mechanism (bounded range) and of permute-and-flip.

The exponential mechanism's curve, the smaller of ``kappa(eps) + (a - 1) eps^2 / 8``
(Cesar & Rogers 2021) and the exact worst case over eps-bounded-range pairs (the
two-valued pair, see dpkit.accounting._math.bounded_range), is checked: ``kappa`` and
the worst case against 40/50-digit mpmath (an independent maximiser); ``kappa`` is the
largest KL divergence of two-valued pairs; the curve equals the worst two-valued pair
on a grid (so it cannot be lowered) and is above the exact divergences of exponential
mechanisms on random score vectors.

Permute-and-flip keeps the pure-DP curve: dp_accounting's Laplace curve is stated
without proof. The numerical search below is the evidence we have that it might hold;
it does not prove it, so dpkit does not use it.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest

from dpkit.accounting import (
    ExponentialMechanismEvent,
    PermuteAndFlipEvent,
    PureDP,
    RDPAccountant,
    laplace_rdp,
    zcdp_rho,
)
from dpkit.accounting._math.bounded_range import (
    bounded_range_kl,
    bounded_range_rdp,
    bounded_range_rdp_exact,
)
from dpkit.accounting._math.rounding import product_up

EPSILONS = [1e-9, 1e-5, 0.005, 0.0099, 0.01, 0.3, 1.0, 1.0000001, 2.5, 10.0, 80.0, 1e4]


def _kappa_mp(epsilon: float) -> mpmath.mpf:
    with mpmath.workdps(50):
        x = mpmath.mpf(epsilon) / mpmath.expm1(mpmath.mpf(epsilon))
        return x - 1 - mpmath.log(x)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_kappa_is_an_upper_bound_within_1e_11(epsilon: float) -> None:
    exact = _kappa_mp(epsilon)
    got = bounded_range_kl(epsilon)
    assert got >= exact
    assert got <= exact * (1 + 1e-11)


def _two_point(epsilon: float, p: float) -> tuple[np.ndarray, np.ndarray]:
    """The eps-BR pair whose loss is ``t + eps`` with P-probability p and ``t`` otherwise."""
    t = math.log(p * math.exp(-epsilon) + 1 - p)  # makes Q sum to one
    big_p = np.array([p, 1 - p])
    big_q = np.array([p * math.exp(-(t + epsilon)), (1 - p) * math.exp(-t)])
    return big_p, big_q


def _renyi(p: np.ndarray, q: np.ndarray, order: float) -> float:
    return math.log(float(np.sum(p**order * q ** (1 - order)))) / (order - 1)


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    return float(np.sum(p * np.log(p / q)))


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0, 8.0])
def test_kappa_is_the_largest_kl_of_two_valued_pairs(epsilon: float) -> None:
    from scipy.optimize import minimize_scalar

    best = minimize_scalar(
        lambda p: -_kl(*_two_point(epsilon, p)),
        bounds=(1e-9, 1 - 1e-9),
        method="bounded",
        options={"xatol": 1e-12},
    )
    reached = -best.fun
    kappa = bounded_range_kl(epsilon)
    assert reached <= kappa * (1 + 1e-12)
    # Tight: a kappa 1e-6 smaller would be refuted by the pair found.
    assert reached >= kappa * (1 - 1e-6)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("order", [1.5, 2.0, 5.0, 32.0])
def test_curve_is_above_two_valued_pairs(epsilon: float, order: float) -> None:
    worst = max(
        max(_renyi(p, q, order), _renyi(q, p, order))
        for p, q in (_two_point(epsilon, x) for x in np.linspace(1e-4, 1 - 1e-4, 2001))
    )
    curve = RDPAccountant((order,)).compose(ExponentialMechanismEvent(epsilon)).guarantee
    assert curve.epsilons[0] >= worst * (1 - 1e-12)
    # Tight: the curve is the worst two-valued pair (the grid finds it to 1e-6), so a
    # curve 30% (or 1e-5) too small would be caught.
    assert curve.epsilons[0] <= worst * (1 + 1e-6)


def _exact_two_valued_max(epsilon: float, order: float) -> mpmath.mpf:
    """max_p of the two-valued pair's divergence, by mpmath's maximiser (not dpkit's)."""
    with mpmath.workdps(40):
        e, a = mpmath.mpf(epsilon), mpmath.mpf(order)
        c1, c2 = -mpmath.expm1(-e), mpmath.expm1((a - 1) * e)

        def f(p: mpmath.mpf) -> mpmath.mpf:
            return mpmath.log(1 - p * c1) + mpmath.log(1 + p * c2) / (a - 1)

        # F is concave: golden-section search on [0, 1] to 1e-30.
        lo, hi = mpmath.mpf(0), mpmath.mpf(1) - mpmath.mpf(10) ** -30
        ratio = (mpmath.sqrt(5) - 1) / 2
        for _ in range(160):
            x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
            if f(x1) < f(x2):
                lo = x1
            else:
                hi = x2
        return f((lo + hi) / 2)


@pytest.mark.parametrize("epsilon", [1e-3, 0.3, 1.0, 4.0, 30.0])
@pytest.mark.parametrize("order", [1.01, 1.5, 2.0, 7.5, 100.0, 1e4])
def test_exact_worst_case_matches_mpmath(epsilon: float, order: float) -> None:
    exact = _exact_two_valued_max(epsilon, order)
    got = bounded_range_rdp_exact(epsilon, order)
    assert got >= exact
    # The float allowance is 1e-12 of the terms' sizes (about eps): absolute.
    assert got <= exact * (1 + 1e-9) + 1e-11 * epsilon
    if order == 2.0:  # closed form 2 log cosh(eps / 2)
        assert got == pytest.approx(2 * math.log(math.cosh(epsilon / 2)), rel=1e-9)


def _exponential_mechanism(scores: np.ndarray, epsilon: float) -> np.ndarray:
    weights = np.exp(epsilon * (scores - scores.max()) / 2.0)  # sensitivity 1
    return weights / weights.sum()


def test_curve_is_above_exponential_mechanisms_on_random_scores() -> None:
    rng = np.random.default_rng(20)
    orders = (1.01, 2.0, 4.0, 16.0)
    for epsilon in (0.5, 1.0, 4.0):
        curve = RDPAccountant(orders).compose(ExponentialMechanismEvent(epsilon))
        bound = curve.guarantee.epsilons
        for _ in range(300):
            k = int(rng.integers(2, 8))
            u = rng.uniform(-5, 5, size=k)
            v = u + rng.choice([-1.0, 1.0], size=k) * rng.uniform(0.5, 1.0, size=k)
            p, q = _exponential_mechanism(u, epsilon), _exponential_mechanism(v, epsilon)
            for order, limit in zip(orders, bound, strict=True):
                assert max(_renyi(p, q, order), _renyi(q, p, order)) <= limit


def test_exponential_mechanism_uses_the_smallest_valid_curve() -> None:
    orders = (1.5, 2.0, 10.0, 1000.0)
    em = RDPAccountant(orders).compose(ExponentialMechanismEvent(1.0)).guarantee.epsilons
    pure = PureDP(1.0).to_rdp(orders).epsilons
    rho = zcdp_rho(ExponentialMechanismEvent(1.0))
    assert rho is not None
    for a, value, p in zip(orders, em, pure, strict=True):
        assert value == min(bounded_range_rdp(1.0, a), p, product_up(rho, a))
    # Even at order 1000 the bounded-range worst case is below the pure-DP curve.
    assert em[-1] < pure[-1]


def _permute_and_flip(scores: list[float], epsilon: float) -> np.ndarray:
    """Exact output distribution (McKenna & Sheldon 2020), sensitivity 1."""
    k, top = len(scores), max(scores)
    accept = [math.exp(epsilon * (s - top) / 2.0) for s in scores]
    out = np.zeros(k)
    orders = list(itertools.permutations(range(k)))
    for order in orders:
        survive = 1.0
        for r in order:
            out[r] += survive * accept[r] / len(orders)
            survive *= 1.0 - accept[r]
    return out


def test_permute_and_flip_keeps_the_pure_curve() -> None:
    orders = (1.5, 2.0, 8.0)
    pf = RDPAccountant(orders).compose(PermuteAndFlipEvent(1.0)).guarantee.epsilons
    assert pf == PureDP(1.0).to_rdp(orders).epsilons


def test_permute_and_flip_numerical_evidence_for_the_laplace_curve() -> None:
    # Not a proof: over random small instances, permute-and-flip's Renyi divergence
    # stays below the Laplace curve (the claim dp_accounting relies on) and, as it
    # must, below the pure curve dpkit uses.
    rng = np.random.default_rng(7)
    worst_ratio = 0.0
    for epsilon in (0.5, 1.0, 2.0):
        for order in (1.5, 2.0, 5.0):
            lap = laplace_rdp(epsilon, order)
            pure = PureDP(epsilon).to_rdp((order,)).epsilons[0]
            for _ in range(150):
                k = int(rng.integers(2, 5))
                u = [float(x) for x in rng.choice([0.0, 1.0, -1.0, 2.5], size=k)]
                shift = rng.choice([-1.0, 0.0, 1.0], size=k)
                v = [x + float(d) for x, d in zip(u, shift, strict=True)]
                p, q = _permute_and_flip(u, epsilon), _permute_and_flip(v, epsilon)
                value = max(_renyi(p, q, order), _renyi(q, p, order))
                assert value <= pure
                worst_ratio = max(worst_ratio, value / lap)
    assert worst_ratio <= 1.0
