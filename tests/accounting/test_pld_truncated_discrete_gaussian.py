"""PLDs of the truncated discrete Gaussian (optionally subsampled), against exact sums.

The noise is ``mu0(k) ∝ exp(-k^2 / (2 sigma^2))`` on ``|k| <= T``, ``mu1(k) = mu0(k - D)``.
The reference is delta(eps) summed exactly (mpmath, 40 digits) over the atoms of the
union of the two supports, ``sum_k max(0, P(k) - e^eps Q(k))`` (an atom with
``Q(k) = 0`` counts whole: infinite loss), for "remove" ``P = (1-q) mu0 + q mu1, Q = mu0``
and "add" the reverse, and for several steps over the product measure (every tuple
of atoms, no merging or dropping). The PLD must never be below the reference, and
within the discretisation error above it: connect-the-dots is exact at grid points,
so one step's PLD lies between the exact delta at eps and at the grid point below.
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import pytest

from dpkit.accounting import PoissonSampledEvent, TruncatedDiscreteGaussianEvent
from dpkit.accounting._math.pld.hockey import hockey_stick
from dpkit.accounting._math.pld.truncated_discrete import (
    truncated_discrete_gaussian_pmfs,
    truncated_discrete_gaussian_supported,
)
from dpkit.accounting.pld import PLDAccountant
from dpkit.accounting.rdp import RDPAccountant
from dpkit.errors import InvalidParameter

mp.mp.dps = 40
H = 1e-4
Atoms = list[tuple[mp.mpf, mp.mpf]]  # (P-mass, Q-mass)


def _pair(sigma: float, d: int, bound: int, q: float, direction: str) -> Atoms:
    s2 = 2 * mp.mpf(sigma) ** 2
    z = mp.fsum(mp.exp(-(mp.mpf(j) ** 2) / s2) for j in range(-bound, bound + 1))

    def mu0(k: int) -> mp.mpf:
        return mp.exp(-(mp.mpf(k) ** 2) / s2) / z if abs(k) <= bound else mp.mpf(0)

    atoms = []
    for k in range(-bound, bound + d + 1):
        m0, m1 = mu0(k), mu0(k - d)
        mix = (1 - mp.mpf(q)) * m0 + mp.mpf(q) * m1
        atoms.append((mix, m0) if direction == "remove" else (m0, mix))
    return atoms


def _delta(atoms: Atoms, eps: float) -> mp.mpf:
    e = mp.exp(mp.mpf(eps))
    return mp.fsum(max(mp.mpf(0), p - e * qq) for p, qq in atoms)


def _compose(atoms: Atoms, count: int) -> Atoms:
    kept = [(p, qq) for p, qq in atoms if p > 0 or qq > 0]
    return [
        (mp.fprod(c[0] for c in combo), mp.fprod(c[1] for c in combo))
        for combo in itertools.product(kept, repeat=count)
    ]


def _worst(sigma: float, d: int, bound: int, q: float, eps: float) -> float:
    return max(float(_delta(_pair(sigma, d, bound, q, x), eps)) for x in ("remove", "add"))


EPSILONS = [-0.5, 0.0, 0.1, 0.23456, 0.5, 1.0, 2.0, 3.7]
CASES = [
    pytest.param(1.0, 1, 3, 1.0, id="sigma1-D1-T3"),
    pytest.param(2.0, 2, 5, 1.0, id="sigma2-D2-T5"),
    pytest.param(3.0, 3, 4, 1.0, id="sigma3-D3-T4"),
    pytest.param(0.7, 1, 1, 1.0, id="sigma0.7-D1-T1"),
    pytest.param(1.0, 2, 1, 1.0, id="D-equals-2T"),
    pytest.param(1.5, 1, 40, 1.0, id="T-beyond-the-evaluated-range"),
    pytest.param(1.0, 1, 3, 0.3, id="sigma1-D1-T3-q0.3"),
    pytest.param(2.0, 3, 4, 0.05, id="sigma2-D3-T4-q0.05"),
    pytest.param(0.8, 1, 30, 0.9, id="sigma0.8-D1-T30-q0.9"),
]


@pytest.mark.parametrize(("sigma", "d", "bound", "q"), CASES)
def test_one_step_against_exact_sum(sigma: float, d: int, bound: int, q: float) -> None:
    remove, add = truncated_discrete_gaussian_pmfs(sigma, d, bound, q, H, 5e-16)
    assert (add is None) == (q == 1.0)
    for direction, pmf in (("remove", remove), ("add", add if add is not None else remove)):
        atoms = _pair(sigma, d, bound, q, direction)
        for eps in EPSILONS:
            exact = float(_delta(atoms, eps))
            exact_below = float(_delta(atoms, math.floor(eps / H) * H))
            got = hockey_stick(pmf, eps)
            assert got >= exact, (direction, eps, got, exact)
            assert got <= exact_below * (1.0 + 1e-9) + 1e-14, (direction, eps, got, exact)


def test_delta_at_least_the_shifted_out_mass() -> None:
    # sigma 1, T 3, D 2: mu1 puts mu0((1, 3]) on {4, 5}, where mu0 is 0.
    sigma, bound, d = 1.0, 3, 2
    z = math.fsum(math.exp(-(j * j) / 2.0) for j in range(-bound, bound + 1))
    shifted_out = (math.exp(-2.0) + math.exp(-4.5)) / z
    accountant = PLDAccountant().compose(TruncatedDiscreteGaussianEvent(sigma, d, bound))
    assert accountant.get_delta(50.0) >= shifted_out
    assert accountant.get_delta(50.0) <= shifted_out * (1.0 + 1e-9)
    assert accountant.get_epsilon(shifted_out * 0.999) == math.inf


def test_disjoint_supports() -> None:
    # D > 2 T: the outputs tell the neighbours apart (delta 1; q with sampling).
    assert PLDAccountant().compose(TruncatedDiscreteGaussianEvent(1.0, 3, 1)).get_delta(5.0) == 1.0
    sampled = PLDAccountant().compose(
        PoissonSampledEvent(TruncatedDiscreteGaussianEvent(1.0, 3, 1), 0.3)
    )
    for eps in (0.0, 1.0, 5.0):
        assert 0.3 <= sampled.get_delta(eps) <= 0.3 + 1e-12
    # T = 0: the query itself is released.
    assert PLDAccountant().compose(TruncatedDiscreteGaussianEvent(1.0, 1, 0)).get_delta(9.0) == 1.0


@pytest.mark.parametrize(
    ("sigma", "d", "bound", "q", "count"),
    [
        pytest.param(1.0, 1, 3, 1.0, 3, id="T3-x3"),
        pytest.param(2.0, 2, 4, 1.0, 2, id="D2-T4-x2"),
        pytest.param(1.0, 1, 3, 0.4, 2, id="T3-q0.4-x2"),
        pytest.param(0.8, 1, 2, 0.2, 3, id="T2-q0.2-x3"),
    ],
)
def test_composition_against_exact_convolution(
    sigma: float, d: int, bound: int, q: float, count: int
) -> None:
    event = TruncatedDiscreteGaussianEvent(sigma, d, bound)
    accountant = PLDAccountant().compose(
        event if q == 1.0 else PoissonSampledEvent(event, q), count=count
    )
    composed = {x: _compose(_pair(sigma, d, bound, q, x), count) for x in ("remove", "add")}
    for eps in (0.0, 0.2, 0.5, 1.0, 2.0, 4.0):
        exact = max(float(_delta(composed[x], eps)) for x in composed)
        got = accountant.get_delta(eps)
        assert got >= exact, (eps, got, exact)
        # Grid points: only the float allowances.
        assert got <= exact * (1.0 + 1e-6) + 1e-12, (eps, got, exact)


def test_replace_relation_and_worse_ordering() -> None:
    event = TruncatedDiscreteGaussianEvent(1.0, 1, 3)
    replace = PLDAccountant(relation="replace")
    assert replace.supports(event)
    assert not replace.supports(PoissonSampledEvent(event, 0.1))
    replace.compose(event)
    add_remove = PLDAccountant().compose(event)
    for eps in (0.0, 0.5, 1.0):
        exact = _worst(1.0, 1, 3, 1.0, eps)
        assert exact <= replace.get_delta(eps) == add_remove.get_delta(eps)
    sampled = PLDAccountant().compose(PoissonSampledEvent(event, 0.3))
    for eps in (0.0, 0.1, 1.0):
        worst = _worst(1.0, 1, 3, 0.3, eps)
        assert worst <= sampled.get_delta(eps) <= worst * (1.0 + 1e-9) + 1e-14


def test_not_zcdp_nor_pure() -> None:
    event = TruncatedDiscreteGaussianEvent(2.0, 1, 10)
    assert not RDPAccountant().supports(event)
    assert event._pure_epsilon() is None and event._zcdp_rho() is None


def test_supported_range() -> None:
    assert truncated_discrete_gaussian_supported(1.0, 1, 10**12, 5e-16)  # evaluates ~40
    assert not truncated_discrete_gaussian_supported(1e8, 1, 10**12, 5e-16)
    assert not PLDAccountant().supports(TruncatedDiscreteGaussianEvent(1e8, 1, 10**12))
    assert PLDAccountant().supports(TruncatedDiscreteGaussianEvent(1e8, 1, 1000))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sigma": 1.0, "sensitivity": 1, "bound": -1},
        {"sigma": 0.0, "sensitivity": 1, "bound": 3},
        {"sigma": -1.0, "sensitivity": 1, "bound": 3},
        {"sigma": math.nan, "sensitivity": 1, "bound": 3},
        {"sigma": 1.0, "sensitivity": 1.5, "bound": 3},
        {"sigma": 1.0, "sensitivity": 0, "bound": 3},
        {"sigma": 1.0, "sensitivity": True, "bound": 3},
        {"sigma": 1.0, "sensitivity": 1, "bound": 2.5},
    ],
)
def test_bad_input(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidParameter):
        TruncatedDiscreteGaussianEvent(**kwargs)  # type: ignore[arg-type]


def test_round_trip() -> None:
    from dpkit.accounting.events import event_from_dict

    event = TruncatedDiscreteGaussianEvent(1.5, 2, 7)
    assert event_from_dict(event.to_dict()) == event


def test_far_bound_matches_the_untruncated_pld() -> None:
    # bound far beyond the evaluated range K: the same atoms and tail bound as the
    # untruncated discrete Gaussian's (both certified for their own mechanism).
    from dpkit.accounting import DiscreteGaussianEvent

    for q in (1.0, 0.2):
        far = TruncatedDiscreteGaussianEvent(2.0, 1, 10**9)
        plain = DiscreteGaussianEvent(2.0, 1)
        a = PLDAccountant().compose(far if q == 1.0 else PoissonSampledEvent(far, q))
        b = PLDAccountant().compose(plain if q == 1.0 else PoissonSampledEvent(plain, q))
        for eps in (0.0, 0.5, 2.0):
            assert a.get_delta(eps) == b.get_delta(eps)
