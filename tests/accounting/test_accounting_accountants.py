"""PureAccountant and ZCDPAccountant, and the shared Accountant contract."""

from __future__ import annotations

import math
import threading

import pytest

import dpkit as dp
from dpkit.accounting import (
    ComposedEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureAccountant,
    RepeatedEvent,
    ZCDPAccountant,
    event_from_dict,
)
from dpkit.testing import check_accountant


def test_pure_accountant_contract() -> None:
    check_accountant(PureAccountant, LaplaceEvent(2.0), GaussianEvent(1.0))


def test_zcdp_accountant_contract() -> None:
    check_accountant(ZCDPAccountant, GaussianEvent(3.0), dp.accounting.ApproxEvent(1.0, 1e-6))


def test_pure_accountant_adds_epsilons_exactly() -> None:
    accountant = PureAccountant()
    for _ in range(10):
        accountant.compose(LaplaceEvent(10.0))  # epsilon 0.1, not exact in binary
    assert accountant.get_epsilon(0.0) == pytest.approx(1.0, rel=1e-15)
    assert accountant.get_epsilon(0.0) >= 1.0
    assert accountant.get_delta(1.0 + 1e-9) == 0.0
    assert accountant.get_delta(0.5) == 1.0


def test_zcdp_accountant_matches_guarantee_conversion() -> None:
    accountant = ZCDPAccountant().compose(GaussianEvent(2.0), count=4)
    assert accountant.guarantee == dp.ZCDP(0.5)
    assert accountant.get_epsilon(1e-5) == dp.ZCDP(0.5).to_approx(1e-5).epsilon
    # Pure events enter through eps * tanh(eps / 2), the exponential mechanism via
    # bounded range (eps^2 / 8).
    mixed = ZCDPAccountant().compose(LaplaceEvent(1.0)).compose(ExponentialMechanismEvent(1.0))
    assert mixed.guarantee.rho == pytest.approx(0.4621172 + 0.125, rel=1e-6)


def test_composite_events_are_walked() -> None:
    tree = ComposedEvent((LaplaceEvent(1.0), RepeatedEvent(LaplaceEvent(2.0), 4)))
    assert PureAccountant().compose(tree, count=2).get_epsilon(0.0) == pytest.approx(6.0)


def test_unsupported_leaf_is_named_and_nothing_is_composed() -> None:
    accountant = PureAccountant().compose(LaplaceEvent(1.0))
    tree = ComposedEvent((LaplaceEvent(1.0), GaussianEvent(1.0)))
    with pytest.raises(dp.UnsupportedEvent, match="GaussianEvent"):
        accountant.compose(tree)
    assert accountant.get_epsilon(0.0) == 1.0
    assert len(accountant.ledger.events) == 1


def test_subsampled_pure_event_is_amplified() -> None:
    # ln(1 + p (e^eps - 1)) for Poisson sampling (add/remove neighbours).
    event = PoissonSampledEvent(LaplaceEvent(1.0), 0.01)
    assert PureAccountant().compose(event).get_epsilon(0.0) == pytest.approx(
        0.01703686323617655, rel=1e-12
    )


def test_ledger_round_trips_through_serialisation() -> None:
    accountant = ZCDPAccountant().compose(GaussianEvent(1.0), count=3)
    ledger = accountant.ledger
    assert event_from_dict(ledger.to_dict()) == ledger
    replay = ZCDPAccountant().compose(ledger)
    assert replay.guarantee == accountant.guarantee


def test_threads_composing_concurrently_lose_nothing() -> None:
    accountant = PureAccountant()

    def spend() -> None:
        for _ in range(200):
            accountant.compose(LaplaceEvent(1000.0))

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert accountant.get_epsilon(0.0) == pytest.approx(1.6, rel=1e-12)


@pytest.mark.parametrize("bad", [-0.1, 1.0, float("nan")], ids=repr)
def test_bad_queries_are_rejected(bad: float) -> None:
    with pytest.raises(dp.InvalidParameter):
        ZCDPAccountant().get_epsilon(bad)


def test_amplified_epsilon_survives_huge_inner_epsilon() -> None:
    # e^eps overflows a float beyond eps ~ 709.78; the log-space branch must take over.
    from dpkit.accounting import SampledWithoutReplacementEvent, pure_epsilon

    huge = PoissonSampledEvent(LaplaceEvent(1e-3), 0.5)  # inner epsilon 1000
    assert pure_epsilon(huge) == pytest.approx(1000 + math.log(0.5), rel=1e-12)
    assert pure_epsilon(huge) >= 1000 + math.log(0.5)
    swr = SampledWithoutReplacementEvent(LaplaceEvent(1e-3), 1, 2)
    assert pure_epsilon(swr) == pytest.approx(1000 + math.log(0.5), rel=1e-12)
