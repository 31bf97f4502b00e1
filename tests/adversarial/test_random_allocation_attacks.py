# ruff: noqa: N802
"""Attacks on random-allocation accounting (``RandomAllocationGaussianEvent``).

Written by a reviewer against independent references (mpmath quadrature, Monte Carlo
with rigorous lower limits, the Gaussian closed form). Found and fixed: a huge ``t`` or
``sigma`` made the law's masses NaN, which ``from_atoms`` turned into a PLD of total
mass 0 that erased every other event of the ledger (epsilon 0); a tiny ``sigma`` raised
a bare OverflowError; the CLI rounded 1/q to the optimistic side; very large ``sigma``
was looser than one Gaussian step (now the accountant takes one Gaussian step where it
is smaller, or where the law is unusable).

The quadrature references (``exact_t2``, ``exact_2of3``) are read from
tests/golden/references/ and recomputed, bit for bit, under ``--runslow``
(tests/_references.py).
"""

from __future__ import annotations

import functools
import itertools
import math
import time

import mpmath
import numpy as np
import pytest
from scipy import integrate, special
from tests._references import golden_reference

from dpkit.accounting import (
    GaussianEvent,
    LaplaceEvent,
    PLDAccountant,
    PoissonSampledEvent,
    RandomAllocationGaussianEvent,
)
from dpkit.accounting._math.pld.hockey import hockey_stick
from dpkit.accounting._math.pld.random_allocation import allocation_gaussian_pmfs, allocation_law
from dpkit.errors import DPError, InvalidParameter

_HUGE_GAUSSIAN = (
    "pre-existing in the Gaussian PLD (not the allocation): for sigma > ~1e154, sigma * "
    "sigma overflows in GaussianNoise.x_le and 0 * inf raises a RuntimeWarning (an error "
    "under -W error); without it GaussianEvent gives epsilon inf: safe, absurd"
)
H, INNER = 1e-4, 1e-18  # what PLDAccountant() passes by default (tail 1e-15 * 1e-3)


# ---------------------------------------------------------------- references (own)
def gauss_delta(sigma: float, eps: float) -> float:
    """Exact delta(eps) of N(1, s^2) vs N(0, s^2) (Balle-Wang), any real eps, 40 digits."""
    mpmath.mp.dps = 40
    s, e = mpmath.mpf(sigma), mpmath.mpf(eps)
    return float(
        mpmath.ncdf(-e * s + 1 / (2 * s)) - mpmath.e**e * mpmath.ncdf(-e * s - 1 / (2 * s))
    )


@golden_reference
def exact_t2(sigma: float, eps: float) -> tuple[float, float]:
    """1-of-2 allocation (remove, add) by mpmath quadrature over y = N(0,1) of Z_1."""
    # Local precision (mpmath.mp.dps = 30 leaked to later tests): a stored value and a
    # live call must leave the same global state behind.
    with mpmath.workdps(30):
        s = mpmath.mpf(1) / sigma
        g = mpmath.e ** mpmath.mpf(eps)

        def z(x):  # Z = exp(s x - s^2/2), x ~ N(0,1)
            return mpmath.e ** (s * x - s * s / 2)

        def call(c):
            if c <= 0:
                return 1 - c
            d1 = (-mpmath.log(c) + s * s / 2) / s
            return mpmath.ncdf(d1) - c * mpmath.ncdf(d1 - s)

        def put(c):
            if c <= 0:
                return mpmath.mpf(0)
            d1 = (-mpmath.log(c) + s * s / 2) / s
            return c * mpmath.ncdf(-(d1 - s)) - mpmath.ncdf(-d1)

        def kink(c):  # x where z(x) = c
            return (mpmath.log(c) + s * s / 2) / s

        pts_r = sorted({-40, kink(2 * g), 40}) if -40 < kink(2 * g) < 40 else [-40, 40]
        pts_a = sorted({-40, kink(2 / g), 40}) if -40 < kink(2 / g) < 40 else [-40, 40]
        rem = mpmath.quad(lambda x: mpmath.npdf(x) * call(2 * g - z(x)), pts_r) / 2
        add = g / 2 * mpmath.quad(lambda x: mpmath.npdf(x) * put(2 / g - z(x)), pts_a)
        return float(rem), float(add)


