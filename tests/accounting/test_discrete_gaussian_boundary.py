"""discrete_gaussian_delta at adversarial epsilons: a loss atom just above epsilon.

The exact delta ([CKS20] Thm 7) is summed with mpmath at 60 digits, with epsilon and
sigma^2 taken as the exact rationals of their floats. dpkit must never be below it and
not above it by more than its stated relative 1e-11. Before the fix the cases where the
boundary atom dominates (small sigma) were optimistic: -1.5e-7 relative at eta = 1e-8,
-1.5e-3 at 1e-12, and the atom was dropped (-100%) at eta <= 1e-15.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest

from dpkit.accounting import discrete_gaussian_delta, discrete_gaussian_epsilon


def _exact_delta(sigma: float, epsilon: float, sens: int) -> mpmath.mpf:
    with mpmath.workdps(60):
        s2 = mpmath.mpf(Fraction(sigma) ** 2)
        eps = mpmath.mpf(Fraction(epsilon))
        span = int(40 * sigma) + 40
        norm = mpmath.fsum(
            mpmath.exp(-mpmath.mpf(y * y) / (2 * s2)) for y in range(-span, span + 1)
        )
        total = mpmath.mpf(0)
        for y in range(-span, span + 1):
            loss = (2 * y * sens + sens * sens) / (2 * s2)
            if loss > eps:
                total += mpmath.exp(-mpmath.mpf(y * y) / (2 * s2)) * -mpmath.expm1(eps - loss)
        return total / norm


def _atom_epsilon(sigma: float, y: int, sens: int, eta: float) -> float:
    """A float epsilon at about ``loss(y) - eta`` (at most ``loss(y)``: the atom counts)."""
    loss = Fraction(2 * y * sens + sens * sens) / (2 * Fraction(sigma) ** 2)
    eps = float(loss - Fraction(eta))
    while Fraction(eps) >= loss:
        eps = math.nextafter(eps, 0.0)
    return eps


CASES = [
    pytest.param(sigma, y, sens, eta, id=f"s{sigma}-y{y}-D{sens}-eta{eta:g}")
    for sigma, y, sens in [
        (1.0, 1, 1),
        (2.5, 3, 1),
        (0.7, 1, 1),
        (0.1, 0, 1),
        (0.15, 1, 1),
        (0.3, 0, 2),
    ]
    for eta in (1e-8, 1e-12, 1e-13, 1e-15, 0.0)
]


@pytest.mark.parametrize(("sigma", "y", "sens", "eta"), CASES)
def test_never_below_exact_delta_at_boundary_atoms(
    sigma: float, y: int, sens: int, eta: float
) -> None:
    eps = _atom_epsilon(sigma, y, sens, eta)
    exact = _exact_delta(sigma, eps, sens)
    got = discrete_gaussian_delta(sigma, eps, sens)
    assert mpmath.mpf(got) >= exact
    # Tight: the stated relative 1e-11 (boundary gaps are computed exactly).
    assert mpmath.mpf(got) <= exact * (1 + mpmath.mpf("2e-11"))


def test_epsilon_search_that_lands_on_an_atom_is_valid() -> None:
    # delta target = the exact delta at an atom: the root is exactly at the atom.
    sigma, sens, y = 0.15, 1, 1
    atom = _atom_epsilon(sigma, y, sens, 0.0)
    target = float(_exact_delta(sigma, atom, sens))
    eps = discrete_gaussian_epsilon(sigma, target, sens)
    assert _exact_delta(sigma, eps, sens) <= target
    assert eps <= atom * (1 + 1e-9) + 1e-12
