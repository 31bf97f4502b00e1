"""The exponential mechanism and permute-and-flip in the PLD accountant.

The exponential mechanism is analysed as ``eps``-bounded range: its PLD is the envelope
of the two-point worst cases (Dong, Durfee & Rogers 2020), checked here against those
pairs directly, against the closed-form envelope, and (for two runs) against an
independent mpmath integral. Every check is two-sided: never below the exact value,
and within 0.1% of it.
"""

from __future__ import annotations

import math

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import (
    ExponentialMechanismEvent,
    PermuteAndFlipEvent,
    PureEvent,
)
from dpkit.accounting._math.pld.bounded_range import bounded_range_delta, bounded_range_pmf
from dpkit.accounting._math.pld.hockey import hockey_stick
from dpkit.accounting.pld import PLDAccountant

TIGHT = 1e-3


def _two_point_delta(epsilon: float, t: float, eps_prime: float) -> float:
    """delta of the t-pair: losses (1-t) eps (P-mass p) and -t eps, in mpmath."""
    eps, t, x = mpmath.mpf(epsilon), mpmath.mpf(t), mpmath.mpf(eps_prime)
    high, low = (1 - t) * eps, -t * eps
    p = (mpmath.exp(-low) - 1) / (mpmath.exp(-low) - mpmath.exp(-high))
    value = p * max(mpmath.mpf(0), 1 - mpmath.exp(x - high))
    value += (1 - p) * max(mpmath.mpf(0), 1 - mpmath.exp(x - low))
    return float(value)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("fraction", [-1.2, -0.5, 0.0, 0.3, 0.9])
def test_envelope_dominates_every_two_point_pair_and_is_attained(
    epsilon: float, fraction: float
) -> None:
    eps_prime = fraction * epsilon
    pairs = [_two_point_delta(epsilon, i / 200, eps_prime) for i in range(1, 200)]
    envelope = bounded_range_delta(epsilon, eps_prime)
    assert max(pairs) <= envelope * (1 + 1e-12)
    if abs(fraction) <= 1.0:  # the maximiser t* = (eps - eps') / (2 eps) is attained
        t_star = (epsilon - eps_prime) / (2 * epsilon)
        assert _two_point_delta(epsilon, t_star, eps_prime) == pytest.approx(envelope, rel=1e-9)


@pytest.mark.parametrize("epsilon", [0.05, 1.0, 3.0])
def test_one_run_is_the_envelope(epsilon: float) -> None:
    accountant = PLDAccountant().compose(ExponentialMechanismEvent(epsilon))
    for fraction in (-1.5, -0.7, 0.0, 0.4, 0.95):
        eps_prime = fraction * epsilon
        exact = bounded_range_delta(epsilon, eps_prime)
        got = accountant.get_delta(eps_prime) if eps_prime >= 0 else None
        if got is None:  # negative eps: check the discretised PLD itself
            got = hockey_stick(bounded_range_pmf(epsilon, 1e-4), eps_prime)
        assert exact <= got <= exact * (1 + TIGHT)


def _two_runs_exact(epsilon: float, eps_prime: float) -> float:
    """delta of the envelope composed twice: int delta_1(eps' - l) dP(l), in mpmath."""
    eps = mpmath.mpf(epsilon)
    scale = 1 / (2 * mpmath.expm1(eps))

    def one(arg: mpmath.mpf) -> mpmath.mpf:
        if arg >= eps:
            return mpmath.mpf(0)
        if arg <= -eps:
            return -mpmath.expm1(arg)
        return (mpmath.exp(eps / 2) - mpmath.exp(arg / 2)) ** 2 / mpmath.expm1(eps)

    def integrand(loss: mpmath.mpf) -> mpmath.mpf:
        return one(eps_prime - loss) * scale * mpmath.exp((eps + loss) / 2)

    kinks = sorted({-eps, eps, eps_prime - eps, eps_prime + eps})
    points = [k for k in kinks if -eps <= k <= eps]
    return float(mpmath.quad(integrand, points))


@pytest.mark.parametrize(("epsilon", "eps_prime"), [(1.0, 0.5), (1.0, 1.5), (0.3, 0.1)])
def test_two_runs_against_an_independent_integral(epsilon: float, eps_prime: float) -> None:
    exact = _two_runs_exact(epsilon, eps_prime)
    got = PLDAccountant().compose(ExponentialMechanismEvent(epsilon), count=2).get_delta(eps_prime)
    assert exact <= got <= exact * (1 + TIGHT)


