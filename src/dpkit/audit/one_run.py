"""One-run auditing (Steinke, Nasr & Jagielski, NeurIPS 2023).

``m`` canaries are each included independently with probability 1/2, the mechanism
runs *once*, every canary gets a score, and an auditor guesses "included" for the
``k_plus`` highest scores, "excluded" for the ``k_minus`` lowest and abstains on the
rest. If the mechanism is (epsilon, delta)-DP with respect to the inclusion vector
(one canary = one privacy unit), the number ``W`` of correct guesses among the
``r = k_plus + k_minus`` guesses satisfies (SNJ23, Corollary 5.4)::

    P[W >= v] <= f(v) + 2 m delta max_{i=1..v} (f(v - i) - f(v)) / i,
    f(u) = P[Binomial(r, e^eps / (e^eps + 1)) >= u].

:func:`p_value` evaluates the right-hand side and :func:`one_run_epsilon` the largest
epsilon it rejects at level ``1 - confidence``, by the bisection of SNJ23, Appendix D
(reimplemented here; checked against the paper's numbers in the tests). The result is
a lower bound on epsilon at confidence ``confidence``, never a certificate of privacy.
``k_plus`` and ``k_minus`` must be fixed before the run: trying several and keeping the
best voids the confidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit import noise
from dpkit.errors import DataError, InvalidParameter
from dpkit.random import Random, RandomLike, as_random

__all__ = [
    "OneRunResult",
    "audit_gaussian_sum_one_run",
    "guesses",
    "one_run_audit",
    "one_run_epsilon",
    "p_value",
]

_BISECTION_STEPS = 30  # SNJ23, Appendix D: 30 halvings of an interval of width <= 1


def _check_counts(m: object, r: object, v: object, owner: str) -> tuple[int, int, int]:
    m_ = check.check_count(m, "m", owner, minimum=1)
    r_ = check.check_count(r, "r", owner, minimum=0)
    v_ = check.check_count(v, "v", owner, minimum=0)
    if not v_ <= r_ <= m_:
        raise InvalidParameter(
            f"{owner}: need 0 <= v <= r <= m (correct guesses <= guesses <= canaries); "
            f"got m={m_}, r={r_}, v={v_}."
        )
    return m_, r_, v_


def _p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    from scipy import stats  # deferred: SciPy is slow to import

    q = 1.0 / (1.0 + math.exp(-epsilon))  # accuracy of epsilon-randomized response
    beta = float(stats.binom.sf(v - 1, r, q))  # P[Binomial(r, q) >= v]
    if v == 0 or delta == 0.0:
        return min(beta, 1.0)
    # s_i = P[v - i <= Binomial(r, q) < v], accumulated in the paper's order (i = 1..v);
    # alpha = max_i s_i / i, the worst slope of the tail (Corollary 5.4's delta term).
    pmf = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)
    slopes = np.cumsum(pmf) / np.arange(1, v + 1)
    alpha = max(0.0, float(np.max(slopes)))
    return min(beta + alpha * delta * 2 * m, 1.0)


def p_value(m: int, r: int, v: int, *, epsilon: float, delta: float) -> float:
    """The p-value of "the mechanism is (epsilon, delta)-DP" after ``v`` of ``r`` correct guesses.

    SNJ23, Corollary 5.4 (Appendix D's ``p_value_DP_audit``): an upper bound on
    ``P[W >= v]`` for any (epsilon, delta)-DP mechanism audited with ``m`` canaries
    and at most ``r`` guesses.

    Parameters
    ----------
    m, r, v:
        Canaries, guesses made, correct guesses; ``0 <= v <= r <= m``.
    epsilon:
        In [0, inf).
    delta:
        In [0, 1].
    """
    owner = "p_value"
    m, r, v = _check_counts(m, r, v, owner)
    epsilon = check.check_nonnegative(epsilon, "epsilon", owner)
    delta = check.check_probability(delta, "delta", owner)
    return _p_value(m, r, v, epsilon, delta)


def one_run_epsilon(m: int, r: int, v: int, *, delta: float, confidence: float = 0.95) -> float:
    """SNJ23's lower bound on epsilon from one run: ``v`` correct of ``r`` guesses, ``m`` canaries.

    The largest epsilon (to bisection accuracy, rounded to the conservative end) whose
    :func:`p_value` is below ``p = 1 - confidence``: SNJ23, Appendix D, ``get_eps_audit``.

    Returns
    -------
    float
        A lower bound on epsilon at confidence ``confidence``: if the mechanism is
        (epsilon, delta)-DP with respect to the canaries' inclusion, the value
        returned exceeds epsilon with probability at most ``1 - confidence``. Never a
        certificate of privacy.

    Examples
    --------
    >>> round(one_run_epsilon(100, 100, 75, delta=0.0, confidence=0.95), 6)
    0.702214
    """
    owner = "one_run_epsilon"
    m, r, v = _check_counts(m, r, v, owner)
    delta = check.check_delta(delta, owner)
    confidence = check.check_probability(
        confidence, "confidence", owner, open_low=True, open_high=True
    )
    p = 1.0 - confidence
    # Invariant: p_value(eps_min) < p <= p_value(eps_max) (the paper's).
    eps_min, eps_max = 0.0, 1.0
    while _p_value(m, r, v, eps_max, delta) < p:
        eps_max += 1.0
    for _ in range(_BISECTION_STEPS):
        eps = (eps_min + eps_max) / 2.0
        if _p_value(m, r, v, eps, delta) < p:
            eps_min = eps
        else:
            eps_max = eps
    return eps_min


def guesses(scores: npt.ArrayLike, *, k_plus: int, k_minus: int) -> npt.NDArray[np.int8]:
    """SNJ23, Algorithm 1, step 4: +1 for the ``k_plus`` highest scores, -1 for the
    ``k_minus`` lowest, 0 (abstain) for the rest. Ties are broken by position."""
    owner = "guesses"
    values = check.check_array(scores, "scores", owner, ndim=1)
    k_plus = check.check_count(k_plus, "k_plus", owner, minimum=0)
    k_minus = check.check_count(k_minus, "k_minus", owner, minimum=0)
    if k_plus + k_minus > values.size:
        raise InvalidParameter(
            f"{owner}: k_plus + k_minus = {k_plus + k_minus} exceeds the {values.size} canaries."
        )
    order = np.argsort(values, kind="stable")
    out = np.zeros(values.size, dtype=np.int8)
    out[order[: values.size - k_plus][:k_minus]] = -1
    if k_plus:
        out[order[values.size - k_plus :]] = 1
    return out


@dataclass(frozen=True, slots=True)
class OneRunResult:
    """The outcome of a one-run audit.

    Attributes
    ----------
    epsilon_lower_bound:
        SNJ23's lower bound on epsilon at ``confidence`` (never a privacy certificate).
    m, r, v:
        Canaries, guesses, correct guesses.
    k_plus, k_minus, delta, confidence:
        As used.
    """

    epsilon_lower_bound: float
    m: int
    r: int
    v: int
    k_plus: int
    k_minus: int
    delta: float
    confidence: float


def one_run_audit(
    included: npt.ArrayLike,
    scores: npt.ArrayLike,
    *,
    k_plus: int,
    k_minus: int,
    delta: float,
    confidence: float = 0.95,
) -> OneRunResult:
    """Score the guesses of one run against the true inclusions and bound epsilon.

    Parameters
    ----------
    included:
        Per canary, whether it was included (booleans, or +1/-1 as ``S_i`` in SNJ23).
        Each must have been included independently with probability exactly 1/2.
    scores:
        Per canary, the auditor's score (higher = looks included).
    k_plus, k_minus:
        Guess counts, fixed before the run.
    delta, confidence:
        The delta audited and the confidence of the bound.
    """
    owner = "one_run_audit"
    inclusion = np.asarray(included)
    if inclusion.dtype == np.bool_:
        signs = np.where(inclusion, 1, -1)
    else:
        signs = check.check_array(inclusion, "included", owner, integer=True, ndim=1)
        if not np.all(np.abs(signs) == 1):
            raise DataError(f"{owner}: 'included' must hold booleans or +1/-1.")
    values = check.check_array(scores, "scores", owner, ndim=1)
    if signs.shape != values.shape:
        raise DataError(f"{owner}: 'included' and 'scores' must have the same length.")
    t = guesses(values, k_plus=k_plus, k_minus=k_minus)
    r = int(np.count_nonzero(t))
    v = int(np.sum(np.maximum(0, t.astype(np.int64) * signs)))
    bound = one_run_epsilon(values.size, r, v, delta=delta, confidence=confidence)
    return OneRunResult(bound, values.size, r, v, k_plus, k_minus, delta, confidence)


def _random_signs(m: int, rng: Random) -> npt.NDArray[np.int64]:
    bits = rng.uint64(m) >> np.uint64(63)  # top bit of each word: a fair coin
    return np.where(bits == 1, 1, -1).astype(np.int64)


def audit_gaussian_sum_one_run(
    m: int,
    *,
    sigma: float,
    k_plus: int,
    k_minus: int,
    delta: float,
    confidence: float = 0.95,
    dimension: int | None = None,
    rng: RandomLike | None = None,
) -> OneRunResult:
    """White-box one-run audit of the Gaussian mechanism on a sum of canaries.

    Canary ``i`` is a unit vector ``c_i``; the mechanism releases
    ``y = sum_{i included} c_i + N(0, sigma^2 I)`` (L2 sensitivity 1 per canary, so it
    is exactly as private as the Gaussian mechanism with noise ``sigma``); the score of
    canary ``i`` is ``<c_i, y>``. With ``dimension=None`` the canaries are the
    standard basis of R^m (orthogonal: scores are independent); otherwise they are
    independent uniform directions in R^dimension (they interfere, as gradients do).
    The noise is dpkit's exact Gaussian sampler.

    Returns
    -------
    OneRunResult
        SNJ23's lower bound; compare it with the true epsilon(delta) of the Gaussian
        mechanism (e.g. ``dpkit.accounting._math.gaussian.gaussian_epsilon``).
    """
    owner = "audit_gaussian_sum_one_run"
    m = check.check_count(m, "m", owner)
    sigma = check.check_positive(sigma, "sigma", owner)
    random = as_random(rng)
    signs = _random_signs(m, random)
    if dimension is None:
        # y_i = [canary i included] + sigma Z_i; the score of canary i is y_i.
        scores = noise.gaussian((signs > 0).astype(np.float64), sigma=sigma, rng=random)
    else:
        d = check.check_count(dimension, "dimension", owner)
        directions = np.asarray(noise.gaussian(np.zeros((m, d)), sigma=1.0, rng=random))
        canaries = directions / np.linalg.norm(directions, axis=1, keepdims=True)
        total = canaries[signs > 0].sum(axis=0)
        released = np.asarray(noise.gaussian(total, sigma=sigma, rng=random))
        scores = canaries @ released
    return one_run_audit(
        signs,
        np.asarray(scores),
        k_plus=k_plus,
        k_minus=k_minus,
        delta=delta,
        confidence=confidence,
    )
