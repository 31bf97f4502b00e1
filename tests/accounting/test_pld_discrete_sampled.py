"""PLDs of the (Poisson-subsampled) discrete Gaussian and discrete Laplace, against exact sums.

The reference is delta(eps) summed exactly (mpmath, 40 digits) over the atoms of the
worst-case pairs, "remove" ``P = (1-q) mu0 + q mu1, Q = mu0`` and "add" the reverse,
and for ``k`` steps over the product measure. The discrete Gaussian's references sum
``|k| <= 14 sigma + 8`` (the rest is below 1e-40, far below the tolerances); the
normaliser sums a wider range. The PLD must never be below the reference, and within
the discretisation error above it: connect-the-dots is exact at grid points, so one
step's PLD lies between the exact delta at eps and at the grid point below eps.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import mpmath as mp
import pytest

from dpkit.accounting import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Event,
    PoissonSampledEvent,
)
from dpkit.accounting._math.pld.discrete_sampled import (
    discrete_gaussian_sampled_pmfs,
    discrete_laplace_sampled_pmfs,
)
from dpkit.accounting._math.pld.hockey import hockey_stick
from dpkit.accounting._math.pld.pmf import LossPmf
from dpkit.accounting.calibrate import calibrate
from dpkit.accounting.pld import PLDAccountant
from dpkit.accounting.rdp import RDPAccountant

mp.mp.dps = 40
H = 1e-4
Atoms = list[tuple[mp.mpf, mp.mpf]]  # (P-mass, Q-mass)
Pair = Callable[[str], Atoms]  # ordering -> atoms


def _gaussian_pair(sigma: float, d: int, q: float, direction: str) -> Atoms:
    s2 = 2 * mp.mpf(sigma) ** 2
    reach = int(14 * sigma) + 8 + d
    z = mp.fsum(mp.exp(-(mp.mpf(j) ** 2) / s2) for j in range(-3 * reach, 3 * reach + 1))
    atoms = []
    for k in range(-reach, reach + 1):
        m0 = mp.exp(-(mp.mpf(k) ** 2) / s2) / z
        m1 = mp.exp(-(mp.mpf(k - d) ** 2) / s2) / z
        mix = (1 - mp.mpf(q)) * m0 + mp.mpf(q) * m1
        atoms.append((mix, m0) if direction == "remove" else (m0, mix))
    return atoms


def _laplace_pair(scale: float, d: int, q: float, direction: str) -> Atoms:
    a = mp.exp(-1 / mp.mpf(scale))
    reach = int(60 * scale) + 8 + d

    def mu(k: int) -> mp.mpf:
        return (1 - a) / (1 + a) * a ** abs(k)

    atoms = []
    for k in range(-reach, reach + 1):
        m0, m1 = mu(k), mu(k - d)
        mix = (1 - mp.mpf(q)) * m0 + mp.mpf(q) * m1
        atoms.append((mix, m0) if direction == "remove" else (m0, mix))
    return atoms


def _delta(atoms: Atoms, eps: float) -> mp.mpf:
    e = mp.exp(mp.mpf(eps))
    return mp.fsum(max(mp.mpf(0), p - e * qq) for p, qq in atoms)


def _compose(atoms: Atoms, k: int) -> Atoms:
    """The k-fold product pair, merged by loss (exact up to 40 digits).

    Atoms with equal loss are merged first (the discrete Laplace's half-lines), and
    atoms of P-mass below 1e-25 dropped (at most 1e-23 of delta in all).
    """
    one: dict[str, tuple[mp.mpf, mp.mpf]] = {}
    for p, qq in atoms:
        if p > mp.mpf(10) ** -25:
            key = mp.nstr(mp.log(p / qq), 25)
            old = one.get(key, (mp.mpf(0), mp.mpf(0)))
            one[key] = (old[0] + p, old[1] + qq)
    kept = list(one.values())
    merged: dict[str, tuple[mp.mpf, mp.mpf]] = {}
    for combo in itertools.product(kept, repeat=k):
        p = mp.fprod(c[0] for c in combo)
        qq = mp.fprod(c[1] for c in combo)
        key = mp.nstr(mp.log(p / qq), 25)
        old = merged.get(key, (mp.mpf(0), mp.mpf(0)))
        merged[key] = (old[0] + p, old[1] + qq)
    return list(merged.values())


GAUSSIAN_CASES = [
    pytest.param(1.0, 1, 0.3, id="sigma1-D1-q0.3"),
    pytest.param(2.0, 3, 0.05, id="sigma2-D3-q0.05"),
    pytest.param(0.7, 2, 0.9, id="sigma0.7-D2-q0.9"),
    pytest.param(0.5, 1, 1.0, id="sigma0.5-D1-q1"),
]
EPSILONS = [-0.5, 0.0, 0.1, 0.23456, 0.5, 1.0, 2.0, 3.7]


def _check_one_step(pmfs: tuple[LossPmf, LossPmf | None], exact_pair: Pair) -> None:
    remove, add = pmfs
    for direction, pmf in (("remove", remove), ("add", add if add is not None else remove)):
        for eps in EPSILONS:
            exact = float(_delta(exact_pair(direction), eps))
            below = math.floor(eps / H) * H
            exact_below = float(_delta(exact_pair(direction), below))
            got = hockey_stick(pmf, eps)
            assert got >= exact, (direction, eps, got, exact)
            assert got <= exact_below * (1.0 + 1e-9) + 1e-14, (direction, eps, got, exact)


@pytest.mark.parametrize(("sigma", "d", "q"), GAUSSIAN_CASES)
def test_discrete_gaussian_one_step_against_exact_sum(sigma: float, d: int, q: float) -> None:
    pmfs = discrete_gaussian_sampled_pmfs(sigma, d, q, H, 1e-15)
    _check_one_step(pmfs, lambda direction: _gaussian_pair(sigma, d, q, direction))


@pytest.mark.parametrize(
    ("scale", "d", "q"),
    [
        pytest.param(1.0, 1, 0.3, id="t1-D1-q0.3"),
        pytest.param(2.0, 4, 0.2, id="t2-D4-q0.2"),
        pytest.param(0.5, 3, 1.0, id="t0.5-D3-q1"),
    ],
)
def test_discrete_laplace_one_step_against_exact_sum(scale: float, d: int, q: float) -> None:
    pmfs = discrete_laplace_sampled_pmfs(scale, d, q, H)
    _check_one_step(pmfs, lambda direction: _laplace_pair(scale, d, q, direction))


def test_accountant_reports_the_worse_ordering() -> None:
    event = PoissonSampledEvent(DiscreteGaussianEvent(1.0, 1), 0.3)
    accountant = PLDAccountant().compose(event)
    for eps in (0.0, 0.1, 1.0):
        worst = max(float(_delta(_gaussian_pair(1.0, 1, 0.3, d), eps)) for d in ("remove", "add"))
        got = accountant.get_delta(eps)
        assert worst <= got <= worst * (1.0 + 1e-9) + 1e-14


@pytest.mark.parametrize(
    ("event", "pair", "count"),
    [
        pytest.param(
            PoissonSampledEvent(DiscreteGaussianEvent(0.8, 1), 0.4),
            lambda d: _gaussian_pair(0.8, 1, 0.4, d),
            2,
            id="dgauss-q0.4-x2",
        ),
        pytest.param(
            PoissonSampledEvent(DiscreteGaussianEvent(0.4, 1), 0.2),
            lambda d: _gaussian_pair(0.4, 1, 0.2, d),
            3,
            id="dgauss-q0.2-x3",
        ),
        pytest.param(
            PoissonSampledEvent(DiscreteLaplaceEvent(1.0, 2), 0.3),
            lambda d: _laplace_pair(1.0, 2, 0.3, d),
            3,
            id="dlap-q0.3-x3",
        ),
    ],
)
def test_composition_against_exact_convolution(event: Event, pair: Pair, count: int) -> None:
    accountant = PLDAccountant().compose(event, count=count)
    composed = {d: _compose(pair(d), count) for d in ("remove", "add")}
    for eps in (0.0, 0.2, 0.5, 1.0, 2.0):
        exact = max(float(_delta(composed[d], eps)) for d in composed)
        got = accountant.get_delta(eps)
        assert got >= exact, (eps, got, exact)
        # Grid points: only the float allowances (measured 2e-11 to 3e-10 relative).
        assert got <= exact * (1.0 + 1e-6) + 1e-12, (eps, got, exact)


def test_supports() -> None:
    accountant = PLDAccountant()
    assert accountant.supports(PoissonSampledEvent(DiscreteGaussianEvent(1.0, 1), 0.1))
    assert accountant.supports(PoissonSampledEvent(DiscreteLaplaceEvent(1.0, 1), 0.1))
    assert accountant.supports(DiscreteGaussianEvent(3.0, 2))
    # More coordinates stay on RDP; a huge sigma is refused rather than slow.
    assert not accountant.supports(DiscreteGaussianEvent(1.0, 1.5, dimension=2))
    assert not accountant.supports(
        PoissonSampledEvent(DiscreteGaussianEvent(1.0, 1.5, dimension=2), 0.1)
    )
    assert not accountant.supports(DiscreteGaussianEvent(1e8, 1))
    replace = PLDAccountant(relation="replace")
    assert replace.supports(DiscreteGaussianEvent(1.0, 1))
    assert not replace.supports(PoissonSampledEvent(DiscreteGaussianEvent(1.0, 1), 0.1))
    assert not replace.supports(PoissonSampledEvent(DiscreteLaplaceEvent(1.0, 1), 0.1))


def test_large_sigma_merges_atoms_pessimistically() -> None:
    # 2 K + 1 > 2^20 integers: consecutive atoms merged into blocks at their top loss.
    sigma, q = 1.5e5, 0.5
    remove, add = discrete_gaussian_sampled_pmfs(sigma, 1000, q, H, 1e-15)
    assert add is not None
    # Within 1e-6 of the continuous Gaussian's (noise multiplier sigma / D) here.
    from dpkit.accounting import GaussianEvent

    gauss = PLDAccountant().compose(PoissonSampledEvent(GaussianEvent(sigma / 1000), q))
    for eps in (0.0, 0.001, 0.003):
        got = max(hockey_stick(remove, eps), hockey_stick(add, eps))
        assert got == pytest.approx(gauss.get_delta(eps), rel=1e-3)


def test_discrete_gaussian_plain_matches_exact_profile() -> None:
    from dpkit.accounting import discrete_gaussian_delta

    accountant = PLDAccountant().compose(DiscreteGaussianEvent(1.5, 2))
    for eps in (0.0, 0.5, 1.0, 2.0):
        exact = discrete_gaussian_delta(1.5, eps, 2)
        assert exact * (1.0 - 1e-9) <= accountant.get_delta(eps) <= exact * (1.0 + 1e-6) + 1e-14


def test_calibration_goes_through_the_pld() -> None:
    def event(sigma: float) -> PoissonSampledEvent:
        return PoissonSampledEvent(DiscreteGaussianEvent(sigma, 3), 0.4)

    delta = 0.27122238416249084
    pld = calibrate(
        PLDAccountant, event, target_epsilon=1.0, target_delta=delta, bracket=(0.2, 20.0)
    )
    assert pld == pytest.approx(0.993, abs=1e-3)  # dp_accounting's "remove" value
    worst = max(float(_delta(_gaussian_pair(pld, 3, 0.4, d), 1.0)) for d in ("remove", "add"))
    assert worst <= delta
    # RDP cannot certify that sigma (it needed 2.03 before issue 33).
    assert RDPAccountant().compose(event(pld)).get_epsilon(delta) > 1.0
