"""Accounting laws of RDPAccountant and calibration, checked with hypothesis."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import (
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RepeatedEvent,
    TruncatedLaplaceEvent,
)
from dpkit.accounting.calibrate import calibrate
from dpkit.accounting.rdp import RDPAccountant
from dpkit.errors import UnsupportedEvent
from dpkit.testing import check_accountant

# A small grid keeps each example fast; the laws hold on any grid.
ORDERS = (1.25, 1.5, 2.0, 2.5, 3.0, 4.5, 6.0, 8.0, 12.0, 16.0, 24.5, 32.0, 64.0, 256.0)
SETTINGS = settings(max_examples=40, deadline=None)

rates = st.floats(min_value=1e-4, max_value=1.0)
sigmas = st.floats(min_value=0.3, max_value=20.0)
deltas = st.floats(min_value=1e-12, max_value=0.5)
events = st.one_of(
    st.builds(PoissonSampledEvent, st.builds(GaussianEvent, sigmas), rates),
    st.builds(GaussianEvent, sigmas),
    st.builds(LaplaceEvent, st.floats(min_value=0.05, max_value=50.0)),
)


def test_contract() -> None:
    check_accountant(RDPAccountant, GaussianEvent(1.0), TruncatedLaplaceEvent(1.0, 1e-6))


@SETTINGS
@given(event=events, count=st.integers(1, 10_000), delta=deltas, factor=st.floats(1.0, 100.0))
def test_epsilon_is_non_increasing_in_delta(event, count, delta, factor) -> None:
    accountant = RDPAccountant(ORDERS).compose(event, count=count)
    larger = min(0.9, delta * factor)
    assert accountant.get_epsilon(larger) <= accountant.get_epsilon(delta)


@SETTINGS
@given(first=events, second=events, count=st.integers(1, 1000), delta=deltas)
def test_composing_more_never_lowers_epsilon(first, second, count, delta) -> None:
    accountant = RDPAccountant(ORDERS).compose(first, count=count)
    before = accountant.get_epsilon(delta)
    assert accountant.compose(second).get_epsilon(delta) >= before
    delta_before = accountant.get_delta(1.0)
    assert accountant.compose(first).get_delta(1.0) >= delta_before


@SETTINGS
@given(event=events, count=st.integers(1, 100))
def test_failed_compose_leaves_state_unchanged(event, count) -> None:
    accountant = RDPAccountant(ORDERS).compose(event, count=count)
    before = (accountant.guarantee, accountant.ledger)
    try:
        accountant.compose(RepeatedEvent(TruncatedLaplaceEvent(1.0, 1e-6), 3))
    except UnsupportedEvent:
        pass
    else:  # pragma: no cover
        raise AssertionError("an unsupported event was composed")
    assert (accountant.guarantee, accountant.ledger) == before


@settings(max_examples=15, deadline=None)
@given(
    rate=st.floats(min_value=1e-3, max_value=1.0),
    steps=st.integers(1, 5000),
    target=st.floats(min_value=0.5, max_value=8.0),
    delta=st.floats(min_value=1e-8, max_value=1e-3),
)
def test_calibration_never_overshoots(rate, steps, target, delta) -> None:
    def make_accountant() -> RDPAccountant:
        return RDPAccountant(ORDERS)

    def make_event(sigma: float) -> RepeatedEvent:
        return RepeatedEvent(PoissonSampledEvent(GaussianEvent(sigma), rate), steps)

    sigma = calibrate(
        make_accountant, make_event, target_epsilon=target, target_delta=delta, tolerance=1e-4
    )
    epsilon = make_accountant().compose(make_event(sigma)).get_epsilon(delta)
    assert epsilon <= target