def _call(c: float, s: float) -> float:
    if c <= 0:
        return 1.0 - c
    d1 = (-math.log(c) + 0.5 * s * s) / s
    return float(special.ndtr(d1) - c * special.ndtr(d1 - s))


def _put(c: float, s: float) -> float:
    if c <= 0:
        return 0.0
    d1 = (-math.log(c) + 0.5 * s * s) / s
    return float(c * special.ndtr(-(d1 - s)) - special.ndtr(-d1))


@golden_reference
def exact_2of3(sigma: float, eps: float) -> tuple[float, float]:
    """k = 2 of t = 3: E_Q[(e_2(Z)/3 - g)_+], E_Q[(1 - g e_2(Z)/3)_+] (2-D quad, x ~ N(0,1))."""
    s = 1.0 / sigma
    g = math.exp(eps)
    L = 12.0

    def z(x):
        return math.exp(s * x - 0.5 * s * s)

    def inner(x1, hinge):
        z1 = z(x1)

        def f(x2):
            z2 = z(x2)
            lin = z1 + z2
            if hinge == "rem":
                c = (3 * g - z1 * z2) / lin
                return lin / 3 * _call(c, s)
            c = (3 / g - z1 * z2) / lin
            return g * lin / 3 * _put(c, s)

        return (
            math.exp(-0.5 * x1 * x1)
            / math.sqrt(2 * math.pi)
            * integrate.quad(
                lambda x2: math.exp(-0.5 * x2 * x2) / math.sqrt(2 * math.pi) * f(x2),
                -L,
                L,
                epsabs=0,
                epsrel=1e-11,
                limit=400,
            )[0]
        )

    rem = integrate.quad(lambda x: inner(x, "rem"), -L, L, epsabs=0, epsrel=1e-10, limit=400)[0]
    add = integrate.quad(lambda x: inner(x, "add"), -L, L, epsabs=0, epsrel=1e-10, limit=400)[0]
    return rem, add


def bernstein_lower(x: np.ndarray, alpha: float) -> float:
    """One-sided empirical Bernstein lower confidence limit (Maurer-Pontil Thm 4), x in [0,1]."""
    n = x.size
    lt = math.log(2.0 / alpha)
    var = float(np.var(x, ddof=1))
    return float(np.mean(x)) - math.sqrt(2.0 * var * lt / n) - 7.0 * lt / (3.0 * (n - 1))


@functools.cache
def _allocation_pmfs(sigma, t):
    """dpkit's (remove, add) PLDs, shared by cases at several eps (LossPmf is immutable)."""
    return allocation_gaussian_pmfs(sigma, t, H, INNER)


def dpkit_dirs(sigma, t, eps):
    rem, add = _allocation_pmfs(sigma, t)
    return hockey_stick(rem, eps), hockey_stick(add, eps)


@functools.cache
def gaussian_epsilon(sigma: float, delta: float) -> float:
    """PLDAccountant's epsilon of one Gaussian step, the yardstick of several attacks
    below (GaussianEvent(0.1) alone in seven cases), computed once per (sigma, delta)."""
    return PLDAccountant().compose(GaussianEvent(sigma)).get_epsilon(delta)


# ---------------------------------------------------------------- t = 1
@pytest.mark.parametrize("sigma", [0.21, 0.3, 0.5, 1.0, 5.0, 50.0, 1000.0])
def test_t1_is_the_gaussian_closed_form(sigma):
    rem, add = allocation_gaussian_pmfs(sigma, 1, H, INNER)
    acc = PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, 1))
    for eps in (-2.0, -0.3, 0.0, 1e-4, 0.01, 0.5, 1.0, 3.0, 8.0, 20.0):
        true = gauss_delta(sigma, eps)
        for got in (hockey_stick(rem, eps), hockey_stick(add, eps)):
            assert got >= true * (1 - 1e-12), (sigma, eps, got, true)
            if sigma <= 50.0:  # beyond, the law is narrower than its grid (first order)
                assert got <= true * 1.01 + 1e-13, (sigma, eps, got, true)
        if eps >= 0:
            assert acc.get_delta(eps) >= true * (1 - 1e-12)
            assert acc.get_delta(eps) <= true * 1.01 + 1e-10  # t = 1: one Gaussian step


