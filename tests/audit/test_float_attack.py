"""Mironov's floating-point attack: the textbook Laplace leaks, dpkit's does not."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import dpkit as dp
from dpkit.audit import (
    audit,
    reachability_attack,
    reachable_from,
    reachable_on_grid,
    textbook_laplace,
    textbook_laplace_from_uniform,
)
from dpkit.random import Random
from dpkit.testing import seeded

EPSILON = 1.0
SCALE = 1.0 / EPSILON


@pytest.mark.parametrize("loc", [0.0, 1.0, -3.5, 1e6])
def test_reproduces_numpy_laplace_bit_for_bit(loc: float) -> None:
    # The same PCG64 stream feeds Generator.laplace and Generator.random (next_double).
    draws = np.random.Generator(np.random.PCG64(7)).laplace(loc, 0.7, 50_000)
    uniforms = np.random.Generator(np.random.PCG64(7)).random(50_000)
    assert np.array_equal(textbook_laplace_from_uniform(loc, 0.7, uniforms), draws)


def test_every_textbook_output_is_reachable_from_its_own_input() -> None:
    # No false alarms: the oracle is exact for outputs the sampler did produce.
    for loc in (0.0, 1.0):
        y = textbook_laplace(loc, scale=SCALE, size=3000, rng=seeded(1))
        assert reachable_from(y, loc, scale=SCALE).all()


def test_textbook_laplace_is_broken() -> None:
    y = textbook_laplace(0.0, scale=SCALE, size=5000, rng=seeded(2))
    result = reachability_attack(y, lambda v: reachable_from(v, 1.0, scale=SCALE))
    # Measured: 81.6% of M(0)'s outputs never come out of M(1) (10^4 draws, seed 0);
    # here 0.8 +- 0.01. So the mechanism is not (eps, delta)-DP for any eps when
    # delta < ~0.8, although it claims (1, 0)-DP.
    assert result.unreachable_fraction > 0.75
    assert result.unreachable_lower > 0.7
    assert result.epsilon_lower_bound == np.inf


def test_black_box_audit_with_the_reachability_attack() -> None:
    def textbook(x: Any, n: int, rng: Random) -> npt.NDArray[Any]:
        return textbook_laplace(float(x), scale=SCALE, size=n, rng=rng)

    def fit(out_x: npt.NDArray[Any], out_xp: npt.NDArray[Any]) -> Any:
        return lambda y: (~reachable_from(y, 1.0, scale=SCALE)).astype(float)

    result = audit(textbook, 0.0, 1.0, samples=4000, attack=fit, rng=seeded(3))
    # Every output of M(1) is reachable from 1, so FPR is estimated 0 out of 2000.
    assert result.false_positives == 0
    assert result.epsilon_lower_bound > 6.0  # measured 6.5: far above the claimed 1


def test_dpkit_laplace_resists() -> None:
    mechanism = dp.Laplace.calibrate(epsilon=EPSILON)
    y = np.asarray(mechanism.release(np.zeros(20_000), rng=seeded(4)).value)
    # dpkit's outputs lie on the grid, and every grid point is an output from 1 too.
    assert reachable_on_grid(1.0, granularity=mechanism.granularity).all()
    result = reachability_attack(
        y, lambda v: reachable_on_grid(v, granularity=mechanism.granularity)
    )
    assert result.unreachable == 0 and result.epsilon_lower_bound == 0.0

    def grid(x: Any, n: int, rng: Random) -> npt.NDArray[Any]:
        return np.asarray(mechanism.release(np.full(n, float(x)), rng=rng).value)

    def fit(out_x: npt.NDArray[Any], out_xp: npt.NDArray[Any]) -> Any:
        return lambda v: (~reachable_on_grid(v, granularity=mechanism.granularity)).astype(float)

    assert audit(grid, 0.0, 1.0, samples=4000, attack=fit, rng=seeded(5)).epsilon_lower_bound == 0


def test_off_grid_values_are_unreachable() -> None:
    assert reachable_on_grid([0.5, 0.3, np.inf], granularity=0.25).tolist() == [
        True,
        False,
        False,
    ]
