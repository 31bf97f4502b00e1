"""The law of the number of draws K in random stopping (Papernot & Steinke 2022), sampled exactly.

Four laws, each given by its mean ``E[K]`` (and, for the negative binomial, a shape),
as :class:`~dpkit.accounting.events.RepeatAndSelectEvent` describes them:

* ``"geometric"`` (shape 1): ``P[K = k] = gamma (1 - gamma)^(k-1)`` on {1, 2, ...},
  ``E[K] = 1/gamma`` (LT19 Algorithm 2);
* ``"negative_binomial"`` with shape ``eta > 0``: the truncated negative binomial
  ``P[K = k] = binom(k + eta - 1, k) (1 - gamma)^k / (gamma^-eta - 1)`` on {1, 2, ...}
  (PS22 Definition 1), ``E[K] = eta (1 - gamma) / (gamma (1 - gamma^eta))``;
* ``"logarithmic"`` (shape 0): ``P[K = k] = (1 - gamma)^k / (k ln(1/gamma))`` on
  {1, 2, ...}, ``E[K] = (1/gamma - 1) / ln(1/gamma)``;
* ``"poisson"`` (shape inf): ``P[K = k] = e^-mu mu^k / k!`` on {0, 1, ...}, ``E[K] = mu``.

Sampling is exact. The geometric law is a run of exact Bernoulli(gamma) coins
(rational gamma). The others are sampled by inversion of the distribution function
against a uniform whose bits are drawn lazily from a :class:`dpkit.random.Random`, with
every quantity held as a certified interval: the unnormalised weights in fixed point
with directed rounding (their ratios ``(1 - gamma)(k + eta)/(k + 1)`` and ``mu/(k + 1)``
are exact rationals, the parameters being floats), the normalising constant
(``gamma^-eta - 1``, ``ln(1/gamma)`` or ``e^mu``) from :mod:`decimal`'s correctly
rounded ``ln`` and ``exp`` with a stated error bound. A comparison the intervals cannot
decide doubles the precision and draws more bits of the uniform: no decision is ever
made by rounding, so ``P[K = k]`` is exactly the law's.

Which ``gamma`` is sampled. The event carries the requested mean, and the RDP
accountant evaluates PS22 Thm 2 with a ``gamma`` no larger than the true parameter of
that mean (:func:`dpkit.accounting._math.selection.tnb_gamma`). The truncated negative
binomial and logarithmic samplers use a float ``gamma_s`` at least as large: it is
stepped up from the accountant's by relative steps of 1e-7 until its mean, evaluated in
floating point (relative error below 1e-14), is at most ``mean (1 - 1e-10)``. So the
sampled law's mean is at most the requested one (and below it by a relative (1 + eta) 1e-7 at
most), and its Theorem 2 bound -- increasing in ``E[K]`` and in ``log(1/gamma)`` -- is at
most the accountant's; Corollary 3's pure bound ``(2 + eta) epsilon`` does not depend on
``gamma``. The geometric law samples its stop probability (``1/mean`` as an exact
rational, when given by its mean) and Poisson ``mu = mean``, both exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal
from fractions import Fraction

from dpkit.accounting._math.selection import tnb_gamma, tnb_mean
from dpkit.noise.rational import bernoulli
from dpkit.random import Random

__all__ = ["LAWS", "MIN_SHAPE", "Repetitions"]

#: The laws of K, by name.
LAWS = ("geometric", "negative_binomial", "logarithmic", "poisson")
#: Smallest positive shape sampled (a smaller one is the logarithmic law, shape 0, up
#: to a pure-DP difference of at most 1e-9 epsilon).
MIN_SHAPE = 1e-9
#: Relative margin below the requested mean for the sampled truncated negative binomial.
_MEAN_MARGIN = 1e-10
#: Relative step of the sampled gamma above the accountant's.
_GAMMA_STEP = 1e-7
#: First fixed-point precision (bits) of the inversion; doubled when undecided.
_FIRST_BITS = 64


@dataclass(frozen=True)
class Repetitions:
    """A law of K (internal): ``name``, the event's ``mean`` and ``shape``, what is sampled.

    ``gamma``: the geometric stop probability (a float no larger than the exact one,
    ``stop``) or the sampled truncated-negative-binomial parameter (1.0: K = 1 surely);
    None for Poisson, whose ``mean`` is sampled exactly.
    """

    name: str
    mean: float
    shape: float
    gamma: float | None
    stop: Fraction | None = None

    @classmethod
    def geometric(cls, stop: Fraction, mean: float) -> Repetitions:
        """Stop probability ``stop`` (exact), event mean ``mean >= 1/stop``."""
        gamma = float(stop)
        if Fraction(gamma) > stop:
            gamma = math.nextafter(gamma, 0.0)
        return cls("geometric", mean, 1.0, gamma, stop)

    @classmethod
    def of(cls, name: str, mean: float, shape: float) -> Repetitions:
        """The law ``name`` with E[K] = ``mean`` (``mean >= 1`` finite, validated by the caller)."""
        if name == "poisson":
            return cls(name, mean, math.inf, None)
        if shape == 1.0:
            return cls.geometric(Fraction(1) / Fraction(mean), mean)
        return cls(name, mean, shape, _sampling_gamma(shape, mean))

    def sample(self, rng: Random) -> int:
        """One exact draw of K."""
        if self.gamma is None:
            return _poisson(Fraction(self.mean), rng)
        if self.stop is not None:
            k = 1
            while not bernoulli(self.stop, rng=rng):
                k += 1
            return k
        if self.gamma >= 1.0:
            return 1
        return _truncated_negative_binomial(self.shape, self.gamma, rng)


def _sampling_gamma(shape: float, mean: float) -> float:
    """A float gamma >= the accountant's, whose law has mean <= ``mean`` (module docstring)."""
    if mean == 1.0:
        return 1.0
    gamma = tnb_gamma(shape, mean)
    while True:
        gamma = min(1.0, gamma * (1.0 + _GAMMA_STEP))
        if gamma >= 1.0 or tnb_mean(gamma, shape) <= mean * (1.0 - _MEAN_MARGIN):
            return gamma