# ---------------------------------------------------------------- t = 2 (mpmath)
@pytest.mark.parametrize("sigma", [0.25, 0.4, 3.0, 30.0])
def test_t2_exact_extremes(sigma):
    rem, add = allocation_gaussian_pmfs(sigma, 2, H, INNER)
    for eps in (-1.0, -0.01, 0.0, 0.003, 0.2, 1.0, 2.5, 6.0, 15.0):
        tr, ta = exact_t2(sigma, eps)
        gr, ga = hockey_stick(rem, eps), hockey_stick(add, eps)
        assert gr >= tr * (1 - 1e-9), ("remove", sigma, eps, gr, tr)
        assert ga >= ta * (1 - 1e-9), ("add", sigma, eps, ga, ta)


@pytest.mark.parametrize("sigma", [0.6, 1.0])
def test_t2_tiny_delta_epsilon(sigma):
    # dpkit's eps at delta = 1e-12 must be >= the true one: true delta at dpkit's eps <= 1e-12.
    acc = PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, 2))
    for delta in (1e-10, 1e-12):
        eps = acc.get_epsilon(delta)
        tr, ta = exact_t2(sigma, eps)
        assert max(tr, ta) <= delta * (1 + 1e-9), (sigma, delta, eps, tr, ta)
        assert acc.get_delta(eps) <= delta * (1 + 1e-9)
        # and not absurdly loose
        assert max(exact_t2(sigma, eps * 0.98)) > delta


# ---------------------------------------------------------------- k > 1
@pytest.mark.parametrize("sigma", [0.8, 2.0])
def test_2_of_3_against_exact_pair(sigma):
    acc = PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, 3, 2))
    for eps in (0.0, 0.5, 1.5, 3.0):
        tr, ta = exact_2of3(sigma, eps)
        assert acc.get_delta(eps) >= max(tr, ta) * (1 - 1e-8), (
            sigma,
            eps,
            acc.get_delta(eps),
            tr,
            ta,
        )
        # never above two Gaussian steps
        assert acc.get_delta(eps) <= gauss_delta(sigma / math.sqrt(2), eps) * 1.01 + 1e-13


@pytest.mark.parametrize(("t", "sigma"), [(4, 1.0), (7, 3.0)])
def test_k_equals_t_is_k_gaussians(t, sigma):
    acc = PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, t, t))
    for eps in (0.0, 0.5, 2.0):
        true = gauss_delta(sigma / math.sqrt(t), eps)
        got = acc.get_delta(eps)
        assert true * (1 - 1e-12) <= got <= true * 1.01 + 1e-13, (eps, got, true)


def test_k_equals_t_minus_1_bounds():
    sigma, t = 2.0, 10
    acc = PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, t, t - 1))
    for eps in (0.5, 2.0):
        hi = gauss_delta(sigma / math.sqrt(t - 1), eps)
        lo = gauss_delta(sigma / math.sqrt(t - 2), eps)  # exact pair contains t-2 sure steps
        got = acc.get_delta(eps)
        assert got <= hi * 1.01 + 1e-13
        # the (t-1)-of-t pair dominates t-2 deterministic steps (post-processing), so >= that
        assert got >= lo


# ---------------------------------------------------------------- Monte Carlo
def _sample_S(sigma, t, n, tilted, gen):
    s = 1.0 / sigma
    tot = np.zeros(n)
    for _ in range(t - 1 if tilted else t):
        tot += np.exp(gen.normal(-0.5 * s * s, s, n))
    if tilted:
        tot += np.exp(gen.normal(0.5 * s * s, s, n))
    return tot