def test_a_thirty_percent_wrong_epsilon_is_caught() -> None:
    # Power: the one-run check above rejects the envelope of 0.7 eps or 1.3 eps.
    got = PLDAccountant().compose(ExponentialMechanismEvent(1.0)).get_delta(0.3)
    assert not bounded_range_delta(0.7, 0.3) <= got <= bounded_range_delta(0.7, 0.3) * 1.001
    assert not bounded_range_delta(1.3, 0.3) <= got <= bounded_range_delta(1.3, 0.3) * 1.001


def test_bounded_range_beats_pure_dp_and_not_more() -> None:
    em = PLDAccountant().compose(ExponentialMechanismEvent(1.0), count=10).get_epsilon(1e-6)
    pure = PLDAccountant().compose(PureEvent(1.0), count=10).get_epsilon(1e-6)
    assert em < 0.85 * pure
    # One run: eps-BR is eps-DP and no better at delta -> 0.
    one = PLDAccountant().compose(ExponentialMechanismEvent(1.0)).get_epsilon(1e-12)
    assert 0.99 < one <= 1.0 + 1e-9


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_permute_and_flip_is_its_pure_guarantee(relation: str) -> None:
    pf = PLDAccountant(relation=relation).compose(PermuteAndFlipEvent(0.7), count=5)
    pure = PLDAccountant(relation=relation).compose(PureEvent(0.7), count=5)
    assert pf.get_epsilon(1e-6) == pure.get_epsilon(1e-6)
    assert PLDAccountant(relation=relation).supports(ExponentialMechanismEvent(1.0))


def test_kl_of_the_envelope_is_stated_in_the_docstring() -> None:
    # 0.16395 at eps = 1 (vs 0.12330 for the best two-point pair): the stated gap.
    pmf = bounded_range_pmf(1.0, 1e-4)
    kl = float((pmf.masses * pmf.losses).sum())
    assert kl == pytest.approx(0.163953, abs=2e-5)
    assert math.isclose(_two_point_kl_max(), 0.123302, abs_tol=2e-6)


def _two_point_kl_max() -> float:
    best = 0.0
    for i in range(1, 2000):
        t = i / 2000
        high, low = 1 - t, -t
        p = math.expm1(-low) / (math.exp(-low) - math.exp(-high))
        best = max(best, p * high + (1 - p) * low)
    return best


def _em_instance_delta(epsilon: float, up: int, total: int, eps_prime: float) -> float:
    """Exact delta of the exponential mechanism on an explicit neighbouring pair.

    ``total`` candidates with score 0 on D; on D' ``up`` of them gain 1 and the rest
    lose 1 (sensitivity 1), probabilities proportional to ``exp(eps u / 2)``. Both
    orderings; only the group (up or down) matters.
    """
    eps, e = mpmath.mpf(epsilon), mpmath.mpf(eps_prime)
    share = mpmath.mpf(up) / total
    weight_up = share * mpmath.exp(eps / 2)
    norm = weight_up + (1 - share) * mpmath.exp(-eps / 2)
    p = (share, 1 - share)
    q = (weight_up / norm, 1 - weight_up / norm)
    forward = sum(max(mpmath.mpf(0), a - mpmath.exp(e) * b) for a, b in zip(p, q, strict=True))
    backward = sum(max(mpmath.mpf(0), b - mpmath.exp(e) * a) for a, b in zip(p, q, strict=True))
    return float(max(forward, backward))


@pytest.mark.parametrize("eps_prime", [0.0, 0.3, 0.7])
def test_the_exponential_mechanism_itself_reaches_the_envelope(eps_prime: float) -> None:
    # Every instance stays below the accountant's delta, and the best split of the
    # candidates comes within 1% of it: the bound is valid and not loose.
    got = PLDAccountant().compose(ExponentialMechanismEvent(1.0)).get_delta(eps_prime)
    instances = [_em_instance_delta(1.0, up, 400, eps_prime) for up in range(1, 400)]
    assert max(instances) <= got
    assert max(instances) >= 0.99 * got


@settings(max_examples=40, deadline=None)
@given(
    epsilon=st.floats(0.01, 5.0),
    t=st.floats(0.0, 1.0),
    fraction=st.floats(-1.5, 1.2),
    h=st.sampled_from([1e-3, 1e-4]),
)
def test_discretised_envelope_dominates_every_two_point_pair(
    epsilon: float, t: float, fraction: float, h: float
) -> None:
    # Property: for any bounded-range parameter t and any real eps', the discretised
    # PLD's delta (plus its slack) is at least the two-point pair's.
    pmf = bounded_range_pmf(epsilon, h)
    eps_prime = fraction * epsilon
    pair = _two_point_delta(epsilon, min(max(t, 1e-9), 1 - 1e-9), eps_prime)
    assert hockey_stick(pmf, eps_prime) + pmf.slack >= pair * (1 - 1e-12) - 1e-15
