"""Unit tests for the composition theorems."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from dpkit.accounting import (
    ZCDP,
    ApproxDP,
    PureDP,
    advanced_composition,
    compose_pure_via_zcdp,
    optimal_composition,
)
from dpkit.errors import InvalidParameter

NAN = float("nan")


def _kov_linear_scan(epsilon: float, delta: float, k: int, target: float) -> float | None:
    """Kairouz-Oh-Viswanath Thm 3.3 by the textbook scan, with exact rational binomials.

    Exponentials are floats, so this is only for small k and targets away from ties.
    """
    e = math.exp(epsilon)
    for i in range(k // 2, -1, -1):
        delta_i = (
            sum(math.comb(k, ell) * (e ** (k - ell) - e ** (k - 2 * i + ell)) for ell in range(i))
            / (1 + e) ** k
        )
        if 1 - (1 - delta) ** k * (1 - delta_i) <= target:
            return (k - 2 * i) * epsilon
    return None


@pytest.mark.parametrize(
    ("epsilon", "delta", "count", "target"),
    [
        pytest.param(0.1, 0.0, 10, 1e-5, id="pure-10"),
        pytest.param(0.5, 1e-6, 20, 1e-4, id="approx-20"),
        pytest.param(1.0, 0.0, 7, 1e-3, id="odd-count"),
        pytest.param(0.05, 1e-7, 100, 1e-5, id="k100"),
        pytest.param(0.3, 0.0, 50, 0.01, id="k50"),
        pytest.param(0.2, 0.0, 1, 0.0, id="k1"),
        pytest.param(0.01, 0.0, 200, 0.3, id="large-target"),
    ],
)
def test_optimal_composition_matches_linear_scan(
    epsilon: float, delta: float, count: int, target: float
) -> None:
    expected = _kov_linear_scan(epsilon, delta, count, target)
    got = optimal_composition(epsilon, delta, count, target)
    assert expected is not None and got is not None
    assert got.epsilon == pytest.approx(expected, rel=1e-14)
    assert Fraction(got.epsilon) >= Fraction(expected) * (1 - Fraction(1, 10**15))
    assert got.delta == target


def test_optimal_composition_none_when_delta_budget_too_small() -> None:
    # 1 - (1 - 1e-3)^10 ~ 9.96e-3 > 1e-3: no epsilon gives the target.
    assert optimal_composition(0.5, 1e-3, 10, 1e-3) is None
    assert optimal_composition(0.5, 1e-3, 10, 0.02) is not None


def test_optimal_composition_is_on_the_kov_grid() -> None:
    result = optimal_composition(0.1, 0.0, 31, 1e-6)
    assert result is not None
    steps = result.epsilon / 0.1
    assert abs(steps - round(steps)) < 1e-9
    assert round(steps) % 2 == 31 % 2


def test_optimal_composition_handles_ten_thousand_steps() -> None:
    result = optimal_composition(0.01, 0.0, 10_000, 1e-6)
    assert result is not None
    advanced = advanced_composition(0.01, 0.0, 10_000, 1e-6)
    via_zcdp = compose_pure_via_zcdp([0.01] * 10_000, 1e-6)
    # Exact composition beats every general bound (up to its grid step of 2 eps).
    assert result.epsilon <= advanced.epsilon + 0.02
    assert result.epsilon <= via_zcdp.epsilon + 0.02
    assert result.epsilon < 0.1 * (10_000 * 0.01)  # far below basic composition


@pytest.mark.parametrize(
    ("target", "expected"),
    [pytest.param(9.33e-7, 4.9, id="just-above"), pytest.param(9.32e-7, 4.92, id="just-below")],
)
def test_optimal_composition_precision_at_ten_thousand_steps(
    target: float, expected: float
) -> None:
    # With eps = 0.01, k = 10^4, the exact KOV delta at total epsilon 4.9 (i = 4755) is
    # 9.32293476e-7 (computed with 60-digit mpmath); at 4.88 it is 1.02552564e-6.
    result = optimal_composition(0.01, 0.0, 10_000, target)
    assert result is not None
    assert result.epsilon == pytest.approx(expected, rel=1e-12)


def test_optimal_composition_pure_target_zero() -> None:
    # delta = 0 everywhere: only basic composition k * eps is exact.
    result = optimal_composition(0.3, 0.0, 5, 0.0)
    assert result == ApproxDP(result.epsilon, 0.0) if result else False
    assert result is not None and result.epsilon == pytest.approx(1.5)


def test_advanced_composition_formula() -> None:
    # Kairouz, Oh & Viswanath 2015, Thm 3.4 (issue 20: was Dwork-Rothblum-Vadhan).
    eps, k, dp = 0.1, 100, 1e-6
    got = advanced_composition(eps, 1e-8, k, dp)
    drift = k * eps * math.tanh(eps / 2)
    near = drift + eps * math.sqrt(2 * k * math.log(math.e + math.sqrt(k) * eps / dp))
    expected = min(near, drift + eps * math.sqrt(2 * k * math.log(1 / dp)))
    assert got.epsilon == pytest.approx(expected, rel=1e-13)
    assert got.epsilon >= expected
    drv = math.sqrt(2 * k * math.log(1 / dp)) * eps + k * eps * math.expm1(eps)
    assert got.epsilon < drv
    assert got.delta == pytest.approx(1 - (1 - 1e-8) ** k * (1 - dp), rel=1e-12)
    assert got.delta <= k * 1e-8 + dp


def test_advanced_composition_never_worse_than_basic() -> None:
    got = advanced_composition(2.0, 0.0, 3, 1e-6)
    assert got.epsilon == pytest.approx(6.0)


def test_compose_pure_via_zcdp_beats_the_textbook_formula() -> None:
    epsilons = [0.1] * 50 + [0.3] * 5
    delta = 1e-6
    total_sq = sum(e * e for e in epsilons)
    textbook = 0.5 * total_sq + math.sqrt(2 * math.log(1 / delta) * total_sq)
    got = compose_pure_via_zcdp(epsilons, delta)
    assert got.epsilon <= textbook
    rho = sum(e * math.tanh(e / 2) for e in epsilons)
    assert got.epsilon == pytest.approx(ZCDP(rho).to_approx(delta).epsilon, rel=1e-12)
    assert got.delta == delta


def test_compose_pure_via_zcdp_never_worse_than_basic() -> None:
    got = compose_pure_via_zcdp([3.0, 4.0], 1e-6)
    assert got.epsilon == pytest.approx(7.0)
    assert got.epsilon >= (PureDP(3.0) + PureDP(4.0)).epsilon * (1 - 1e-15)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: advanced_composition(0.0, 0.0, 10, 1e-6), id="adv-eps-zero"),
        pytest.param(lambda: advanced_composition(NAN, 0.0, 10, 1e-6), id="adv-eps-nan"),
        pytest.param(lambda: advanced_composition(0.1, 1.0, 10, 1e-6), id="adv-delta-one"),
        pytest.param(lambda: advanced_composition(0.1, 0.0, 0, 1e-6), id="adv-count-zero"),
        pytest.param(lambda: advanced_composition(0.1, 0.0, 2.5, 1e-6), id="adv-count-float"),
        pytest.param(lambda: advanced_composition(0.1, 0.0, 10, 0.0), id="adv-dprime-zero"),
        pytest.param(lambda: advanced_composition(0.1, 0.2, 10, 1e-6), id="adv-total-delta"),
        pytest.param(lambda: optimal_composition(-1.0, 0.0, 10, 1e-6), id="opt-eps-negative"),
        pytest.param(lambda: optimal_composition(0.1, -0.1, 10, 1e-6), id="opt-delta-negative"),
        pytest.param(lambda: optimal_composition(0.1, 0.0, True, 1e-6), id="opt-count-bool"),
        pytest.param(lambda: optimal_composition(0.1, 0.0, 10, 1.0), id="opt-target-one"),
        pytest.param(lambda: optimal_composition("0.1", 0.0, 10, 1e-6), id="opt-eps-str"),
        pytest.param(lambda: compose_pure_via_zcdp([], 1e-6), id="zcdp-empty"),
        pytest.param(lambda: compose_pure_via_zcdp([0.1, 0.0], 1e-6), id="zcdp-eps-zero"),
        pytest.param(lambda: compose_pure_via_zcdp([0.1], 0.0), id="zcdp-delta-zero"),
        pytest.param(lambda: compose_pure_via_zcdp(0.1, 1e-6), id="zcdp-not-iterable"),
        pytest.param(lambda: compose_pure_via_zcdp([math.inf], 1e-6), id="zcdp-eps-inf"),
    ],
)
def test_invalid_composition_arguments(call: object) -> None:
    assert callable(call)
    with pytest.raises(InvalidParameter):
        call()