@pytest.mark.parametrize(
    ("sigma", "t", "eps"), [(0.5, 10, 1.0), (0.5, 10, 2.5), (2.0, 1000, 0.01), (50.0, 300, 0.0)]
)
def test_monte_carlo_single_epoch(sigma, t, eps):
    gen = np.random.Generator(np.random.PCG64(12345 + t))
    n = max(20_000, 3_000_000 // t)
    g = math.exp(eps)
    sp = _sample_S(sigma, t, n, True, gen)
    sq = _sample_S(sigma, t, n, False, gen)
    rem_lo = bernstein_lower(np.maximum(1.0 - g * t / sp, 0.0), 1e-6)
    add_lo = bernstein_lower(np.maximum(1.0 - g * sq / t, 0.0), 1e-6)
    gr, ga = dpkit_dirs(sigma, t, eps)
    assert gr >= rem_lo and ga >= add_lo, (gr, rem_lo, ga, add_lo)


@pytest.mark.parametrize(
    ("sigma", "t", "epochs", "eps"), [(1.0, 2, 10, 1.5), (0.7, 3, 5, 3.0), (2.0, 20, 50, 0.5)]
)
def test_monte_carlo_epochs(sigma, t, epochs, eps):
    # delta_remove(E epochs) = E_P[(1 - e^{eps - L})_+], L the sum of E iid losses log(S/t) under P.
    gen = np.random.Generator(np.random.PCG64(999 + epochs))
    n = 400_000 if t <= 3 else 60_000
    L = np.zeros(n)
    for _ in range(epochs):
        L += np.log(_sample_S(sigma, t, n, True, gen) / t)
    lo = bernstein_lower(np.maximum(-np.expm1(eps - L), 0.0), 1e-6)
    acc = PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, t), count=epochs)
    assert acc.get_delta(eps) >= lo, (acc.get_delta(eps), lo)
    # add direction: loss log(t/S) under Q... E_Q[(1 - e^{eps} prod S/t)_+] bounded in [0,1]
    Lq = np.zeros(n)
    for _ in range(epochs):
        Lq += np.log(_sample_S(sigma, t, n, False, gen) / t)
    lo_add = bernstein_lower(np.maximum(-np.expm1(eps + Lq), 0.0), 1e-6)
    assert acc.get_delta(eps) >= lo_add, (acc.get_delta(eps), lo_add)


def test_epochs_compose_same_as_other_path():
    sigma, t = 1.0, 50
    a = PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, t), count=8)
    b = PLDAccountant()
    for _ in range(8):
        b.compose(RandomAllocationGaussianEvent(sigma, t))
    for eps in (0.2, 1.0, 2.0):
        assert a.get_delta(eps) == pytest.approx(b.get_delta(eps), rel=1e-6)


# ---------------------------------------------------------------- comparisons / monotonicity
@pytest.mark.parametrize(("sigma", "t"), [(1000.0, 10**6), (1000.0, 1000), (500.0, 10**5)])
def test_never_above_one_gaussian_large_sigma(sigma, t):
    alloc = PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, t))
    gauss = PLDAccountant().compose(GaussianEvent(sigma))
    for delta in (1e-5, 1e-8):
        assert alloc.get_epsilon(delta) <= gauss.get_epsilon(delta) * 1.001, (
            delta,
            alloc.get_epsilon(delta),
            gauss.get_epsilon(delta),
        )


