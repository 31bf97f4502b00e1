"""Golden cross-checks of the PLD accountant against dp_accounting and prv_accountant.

dpkit's answer is a certified upper bound, so it must lie at or above the lower end
of prv_accountant's interval (a provable lower bound on the true epsilon) and within
0.1% of dp_accounting's pessimistic PLD value (same grid width, 1e-4). The issue's
reference numbers are pinned as well. prv_accountant is optional: those checks skip
without it.
"""

from __future__ import annotations

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant

from dpkit.accounting import GaussianEvent, LaplaceEvent, PoissonSampledEvent
from dpkit.accounting.pld import PLDAccountant

REL = 1e-3
DELTA = 1e-5


def _theirs(event: dp_accounting.DpEvent, count: int, delta: float) -> float:
    accountant = pld_privacy_accountant.PLDAccountant()
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, count))
    return float(accountant.get_epsilon(delta))


CASES = [
    pytest.param(GaussianEvent(1.0), dp_accounting.GaussianDpEvent(1.0), 1, id="gauss-x1"),
    pytest.param(GaussianEvent(5.0), dp_accounting.GaussianDpEvent(5.0), 100, id="gauss-x100"),
    pytest.param(LaplaceEvent(1.0), dp_accounting.LaplaceDpEvent(1.0), 1, id="laplace-x1"),
    pytest.param(LaplaceEvent(10.0), dp_accounting.LaplaceDpEvent(10.0), 100, id="laplace-x100"),
]
for q in (0.001, 0.01, 0.1):
    for count in (1, 100, 10_000):
        marks = [pytest.mark.slow] if count == 10_000 and q != 0.01 else []
        CASES.append(
            pytest.param(
                PoissonSampledEvent(GaussianEvent(1.0), q),
                dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(1.0)),
                count,
                id=f"sampled-gauss-q{q}-x{count}",
                marks=marks,
            )
        )


@pytest.mark.parametrize(("ours", "theirs", "count"), CASES)
def test_within_a_tenth_of_a_percent_of_dp_accounting(
    ours: GaussianEvent, theirs: dp_accounting.DpEvent, count: int
) -> None:
    mine = PLDAccountant().compose(ours, count=count).get_epsilon(DELTA)
    reference = _theirs(theirs, count, DELTA)
    assert mine == pytest.approx(reference, rel=REL)


@pytest.mark.parametrize(
    ("count", "expected"),
    [pytest.param(1000, 1.82824, id="T1e3"), pytest.param(10_000, 6.18774, id="T1e4")],
)
def test_issue_dp_sgd_reference(count: int, expected: float) -> None:
    event = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    assert PLDAccountant().compose(event, count=count).get_epsilon(1e-5) == pytest.approx(
        expected, rel=REL
    )


def test_issue_laplace_reference() -> None:
    eps = PLDAccountant().compose(LaplaceEvent(10.0), count=100).get_epsilon(1e-6)
    assert eps == pytest.approx(4.69267, rel=REL)


@pytest.mark.parametrize(
    ("q", "count"),
    [pytest.param(0.01, 1000, id="q0.01-T1e3"), pytest.param(0.1, 100, id="q0.1-T100")],
)
def test_never_below_prv_lower_bound(q: float, count: int) -> None:
    prv = pytest.importorskip("prv_accountant")
    accountant = prv.PRVAccountant(
        prvs=prv.PoissonSubsampledGaussianMechanism(noise_multiplier=1.0, sampling_probability=q),
        max_self_compositions=count,
        eps_error=0.01,
        delta_error=1e-10,
    )
    lower, estimate, upper = accountant.compute_epsilon(delta=DELTA, num_self_compositions=count)
    mine = (
        PLDAccountant()
        .compose(PoissonSampledEvent(GaussianEvent(1.0), q), count=count)
        .get_epsilon(DELTA)
    )
    assert lower <= mine <= upper
    assert mine == pytest.approx(estimate, rel=5e-3)
