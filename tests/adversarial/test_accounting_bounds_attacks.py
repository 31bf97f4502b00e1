"""Adversarial review of today's accounting changes (bounds that must hold).

1. WBK19 Thm 27 for the Gaussian sampled without replacement (RDP accountant): the
   curve must never be below the Renyi divergence of an explicit pair of neighbouring
   datasets (one record of a 1-D sum query swapped), computed with mpmath, nor below an
   mpmath evaluation of Thm 27's terms; caching must not mix sigmas.
2. ``mul_up_many``: exactly the smallest float >= the exact product, element by element.
3. The RDP accountant's held-back single curve (``count x curve``): composing the same
   event in loops, interleaved, with count 0 or 2^60, must give the epsilons of the
   plain exact sums.
4. The certified PLD *lower* bound for DP-SGD: never above the truth (closed forms for
   the Gaussian, 50-digit mpmath for one subsampled step, prv_accountant's eps_upper
   and dpkit's own upper bound for long runs).
5. Bad inputs give dpkit errors.

Each test is an attack; the docstring says what it tries. Attacks the code resists are
regression tests; attacks that succeed are ``xfail(strict=True)`` with the reason.

The slow exact references (``_pair_renyi``, ``_mixture_renyi``, ``_log_b``, and the
50-digit ``_true_delta`` and ``_true_epsilon`` of section 4) are read from
tests/golden/references/ and recomputed, bit for bit, under ``--runslow``
(tests/_references.py).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import random
import warnings
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from tests._references import golden_reference

from dpkit.accounting import (
    ComposedEvent,
    GaussianEvent,
    PLDAccountant,
    PoissonSampledEvent,
    RDPAccountant,
    RepeatedEvent,
    SampledWithoutReplacementEvent,
)
from dpkit.accounting._math.rounding import fraction_up, mul_up_many
from dpkit.accounting._math.without_replacement import (
    _gaussian_thm27_terms,
    without_replacement_rdp_curve,
)
from dpkit.accounting.pld_bounds import EpsilonInterval
from dpkit.errors import DPError

# --------------------------------------------------------------------------- helpers


@golden_reference
def _pair_renyi(alpha: float, sigma: float, gamma: float, a: float, b: float) -> mpmath.mpf:
    """``D_alpha(P || Q)`` for ``P = (1-g) N(0, s^2) + g N(a, s^2)``, ``Q`` the same with ``b``.

    Replace-one, sum query over records in [0, 1], noise N(0, s^2), a uniformly random
    m-subset (g = m / n): if the other records all equal ``c`` the output is
    ``const + N(0, s^2)`` without the swapped record and ``const + (x - c) + ...`` with
    it, so ``(a, b) = (x - c, x' - c)`` with ``x, x', c`` in [0, 1]: (1, 0), (0, 1) and
    (1/2, -1/2) are all real neighbouring pairs.
    """
    with mpmath.workdps(40):
        s, g, al = mpmath.mpf(sigma), mpmath.mpf(gamma), mpmath.mpf(alpha)
        am, bm = mpmath.mpf(a), mpmath.mpf(b)

        def f(x: mpmath.mpf) -> mpmath.mpf:
            p = (1 - g) * mpmath.exp(-(x**2) / (2 * s * s)) + g * mpmath.exp(
                -((x - am) ** 2) / (2 * s * s)
            )
            q = (1 - g) * mpmath.exp(-(x**2) / (2 * s * s)) + g * mpmath.exp(
                -((x - bm) ** 2) / (2 * s * s)
            )
            return q * (p / q) ** al

        far = al * max(abs(am), abs(bm))
        points = sorted(
            {
                -mpmath.inf,
                -20 * s,
                -5 * s,
                mpmath.mpf(0),
                5 * s,
                20 * s,
                far,
                far + 20 * s,
                mpmath.inf,
            }
        )
        value = mpmath.quad(f, points, maxdegree=10) / (s * mpmath.sqrt(2 * mpmath.pi))
        return mpmath.log(value) / (al - 1)


def _wor_curve(sigma: float, m: int, n: int, orders: tuple[float, ...]) -> tuple[float, ...]:
    event = SampledWithoutReplacementEvent(GaussianEvent(sigma), m, n)
    return RDPAccountant(orders).compose(event).guarantee.epsilons


@golden_reference
def _log_b(sigma: float, k: int) -> mpmath.mpf:
    """log B(k), B(k) = sum_i C(k, i) (-1)^(k-i) e^(i (i-1) / (2 sigma^2)), enough digits."""
    c = 1.0 / (2.0 * sigma * sigma)
    lower = 0.5 * k * math.log10(c) + (math.lgamma(k + 1) - math.lgamma(k / 2 + 1)) / math.log(10)
    dps = int(0.302 * k + k * k * c / 2.3 - lower) + 40
    with mpmath.workdps(dps):
        cm = 1 / (2 * mpmath.mpf(sigma) ** 2)
        total = mpmath.fsum(
            mpmath.binomial(k, i) * (-1) ** (k - i) * mpmath.exp(i * (i - 1) * cm)
            for i in range(k + 1)
        )
        assert total > 0
        return mpmath.log(total)


# ----------------------------------------------------- 1. without replacement, Thm 27

WOR_ORDERS = (1.25, 2.0, 2.5, 3.0, 4.0, 7.5, 16.0, 32.0)


@pytest.mark.parametrize(
    ("sigma", "m", "n"),
    [
        # The two costliest pairs (12-14 s each on a busy worker) run with --runslow;
        # the others reach the same code paths (small and large n; m > 1 is attacked
        # at large orders below).
        pytest.param(0.5, 1, 10, marks=pytest.mark.slow),
        (0.7, 1, 100_000),
        (1.0, 1, 100),
        pytest.param(1.0, 99, 100, marks=pytest.mark.slow),
        (2.0, 1, 10),
        (3.0, 1, 100),
        (10.0, 1, 2),
    ],
)
def test_wor_gaussian_never_below_an_explicit_neighbouring_pair(
    sigma: float, m: int, n: int
) -> None:
    """Attack: find a real replace-one pair whose Renyi divergence beats dpkit's curve.

    Three pairs (record moved up, down, and +1/2 against -1/2 around the others), both
    integer and fractional orders, in 40-digit mpmath quadrature.
    """
    curve = _wor_curve(sigma, m, n, WOR_ORDERS)
    gamma = m / n
    for order, eps in zip(WOR_ORDERS, curve, strict=True):
        for a, b in ((1.0, 0.0), (0.0, 1.0), (0.5, -0.5)):
            assert _pair_renyi(order, sigma, gamma, a, b) <= eps, (order, a, b)


@pytest.mark.parametrize(
    ("sigma", "m", "n", "order"),
    [
        (1000.0, 99, 100, 1024.0),  # the work budget: Thm 27 stops at j = 844 here
        (1000.0, 1, 100_000, 2048.0),  # the largest amplified order
        (140.0, 1, 2, 1000.5),  # fractional, near the end of the affordable table
        (13.0, 1, 10, 960.0),
        (50.0, 1, 100, 255.5),
    ],
)
def test_wor_large_sigma_large_order_never_below_explicit_pair(
    sigma: float, m: int, n: int, order: float
) -> None:
    """Attack: large sigma (the alternating sums cancel the most) and the largest
    orders, where the work budget switches terms back to Thm 9."""
    (eps,) = _wor_curve(sigma, m, n, (order,))
    for a, b in ((1.0, 0.0), (0.0, 1.0), (0.5, -0.5)):
        assert _pair_renyi(order, sigma, m / n, a, b) <= eps


@pytest.mark.parametrize("sigma", [0.5, 0.5000000000000001, 3.0, 13.0, 140.0, 1000.0, 1e4])
def test_wor_thm27_terms_never_below_mpmath(sigma: float) -> None:
    """Attack: the exact-integer forward differences (scaled by 2^P, P from a lower
    bound on B(k)) round a term below ``log(4 sqrt(B(2 fl(j/2)) B(2 ce(j/2))))``."""
    _gaussian_thm27_terms.cache_clear()
    terms = _gaussian_thm27_terms(sigma, 1024)
    finite = [j for j in range(len(terms)) if math.isfinite(terms[j])]
    assert finite, "Thm 27 never used"
    picks = {3, 4, 5, 6, 7, 17, 33, finite[-1], finite[-2], finite[len(finite) // 2]}
    for j in sorted(p for p in picks if p < len(terms) and math.isfinite(terms[p])):
        lo, hi = 2 * (j // 2), 2 * ((j + 1) // 2)
        ref = mpmath.log(4) + (_log_b(sigma, lo) + _log_b(sigma, hi)) / 2
        assert terms[j] >= ref, (sigma, j)
        assert terms[j] <= ref + 1e-9 * (1 + abs(ref))  # and not vacuous


def test_wor_cache_does_not_mix_sigmas_one_ulp_apart() -> None:
    """Attack: a cache keyed on a rounded sigma (or on the order list only) would hand
    sigma's Thm 27 terms to the next float below it, whose terms are larger.

    Each curve must equal the one computed from an empty cache, and a smaller sigma
    never gets a smaller curve."""
    orders = (2.0, 3.0, 5.5, 64.0, 256.0)
    base = 3.0
    sigmas = [math.nextafter(base, 0.0), base, math.nextafter(base, 4.0)]
    warm = []
    for sigma in sigmas + sigmas[::-1]:
        warm.append(
            without_replacement_rdp_curve(
                0.01,
                [j / (2 * sigma**2) * (1 + 1e-15) for j in range(2, 258)],
                [a / (2 * sigma**2) for a in orders],
                orders,
                gaussian_sigma=sigma,
            )
        )
    cold = []
    for sigma in sigmas + sigmas[::-1]:
        _gaussian_thm27_terms.cache_clear()
        cold.append(
            without_replacement_rdp_curve(
                0.01,
                [j / (2 * sigma**2) * (1 + 1e-15) for j in range(2, 258)],
                [a / (2 * sigma**2) for a in orders],
                orders,
                gaussian_sigma=sigma,
            )
        )
    assert warm == cold
    # Also through the accountant (its leaf cache is keyed by the event).
    curves = [_wor_curve(s, 1, 100, orders) for s in sigmas]
    _gaussian_thm27_terms.cache_clear()
    assert curves == [_wor_curve(s, 1, 100, orders) for s in sigmas]
    for smaller, larger in itertools.pairwise(curves):
        assert all(x >= y for x, y in zip(smaller, larger, strict=True))


def test_wor_thm27_cached_with_a_shorter_top_is_not_reused_for_longer() -> None:
    """Attack: the Thm 27 table is cached per (sigma, top); asking first for a short
    table and then a long one must not truncate the long one to Thm 9 silently nor
    return a table whose entries differ from a cold computation."""
    _gaussian_thm27_terms.cache_clear()
    short = _gaussian_thm27_terms(20.0, 10)
    long_ = _gaussian_thm27_terms(20.0, 300)
    _gaussian_thm27_terms.cache_clear()
    cold = _gaussian_thm27_terms(20.0, 300)
    assert np.array_equal(long_, cold)
    # The scale P depends on the table's length: last-bit differences, both upper bounds.
    assert np.allclose(short[3:], cold[3:11], rtol=1e-12, atol=0)


def test_wor_monotone_in_sampling_fraction_and_sigma() -> None:
    """Attack: min(Thm 9, Thm 27) switching terms could make a larger sampling fraction
    or smaller sigma report less."""
    orders = (1.5, 2.0, 3.0, 4.5, 8.0, 16.0, 40.0, 128.0, 256.0)
    for sigma in (0.6, 1.0, 3.0, 8.0):
        previous = None
        for m in (1, 10, 50, 99):
            curve = _wor_curve(sigma, m, 100, orders)
            if previous is not None:
                assert all(x >= y for x, y in zip(curve, previous, strict=True)), (sigma, m)
            previous = curve


# ------------------------------------------------------------------- 2. mul_up_many


def _want(value: float, factor: Fraction) -> float:
    if math.isinf(value):
        return math.inf if factor > 0 else 0.0
    return fraction_up(Fraction(value) * factor)


def _random_float(rng: random.Random) -> float:
    k = rng.random()
    if k < 0.1:
        return rng.choice(
            [
                0.0,
                math.inf,
                5e-324,
                2.2250738585072014e-308,
                1.7976931348623157e308,
                1.0,
                0.5,
                3.0,
                36.0,
            ]
        )
    if k < 0.2:
        return math.ldexp(rng.getrandbits(53) | 1, rng.randint(-1130, -1000))  # subnormal
    if k < 0.4:
        return float(rng.randint(1, 2**20))
    if k < 0.6:
        return math.ldexp(rng.getrandbits(53), rng.randint(-1100, 970))
    return math.ldexp(rng.getrandbits(53), rng.randint(-80, 0))


def _random_factor(rng: random.Random) -> Fraction:
    k = rng.random()
    if k < 0.2:
        return Fraction(rng.randint(0, 50), rng.randint(1, 50))
    if k < 0.4:  # numerators and denominators far beyond 2^53
        return Fraction(
            rng.getrandbits(rng.randint(1, 200)), rng.getrandbits(rng.randint(1, 200)) | 1
        )
    if k < 0.5:
        x = _random_float(rng)
        return Fraction(x if math.isfinite(x) else 2.0)
    if k < 0.6:  # a / (2 sigma^2) factors
        return 1 / (2 * Fraction(rng.uniform(0.3, 100)) ** 2)
    if k < 0.7:  # counts
        return Fraction(rng.randint(1, 2**62))
    if k < 0.8:  # a hair off a float: f_lo and r both matter
        return Fraction(rng.uniform(0.1, 10)) + Fraction(1, 2 ** rng.randint(53, 200))
    if k < 0.9:  # outside the float path's factor range
        return Fraction(2) ** rng.randint(-1200, 1200) * Fraction(
            rng.randint(1, 99), rng.randint(1, 99)
        )
    return Fraction(3, 2 ** rng.randint(0, 1100))


def test_mul_up_many_random_against_fractions() -> None:
    """Attack: random values (subnormal, huge, integers, inf) times random exact factors
    (float, near-float, huge numerators/denominators, out of range), plus values built
    so that the product is exactly a float (ties of the decision ``X = s``)."""
    rng = random.Random(20261125)
    for _ in range(3000):
        factor = _random_factor(rng)
        values = [_random_float(rng) for _ in range(rng.randint(1, 20))]
        if factor and rng.random() < 0.4:
            for target in (1.0, 3.0, 0.75, 36.0, 2.0**-1000):
                with contextlib.suppress(OverflowError):
                    values.append(float(Fraction(target) / factor))
            for k in range(1, 4):
                with contextlib.suppress(OverflowError):
                    values.append(float(factor.denominator * k))
        got = mul_up_many(values, factor).tolist()
        assert got == [_want(v, factor) for v in values], factor


@pytest.mark.parametrize(
    "factor",
    [
        Fraction(1, 18),  # v = 36: exact product 2 (the docstring's example)
        Fraction(2**60 + 1, 2**61 + 2),  # = 1/2, but numerator/denominator >= 2^53
        Fraction(3 * (2**70 + 7), 2**70 + 7),  # = 3, unreduced-looking (Fraction reduces)
        Fraction(10**30 + 1, 10**30),  # a hair above 1: X = v (1 + 1e-30)
        Fraction(10**30 - 1, 10**30),  # a hair below 1
        Fraction(1, 3) + Fraction(1, 2**120),
        Fraction(2**400),  # the edge of the float path's factor range
        Fraction(1, 2**400),
        Fraction(2**401, 3),
    ],
)
def test_mul_up_many_hard_factors(factor: Fraction) -> None:
    """Attack: products equal to or within 2^-100 of a float, factors at the range edges."""
    values = [
        1.0,
        2.0,
        3.0,
        36.0,
        0.1,
        1.0 - 2**-53,
        1.0 + 2**-52,
        2.0**-1074,
        2.0**-1022,
        2.0**499,
        2.0**-499,
        2.0**-500,
        2.0**500,
        1e308,
        3 * 2.0**-1074,
        0.0,
        math.inf,
    ]
    values += [
        math.nextafter(float(Fraction(k) / factor), 0.0)
        for k in (1, 2, 3)
        if Fraction(k) / factor < 1e300
    ]
    values += [float(Fraction(k) / factor) for k in (1, 2, 3) if Fraction(k) / factor < 1e300]
    assert mul_up_many(values, factor).tolist() == [_want(v, factor) for v in values]


def test_mul_up_many_refuses_values_outside_its_contract() -> None:
    """Attack: negative inputs and NaN. The vectorised branches assume an infinity is
    +inf and the factor non-negative (-inf came back as +inf, inf times a negative
    factor as 0.0, silently); out-of-contract values must raise, never round wrongly."""
    for values, factor in [
        ([-1.5], Fraction(1, 3)),
        ([-math.inf], Fraction(1, 3)),
        ([math.inf], Fraction(-1, 3)),
        ([math.nan], Fraction(1, 3)),
    ]:
        with pytest.raises(DPError):
            mul_up_many(values, factor)


# ------------------------------------------- 3. the RDP accountant's held-back curve

ORDERS = (1.25, 1.5, 2.0, 3.0, 4.5, 8.0, 16.0, 64.0, 256.0)


def _curve(event: object) -> tuple[float, ...]:
    return RDPAccountant(ORDERS).compose(event).guarantee.epsilons  # type: ignore[arg-type]


def _exact_sum(parts: list[tuple[object, int]]) -> tuple[float, ...]:
    out = []
    for index in range(len(ORDERS)):
        total = Fraction(0)
        infinite = False
        for event, count in parts:
            value = _curve(event)[index]
            if math.isinf(value):
                infinite = True
            elif value > 0:
                total += count * Fraction(value)
        out.append(math.inf if infinite else fraction_up(total))
    return tuple(out)


def test_held_back_curve_matches_exact_sums_in_every_composition_pattern() -> None:
    """Attack: the single pending (curve, count) is read out as ``count * curve`` while
    mixed ledgers go through the integer totals; loops, interleaving, equal-curve
    different events, huge counts and RepeatedEvent/ComposedEvent must all give the
    exactly rounded sum, and epsilon never drops as more is composed."""
    a = GaussianEvent(1.3)
    b = PoissonSampledEvent(GaussianEvent(0.9), 0.01)
    a_twin = GaussianEvent(1.3000000000000000444)  # the same float: equal events
    near = GaussianEvent(math.nextafter(1.3, 2.0))  # one ulp: a different curve
    wor = SampledWithoutReplacementEvent(GaussianEvent(2.0), 3, 1000)
    patterns: list[list[tuple[object, int]]] = [
        [(a, 1)] * 7,
        [(a, 3), (a, 2**60)],
        [(a, 1), (b, 1)] * 4,
        [(a, 5), (a_twin, 6), (near, 1), (a, 2)],
        [(b, 2**60), (a, 1), (b, 1)],
        [(wor, 10), (a, 1), (wor, 10)],
        [(near, 1), (a, 1)],
    ]
    for pattern in patterns:
        accountant = RDPAccountant(ORDERS)
        previous = (0.0,) * len(ORDERS)
        done: list[tuple[object, int]] = []
        for event, count in pattern:
            accountant.compose(event, count=count)  # type: ignore[arg-type]
            done.append((event, count))
            eps = accountant.guarantee.epsilons
            assert eps == _exact_sum(done), pattern
            assert all(x >= y for x, y in zip(eps, previous, strict=True))
            previous = eps
        # The same ledger in one go, as structure, gives the same numbers.
        whole = ComposedEvent(tuple(RepeatedEvent(e, c) if c > 1 else e for e, c in pattern))  # type: ignore[misc]
        assert RDPAccountant(ORDERS).compose(whole).guarantee.epsilons == previous
        assert RDPAccountant(ORDERS).compose(accountant.ledger).guarantee.epsilons == previous


def test_held_back_curve_single_vs_loop_bit_for_bit_and_epsilon() -> None:
    """Attack: ``compose(e, count=k)`` (one exact product) against k separate composes
    and against the integer totals path; get_epsilon must agree too."""
    e = PoissonSampledEvent(GaussianEvent(1.1), 0.003)
    loop = RDPAccountant(ORDERS)
    for _ in range(1000):
        loop.compose(e)
    once = RDPAccountant(ORDERS).compose(e, count=1000)
    assert loop.guarantee.epsilons == once.guarantee.epsilons == _exact_sum([(e, 1000)])
    assert loop.get_epsilon(1e-6) == once.get_epsilon(1e-6)
    # Reading the guarantee in the middle of a run must not change the final sum.
    mid = RDPAccountant(ORDERS)
    for i in range(10):
        mid.compose(e, count=100)
        if i % 3 == 0:
            mid.get_epsilon(1e-6)
    assert mid.guarantee.epsilons == once.guarantee.epsilons


# ------------------------------------------------ 4. the certified PLD lower bound


def _phic(z: mpmath.mpf) -> mpmath.mpf:
    return mpmath.erfc(z / mpmath.sqrt(2)) / 2


@golden_reference
def _true_delta(sigma: float, q: float, eps: float) -> mpmath.mpf:
    """delta(eps) of one Poisson-subsampled Gaussian step (add/remove, both orderings),
    50 digits (stored: see :func:`_delta_50_digits`)."""
    return _delta_50_digits(sigma, q, eps)


def _delta_50_digits(sigma: float, q: float, eps: float) -> mpmath.mpf:
    """delta(eps) of one Poisson-subsampled Gaussian step (add/remove, both orderings),
    50 digits: the loss is monotone in the output, so each hockey-stick divergence is
    a difference of two Gaussian tails at the threshold."""
    with mpmath.workdps(50):
        s, g, e = mpmath.mpf(sigma), mpmath.mpf(q), mpmath.mpf(eps)
        big = mpmath.exp(e)
        # "remove": P = (1-g) N(0) + g N(1) against Q = N(0), loss increasing in x.
        if g == 1:
            x = s * s * e + mpmath.mpf(1) / 2
        else:
            x = (2 * s * s * mpmath.log((big - (1 - g)) / g) + 1) / 2
        remove = (1 - g) * _phic(x / s) + g * _phic((x - 1) / s) - big * _phic(x / s)
        # "add": P = N(0) against Q = (1-g) N(0) + g N(1), loss decreasing in x.
        small = 1 / big
        if small <= 1 - g:
            add = mpmath.mpf(0)
        else:
            x = (
                (2 * s * s * mpmath.log((small - (1 - g)) / g) + 1) / 2
                if g < 1
                else (-2 * s * s * e + 1) / 2
            )
            add = (1 - _phic(x / s)) - big * (
                (1 - g) * (1 - _phic(x / s)) + g * (1 - _phic((x - 1) / s))
            )
        return max(remove, add)


@golden_reference
def _true_epsilon(sigma: float, q: float, delta: float) -> float:
    """The smallest eps with delta(eps) <= delta (bisection to ~1e-20, then rounded up)."""
    # The unstored evaluation: ~85 mpf arguments per call, none worth a stored entry.
    if _delta_50_digits(sigma, q, 0.0) <= delta:
        return 0.0
    lo, hi = mpmath.mpf(0), mpmath.mpf(1)
    while _delta_50_digits(sigma, q, hi) > delta:
        hi *= 2
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _delta_50_digits(sigma, q, mid) > delta else (lo, mid)
    return math.nextafter(float(hi), math.inf)


@functools.cache
def _dpsgd_bounds(q: float, sigma: float, steps: int, delta: float) -> EpsilonInterval:
    """dpsgd_epsilon_bounds, once per schedule (an immutable EpsilonInterval): the
    typical q = 0.01, sigma = 1, 1000 steps is attacked twice below."""
    from dpkit.accounting.calibrate import dpsgd_epsilon_bounds

    return dpsgd_epsilon_bounds(
        sampling_probability=q, noise_multiplier=sigma, steps=steps, delta=delta
    )


def _lower(event: object, delta: float, **kw: float) -> float:
    from dpkit.accounting.pld_bounds import epsilon_lower_bound

    return epsilon_lower_bound(event, delta, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sigma", "count", "delta"),
    [
        (10.0, 100, 1e-5),
        (0.3, 1, 1e-5),
        # The costliest small count (3-20 s on a busy machine) runs with --runslow: a
        # small count at delta 1e-12 is also (5.0, 3, 1e-12).
        pytest.param(0.3, 4, 1e-12, marks=pytest.mark.slow),
        (5.0, 3, 1e-12),
        (100.0, 1, 1e-5),
        (0.5, 1, 0.3),
        (50.0, 10**6, 1e-5),  # 10^6 steps: sigma_eff = 0.05
        (50.0, 10**6, 1e-12),
    ],
)
def test_lower_never_above_composed_gaussian_closed_form(
    sigma: float, count: int, delta: float
) -> None:
    """Attack: k Gaussians are one Gaussian of sigma / sqrt(k) (closed-form delta); the
    lower bound, from the random-rounding + Hoeffding argument, must stay below."""
    event = RepeatedEvent(GaussianEvent(sigma), count) if count > 1 else GaussianEvent(sigma)
    assert _lower(event, delta) <= _true_epsilon(sigma / math.sqrt(count), 1.0, delta)


def test_lower_mixed_gaussians_closed_form() -> None:
    """Attack: several different Gaussians (one FFT of the product, mean bias over
    factors): sum k_i / sigma_i^2 = 1 / sigma_eff^2."""
    event = ComposedEvent(
        (
            RepeatedEvent(GaussianEvent(3.0), 5),
            GaussianEvent(2.0),
            RepeatedEvent(GaussianEvent(7.0), 40),
        )
    )
    sigma_eff = 1.0 / math.sqrt(5 / 9 + 1 / 4 + 40 / 49)
    for delta in (1e-3, 1e-6, 1e-12):
        assert _lower(event, delta) <= _true_epsilon(sigma_eff, 1.0, delta)


@pytest.mark.parametrize("h", [1.0, 0.7, 0.3, 0.1, 0.03, 1e-3])
def test_lower_coarse_grids_never_above_truth(h: float) -> None:
    """Attack: coarse grids make the rounding error (h^2/8 per step, Hoeffding in
    sqrt(k) h) large; a wrong constant shows there first."""
    for sigma, count, delta in [(1.0, 1, 1e-5), (10.0, 100, 1e-5), (0.3, 1, 1e-12)]:
        event = RepeatedEvent(GaussianEvent(sigma), count) if count > 1 else GaussianEvent(sigma)
        truth = _true_epsilon(sigma / math.sqrt(count), 1.0, delta)
        assert _lower(event, delta, discretization=h) <= truth, (h, sigma, count)
    for sigma, q, delta in [(1.0, 0.01, 1e-5), (0.5, 0.3, 1e-8)]:
        event = PoissonSampledEvent(GaussianEvent(sigma), q)
        assert _lower(event, delta, discretization=h) <= _true_epsilon(sigma, q, delta)


@pytest.mark.parametrize(
    ("sigma", "q"),
    [
        (1.0, 0.01),
        # Small sigma and small q (the costliest, 12 s on a busy worker) runs with
        # --runslow; sigma 0.3 runs by default at q = 0.5 and 0.999, q = 0.01 at sigma 1.
        pytest.param(0.3, 0.01, marks=pytest.mark.slow),
        (0.3, 0.5),
        (0.3, 0.999),
        (50.0, 0.5),
        (1.0, 1e-6),
        (2.0, 0.999999),
        (0.5, 0.1),
        (1.0, 0.9999),
    ],
)
def test_lower_single_subsampled_step_vs_mpmath(sigma: float, q: float) -> None:
    """Attack: one Poisson-subsampled Gaussian step, both orderings, rates near 0 and 1,
    sigma 0.3 to 50: epsilon at three deltas and delta at four epsilons (incl. 0 and
    epsilons where the true profile is ~0)."""
    from dpkit.accounting.pld_bounds import delta_lower_bound

    event = PoissonSampledEvent(GaussianEvent(sigma), q)
    for delta in (1e-3, 1e-5, 1e-12):
        assert _lower(event, delta) <= _true_epsilon(sigma, q, delta), delta
    for eps in (0.0, 0.01, 0.5, 2.0, 40.0):
        assert delta_lower_bound(event, eps) <= _true_delta(sigma, q, eps), eps


def test_lower_delta_near_one_and_profile_zero() -> None:
    """Attack: delta near 1 (the answer must be 0: delta(0) < 1) and epsilons far past
    the last loss (the profile is 0 there: the lower bound must be 0, not -beta
    or a float artefact above 0)."""
    from dpkit.accounting.pld_bounds import delta_lower_bound

    event = RepeatedEvent(PoissonSampledEvent(GaussianEvent(0.8), 0.05), 50)
    upper = PLDAccountant().compose(event)  # composed once, read at each delta
    for delta in (0.999999, 0.9, 0.5):
        lower = _lower(event, delta)
        assert lower == 0.0 or lower <= upper.get_epsilon(delta)
    for eps in (1e3, 1e6, math.inf):
        assert delta_lower_bound(event, eps) == 0.0


@pytest.mark.parametrize(
    ("q", "sigma", "steps", "delta"),
    [
        (0.01, 1.0, 1000, 1e-5),
        # 10^5 steps and the smallest delta (15 s each on a busy worker) run with
        # --runslow; the others run the same code, and prv_accountant live, on the
        # default test set (10^6 steps: test_lower_heterogeneous_and_huge_below_...).
        pytest.param(0.001, 0.8, 100_000, 1e-6, marks=pytest.mark.slow),
        (0.99, 10.0, 100, 1e-5),
        pytest.param(0.01, 0.6, 10_000, 1e-9, marks=pytest.mark.slow),
    ],
)
def test_lower_below_prv_upper_and_dpkit_upper(
    q: float, sigma: float, steps: int, delta: float
) -> None:
    """Attack: long DP-SGD runs, where no closed form exists: the certified lower bound
    must stay below prv_accountant's eps_upper (itself above the truth) and below
    dpkit's own upper bound."""
    prv = pytest.importorskip("prv_accountant")
    bounds = _dpsgd_bounds(q, sigma, steps, delta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # prv's deprecation and overflow warnings
        accountant = prv.Accountant(
            noise_multiplier=sigma,
            sampling_probability=q,
            delta=delta,
            eps_error=0.01,
            max_compositions=steps,
        )
        _, _, prv_upper = accountant.compute_epsilon(num_compositions=steps)
    assert bounds.lower <= prv_upper
    assert bounds.lower <= bounds.upper


def test_lower_mixed_subsampled_and_plain_through_the_accountant() -> None:
    """Attack: a ledger mixing Poisson-subsampled and plain Gaussians, composed in
    pieces (the lower bound re-reads the ledger): below dpkit's PLD and RDP upper
    bounds at several deltas."""
    steps = PoissonSampledEvent(GaussianEvent(1.1), 0.02)
    accountant = PLDAccountant()
    accountant.compose(steps, count=300).compose(GaussianEvent(20.0)).compose(
        PoissonSampledEvent(GaussianEvent(0.7), 0.001), count=2000
    )
    rdp = RDPAccountant().compose(accountant.ledger)
    for delta in (1e-3, 1e-7, 1e-11):
        interval = accountant.get_epsilon_interval(delta)
        assert 0.0 <= interval.lower <= interval.upper
        assert interval.lower <= rdp.get_epsilon(delta)


def test_lower_bound_is_not_vacuous_where_documented() -> None:
    """Not an attack on soundness: how loose the bound gets (the docstring promises 'a
    fraction of a percent' with the defaults). Measured: 0.17% (q=0.01, s=1, 1000
    steps); 23% at q=1e-4, s=1, 10^6 steps; 13% for 10^6 Gaussians of s=50 at 1e-12;
    one step at q=1e-6 gives 1.5e-5 against a true 1.3e-4 at delta=1e-12."""
    bounds = _dpsgd_bounds(0.01, 1.0, 1000, 1e-5)
    assert bounds.lower > 0.99 * bounds.upper


def test_lower_subnormal_delta_gives_a_number_or_a_dpkit_error() -> None:
    """Attack: the smallest deltas check_delta accepts (subnormals)."""
    event = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    try:
        value = _lower(event, 1e-320)
    except DPError:
        return
    assert value >= 0.0


# ------------------------------------------------------------------- 5. bad inputs

BAD = [math.nan, math.inf, -math.inf, -1.0, 0.0, 2.0, True, "0.1", None]


def test_bad_inputs_are_dpkit_errors() -> None:
    """Attack: NaN, inf, negative, zero, out of range, wrong types in every parameter of
    the new entry points: each must raise a dpkit error (DPError), never a bare one,
    or return a number where the value is legal (delta_lower_bound at eps = inf)."""
    from dpkit.accounting.calibrate import dpsgd_epsilon_bounds
    from dpkit.accounting.pld_bounds import delta_lower_bound, epsilon_interval

    event = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    calls = []
    for x in BAD:
        calls += [
            lambda x=x: _lower(event, x),
            lambda x=x: _lower(event, 1e-5, discretization=x),
            lambda x=x: _lower(event, 1e-5, tail_mass=x),
            lambda x=x: delta_lower_bound(event, x),
            lambda x=x: epsilon_interval(event, x),
            lambda x=x: epsilon_interval(event, 1e-5, discretization=x),
            lambda x=x: epsilon_interval(event, 1e-5, lower_discretization=x),
            lambda x=x: PLDAccountant().compose(event).get_epsilon_interval(x),
        ]
        for name in ("sampling_probability", "noise_multiplier", "steps", "delta"):
            kw: dict[str, object] = {
                "sampling_probability": 0.01,
                "noise_multiplier": 1.0,
                "steps": 10,
                "delta": 1e-5,
            }
            kw[name] = x
            calls.append(lambda kw=kw: dpsgd_epsilon_bounds(**kw))  # type: ignore[arg-type]
    calls += [
        lambda: _lower("not an event", 1e-5),
        lambda: _lower(GaussianEvent(1e-3), 1e-5),  # too many grid points
        lambda: _lower(RepeatedEvent(GaussianEvent(1.0), 10**12), 1e-5),
        lambda: (
            PLDAccountant(relation="replace").compose(GaussianEvent(1.0)).get_epsilon_interval(1e-5)
        ),
        lambda: _lower(SampledWithoutReplacementEvent(GaussianEvent(1.0), 1, 10), 1e-5),
        lambda: _lower(
            PoissonSampledEvent(PoissonSampledEvent(GaussianEvent(1.0), 0.5), 0.5), 1e-5
        ),
    ]
    for call in calls:
        try:
            result = call()
        except DPError:
            continue
        assert result is not None
        value = result if isinstance(result, float) else result.lower
        assert value >= 0.0


# ------------------------------------------------------ more: pairs, scans, the CLI


@golden_reference
def _mixture_renyi(alpha: float, sigma: float, wp: float, wq: float) -> mpmath.mpf:
    """D_alpha((1-wp) N(0) + wp N(1) || (1-wq) N(0) + wq N(1)), sd sigma, 40 digits."""
    with mpmath.workdps(40):
        s, al = mpmath.mpf(sigma), mpmath.mpf(alpha)
        p_w, q_w = mpmath.mpf(wp), mpmath.mpf(wq)

        def f(x: mpmath.mpf) -> mpmath.mpf:
            d0 = mpmath.exp(-(x**2) / (2 * s * s))
            d1 = mpmath.exp(-((x - 1) ** 2) / (2 * s * s))
            p, q = (1 - p_w) * d0 + p_w * d1, (1 - q_w) * d0 + q_w * d1
            return q * (p / q) ** al

        points = sorted(
            {
                -mpmath.inf,
                -20 * s,
                mpmath.mpf(0),
                mpmath.mpf(1),
                20 * s,
                al,
                al + 20 * s,
                mpmath.inf,
            }
        )
        value = mpmath.quad(f, points, maxdegree=10) / (s * mpmath.sqrt(2 * mpmath.pi))
        return mpmath.log(value) / (al - 1)


@pytest.mark.parametrize(
    ("sigma", "n"),
    # n = 10 (16-25 s each) runs with --runslow; n = 6 runs the same mixtures cheaper.
    [
        pytest.param(1.0, 10, marks=pytest.mark.slow),
        pytest.param(0.5, 10, marks=pytest.mark.slow),
        (1.0, 6),
        (3.0, 3),
        (5.0, 2),
        (0.8, 4),
    ],
)
def test_wor_gaussian_never_below_pairs_with_a_mixed_background(sigma: float, n: int) -> None:
    """Attack: the other records are not all equal (k ones, the rest zeros), so the
    common part of the two subsampled outputs is itself a mixture: with m = 1 the pair is
    ``(w + g) N(1) + ...`` against ``w N(1) + ...`` for w = k / n, in both orders."""
    orders = (1.5, 2.0, 3.0, 4.0, 8.0, 16.0)
    gamma = 1 / n
    curve = _wor_curve(sigma, 1, n, orders)
    for order, eps in zip(orders, curve, strict=True):
        for k in range(n):
            w = k / n
            assert _mixture_renyi(order, sigma, w + gamma, w) <= eps, (order, k)
            assert _mixture_renyi(order, sigma, w, w + gamma) <= eps, (order, k)


@pytest.mark.parametrize(
    # The finest grid (25 s on a busy worker) runs with --runslow; the others run the
    # same code on coarser grids.
    "h",
    [pytest.param(3e-5, marks=pytest.mark.slow), 1e-3, 0.1, 0.5],
)
def test_lower_delta_profile_scan_never_above_truth(h: float) -> None:
    """Attack: scan the whole privacy profile (80 epsilons from 0 to far in the tail,
    where the tilted FFT part and the beta choice take over) of composed Gaussians and
    of single subsampled steps, against closed forms."""
    from dpkit.accounting._pld_lower import _profiles

    grid = [x / 20 for x in range(61)] + [4.0, 5.0, 6.0, 8.0, 10.0]
    cases: list[tuple[object, float, float, list[float]]] = []
    for sigma, count in [(1.0, 1), (10.0, 100), (0.3, 1), (3.0, 7)]:
        eff = sigma / math.sqrt(count)
        event = RepeatedEvent(GaussianEvent(sigma), count) if count > 1 else GaussianEvent(sigma)
        cases.append((event, eff, 1.0, [e * (1 + 1 / (2 * eff * eff)) for e in grid]))
    for sigma, q in [(1.0, 0.01), (0.3, 0.5), (2.0, 0.999), (1.0, 1e-4)]:
        cases.append(
            (
                PoissonSampledEvent(GaussianEvent(sigma), q),
                sigma,
                q,
                [e / 3 for e in grid] + [e * 3 for e in grid],
            )
        )
    for event, sigma, q, epsilons in cases:
        profiles = _profiles(event, h, 1e-15, "scan")  # type: ignore[arg-type]
        for eps in epsilons:
            lower = max(p.delta(eps) for p in profiles)
            assert lower <= _true_delta(sigma, q, eps), (event, eps)


@pytest.mark.parametrize(
    "event",
    [
        # 18 s on a busy worker: with --runslow (the next case has 10^6 steps too).
        pytest.param(
            RepeatedEvent(PoissonSampledEvent(GaussianEvent(0.8), 1e-2), 10**6),
            marks=pytest.mark.slow,
        ),
        ComposedEvent(
            (
                GaussianEvent(0.5),
                RepeatedEvent(PoissonSampledEvent(GaussianEvent(1.0), 1e-5), 10**6),
            )
        ),
        ComposedEvent(
            tuple(
                PoissonSampledEvent(GaussianEvent(1.0 + i / 10), 0.01 * (i + 1)) for i in range(10)
            )
        ),
    ],
)
def test_lower_heterogeneous_and_huge_below_dpkit_upper_bounds(event: object) -> None:
    """Attack: 10^6 subsampled steps, and products of many different factors (the mean
    bias over factors, the tilt chosen on one factor only): below the RDP accountant
    and the PLD accountant (where finite) at three deltas."""
    rdp = RDPAccountant().compose(event)  # type: ignore[arg-type]
    pld = PLDAccountant().compose(event)  # type: ignore[arg-type]
    for delta in (1e-3, 1e-6, 1e-10):
        lower = _lower(event, delta)
        assert lower <= rdp.get_epsilon(delta)
        assert lower <= pld.get_epsilon(delta)


def test_cli_prv_interval_subnormal_delta_is_a_clean_error() -> None:
    """Attack: the CLI front door of the lower bound with the smallest delta it accepts."""
    from typer.testing import CliRunner

    from dpkit.cli.main import app

    result = CliRunner().invoke(
        app,
        [
            "account",
            "dpsgd",
            "--accountant",
            "prv",
            "--noise-multiplier",
            "1.0",
            "--delta",
            "1e-320",
            "--sampling-rate",
            "0.01",
            "--steps",
            "10",
        ],
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


def test_cli_accountant_help_shows_the_interval_text() -> None:
    """Attack (cosmetic): the help string contains square brackets, Rich markup."""
    from typer.testing import CliRunner

    from dpkit.cli.main import app

    result = CliRunner().invoke(app, ["account", "dpsgd", "--help"], env={"COLUMNS": "200"})
    assert "certified interval [lower, upper]" in " ".join(result.output.split())


def test_wor_orders_one_ulp_around_integers_and_the_largest() -> None:
    """Attack: orders an ulp either side of an integer (theta ~ 0 or ~ 1 in Cor. 10's
    interpolation), orders barely above 1 (division by a - 1), and the last amplified
    orders around WOR_MAX_ORDER = 2048."""
    near = (
        1 + 1e-12,
        1.0000001,
        math.nextafter(2.0, 1),
        math.nextafter(2.0, 3),
        math.nextafter(3.0, 2),
        math.nextafter(3.0, 4),
        3 + 1e-9,
    )
    for sigma, n in [(1.0, 100), (3.0, 10)]:
        for order, eps in zip(near, _wor_curve(sigma, 1, n, near), strict=True):
            for a, b in ((1.0, 0.0), (0.0, 1.0), (0.5, -0.5)):
                assert _pair_renyi(order, sigma, 1 / n, a, b) <= eps
    top = (2047.5, math.nextafter(2048.0, 0), 2048.0, math.nextafter(2048.0, 3000))
    for order, eps in zip(top, _wor_curve(50.0, 1, 1000, top), strict=True):
        assert _pair_renyi(order, 50.0, 1e-3, 1.0, 0.0) <= eps


def test_gaussian_rdp_curve_equals_per_order_exact_rounding() -> None:
    """Attack: the vectorised Gaussian curve (one mul_up_many) against the per-order
    exact rounding, for sigmas whose factor 1 / (2 sigma^2) leaves the float path's
    range (1e-200, 1e200), subnormal-producing ones and ordinary ones, with the
    accountant's default orders and random orders."""
    from dpkit.accounting._math.rdp import gaussian_rdp, gaussian_rdp_curve
    from dpkit.accounting.guarantees import DEFAULT_ORDERS

    rng = random.Random(7)
    sigmas = [1e-200, 1e-160, 1e-150, 0.3, 1.0, 1.1, 3.0, 1e3, 1e150, 1e160, 1e200, 1e300]
    sigmas += [math.ldexp(rng.getrandbits(53), rng.randint(-60, 0)) for _ in range(30)]
    orders = sorted(
        {*DEFAULT_ORDERS, *(1 + rng.random() * 10 ** rng.randint(-12, 5) for _ in range(40))}
    )
    for sigma in sigmas:
        got = gaussian_rdp_curve(sigma, orders)
        assert got == tuple(gaussian_rdp(sigma, a) for a in orders), sigma
        assert got == tuple(fraction_up(Fraction(a) / (2 * Fraction(sigma) ** 2)) for a in orders)


def test_held_back_curve_overflow_to_infinity() -> None:
    """Attack: curves near the float maximum, summed once through count x curve and once
    through the integer totals: the sums overflow and must be inf, never wrap or drop."""
    orders = (2.0, 3.0)
    for s1, s2 in [(1e-154, 1.1e-154), (1e-154, 1e-154), (6e-155, 1.0)]:
        mixed = RDPAccountant(orders).compose(GaussianEvent(s1)).compose(GaussianEvent(s2))
        twice = RDPAccountant(orders).compose(GaussianEvent(s1), count=2)
        assert mixed.guarantee.epsilons == (math.inf, math.inf)
        assert twice.guarantee.epsilons == (math.inf, math.inf)


def test_wor_gaussian_astronomical_sigma_is_not_a_bare_error() -> None:
    """Attack: a noise multiplier so large that 1 / sigma^2 is below the smallest float
    (the Gaussian event itself is fine: epsilon 0)."""
    event = SampledWithoutReplacementEvent(GaussianEvent(1e200), 1, 100)
    try:
        eps = RDPAccountant((2.0, 3.0)).compose(event).get_epsilon(1e-5)
    except DPError:
        return
    assert eps >= 0.0


def test_wor_gaussian_huge_sigma_just_below_the_underflow() -> None:
    """Attack: sigmas around 1e150 (the integer table needs ~(k/2) log2(2 sigma^2) bits
    per entry: the work budget must cut it, and the curve must stay >= the pair's)."""
    orders = (2.0, 3.0, 64.0)
    for sigma in (1e100, 1e150, 6e161):
        curve = _wor_curve(sigma, 1, 100, orders)
        assert all(e >= 0.0 for e in curve)
        # The pair's divergence is ~ g^2 a / (2 sigma^2) (below the smallest float): it
        # suffices that no curve value is negative or NaN.
        assert all(not math.isnan(e) for e in curve)


def test_cli_prv_interval_lower_bound_is_for_the_trained_schedule() -> None:
    """Attack: the schedule is rounded to the safe side for the upper bound, which is the
    unsafe side for a lower bound: an Opacus user with --epochs 1 at q = 0.3 trains 3
    steps."""
    import json

    from typer.testing import CliRunner

    from dpkit.accounting.calibrate import dpsgd_epsilon_bounds
    from dpkit.cli.main import app

    args = ["account", "dpsgd", "--accountant", "prv", "--noise-multiplier", "1.0"]
    args += ["--delta", "1e-5", "--sampling-rate", "0.3", "--epochs", "1", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    lower = json.loads(result.output)["epsilon_lower"]
    opacus_steps = int(1 / 0.3)  # Opacus: steps = int(epochs / sample_rate)
    provable = dpsgd_epsilon_bounds(
        sampling_probability=0.3, noise_multiplier=1.0, steps=opacus_steps, delta=1e-5
    ).upper
    assert lower <= provable