@pytest.mark.parametrize(
    ("sigmas", "ts"),
    [
        # By default 3 sigmas x 6 t (the small sigma and t = 1000 included); the full
        # 4 x 7 grid (22 s on a busy worker: small sigmas cost 5-15 s per accountant
        # there) adds sigma 0.8 and t = 5 with --runslow.
        ((0.5, 1.0, 2.0), (1, 2, 3, 10, 100, 1000)),
        pytest.param((0.5, 0.8, 1.0, 2.0), (1, 2, 3, 5, 10, 100, 1000), marks=pytest.mark.slow),
    ],
    ids=["default", "full"],
)
def test_monotone_in_sigma_and_t(sigmas, ts):
    eps_list = (0.0, 0.3, 1.0, 3.0)
    # Each accountant's delta at each eps, read once (the comparisons below use each
    # value up to four times).
    table = {}
    for s in sigmas:
        for t in ts:
            accountant = PLDAccountant().compose(RandomAllocationGaussianEvent(s, t))
            for eps in eps_list:
                table[(s, t, eps)] = accountant.get_delta(eps)
    bad = []
    for eps in eps_list:
        for s in sigmas:
            for t1, t2 in itertools.pairwise(ts):
                if table[(s, t2, eps)] > table[(s, t1, eps)] * (1 + 1e-6) + 1e-15:
                    bad.append(("t", s, t1, t2, eps))
        for t in ts:
            for s1, s2 in itertools.pairwise(sigmas):
                if table[(s2, t, eps)] > table[(s1, t, eps)] * (1 + 1e-6) + 1e-15:
                    bad.append(("sigma", s1, s2, t, eps))
    assert not bad, bad


def test_inflated_law_is_never_used():
    # The float-error inflation compounds as (1 + d0)^t: at t = 1e8 the law's total mass
    # is ~2. The accountant must not compose such a law; one Gaussian step (a proven
    # bound) is used instead.
    law = allocation_law(1.0, 10**8, INNER)
    assert float(np.sum(law.masses)) + law.zero > 1.01  # the attack's premise
    eps = PLDAccountant().compose(RandomAllocationGaussianEvent(1.0, 10**8)).get_epsilon(1e-5)
    assert eps == gaussian_epsilon(1.0, 1e-5)


@pytest.mark.parametrize("steps", [10**11, 10**20])
def test_huge_t_never_erases_the_ledger(steps):
    # t = 1e11 .. 1e20 at sigma = 1: the masses overflowed to inf/NaN and from_atoms
    # returned a PLD of total mass 0, so a ledger with GaussianEvent(0.1) reported 0.
    event = RandomAllocationGaussianEvent(1.0, steps)
    alone = PLDAccountant().compose(event).get_epsilon(1e-5)
    assert math.isfinite(alone)
    assert alone <= gaussian_epsilon(1.0, 1e-5)
    ledger = PLDAccountant().compose(GaussianEvent(0.1)).compose(event).get_epsilon(1e-5)
    assert ledger >= gaussian_epsilon(0.1, 1e-5)


@pytest.mark.parametrize("sigma", [1e12, 1e20, 1e100])
def test_huge_sigma_never_erases_the_ledger(sigma):
    event = RandomAllocationGaussianEvent(sigma, 1000)
    ledger = PLDAccountant().compose(GaussianEvent(0.1)).compose(event).get_epsilon(1e-5)
    assert ledger >= gaussian_epsilon(0.1, 1e-5)
    true_floor = gauss_delta(sigma * math.sqrt(1000), 0.0)  # below the true delta(0)
    assert PLDAccountant().compose(event).get_delta(0.0) >= true_floor


def test_from_atoms_refuses_nan_masses():
    from dpkit.accounting._math.pld.discretize import from_atoms

    with pytest.raises(DPError):
        from_atoms(np.array([0.1, 0.2]), np.array([np.nan, np.nan]), 1e-4)
    empty = from_atoms(np.array([0.1]), np.array([0.0]), 1e-4)
    assert empty.infinity_mass >= 1.0  # no finite atom: all of P at +inf, never mass 0


# ---------------------------------------------------------------- mixed composition / consistency
def test_mixed_composition():
    sigma = 1.3
    acc = (
        PLDAccountant()
        .compose(RandomAllocationGaussianEvent(sigma, 1))
        .compose(GaussianEvent(sigma))
    )
    for eps in (0.0, 0.5, 2.0):
        true = gauss_delta(sigma / math.sqrt(2), eps)
        assert acc.get_delta(eps) >= true * (1 - 1e-12)
        assert acc.get_delta(eps) <= true * 1.01 + 1e-13
    mix = PLDAccountant()
    mix.compose(RandomAllocationGaussianEvent(1.0, 100), count=3)
    mix.compose(PoissonSampledEvent(GaussianEvent(1.0), 0.01), count=100)
    mix.compose(LaplaceEvent(5.0))
    only = PLDAccountant().compose(RandomAllocationGaussianEvent(1.0, 100), count=3)
    for delta in (1e-5, 1e-10):
        eps = mix.get_epsilon(delta)
        assert eps >= only.get_epsilon(delta)
        assert mix.get_delta(eps) <= delta * (1 + 1e-9)


