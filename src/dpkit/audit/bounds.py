"""Exact binomial confidence bounds and the hypothesis-testing lower bound on epsilon.

Everything here is a *lower bound on epsilon at a stated confidence*: evidence that a
mechanism is less private than claimed when it exceeds the claim, never a
certificate that it is private.

Sources: Clopper & Pearson (1934) one-sided exact intervals, in the Beta-quantile form
used by DP-Sniper's ``binomial_cdf.py`` (Bichsel et al., IEEE S&P 2021); the
hypothesis-testing characterisation of (epsilon, delta)-DP (Kairouz, Oh & Viswanath,
ICML 2015; Wasserman & Zhou 2010): every test with false-positive rate FPR and
false-negative rate FNR satisfies ``FPR + e^eps FNR >= 1 - delta`` and
``FNR + e^eps FPR >= 1 - delta``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.errors import InvalidParameter

__all__ = [
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "epsilon_from_rates",
    "epsilon_lower_bound",
]

FloatArray = npt.NDArray[np.float64]


def _counts(successes: npt.ArrayLike, trials: npt.ArrayLike, owner: str) -> tuple[FloatArray, ...]:
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if not (np.all(np.isfinite(k)) and np.all(np.isfinite(n))):
        raise InvalidParameter(f"{owner}: counts must be finite.")
    if np.any(k != np.round(k)) or np.any(n != np.round(n)):
        raise InvalidParameter(f"{owner}: counts must be whole numbers.")
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise InvalidParameter(f"{owner}: need 0 <= successes <= trials and trials >= 1.")
    return k, n


def _level(level: float, owner: str) -> float:
    return check.check_probability(level, "level", owner, open_low=True, open_high=True)


def clopper_pearson_upper(
    successes: npt.ArrayLike, trials: npt.ArrayLike, level: float
) -> FloatArray | float:
    """One-sided Clopper-Pearson upper bound on a binomial proportion.

    With ``k`` successes in ``n`` trials, returns ``u`` with ``P(p <= u) >= 1 - level``
    over the draw of ``k``, for every true ``p``: the ``1 - level`` quantile of
    Beta(k + 1, n - k), and 1 when ``k = n``. Exact (never anti-conservative).

    Parameters
    ----------
    successes, trials:
        Counts (scalars or arrays of the same shape), ``0 <= successes <= trials``.
    level:
        The error probability of this one-sided bound, in (0, 1).
    """
    from scipy import stats  # deferred: SciPy is slow to import

    owner = "clopper_pearson_upper"
    level = _level(level, owner)
    k, n = _counts(successes, trials, owner)
    with np.errstate(invalid="ignore"):
        bound = stats.beta.ppf(1.0 - level, k + 1.0, np.maximum(n - k, 1.0))
    out = np.where(k >= n, 1.0, bound).astype(np.float64)
    return float(out) if out.ndim == 0 else out


def clopper_pearson_lower(
    successes: npt.ArrayLike, trials: npt.ArrayLike, level: float
) -> FloatArray | float:
    """One-sided Clopper-Pearson lower bound: the ``level`` quantile of Beta(k, n - k + 1).

    ``P(p >= lower) >= 1 - level`` for every true ``p``; 0 when ``k = 0``.
    """
    from scipy import stats  # deferred: SciPy is slow to import

    owner = "clopper_pearson_lower"
    level = _level(level, owner)
    k, n = _counts(successes, trials, owner)
    with np.errstate(invalid="ignore"):
        bound = stats.beta.ppf(level, np.maximum(k, 1.0), n - k + 1.0)
    out = np.where(k <= 0, 0.0, bound).astype(np.float64)
    return float(out) if out.ndim == 0 else out


def epsilon_from_rates(
    fpr: npt.ArrayLike, fnr: npt.ArrayLike, delta: float = 0.0
) -> FloatArray | float:
    """The smallest epsilon consistent with a test's error rates at ``delta``.

    ``max(ln((1 - delta - FPR) / FNR), ln((1 - delta - FNR) / FPR), 0)``: an
    (epsilon, delta)-DP mechanism admits no test with these rates for a smaller
    epsilon (Kairouz, Oh & Viswanath 2015). Given *upper* bounds on the two rates
    it gives a lower bound on epsilon; ``inf`` when a rate is 0 and the other
    leaves room (only a proven zero, never an estimate, should be passed as 0).
    """
    delta = check.check_delta(delta, "epsilon_from_rates")
    a = np.asarray(fpr, dtype=np.float64)
    b = np.asarray(fnr, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.log(np.maximum(1.0 - delta - a, 0.0)) - np.log(b)
        second = np.log(np.maximum(1.0 - delta - b, 0.0)) - np.log(a)
    first = np.where(np.isnan(first), -np.inf, first)
    second = np.where(np.isnan(second), -np.inf, second)
    out = np.maximum(np.maximum(first, second), 0.0).astype(np.float64)
    return float(out) if out.ndim == 0 else out


def epsilon_lower_bound(
    false_positives: npt.ArrayLike,
    negatives: npt.ArrayLike,
    false_negatives: npt.ArrayLike,
    positives: npt.ArrayLike,
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
) -> FloatArray | float:
    """A lower bound on epsilon at ``confidence`` from one fixed test's error counts.

    The test (a region ``S`` of outputs, fixed *before* these samples were drawn)
    says "positive" on ``S``. ``false_positives`` of ``negatives`` draws from the
    negative input landed in ``S``; ``false_negatives`` of ``positives`` draws from
    the positive input did not. Each rate is replaced by its one-sided
    Clopper-Pearson upper bound at level ``(1 - confidence) / 2`` (a union bound,
    so both hold together with probability at least ``confidence``), and
    :func:`epsilon_from_rates` turns them into epsilon.

    Returns
    -------
    float or numpy.ndarray
        A lower bound on epsilon at confidence ``confidence``: if the mechanism is
        (epsilon, delta)-DP, the returned value exceeds epsilon with probability at
        most ``1 - confidence``. Never a certificate of privacy.
    """
    confidence = check.check_probability(
        confidence, "confidence", "epsilon_lower_bound", open_low=True, open_high=True
    )
    level = (1.0 - confidence) / 2.0
    fpr = clopper_pearson_upper(false_positives, negatives, level)
    fnr = clopper_pearson_upper(false_negatives, positives, level)
    return epsilon_from_rates(fpr, fnr, delta)
