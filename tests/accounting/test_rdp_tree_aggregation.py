"""SingleEpochTreeAggregationEvent (DP-FTRL, Kairouz et al. 2021) and relation= checks."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from dpkit.accounting import (
    ComposedEvent,
    GaussianEvent,
    PoissonSampledEvent,
    RandomizedResponseEvent,
    RDPAccountant,
    RepeatedEvent,
    SampledWithoutReplacementEvent,
    SingleEpochTreeAggregationEvent,
    event_from_dict,
    zcdp_rho,
)
from dpkit.accounting.events.tree import tree_depth
from dpkit.errors import InvalidParameter, UnsupportedEvent

ORDERS = (1.5, 2.0, 8.0, 64.0)


def _released_nodes_per_leaf(steps: int) -> list[int]:
    """Simulate the online tree: a dyadic node is released once all its steps are done."""
    counts = [0] * steps
    width = 1
    while width <= steps:
        for start in range(0, steps - width + 1, width):  # complete nodes only
            for leaf in range(start, start + width):
                counts[leaf] += 1
        width *= 2
    return counts


@pytest.mark.parametrize("steps", [*range(1, 70), 255, 256, 257, 1023, 1600])
def test_depth_is_the_most_nodes_a_record_lies_in(steps: int) -> None:
    assert tree_depth(steps) == max(_released_nodes_per_leaf(steps))
    assert tree_depth(steps) == math.ceil(math.log2(steps + 1))


def test_curve_is_the_gaussian_with_squared_sensitivity_depth() -> None:
    event = SingleEpochTreeAggregationEvent(2.0, [7, 100, 3])
    assert event.depth == 7
    curve = RDPAccountant(ORDERS).compose(event).guarantee.epsilons
    assert curve == tuple(a * 7 / 8 for a in ORDERS)
    assert zcdp_rho(event) == 7 / 8
    # Empty trees cost nothing.
    empty = RDPAccountant(ORDERS).compose(SingleEpochTreeAggregationEvent(1.0, 0))
    assert empty.get_epsilon(1e-6) == 0.0


def test_curve_rounds_up() -> None:
    event = SingleEpochTreeAggregationEvent(0.3, 5)
    curve = RDPAccountant(ORDERS).compose(event).guarantee.epsilons
    for a, value in zip(ORDERS, curve, strict=True):
        assert Fraction(value) >= Fraction(a) * 3 / (2 * Fraction(0.3) ** 2)


def test_event_round_trips_and_normalises_step_counts() -> None:
    single = SingleEpochTreeAggregationEvent(1.0, 5)
    assert single.step_counts == (5,)
    several = SingleEpochTreeAggregationEvent(1.5, [5, 10])
    assert event_from_dict(several.to_dict()) == several
    assert several.to_dict() == {
        "type": "SingleEpochTreeAggregationEvent",
        "noise_multiplier": 1.5,
        "step_counts": [5, 10],
    }


@pytest.mark.parametrize(
    ("sigma", "steps"),
    [
        (0.0, 3),
        (-1.0, 3),
        (math.nan, 3),
        (math.inf, 3),
        ("1", 3),
        (1.0, -3),
        (1.0, [4, -3]),
        (1.0, []),
        (1.0, 2.5),
        (1.0, "7"),
        (1.0, [True]),
    ],
)
def test_bad_parameters_are_refused(sigma: object, steps: object) -> None:
    with pytest.raises(InvalidParameter):
        SingleEpochTreeAggregationEvent(sigma, steps)  # type: ignore[arg-type]


def test_relation_checks() -> None:
    tree = SingleEpochTreeAggregationEvent(1.0, 5)
    wor = SampledWithoutReplacementEvent(GaussianEvent(1.0), 10, 100)
    poisson = PoissonSampledEvent(GaussianEvent(1.0), 0.1)
    rr = RandomizedResponseEvent(1.0, 2)
    table = {
        "add_remove": (False, False, True, False),
        "replace": (False, True, False, True),
        "replace_special": (True, False, True, False),
        None: (True, True, True, True),
    }
    for relation, expected in table.items():
        accountant = RDPAccountant(ORDERS, relation=relation)  # type: ignore[arg-type]
        assert accountant.relation == relation
        got = tuple(accountant.supports(e) for e in (tree, wor, poisson, rr))
        assert got == expected, relation
    # Nested events are checked too, and a refused compose changes nothing.
    accountant = RDPAccountant(ORDERS, relation="add_remove").compose(poisson)
    before = accountant.guarantee
    nested = ComposedEvent((GaussianEvent(1.0), RepeatedEvent(tree, 3)))
    assert not accountant.supports(nested)
    with pytest.raises(UnsupportedEvent):
        accountant.compose(nested)
    assert accountant.guarantee == before
    # A replace-one randomiser inside a Poisson (add/remove) sample is refused when the
    # relation is checked.
    sampled_rr = PoissonSampledEvent(rr, 0.1)
    assert RDPAccountant(ORDERS).supports(sampled_rr)
    assert not RDPAccountant(ORDERS, relation="add_remove").supports(sampled_rr)
    with pytest.raises(InvalidParameter):
        RDPAccountant(ORDERS, relation="replace_one")  # type: ignore[arg-type]
