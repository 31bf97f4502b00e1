"""Exact Renyi DP of the Poisson-subsampled one-dimensional discrete Gaussian.

Setting: add/remove-one neighbours (or replace-with-special); an integer query of
sensitivity ``D`` (an integer) plus discrete Gaussian noise ``N_Z(0, sigma^2)``
(Canonne, Kamath & Steinke 2020, Def. 1), run on a Poisson sample of rate ``q``.

Reduction. For a sample ``S`` of the smaller dataset the outputs without and with the
record ``x`` are ``N_Z(f(S), sigma^2)`` and ``N_Z(f(S) + d, sigma^2)`` for an integer
``|d| <= D``. Since ``(P, Q) -> sum P^a Q^{1-a}`` is jointly convex for ``a > 1``, the
mixture over ``S`` costs at most the worst ``S``; translating by ``f(S)`` (and
reflecting ``k -> -k`` when ``d < 0``) that is the pair ``mu0 = N_Z(0, sigma^2)`` and
``m = (1 - q) mu0 + q mu0(. - d)`` for some ``d`` in ``1..D``. With
``r(k) = mu0(k - d) / mu0(k) = exp((2 k d - d^2) / (2 sigma^2))`` and
``u(k) = q (r(k) - 1)`` the two directions are

    removal   A_a = sum_k mu0(k) (1 + u(k))^a       = e^{(a-1) D_a(m || mu0)},
    addition  B_a = sum_k mu0(k) (1 + u(k))^{1-a}   = e^{(a-1) D_a(mu0 || m)},

and the RDP epsilon of order ``a`` is ``max over d of max(log A_a, log B_a) / (a - 1)``,
exactly (no inequality beyond joint convexity, which is attained by a dataset whose
samples all have the same ``f(S)``).

Cancellation-free form. ``sum_k mu0(k) u(k) = 0`` exactly (``mu0(. - d)`` sums to 1
because ``d`` is an integer), so with ``g = log(1 + u)`` and ``e = a`` (removal) or
``e = 1 - a`` (addition)::

    A_a - 1 or B_a - 1 = sum_k mu0(k) phi_e(g(k)),
    phi_e(g) = e^{e g} - 1 - e (e^g - 1) = sum_{j >= 2} (e^j - e) g^j / j!  >= 0

(convexity of ``t -> (1 + t)^e`` for ``e > 1`` or ``e < 0``). Every term is
non-negative, so the sum keeps its relative precision however small ``q`` is.

Certified evaluation (every step rounds towards a larger result):

* ``phi`` per term: the power series when ``M |g| <= 1/4`` (``M = max(|e|, 1)``),
  stopped after ``j = 24`` with the remainder bounded by ``|e^j - e| <= 2 M^j``:
  ``sum_{j > 24} 2 (M |g|)^j / j! <= 4 M^2 g^2 (1/4)^23 / 25!``; otherwise the closed
  form ``expm1(e g) - e expm1(g)`` (in log space when ``e g > 700``). Each float
  operation is allowed a relative error ``_ETA`` (50 ulps, as elsewhere in
  ``_math``); the error of ``g`` is carried through ``|d phi / d g| =
  |e (e^{e g} - e^g)|``; the total allowance is added to ``phi``.
* The window ``k_lo <= k <= k_hi`` is summed in log space with a per-term allowance.
* Tails, for ``t >= 1`` integer and ``c = 2 sigma^2``:
  ``sum_{j >= 0} exp(-(t + j)^2 / c) <= exp(-t^2 / c) / (1 - exp(-2 t / c))``
  (because ``(t + j)^2 >= t^2 + 2 t j``). Removal, ``k > k_hi >= a d``: ``phi <=
  (1 + u)^a <= r^a`` (``u >= 0``) and ``mu0(k) r(k)^a = e^{a (a-1) d^2 / c}
  mu0(k - a d)``; ``k < k_lo <= 0``: ``u in [-q, 0)``, ``phi <= -a u <= a q``.
  Addition, ``k > k_hi >= d``: ``phi <= -e u = (a - 1) u <= (a - 1) q r`` and
  ``mu0(k) r(k) = mu0(k - d)``; ``k < k_lo``: ``phi <= (1 + u)^{1-a} <= (1 - q)^{1-a}``.
  The window widens until the tails are below ``1e-13`` of the sum; they are added.
* The normaliser ``Z = sum_k exp(-k^2 / c)`` (>= 1) divides the sum: a lower bound
  on it is the window's partial sum rounded down.

Checked against 50-digit mpmath sums in ``tests/accounting/
test_rdp_discrete_gaussian_exact.py`` (never below, within 1e-9 relative). At
integer orders the removal direction equals the continuous Gaussian's (the integer
moments ``E_mu0[r^l] = e^{l (l-1) d^2 / c}`` agree: CKS20, proof of Prop. 5), which the
tests also check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dpkit.accounting._math.rounding import down, up

__all__ = [
    "MAX_EXACT_SENSITIVITY",
    "subsampled_discrete_gaussian_log_moments",
    "subsampled_discrete_gaussian_rdp_curve",
]

FloatArray = npt.NDArray[np.float64]

# Relative error allowed for each library function and arithmetic step (~50 ulps; the
# same assumption as dpkit.accounting._math.rdp).
_ETA = 1e-14
_ULP = 2.0**-52
# Power-series regime and its length (see the module docstring).
_TAU = 0.25
_SERIES_TERMS = 24
_SERIES_TAIL = 4.0 * _TAU ** (_SERIES_TERMS - 1) / math.factorial(_SERIES_TERMS + 1)
# Tails must be below this fraction of the window sum (they are added in any case).
_TAIL_FRACTION = 1e-13
# Largest window (number of integers) per order; beyond it the exact path gives up.
_MAX_WINDOW = 1 << 16
#: Largest integer sensitivity analysed exactly (the maximum over shifts 1..D is taken).
MAX_EXACT_SENSITIVITY = 8


def _log_g(q: float, k: FloatArray, d: int, two_s2: float) -> tuple[FloatArray, FloatArray]:
    """``g(k) = log(1 - q + q r(k))`` and an absolute error bound on it."""
    c = (2.0 * d * k - float(d * d)) / two_s2
    dc = 3.0 * _ULP * np.abs(c)  # two roundings of the (exact integer) numerator / c
    big = c > 30.0
    with np.errstate(over="ignore"):
        v = q * np.expm1(np.minimum(c, 30.0))
    small_g = np.log1p(v)
    # dg/dc = q e^c / (1 + v) = (v + q) / (1 + v), in (0, 1].
    small_err = _ETA * (np.abs(small_g) + np.abs(v) / (1.0 + v)) + dc * (np.abs(v) + q) / (1.0 + v)
    tail = (1.0 - q) / q * np.exp(-np.maximum(c, 30.0))
    large_g = c + math.log(q) + np.log1p(tail)
    large_err = _ETA * (np.abs(c) + abs(math.log(q)) + 1.0) + dc
    g: FloatArray = np.where(big, large_g, small_g)
    err: FloatArray = np.where(big, large_err, small_err) * 1.01
    return g, err


def _series_coefficients(e: float) -> list[float]:
    """``(e^j - e) / j!`` for ``j = 2..24``, accurate also for ``e`` near 1 or 0."""
    out = []
    log_abs = math.log(abs(e))
    for j in range(2, _SERIES_TERMS + 1):
        if e > 0.0:  # e (e^{j-1} - 1)
            value = e * math.expm1((j - 1) * log_abs)
        elif j % 2 == 0:  # |e|^j + |e|
            value = abs(e) ** j + abs(e)
        else:  # -|e|^j + |e| = -|e| (|e|^{j-1} - 1)
            value = -abs(e) * math.expm1((j - 1) * log_abs)
        out.append(value / math.factorial(j))
    return out


def _log_phi_up(e: float, g: FloatArray, g_err: FloatArray) -> FloatArray:
    """An upper bound on ``log phi_e(g*)`` for every ``g*`` within ``g_err`` of ``g``.

    ``phi_e`` is 0 at 0, decreasing below 0 and increasing above (``phi_e'(g) =
    e (e^{e g} - e^g)``), so it is largest at the end of the interval farther from 0:
    that float argument is evaluated, with an allowance for the evaluation only. Where
    the interval contains 0 (``|g| <= g_err``), ``|g*| <= x = 2 g_err`` and
    ``phi_e(g*) <= sum_j 2 M^j x^j / j! <= 2 M^2 x^2 e^{M x}``.
    """
    big_m = max(abs(e), 1.0)
    far = np.where(g >= 0.0, g + g_err, g - g_err)
    near_zero = np.abs(g) <= g_err
    series = big_m * np.abs(far) <= _TAU
    # Power series (entries outside the regime are clipped; their values are unused).
    gs = np.where(series, far, 0.0)
    total = np.zeros_like(gs)
    size = np.zeros_like(gs)
    power = gs * gs
    for coef in _series_coefficients(e):
        term = coef * power
        total += term
        size += np.abs(term)
        power = power * gs
    series_phi = total + _ETA * size + _SERIES_TAIL * big_m * big_m * (gs * gs)
    # Closed form expm1(E) - e expm1(g), E = e g, for E <= 700.
    gc = np.where(series, _TAU / big_m, far)
    big_e = e * gc
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        p = np.expm1(np.minimum(big_e, 700.0))
        qq = e * np.expm1(np.minimum(gc, 700.0))
        closed_err = (
            _ETA * (np.abs(p) + np.abs(qq) + 1.0 * np.abs(p - qq))
            + (np.abs(p) + 1.0) * (_ULP * np.abs(big_e)) * 1.01
        )
        closed_phi = np.maximum(p - qq, 0.0) + closed_err
        # E > 700: phi = e^E (1 - w), w = e^{-E} (1 - e + e e^g) in (0, 1); log1p(-w) is
        # used where w <= 1/2 and dropped (it is negative) elsewhere.
        shift = np.maximum(big_e, 700.0)
        w = (1.0 - e) * np.exp(-shift) + e * np.exp(gc - shift)
        w_low = w * (1.0 - _ETA * (2.0 + np.abs(big_e) + np.abs(gc)))
        use_w = (w_low > 0.0) & (w <= 0.5)
        log_huge = (
            big_e
            + np.log1p(-np.where(use_w, w_low, 0.0))
            + _ULP * np.abs(big_e)
            + _ETA * (np.abs(big_e) + 1.0)
        )
        phi = np.where(series, series_phi, closed_phi)
        x = 2.0 * g_err
        phi = np.where(near_zero, 2.0 * big_m * big_m * x * x * np.exp(big_m * x) * 1.01, phi)
        log_phi = np.log(phi)
    # phi == 0 exactly only at g == 0 with no error (k = d / 2): log phi stays -inf.
    finite = np.isfinite(log_phi)
    log_phi = np.where(finite, log_phi + _ETA * np.abs(np.where(finite, log_phi, 0.0)), log_phi)
    result: FloatArray = np.where(~series & ~near_zero & (big_e > 700.0), log_huge, log_phi)
    return result


def _log_sum_up(logs: FloatArray) -> float:
    """An upper bound on ``log(sum(exp(logs)))`` for already-rounded-up ``logs``."""
    top = float(np.max(logs))
    if top == -math.inf:
        return -math.inf
    total = math.fsum(np.exp(logs - top).tolist())
    # exp of each term within _ETA relative, fsum exact then one rounding.
    return up(top + math.log(total * (1.0 + 2.0 * _ETA)) + _ETA * (abs(top) + 1.0), 2)


def _log_geometric_tail(t: float, two_s2: float) -> float:
    """``log`` of ``exp(-t^2 / c) / (1 - exp(-2 t / c))`` for ``t >= 1``, rounded up."""
    value = -t * t / two_s2 - math.log(-math.expm1(-2.0 * t / two_s2))
    return value + _ETA * (abs(value) + 1.0)


def _log_normaliser_down(two_s2: float) -> float:
    """A lower bound on ``log Z``, ``Z = sum_k exp(-k^2 / c)``: a partial sum."""
    half = math.ceil(math.sqrt(two_s2 * 40.0)) + 1
    k = np.arange(-half, half + 1, dtype=np.float64)
    total = math.fsum(np.exp(-(k * k) / two_s2).tolist())
    return down(math.log(total * (1.0 - 4.0 * _ETA)) - _ETA, 2)


def _direction_log_excess(
    q: float, sigma: float, d: int, order: float, removal: bool
) -> float | None:
    """Upper bound on ``log(A_a - 1)`` (removal) or ``log(B_a - 1)`` (addition), times Z.

    That is ``log sum_k exp(-k^2 / c) phi(g(k))`` (not divided by Z); None when the
    window would exceed ``_MAX_WINDOW``.
    """
    # c = 2 sigma^2 rounded up for the geometric tails (both factors grow with c) and
    # down for the factor e^{a (a-1) d^2 / c}.
    c_up = up(2.0 * sigma * sigma, 2)
    c_down = down(2.0 * sigma * sigma, 2)
    e = order if removal else 1.0 - order
    spread = math.ceil(sigma * math.sqrt(2.0 * 40.0)) + 2
    centre = math.ceil(order * d) if removal else d
    while True:
        k_lo = -spread
        k_hi = centre + spread
        if k_hi - k_lo + 1 > _MAX_WINDOW:
            return None
        k = np.arange(k_lo, k_hi + 1, dtype=np.float64)
        g, g_err = _log_g(q, k, d, 2.0 * sigma * sigma)
        logs = -(k * k) / (2.0 * sigma * sigma)
        logs = logs + _ETA * np.abs(logs) + _log_phi_up(e, g, g_err)
        window = _log_sum_up(logs)
        t_lo = float(spread + 1)  # k <= k_lo - 1 = -(spread + 1)
        if removal:
            t_hi = float(k_hi + 1) - order * d  # >= 1 since k_hi >= ceil(a d) + 2
            log_hi = up(order * (order - 1.0) * d * d / c_down, 4) + _log_geometric_tail(t_hi, c_up)
            log_lo = math.log(order * q) + _log_geometric_tail(t_lo, c_up)
        else:
            t_hi = float(k_hi + 1 - d)
            log_hi = math.log((order - 1.0) * q) + _log_geometric_tail(t_hi, c_up)
            log_lo = (1.0 - order) * math.log1p(-q) + _log_geometric_tail(t_lo, c_up)
        log_hi = up(log_hi + _ETA * (abs(log_hi) + 1.0), 2)
        log_lo = up(log_lo + _ETA * (abs(log_lo) + 1.0), 2)
        tails = max(log_hi, log_lo) + math.log(2.0)
        if window > -math.inf and tails <= window + math.log(_TAIL_FRACTION):
            return up(window + math.log1p(math.exp(tails - window)) * 1.01, 2)
        spread *= 2


def subsampled_discrete_gaussian_log_moments(
    q: float, sigma: float, shift: int, order: float
) -> tuple[float, float] | None:
    """Upper bounds on ``(log A_a, log B_a)`` for the shift ``d = shift`` (docstring above).

    ``0 < q < 1``, ``sigma > 0``, ``shift >= 1`` an integer, ``order > 1``. None when the
    summation window would be too long (very large ``sigma`` or order).
    """
    log_z = _log_normaliser_down(down(2.0 * sigma * sigma, 2))
    out = []
    for removal in (True, False):
        excess = _direction_log_excess(q, sigma, shift, order, removal)
        if excess is None:
            return None
        log_ratio = up(excess - log_z, 2)
        # log1p(e^x), rounded up.
        value = (
            log_ratio + math.log1p(math.exp(-log_ratio))
            if log_ratio > 0.0
            else math.log1p(math.exp(log_ratio))
        )
        out.append(up(value * (1.0 + _ETA), 2))
    return out[0], out[1]


def subsampled_discrete_gaussian_rdp_curve(
    sampling_probability: float, sigma: float, sensitivity: int, orders: Sequence[float]
) -> tuple[float | None, ...]:
    """RDP epsilons at ``orders`` of the Poisson-subsampled 1-D discrete Gaussian.

    Add/remove-one neighbours, integer ``sensitivity`` ``D`` (at most
    ``MAX_EXACT_SENSITIVITY``), noise ``N_Z(0, sigma^2)``, rate ``q`` in (0, 1): the exact
    value ``max_{1 <= d <= D} max(log A_a, log B_a) / (a - 1)`` (module docstring),
    rounded up; None at an order whose summation window is too long.

    >>> curve = subsampled_discrete_gaussian_rdp_curve(0.01, 2.0, 1, (2.0, 8.0))
    >>> [round(v, 8) for v in curve]
    [2.84e-05, 0.00011576]
    """
    q = sampling_probability
    out: list[float | None] = []
    for a in orders:
        best: float | None = 0.0
        for d in range(1, sensitivity + 1):
            moments = subsampled_discrete_gaussian_log_moments(q, sigma, d, a)
            if moments is None:
                best = None
                break
            value = up(max(moments) / down(a - 1.0, 1), 2)
            assert best is not None
            best = max(best, value)
        out.append(best)
    return tuple(out)
