"""Randomized response under the replace-special relation (issue 33, item 3).

dp_accounting's ``from_randomized_response(..., neighboring_relation=REPLACE_SPECIAL)``
analyses k-ary randomized response with noise parameter ``p`` (output uniform with
probability ``p``) against the special input whose output is uniform. dpkit's event
takes ``epsilon`` with ``e^eps = k (1 - p) / p + 1`` and ``relation="replace_special"``.
Checked: dpkit's PLD delta is never below the exact delta of the pair (both orderings,
summed over the k outputs) and within dp_accounting's own discretisation of its value;
the pure epsilon is dp_accounting's RDP value at order infinity for this relation
(2.302585092994046 at p = 0.1, k = 10, transcribed from its RDP accountant's tests).
"""

from __future__ import annotations

import math

import pytest
from dp_accounting.pld import privacy_loss_distribution as dpa

from dpkit.accounting import PLDAccountant, RandomizedResponseEvent, pure_epsilon
from dpkit.errors import InvalidParameter


def _epsilon_of(p: float, k: int) -> float:
    return math.log(k * (1.0 - p) / p + 1.0)


def _exact_delta(p: float, k: int, epsilon: float) -> float:
    """max over the two orderings of sum_o (P(o) - e^eps Q(o))+, exactly as defined."""
    a, b, u = 1.0 - p + p / k, p / k, 1.0 / k
    remove = max(0.0, a - math.exp(epsilon) * u) + (k - 1) * max(0.0, b - math.exp(epsilon) * u)
    add = max(0.0, u - math.exp(epsilon) * a) + (k - 1) * max(0.0, u - math.exp(epsilon) * b)
    return max(remove, add)


CASES = [(0.1, 10), (0.5, 2), (0.3, 4), (0.05, 100)]


@pytest.mark.parametrize(("p", "k"), CASES)
@pytest.mark.parametrize("epsilon", [0.0, 0.5, 1.0, 2.0])
def test_delta_against_exact_and_dp_accounting(p: float, k: int, epsilon: float) -> None:
    event = RandomizedResponseEvent(_epsilon_of(p, k), k, relation="replace_special")
    ours = PLDAccountant().compose(event).get_delta(epsilon)
    exact = _exact_delta(p, k, epsilon)
    theirs = dpa.from_randomized_response(
        p, k, neighboring_relation=dpa.NeighborRel.REPLACE_SPECIAL
    ).get_delta_for_epsilon(epsilon)
    assert ours >= exact
    assert ours <= exact + 1e-3 + 1e-9  # dpkit's grid (1e-4 in loss) error is small
    assert abs(ours - theirs) <= 2e-3 * max(theirs, 1e-3)


def test_pure_epsilon_is_dp_accountings_order_infinity() -> None:
    event = RandomizedResponseEvent(_epsilon_of(0.1, 10), 10, relation="replace_special")
    value = pure_epsilon(event)
    assert value is not None
    assert value == pytest.approx(2.302585092994046, rel=1e-12)
    assert value >= 2.302585092994046
    # The default relation keeps eps = log(91).
    assert pure_epsilon(RandomizedResponseEvent(_epsilon_of(0.1, 10), 10)) == pytest.approx(
        math.log(91.0)
    )


def test_special_is_never_worse_than_replace_one() -> None:
    for p, k in CASES:
        eps = _epsilon_of(p, k)
        special = PLDAccountant().compose(
            RandomizedResponseEvent(eps, k, relation="replace_special")
        )
        plain = PLDAccountant().compose(RandomizedResponseEvent(eps, k))
        for e in (0.0, 0.3, 1.0):
            assert special.get_delta(e) <= plain.get_delta(e) + 1e-12


def test_unknown_relation_is_refused() -> None:
    with pytest.raises(InvalidParameter, match="relation"):
        RandomizedResponseEvent(1.0, 3, relation="add_remove")