@pytest.mark.parametrize(
    ("sigma", "t", "k", "epochs"), [(0.6, 100, 1, 3), (1.0, 10, 3, 20), (4.0, 1000, 1, 1)]
)
def test_delta_epsilon_consistency(sigma, t, k, epochs):
    acc = PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, t, k), count=epochs)
    for delta in (1e-3, 1e-6, 1e-9, 1e-12):
        eps = acc.get_epsilon(delta)
        if math.isinf(eps):  # documented: delta below smallest_delta
            assert acc.smallest_delta > delta
            continue
        assert acc.get_delta(eps) <= delta * (1 + 1e-9)
        if eps > 1e-6:
            assert acc.get_delta(eps * (1 - 1e-3)) > delta * (1 - 1e-9)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "args",
    [
        (1.0, 10.0),
        (1.0, np.float64(10.0)),
        (1.0, 10, 2.0),
        (1.0, 10, np.True_),
        (np.nan, 3),
        (1.0, "10"),
        (1.0, 10, None),
        (-0.0, 3),
        (1.0, 3, 4),
    ],
)
def test_bad_input(args):
    with pytest.raises(InvalidParameter):
        RandomAllocationGaussianEvent(*args)


def test_numpy_ints_accepted():
    e = RandomAllocationGaussianEvent(np.float32(1.0), np.int64(10), np.int32(2))
    assert type(e.num_steps) is int and type(e.num_allocations) is int


@pytest.mark.parametrize("sigma", [5e-324, 1e-300, 1e-160, 0.15, 0.185])
def test_tiny_sigma_refused_quickly(sigma):
    # BUG: sigma < ~1e-154 gives a raw OverflowError (math.floor(inf)), not InvalidParameter.
    t0 = time.time()
    with pytest.raises(InvalidParameter):
        PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, 100))
    assert time.time() - t0 < 10


@pytest.mark.parametrize(
    "sigma",
    [
        1e6,
        1e150,
        pytest.param(1e300, marks=pytest.mark.xfail(strict=True, reason=_HUGE_GAUSSIAN)),
        pytest.param(
            float(np.finfo(float).max), marks=pytest.mark.xfail(strict=True, reason=_HUGE_GAUSSIAN)
        ),
    ],
)
def test_astronomical_sigma(sigma):
    # One Gaussian step is a proven upper bound; at sigma >= 1e6 its eps(1e-6) is 0.
    acc = PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, 1000))
    eps = acc.get_epsilon(1e-6)
    assert 0.0 <= eps <= PLDAccountant().compose(GaussianEvent(sigma)).get_epsilon(1e-6) + 1e-4, eps


# ---------------------------------------------------------------- CLI
def _cli(*args):
    from typer.testing import CliRunner

    from dpkit.cli.main import app

    return CliRunner().invoke(app, ["account", "dpsgd", *args])


