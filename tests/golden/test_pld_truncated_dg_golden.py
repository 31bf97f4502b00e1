"""Golden values for issue 33: the PLD of the truncated discrete Gaussian.

The peer is the installed dp_accounting: ``from_discrete_gaussian_mechanism(sigma,
sensitivity=D, truncation_bound=T, sampling_prob=q)`` (pessimistic privacy buckets of
width 1e-4, both orderings), whose ``get_delta_for_epsilon`` is an upper bound on the
exact delta. Each of dpkit's values is checked against the exact delta (mpmath over the
atoms of both orderings, as in ``tests/accounting/test_pld_truncated_discrete_gaussian``)
and against dp_accounting's: never below the exact value, and never above
dp_accounting's by more than dpkit's float allowances (a relative 1e-9 and 1e-13;
measured: at most 8e-11 relative above the exact value, and below dp_accounting's
by up to 4.5e-5 where its buckets are coarse: subsampled, or sigma 3). dpkit's
epsilon is within 3e-10 of dp_accounting's, or below it (by up to 4.3e-5, subsampled).
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpkit.accounting import PoissonSampledEvent, TruncatedDiscreteGaussianEvent
from dpkit.accounting.pld import PLDAccountant

pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")

mp.mp.dps = 30


def _exact_delta(sigma: float, d: int, bound: int, q: float, eps: float) -> float:
    """max over both orderings of ``sum_k max(0, P(k) - e^eps Q(k))``."""
    s2 = 2 * mp.mpf(sigma) ** 2
    z = mp.fsum(mp.exp(-(mp.mpf(j) ** 2) / s2) for j in range(-bound, bound + 1))

    def mu0(k: int) -> mp.mpf:
        return mp.exp(-(mp.mpf(k) ** 2) / s2) / z if abs(k) <= bound else mp.mpf(0)

    e, qq = mp.exp(mp.mpf(eps)), mp.mpf(q)
    remove, add = mp.mpf(0), mp.mpf(0)
    for k in range(-bound, bound + d + 1):
        m0 = mu0(k)
        mix = (1 - qq) * m0 + qq * mu0(k - d)
        remove += max(mp.mpf(0), mix - e * m0)
        add += max(mp.mpf(0), m0 - e * mix)
    return float(max(remove, add))


# (sigma, truncation bound T, sensitivity D, sampling probability q)
CASES = [
    (0.5, 2, 1, 1.0),
    (1.0, 3, 1, 1.0),
    (1.0, 10, 2, 1.0),
    (2.0, 5, 1, 1.0),
    (2.0, 4, 3, 1.0),
    (3.0, 12, 2, 1.0),
    (5.0, 20, 4, 1.0),
    (1.0, 3, 1, 0.3),
    (2.0, 6, 2, 0.1),
    (1.5, 4, 1, 0.7),
]
EPSILONS = [0.0, 0.25, 0.5, 1.0, 2.0]


def _accountant(sigma: float, d: int, bound: int, q: float) -> PLDAccountant:
    event = TruncatedDiscreteGaussianEvent(sigma, d, bound)
    return PLDAccountant().compose(event if q == 1.0 else PoissonSampledEvent(event, q))


@pytest.mark.parametrize(("sigma", "bound", "d", "q"), CASES)
def test_delta_against_dp_accounting(sigma: float, bound: int, d: int, q: float) -> None:
    peer = pld.from_discrete_gaussian_mechanism(
        sigma, sensitivity=d, truncation_bound=bound, sampling_prob=q
    )
    accountant = _accountant(sigma, d, bound, q)
    for eps in EPSILONS:
        exact = _exact_delta(sigma, d, bound, q, eps)
        theirs = float(peer.get_delta_for_epsilon(eps))
        ours = accountant.get_delta(eps)
        assert theirs >= exact * (1.0 - 1e-12), (eps, theirs, exact)  # the peer's is an upper bound
        assert ours >= exact, (eps, ours, exact)
        assert ours <= exact * (1.0 + 1e-9) + 1e-13, (eps, ours, exact)
        assert ours <= theirs * (1.0 + 1e-9) + 1e-13, (eps, ours, theirs)


@pytest.mark.parametrize(("sigma", "bound", "d", "q"), CASES[1::3])
def test_epsilon_against_dp_accounting(sigma: float, bound: int, d: int, q: float) -> None:
    peer = pld.from_discrete_gaussian_mechanism(
        sigma, sensitivity=d, truncation_bound=bound, sampling_prob=q
    )
    accountant = _accountant(sigma, d, bound, q)
    for delta in (0.3, 0.05, 0.02):
        theirs = float(peer.get_epsilon_for_delta(delta))
        ours = accountant.get_epsilon(delta)
        if math.isinf(theirs):
            assert math.isinf(ours)
            continue
        # Never below the exact epsilon (delta(ours) <= delta), and at most the peer's
        # up to dpkit's float allowances.
        assert _exact_delta(sigma, d, bound, q, ours) <= delta
        assert ours <= theirs + 1e-8, (delta, ours, theirs)
