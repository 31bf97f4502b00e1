"""Shared designs (solved once per test session) and an independent DP checker."""

from __future__ import annotations

import decimal
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from dpkit.design import NoiseDesign, design_noise


def exp_below(epsilon: float) -> Fraction:
    """A rational below e^epsilon (written here, independently of dpkit.design)."""
    with decimal.localcontext() as context:
        context.prec = 50
        return Fraction(Decimal(epsilon).exp() * (1 - Decimal(10) ** -45))


def max_divergence(
    counts_a: list[int],
    counts_b: list[int],
    beta_units: int,
    epsilon: float,
    refine: int,
    shift_range: tuple[int, int] | None = None,
) -> Fraction:
    """Largest exact hockey-stick divergence of b shifted by phi from a, for all shifts
    |phi| <= beta_units * beta on a grid ``refine`` times finer than beta (so shifts that
    are not multiples of beta are checked too). Masses are counts / sum(counts).
    ``shift_range``: only these shifts, in units of beta / refine."""
    bound = exp_below(epsilon)
    fine_a = [Fraction(c, refine) for c in counts_a for _ in range(refine)]
    fine_b = [Fraction(c, refine) for c in counts_b for _ in range(refine)]
    total = sum(counts_a)
    worst = Fraction(0)
    n = len(fine_a)
    low, high = shift_range or (-beta_units * refine, beta_units * refine)
    for shift in range(low, high + 1):
        excess = Fraction(0)
        for i in range(n):
            other = fine_b[i - shift] if 0 <= i - shift < n else Fraction(0)
            excess += max(Fraction(0), fine_a[i] - bound * other)
        worst = max(worst, excess / total)
    return worst


def counts_of(design: NoiseDesign) -> list[int]:
    return [int(c) for c in design._distribution.counts]


@pytest.fixture(scope="session")
def l1_design() -> NoiseDesign:
    # digest optimal-noise.md A.4: (eps, delta) = (1, 0.2), beta = 0.05, support ~10
    return design_noise(epsilon=1.0, delta=0.2, granularity=0.05, support=10.0)


@pytest.fixture(scope="session")
def coarse_design() -> NoiseDesign:
    return design_noise(epsilon=1.0, delta=0.2, granularity=0.25, support=4.0)


@pytest.fixture(scope="session")
def too_loose_design() -> NoiseDesign:
    # solved for a delta 30% too large: the checks must reject it at delta = 0.2
    return design_noise(epsilon=1.0, delta=0.26, granularity=0.25, support=4.0)


def support_counts(design: NoiseDesign) -> np.ndarray:
    return np.asarray(design._distribution.counts)
