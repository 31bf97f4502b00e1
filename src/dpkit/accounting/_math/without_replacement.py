"""Renyi DP amplified by sampling without replacement, for any RDP curve (WBK19 Thm 9).

Setting: replace-one neighbours on datasets of a public size ``n``; a uniformly random
subset of ``m`` records (``gamma = m / n``) is drawn without replacement and a mechanism
``M`` runs on it. If ``M`` is ``(j, eps(j))``-RDP for the replace-one relation at every
integer ``j >= 2`` (and ``eps_inf``-DP, possibly ``eps_inf = inf``), then for every
integer ``a >= 2`` the subsampled mechanism is ``(a, log(T_a) / (a - 1))``-RDP with
(Wang, Balle & Kasiviswanathan 2019, Theorem 9)::

    T_a = 1 + gamma^2 C(a, 2) min(4 (e^{eps(2)} - 1), e^{eps(2)} min(2, (e^{eps_inf} - 1)^2))
            + sum_{j=3}^{a} gamma^j C(a, j) e^{(j-1) eps(j)} min(2, (e^{eps_inf} - 1)^j).

Fractional orders ``n < a < n + 1`` use the convexity of the cumulant generating
function ``(a - 1) eps(a)`` of the privacy loss (WBK19, Cor. 10): ``(a - 1) eps(a) <=
(1 - theta) log T_n + theta log T_{n+1}`` with ``theta = a - n`` (``log T_1 = 0``). The
result is capped by ``eps(a)`` itself (subsampling never hurts: joint quasi-convexity
of Renyi divergence); the accountant also takes the pointwise minimum with the tight
pure-DP curve at the amplified epsilon ``log(1 + gamma (e^{eps_inf} - 1))`` (Balle,
Barthe & Gaboardi 2018, Thm 9).

Source: Y.-X. Wang, B. Balle, S. Kasiviswanathan, "Subsampled Renyi differential
privacy and analytical moments accountant", AISTATS 2019 (arXiv 1808.00087), Thm 9
and Cor. 10. The formula was checked against autodp's implementation by the first
author (``rdp_acct.compose_subsampled_mechanism``, ``improved_bound_flag=False``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dpkit.accounting._math.rdp import _ETA, _LOG_SLACK, FloatArray, _log1p_exp
from dpkit.accounting._math.rounding import down, up

__all__ = ["WOR_MAX_ORDER", "without_replacement_rdp_curve"]

# Integer orders above this are not amplified (the curve of the mechanism is kept):
# the sums cost O(a) each.
WOR_MAX_ORDER = 2048

_LOG2 = math.log(2.0)
_LOG4 = math.log(4.0)


def _log_expm1(x: float) -> float:
    """``log(e^x - 1)`` for x > 0 (``-inf`` at 0, ``inf`` at inf)."""
    if x == 0.0:
        return -math.inf
    if math.isinf(x):
        return math.inf
    if x > 30.0:
        return x + math.log1p(-math.exp(-x))
    return math.log(math.expm1(x))


def _log_t(gamma: float, n: int, eps: FloatArray, log_cap_inf: float) -> float:
    """Upper bound on ``log T_n`` (module docstring); ``eps[j]`` is ``eps(j)`` for j >= 2.

    ``log_cap_inf`` is ``log(e^{eps_inf} - 1)`` (``inf`` when there is no pure bound).
    """
    from scipy import special  # deferred: SciPy is slow to import

    j = np.arange(2, n + 1, dtype=np.float64)
    eps_j = eps[2 : n + 1]
    if not np.all(np.isfinite(eps_j)):
        return math.inf
    log_binom = special.gammaln(n + 1.0) - special.gammaln(j + 1.0) - special.gammaln(n - j + 1.0)
    log_gamma_j = j * math.log(gamma)
    moment = (j - 1.0) * eps_j
    pure_factor = np.minimum(_LOG2, j * log_cap_inf)
    body = moment + pure_factor
    # The j = 2 term: min(4 (e^{eps(2)} - 1), e^{eps(2)} min(2, (e^{eps_inf} - 1)^2)).
    e2 = float(eps_j[0])
    body[0] = min(_LOG4 + _log_expm1(e2), e2 + min(_LOG2, 2.0 * log_cap_inf))
    logs: FloatArray = log_binom + log_gamma_j + body
    # Absolute error allowance of each log-term: a relative _ETA of the magnitudes
    # that were added (gammaln, products, logs), as in dpkit.accounting._math.rdp.
    size = (
        special.gammaln(n + 1.0)
        + np.abs(special.gammaln(j + 1.0))
        + np.abs(special.gammaln(n - j + 1.0))
        + np.abs(log_gamma_j)
        + np.abs(moment)
        + np.abs(body)
        + 1.0
    )
    top = float(np.max(logs))
    if top == -math.inf:
        return 0.0
    total = math.fsum(np.exp(logs - top).tolist())
    log_sum = top + math.log(total) + float(np.max(_ETA * size)) + _LOG_SLACK
    return _log1p_exp(log_sum)


def without_replacement_rdp_curve(
    sampling_fraction: float,
    inner_integer_curve: Sequence[float],
    inner_curve: Sequence[float],
    orders: Sequence[float],
    pure_epsilon: float | None = None,
) -> tuple[float, ...]:
    """RDP epsilons at ``orders`` of a mechanism run on a sample drawn without replacement.

    Replace-one neighbours; WBK19 Thm 9 with the CGF interpolation of Cor. 10 (module
    docstring), capped by the mechanism's own curve, rounded up.

    Parameters
    ----------
    sampling_fraction:
        ``gamma = m / n`` in (0, 1], rounded up by the caller.
    inner_integer_curve:
        ``eps(j)`` of the mechanism at ``j = 2, 3, ..., N`` (upper bounds); orders whose
        interpolation would need ``eps`` beyond ``N`` are not amplified.
    inner_curve:
        ``eps(a)`` of the mechanism at each of ``orders`` (the cap).
    orders:
        Renyi orders > 1.
    pure_epsilon:
        ``eps_inf`` of the mechanism, or None when it has no pure-DP bound.

    >>> curve = without_replacement_rdp_curve(0.01, [j / 2 for j in range(2, 12)],
    ...                                       [2.0, 4.0], (4.0, 8.0))
    >>> [round(v, 6) for v in curve]
    [0.001142, 0.002684]
    """
    gamma = sampling_fraction
    if gamma >= 1.0:
        return tuple(inner_curve)
    top = len(inner_integer_curve) + 1  # the largest integer order available
    eps = np.full(top + 1, np.inf)
    eps[2:] = np.asarray(inner_integer_curve, dtype=np.float64)
    log_cap_inf = math.inf if pure_epsilon is None else _log_expm1(pure_epsilon)
    cache: dict[int, float] = {1: 0.0}

    def log_t(n: int) -> float:
        if n not in cache:
            cache[n] = _log_t(gamma, n, eps, log_cap_inf)
        return cache[n]

    out = []
    for a, cap in zip(orders, inner_curve, strict=True):
        n = math.floor(a)
        theta = a - n
        needed = n + 1 if theta > 0 else n
        if needed > min(top, WOR_MAX_ORDER):
            out.append(cap)
            continue
        cgf = log_t(n)
        if theta > 0.0:  # Cor. 10: the CGF interpolated between n and n + 1, rounded up
            cgf = up((1.0 - theta) * cgf + theta * log_t(n + 1), 4)
        value = up(cgf / down(a - 1.0, 1), 2)  # divided by a - 1 rounded down
        out.append(min(cap, max(0.0, value)))
    return tuple(out)
