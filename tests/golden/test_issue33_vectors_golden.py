"""Issue 33, item 3: peer values for the vectors dpkit did not support (values only).

- OpenDP 0.16.0, ``opendp.accuracy``: ``laplacian_scale_to_accuracy``,
  ``discrete_laplacian_scale_to_accuracy``, ``gaussian_scale_to_accuracy``,
  ``discrete_gaussian_scale_to_accuracy`` and the ``accuracy_to_*_scale`` inverses at
  alpha = 0.05 (``repr`` of each call's result).
- dp_accounting 0.6.0: ``PLDAccountant().compose(event).get_delta(0.0)`` (a target
  epsilon of 0), ``GaussianPrivacyLoss(standard_deviation=1/mu).get_delta_for_epsilon``
  (the mu-GDP profile, DRS22 Cor. 2.13), and ``mechanism_calibration
  .calibrate_dp_mechanism(..., discrete=True)`` with an ``ExplicitBracketInterval``.

dpkit must agree to the stated tolerance and sit on the safe side: accuracies and deltas
at or above the peer's exact value, scales at or below it.
"""

from __future__ import annotations

import pytest

from dpkit.accounting import (
    GaussianEvent,
    LaplaceEvent,
    PLDAccountant,
    PoissonSampledEvent,
    RDPAccountant,
    RepeatedEvent,
    calibrate_integer,
    gdp_delta,
)
from dpkit.mechanisms import accuracy_to_scale, scale_to_accuracy

ALPHA = 0.05
KINDS = ("laplace", "discrete_laplace", "gaussian", "discrete_gaussian")
# OpenDP 0.16.0: *_scale_to_accuracy(scale, 0.05), in the order of KINDS.
OPENDP_ACCURACY = {
    0.5: (1.4978661367769954, 1.7809757215354818, 0.9799819922700269, 2.0),
    1.0: (2.995732273553991, 3.3756177665957137, 1.9599639845400538, 3.0),
    2.0: (5.991464547107982, 6.42960493986766, 3.9199279690801077, 5.0),
    20.0: (59.914645471079815, 60.408396122013, 39.19927969080108, 40.0),
}
# OpenDP 0.16.0: accuracy_to_*_scale(accuracy, 0.05), in the order of KINDS.
OPENDP_SCALE = {
    1.0: (0.33380820069533407, 0.27295842040939744, 0.510213456924654, 0.3707466793890236),
    2.0: (0.6676164013906681, 0.5664230405976555, 1.020426913849308, 0.8171228444054308),
    20.0: (6.676164013906681, 6.515657600399921, 10.20426913849308, 9.953349189162989),
    25.0: (8.345205017383352, 8.183396611580843, 12.755336423116349, 12.503562372734079),
}


@pytest.mark.parametrize("scale", sorted(OPENDP_ACCURACY))
@pytest.mark.parametrize("index", range(4), ids=KINDS)
def test_scale_to_accuracy_matches_opendp(scale: float, index: int) -> None:
    ours = scale_to_accuracy(KINDS[index], scale, ALPHA)  # type: ignore[arg-type]
    theirs = OPENDP_ACCURACY[scale][index]
    assert theirs <= ours <= theirs * (1 + 1e-10)


@pytest.mark.parametrize("accuracy", sorted(OPENDP_SCALE))
@pytest.mark.parametrize("index", range(4), ids=KINDS)
def test_accuracy_to_scale_matches_opendp(accuracy: float, index: int) -> None:
    ours = accuracy_to_scale(KINDS[index], accuracy, ALPHA)  # type: ignore[arg-type]
    theirs = OPENDP_SCALE[accuracy][index]
    assert theirs * (1 - 1e-9) <= ours <= theirs


# dp_accounting 0.6.0, PLDAccountant().compose(event).get_delta(0.0): the total
# variation distance (Gaussian: 2 Phi(1/(2 sigma)) - 1; Laplace: 1 - e^{-1/(2b)}).
DPA_DELTA_AT_ZERO = [
    pytest.param(GaussianEvent(1.0), 0.3829249225481049, id="gaussian1"),
    pytest.param(LaplaceEvent(1.0), 0.39346934028743535, id="laplace1"),
]


@pytest.mark.parametrize(("event", "theirs"), DPA_DELTA_AT_ZERO)
def test_delta_at_epsilon_zero_matches_dp_accounting(event: object, theirs: float) -> None:
    ours = PLDAccountant().compose(event).get_delta(0.0)  # type: ignore[arg-type]
    assert theirs * (1 - 1e-9) <= ours <= theirs * (1 + 1e-6)


# dp_accounting 0.6.0, GaussianPrivacyLoss(standard_deviation=1/mu).get_delta_for_epsilon.
DPA_GDP_PROFILE = [
    (1.0, 0.0, 0.38292492255185556),
    (1.0, 1.0, 0.12693673750791334),
    (1.0, 3.0, 0.0015371853694163254),
    (0.5, 0.0, 0.1974126513678216),
    (0.5, 1.0, 0.006829594983182875),
    (0.5, 3.0, 3.4009117357075466e-10),
]


@pytest.mark.parametrize(("mu", "epsilon", "theirs"), DPA_GDP_PROFILE)
def test_gdp_delta_matches_dp_accounting(mu: float, epsilon: float, theirs: float) -> None:
    ours = gdp_delta(mu=mu, epsilon=epsilon)
    assert theirs * (1 - 1e-12) <= ours <= theirs * (1 + 1e-9)


def _gaussian_steps(n: int) -> RepeatedEvent:
    return RepeatedEvent(GaussianEvent(10.0), n)


def _sampled_steps(n: int) -> RepeatedEvent:
    return RepeatedEvent(PoissonSampledEvent(GaussianEvent(1.0), 0.01), n)


# dp_accounting 0.6.0, calibrate_dp_mechanism(Accountant, make_event, eps, delta,
# ExplicitBracketInterval(1, high), discrete=True): the largest number of steps.
DPA_INTEGER = [
    pytest.param(PLDAccountant, _gaussian_steps, 1.0, 1e-5, 1000, 7, id="pld-g10-e1"),
    pytest.param(PLDAccountant, _gaussian_steps, 2.0, 1e-6, 1000, 20, id="pld-g10-e2"),
    pytest.param(RDPAccountant, _gaussian_steps, 1.0, 1e-5, 1000, 6, id="rdp-g10-e1"),
    pytest.param(RDPAccountant, _gaussian_steps, 2.0, 1e-6, 1000, 17, id="rdp-g10-e2"),
    pytest.param(RDPAccountant, _sampled_steps, 1.0, 1e-5, 100000, 4, id="rdp-sampled"),
]


@pytest.mark.parametrize(("make", "event", "eps", "delta", "high", "theirs"), DPA_INTEGER)
def test_calibrate_integer_matches_dp_accounting(
    make: object, event: object, eps: float, delta: float, high: int, theirs: int
) -> None:
    ours = calibrate_integer(
        make,  # type: ignore[arg-type]
        event,  # type: ignore[arg-type]
        target_epsilon=eps,
        target_delta=delta,
        bracket=(1, high),
        decreasing=False,
    )
    assert ours == theirs
