"""Golden cross-checks of the PLD accountant against dp_accounting and prv_accountant.

dpkit's answer is a certified upper bound, so it must lie at or above the lower end
of prv_accountant's interval (a provable lower bound on the true epsilon) and within
0.1% of dp_accounting's pessimistic PLD value (same grid width, 1e-4). The issue's
reference numbers are pinned as well. prv_accountant is optional: its live check skips
without it.

The peers' values are pure functions of their arguments and took most of this file's
time (dp_accounting ~7 of ~8 s of CPU): the default run reads them from
``tests/golden/references/golden/test_pld_golden.json`` (:func:`golden_reference`), and
computes live one case of each dp_accounting event kind (plain Gaussian, Laplace,
Poisson-sampled Gaussian) and one prv_accountant interval, so the cross-check against
the installed peers still runs; ``pytest --runslow tests/golden/test_references.py``
recomputes every stored value and requires it bit for bit.
"""

from __future__ import annotations

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant
from tests._references import golden_reference

from dpkit.accounting import GaussianEvent, LaplaceEvent, PoissonSampledEvent
from dpkit.accounting.pld import PLDAccountant

REL = 1e-3
DELTA = 1e-5


@golden_reference
def _theirs(mechanism: str, scale: float, q: float, count: int, delta: float) -> float:
    """dp_accounting's epsilon of ``count`` self-compositions of a Gaussian or Laplace
    mechanism ("gaussian", "laplace") of noise ``scale``, Poisson-sampled at rate ``q``
    when ``q < 1`` (not wrapped in sampling at ``q = 1``)."""
    kinds = {"gaussian": dp_accounting.GaussianDpEvent, "laplace": dp_accounting.LaplaceDpEvent}
    event: dp_accounting.DpEvent = kinds[mechanism](scale)
    if q < 1:
        event = dp_accounting.PoissonSampledDpEvent(q, event)
    accountant = pld_privacy_accountant.PLDAccountant()
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, count))
    return float(accountant.get_epsilon(delta))


# (dpkit's event, dp_accounting's (mechanism, scale, q), count, live): ``live`` cases
# compute dp_accounting's value now, in the default run too (the cheapest case of each
# event kind, ~0.8 s together); the others read it from the stored file.
CASES = [
    pytest.param(GaussianEvent(1.0), ("gaussian", 1.0, 1.0), 1, True, id="gauss-x1"),
    pytest.param(GaussianEvent(5.0), ("gaussian", 5.0, 1.0), 100, False, id="gauss-x100"),
    pytest.param(LaplaceEvent(1.0), ("laplace", 1.0, 1.0), 1, True, id="laplace-x1"),
    pytest.param(LaplaceEvent(10.0), ("laplace", 10.0, 1.0), 100, False, id="laplace-x100"),
]
for q in (0.001, 0.01, 0.1):
    for count in (1, 100, 10_000):
        marks = [pytest.mark.slow] if count == 10_000 and q != 0.01 else []
        CASES.append(
            pytest.param(
                PoissonSampledEvent(GaussianEvent(1.0), q),
                ("gaussian", 1.0, q),
                count,
                q == 0.001 and count == 1,
                id=f"sampled-gauss-q{q}-x{count}",
                marks=marks,
            )
        )


@pytest.mark.parametrize(("ours", "theirs", "count", "live"), CASES)
def test_within_a_tenth_of_a_percent_of_dp_accounting(
    ours: GaussianEvent, theirs: tuple[str, float, float], count: int, live: bool
) -> None:
    mine = PLDAccountant().compose(ours, count=count).get_epsilon(DELTA)
    peer = _theirs.__wrapped__ if live else _theirs  # type: ignore[attr-defined]
    assert mine == pytest.approx(peer(*theirs, count, DELTA), rel=REL)


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


@golden_reference
def _prv_interval(q: float, count: int) -> tuple[float, float, float]:
    """prv_accountant's (lower, estimate, upper) epsilon at ``DELTA`` of ``count``
    compositions of the Gaussian (noise multiplier 1) Poisson-sampled at rate ``q``."""
    prv = pytest.importorskip("prv_accountant")
    accountant = prv.PRVAccountant(
        prvs=prv.PoissonSubsampledGaussianMechanism(noise_multiplier=1.0, sampling_probability=q),
        max_self_compositions=count,
        eps_error=0.01,
        delta_error=1e-10,
    )
    lower, estimate, upper = accountant.compute_epsilon(delta=DELTA, num_self_compositions=count)
    return float(lower), float(estimate), float(upper)


@pytest.mark.parametrize(
    ("q", "count", "live"),
    [
        # One interval computed live in the default run (~0.7 s), the other stored.
        pytest.param(0.01, 1000, True, id="q0.01-T1e3"),
        pytest.param(0.1, 100, False, id="q0.1-T100"),
    ],
)
def test_never_below_prv_lower_bound(q: float, count: int, live: bool) -> None:
    interval = _prv_interval.__wrapped__ if live else _prv_interval  # type: ignore[attr-defined]
    lower, estimate, upper = interval(q, count)
    mine = (
        PLDAccountant()
        .compose(PoissonSampledEvent(GaussianEvent(1.0), q), count=count)
        .get_epsilon(DELTA)
    )
    assert lower <= mine <= upper
    assert mine == pytest.approx(estimate, rel=5e-3)
