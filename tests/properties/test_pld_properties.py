"""Accounting laws of the PLD accountant (hypothesis; coarse grid to stay fast)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureEvent,
    ZCDPEvent,
)
from dpkit.accounting.pld import PLDAccountant
from dpkit.errors import UnsupportedEvent

H = 1e-2  # coarse grid: the laws hold on every grid, and this keeps examples fast

scales = st.floats(min_value=0.5, max_value=5.0)
events = st.one_of(
    scales.map(GaussianEvent),
    scales.map(LaplaceEvent),
    st.floats(min_value=0.05, max_value=2.0).map(PureEvent),
    st.tuples(scales, st.floats(min_value=0.01, max_value=0.5)).map(
        lambda t: PoissonSampledEvent(GaussianEvent(t[0]), t[1])
    ),
)
deltas = st.floats(min_value=1e-10, max_value=0.1)


@settings(max_examples=30, deadline=None)
@given(event=events, count=st.integers(1, 20), d1=deltas, d2=deltas)
def test_epsilon_non_increasing_in_delta(event: Event, count: int, d1: float, d2: float) -> None:
    accountant = PLDAccountant(discretization=H).compose(event, count=count)
    lo, hi = sorted((d1, d2))
    assert accountant.get_epsilon(hi) <= accountant.get_epsilon(lo)


@settings(max_examples=30, deadline=None)
@given(first=events, second=events, delta=deltas)
def test_composing_more_never_lowers_epsilon(first: Event, second: Event, delta: float) -> None:
    accountant = PLDAccountant(discretization=H).compose(first)
    before = accountant.get_epsilon(delta)
    accountant.compose(second)
    assert accountant.get_epsilon(delta) >= before


@settings(max_examples=20, deadline=None)
@given(event=events, delta=deltas, eps=st.floats(min_value=0.0, max_value=5.0))
def test_failed_compose_leaves_state_unchanged(event: Event, delta: float, eps: float) -> None:
    accountant = PLDAccountant(discretization=H, relation="replace").compose(PureEvent(0.5))
    if accountant.supports(event):
        accountant.compose(event)
    before = (accountant.get_epsilon(delta), accountant.get_delta(eps), accountant.ledger)
    # Unsupported under replace-one: zCDP black boxes, and a sampled Laplace (only the
    # sampled Gaussian has a replace-one analysis, dp_accounting's REPLACE_ONE pair).
    for bad in (ZCDPEvent(0.1), PoissonSampledEvent(LaplaceEvent(1.0), 0.5)):
        with pytest.raises(UnsupportedEvent):
            accountant.compose(bad)
    assert (accountant.get_epsilon(delta), accountant.get_delta(eps), accountant.ledger) == before