# --- exact inversion -------------------------------------------------------------------


def _inversion(
    start: int,
    ratio: Callable[[int], tuple[int, int]],
    total: Callable[[int], tuple[Fraction, Fraction]],
    rng: Random,
) -> int:
    """The smallest ``k >= start`` with ``U N < v_start + ... + v_k``, U uniform on [0, 1).

    ``v_start = 1``, ``v_(k+1) = v_k a / b`` with ``(a, b) = ratio(k)`` (positive ints),
    ``N = sum_k v_k``, bounded below and above by ``total(bits)`` (within a relative
    ~2^-bits). Then ``P[result = k] = v_k / N`` exactly.
    """
    bits = _FIRST_BITS
    u = rng.getrandbits(bits)  # U in [u, u + 1) / 2^bits
    while True:
        low, high = total(bits)
        n_lo = math.floor(low * (1 << bits))  # N 2^bits, rounded outwards
        n_hi = math.ceil(high * (1 << bits))
        v_lo = v_hi = 1 << bits  # v_k 2^bits, rounded down / up
        s_lo = s_hi = 0  # (v_start + ... + v_k) 2^bits, down / up
        above = (u + 1) * n_hi  # U N < above / 2^(2 bits)
        below = u * n_lo  # U N >= below / 2^(2 bits)
        k = start
        while True:
            s_lo += v_lo
            s_hi += v_hi
            # U N against S_k, both times 2^(2 bits).
            if above <= s_lo << bits:
                return k  # U N < S_k: K = k
            if below < s_hi << bits:
                break  # undecided at this precision
            a, b = ratio(k)  # U N >= S_k: K > k
            v_lo = v_lo * a // b
            v_hi = -(-v_hi * a // b)
            k += 1
        # Refine: more bits of the same U, twice the precision.
        u = (u << bits) | rng.getrandbits(bits)
        bits *= 2


def _context(bits: int, extra: int = 0) -> tuple[Context, Fraction]:
    """A decimal context a little finer than 2^-bits, and its relative rounding unit."""
    digits = int(bits * 0.30103) + 20 + extra
    return Context(prec=digits, Emax=MAX_EMAX, Emin=MIN_EMIN), Fraction(1, 10 ** (digits - 1))


def _exp_bounds(y: Fraction, context: Context, unit: Fraction) -> tuple[Fraction, Fraction]:
    """Bounds on ``e^y`` for an exact rational ``y >= 0``.

    ``y`` is rounded to the context (relative error ``unit/2``, so absolute
    ``y unit / 2``) and ``exp`` is correctly rounded (relative ``unit/2``): ``e^y`` is
    within a factor ``exp(+-(y + 1) unit)``, inside ``1 +- 2 (y + 1) unit`` while
    ``(y + 1) unit <= 1/2``.
    """
    rounded = context.divide(Decimal(y.numerator), Decimal(y.denominator))
    value = Fraction(context.exp(rounded))
    spread = 2 * (y + 1) * unit
    assert spread <= Fraction(1, 2)
    return value * (1 - spread), value * (1 + spread)


def _truncated_negative_binomial(shape: float, gamma: float, rng: Random) -> int:
    """K on {1, 2, ...}, ``P[K = k]`` proportional to ``binom(k+eta-1, k) q^k``, or to ``q^k/k``."""
    eta = Fraction(shape)
    q = 1 - Fraction(gamma)
    en, ed = eta.numerator, eta.denominator
    qn, qd = q.numerator, q.denominator

    def ratio(k: int) -> tuple[int, int]:
        # v_(k+1) / v_k = q (k + eta) / (k + 1); eta = 0 gives the logarithmic q k / (k + 1).
        return qn * (k * ed + en), qd * (k + 1) * ed

    def total(bits: int) -> tuple[Fraction, Fraction]:
        # v_1 = 1 stands for w_1 = eta q (eta > 0) or q (eta = 0): N = Z / w_1, with
        # Z = gamma^-eta - 1 = e^(eta ln(1/gamma)) - 1, or Z = ln(1/gamma) for eta = 0.
        # ln(1/gamma) >= 1.1e-16 (gamma a float < 1) and eta >= 1e-9: y = eta ln(1/gamma)
        # >= 1e-25, and e^y - 1 >= y loses at most log10(1/y) < 26 digits to cancellation.
        y_float = shape * -math.log(gamma)
        if 0.0 < y_float < 1.0:
            extra = math.ceil(-math.log10(y_float)) + 5
        else:  # e^y's error grows like y: one more digit per factor 10 of y
            extra = len(str(math.ceil(y_float))) + 5
        context, unit = _context(bits, extra)
        ell = -Fraction(context.ln(Decimal(gamma)))  # Decimal(float) is exact; ln rounded
        ell_lo, ell_hi = ell * (1 - unit), ell * (1 + unit)
        if eta == 0:
            return ell_lo / q, ell_hi / q
        z_lo = _exp_bounds(eta * ell_lo, context, unit)[0] - 1
        z_hi = _exp_bounds(eta * ell_hi, context, unit)[1] - 1
        return z_lo / (eta * q), z_hi / (eta * q)

    return _inversion(1, ratio, total, rng)


def _poisson(mu: Fraction, rng: Random) -> int:
    """K on {0, 1, ...} with ``P[K = k] = e^-mu mu^k / k!`` (``mu`` a positive rational)."""
    mn, md = mu.numerator, mu.denominator

    def ratio(k: int) -> tuple[int, int]:
        return mn, md * (k + 1)

    def total(bits: int) -> tuple[Fraction, Fraction]:
        context, unit = _context(bits, len(str(math.ceil(mu))) + 2)
        return _exp_bounds(mu, context, unit)

    return _inversion(0, ratio, total, rng)
