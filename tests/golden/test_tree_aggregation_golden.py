"""Golden values for tree aggregation (DP-FTRL) from dp_accounting's tests, and a live check.

Transcribed from dp_accounting's ``rdp/rdp_privacy_accountant_test.py`` (values, not
code): the StackOverflow setting of Kairouz et al. 2021 (1600 steps, delta 1e-6, their
order grid) must give epsilon below 19.74 at noise multiplier 1.13 and below 2.04 at
8.83; restarting trees composes additively; one epoch over several trees costs the
deepest tree; epsilon decreases with the noise; one-step trees are plain Gaussian
steps. dpkit's curve is the same exact formula (``a d / (2 sigma^2)``), so the live
comparison with the installed dp_accounting is to 1e-12 relative (dpkit rounds up,
dp_accounting to nearest), and so is the conversion to (epsilon, delta).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpkit.accounting import (
    ComposedEvent,
    GaussianEvent,
    RDPAccountant,
    RepeatedEvent,
    SingleEpochTreeAggregationEvent,
)

dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting import dp_event, privacy_accountant  # noqa: E402
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib  # noqa: E402

THEIR_ORDERS = tuple([1 + x / 10 for x in range(1, 100)] + [float(x) for x in range(12, 64)])


def _trees(sigma: float, step_counts: list[int], orders: tuple[float, ...]) -> RDPAccountant:
    events = tuple(SingleEpochTreeAggregationEvent(sigma, s) for s in step_counts)
    return RDPAccountant(orders, relation="replace_special").compose(ComposedEvent(events))


def _single_epoch(sigma: float, step_counts: list[int] | int, orders: tuple[float, ...]):
    event = SingleEpochTreeAggregationEvent(sigma, step_counts)
    return RDPAccountant(orders, relation="replace_special").compose(event)


@pytest.mark.parametrize(("sigma", "bound"), [(1.13, 19.74), (8.83, 2.04)])
def test_stackoverflow_setting(sigma: float, bound: float) -> None:
    epsilon = _single_epoch(sigma, 1600, THEIR_ORDERS).get_epsilon(1e-6)
    assert epsilon < bound
    theirs = rdp_lib.RdpAccountant(
        list(THEIR_ORDERS), privacy_accountant.NeighboringRelation.REPLACE_SPECIAL
    )
    theirs.compose(dp_event.SingleEpochTreeAggregationDpEvent(sigma, 1600))
    # Same curve and the same conversion up to rounding (ours rounds up).
    assert epsilon <= theirs.get_epsilon(1e-6) * (1 + 1e-12)


@pytest.mark.parametrize(
    "step_counts", [[400] * 4, [800] * 2, [10, 400, 400, 400, 390]], ids=["r4", "r2", "adaptive"]
)
def test_restarts_compose_additively(step_counts: list[int]) -> None:
    orders = (1.5,)
    summed = sum(_single_epoch(0.1, [s], orders).guarantee.epsilons[0] for s in step_counts)
    composed = _trees(0.1, step_counts, orders).guarantee.epsilons[0]
    assert composed == pytest.approx(summed, rel=1e-12)


def test_single_epoch_over_several_trees_costs_the_deepest() -> None:
    orders = (1.5,)
    single = _single_epoch(0.1, [10, 40, 30, 20], orders).guarantee.epsilons[0]
    worst = max(_single_epoch(0.1, s, orders).guarantee.epsilons[0] for s in [10, 40, 30, 20])
    assert single == worst


@pytest.mark.parametrize(
    "step_counts", [[400] * 4, [800] * 2, [10, 400, 400, 400, 390]], ids=["r4", "r2", "adaptive"]
)
def test_epsilon_decreases_with_noise(step_counts: list[int]) -> None:
    previous = np.inf
    for sigma in [0.1 * x for x in range(1, 100, 5)]:
        epsilon = _trees(sigma, step_counts, THEIR_ORDERS).get_epsilon(1e-6)
        assert epsilon < previous
        previous = epsilon


@pytest.mark.parametrize(("steps", "sigma"), [(100, 0.1), (1000, 0.01)])
def test_one_step_trees_are_gaussian_steps(steps: int, sigma: float) -> None:
    tree = _trees(sigma, [1] * steps, THEIR_ORDERS).guarantee.epsilons
    plain = RDPAccountant(THEIR_ORDERS).compose(RepeatedEvent(GaussianEvent(sigma), steps))
    np.testing.assert_allclose(tree, plain.guarantee.epsilons, rtol=1e-12)


@pytest.mark.parametrize("sigma", [0.5, 1.13, 8.83])
@pytest.mark.parametrize("step_counts", [1, 7, 1600, [5, 10], [1000, 24, 3]])
def test_matches_dp_accounting(sigma: float, step_counts: int | list[int]) -> None:
    ours = _single_epoch(sigma, step_counts, THEIR_ORDERS).guarantee.epsilons
    theirs = rdp_lib._compute_rdp_single_epoch_tree_aggregation(sigma, step_counts, THEIR_ORDERS)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    # dp_accounting rounds to nearest; dpkit is never below the exact value.
    depth = SingleEpochTreeAggregationEvent(sigma, step_counts).depth
    for a, value in zip(THEIR_ORDERS, ours, strict=True):
        assert Fraction(value) >= Fraction(a) * depth / (2 * Fraction(sigma) ** 2)