def test_cli_non_integer_inverse_rate_rounds_safely():
    import json

    # 1/0.003 = 333.33 batches: the CLI took ceil = 334 per epoch (more amplification
    # than 333). A rate alone must give a whole number of batches, else exit 2.
    r = _cli(
        "--noise-multiplier",
        "1.0",
        "--delta",
        "1e-5",
        "--sampling-rate",
        "0.003",
        "--steps",
        "3000",
        "--accountant",
        "pld",
        "--sampler",
        "allocation",
        "--json",
    )
    assert r.exit_code == 2, r.output
    r = _cli(
        "--noise-multiplier",
        "1.0",
        "--delta",
        "1e-5",
        "--sampling-rate",
        "0.004",
        "--steps",
        "3000",
        "--accountant",
        "pld",
        "--sampler",
        "allocation",
        "--json",
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["batches_per_epoch"] == 250


@pytest.mark.parametrize(
    "extra",
    [
        ["--accountant", "rdp"],
        ["--accountant", "prv"],
        ["--relation", "replace", "--accountant", "pld"],
    ],
)
def test_cli_refusals(extra):
    base = [
        "--noise-multiplier",
        "1.0",
        "--delta",
        "1e-5",
        "--sampling-rate",
        "0.01",
        "--steps",
        "100",
        "--sampler",
        "allocation",
    ]
    if "--accountant" not in extra:
        base += []
    r = _cli(*base, *extra)
    assert r.exit_code == 2, r.output


def test_cli_epochs_batch_dataset():
    import json

    r = _cli(
        "--noise-multiplier",
        "0.9",
        "--delta",
        "1e-6",
        "--epochs",
        "2.5",
        "--batch-size",
        "1000",
        "--dataset-size",
        "10001",
        "--accountant",
        "pld",
        "--sampler",
        "allocation",
        "--json",
    )
    assert r.exit_code == 0, r.output
    p = json.loads(r.output)
    assert p["batches_per_epoch"] == 11, p
    assert p["epochs"] >= 3, p


# ------------------------------------------------ CRITICAL (fixed): NaN law -> zero-mass PLD
def test_huge_sigma_nan_law_erases_the_whole_ledger():
    # sigma = 1e100 (also 1e16..), t = 1000: _lognormal_law's error terms scale like 1/sd,
    # masses ~1e171, squaring overflows to inf, inf*0 = NaN; from_atoms drops the NaN atoms
    # (probabilities > 0 is False) and returns a PLD of total mass 0 with no mass at +inf.
    # Convolved into the accountant it zeroes every other event's privacy loss.
    alone = gaussian_epsilon(0.1, 1e-5)  # ~91.8
    acc = (
        PLDAccountant()
        .compose(GaussianEvent(0.1))
        .compose(RandomAllocationGaussianEvent(1e100, 1000))
    )
    assert acc.get_epsilon(1e-5) >= alone, (acc.get_epsilon(1e-5), alone)


def test_huge_sigma_alone_is_below_true_delta():
    # True delta(0) for sigma = 1e20, t = 1000 is about 0.4 * 1e-20 / sqrt(1000) ~ 1e-22 > 0;
    # more to the point, dpkit's own float guards (>= 4u at +inf per event) vanish.
    acc = PLDAccountant().compose(RandomAllocationGaussianEvent(1e20, 1000))
    assert acc.get_delta(0.0) >= 1e-16, acc.get_delta(0.0)


def test_huge_t_nan_law_erases_the_whole_ledger():
    # sigma = 1 (ordinary), t = 1e20: the float-error inflation (1 + d0)^t overflows, inf*0 = NaN,
    # the allocation PLD has total mass 0 and the ledger's epsilon collapses to 0.
    alone = gaussian_epsilon(0.1, 1e-5)
    acc = (
        PLDAccountant()
        .compose(GaussianEvent(0.1))
        .compose(RandomAllocationGaussianEvent(1.0, 10**20))
    )
    assert acc.get_epsilon(1e-5) >= alone, (acc.get_epsilon(1e-5), alone)


def test_tiny_sigma_via_dpsgd_and_cli_is_a_dpkit_error():
    from dpkit.accounting.calibrate import dpsgd_epsilon

    with pytest.raises(DPError):
        dpsgd_epsilon(
            sampling_probability=0.01,
            noise_multiplier=1e-300,
            steps=100,
            delta=1e-5,
            accountant="pld",
            sampler="allocation",
        )
    r = _cli(
        "--noise-multiplier",
        "1e-300",
        "--delta",
        "1e-5",
        "--sampling-rate",
        "0.01",
        "--steps",
        "100",
        "--accountant",
        "pld",
        "--sampler",
        "allocation",
    )
    assert (r.exit_code == 2 and r.exception is None) or isinstance(r.exception, SystemExit), (
        r.exit_code,
        repr(r.exception),
    )
