"""Expected losses of the textbook noises, for comparison with a designed noise.

Each function returns ``E[c(X)]`` for ``c = |x|`` (``"l1"``) or ``x^2`` (``"l2"``) of the
noise that the named mechanism adds to a query of sensitivity ``sensitivity`` at the
given target, in closed form:

* Laplace, scale ``Δ/ε`` (ε-DP, so (ε, δ)-DP for every δ): ``b`` and ``2 b^2``.
* Gaussian, the analytic calibration of Balle & Wang (2018) (dpkit's
  :class:`~dpkit.mechanisms.Gaussian`): ``σ sqrt(2/π)`` and ``σ^2``.
* Truncated Laplace (Geng, Ding, Guo & Kumar 2020; ``λ = Δ/ε``,
  ``A = λ ln(1 + (e^ε - 1)/(2δ))``, exactly (ε, δ)-DP): the moments of an
  exponential truncated to ``[0, A]``.
* Staircase (Geng & Viswanath 2016), the optimal ε-DP noise for these losses: the
  expected loss of the staircase density with parameter ``γ``, minimised over ``γ``.
"""

from __future__ import annotations

import math

from dpkit import _validation as check
from dpkit.errors import InvalidParameter

__all__ = ["gaussian_loss", "laplace_loss", "staircase_loss", "truncated_laplace_loss"]


def _loss_name(loss: str, owner: str) -> str:
    if loss not in ("l1", "l2"):
        raise InvalidParameter.for_parameter("loss", owner, "'l1' or 'l2'", loss)
    return loss


def laplace_loss(*, epsilon: float, sensitivity: float = 1.0, loss: str = "l1") -> float:
    """``E|X|`` or ``E X^2`` of Laplace noise of scale ``sensitivity / epsilon``."""
    owner = "laplace_loss"
    scale = check.check_positive(sensitivity, "sensitivity", owner) / check.check_positive(
        epsilon, "epsilon", owner
    )
    return scale if _loss_name(loss, owner) == "l1" else 2.0 * scale**2


def gaussian_loss(
    *, epsilon: float, delta: float, sensitivity: float = 1.0, loss: str = "l1"
) -> float:
    """``E|X|`` or ``E X^2`` of analytic-Gaussian noise (Balle & Wang 2018)."""
    from dpkit.mechanisms import Gaussian

    owner = "gaussian_loss"
    name = _loss_name(loss, owner)
    sigma = Gaussian.calibrate(epsilon=epsilon, delta=delta, sensitivity=sensitivity).sigma
    return sigma * math.sqrt(2.0 / math.pi) if name == "l1" else sigma**2


def truncated_laplace_loss(
    *, epsilon: float, delta: float, sensitivity: float = 1.0, loss: str = "l1"
) -> float:
    """``E|X|`` or ``E X^2`` of truncated Laplace noise at its tight calibration."""
    owner = "truncated_laplace_loss"
    name = _loss_name(loss, owner)
    eps = check.check_positive(epsilon, "epsilon", owner)
    dlt = check.check_delta(delta, owner, allow_zero=False)
    scale = check.check_positive(sensitivity, "sensitivity", owner) / eps
    bound = scale * math.log1p(math.expm1(eps) / (2.0 * dlt))
    # |X| is an exponential of mean `scale` truncated to [0, bound]
    ratio = math.exp(-bound / scale) / -math.expm1(-bound / scale)
    if name == "l1":
        return scale - bound * ratio
    return 2.0 * scale**2 - (bound**2 + 2.0 * scale * bound) * ratio


def _staircase(gamma: float, b: float, sensitivity: float, power: int) -> float:
    # Density a b^k on |x| in [k, k + gamma) Δ and a b^(k+1) on [k + gamma, k + 1) Δ,
    # a = (1 - b) / (2 Δ (gamma + (1 - gamma) b)); E|X|^power summed in closed form
    # over k with the series sum b^k k^m (m <= power + 1).
    a = (1.0 - b) / (2.0 * sensitivity * (gamma + (1.0 - gamma) * b))
    s = [
        1 / (1 - b),
        b / (1 - b) ** 2,
        b * (1 + b) / (1 - b) ** 3,
        b * (1 + 4 * b + b * b) / (1 - b) ** 4,
    ]

    def moment(lo: float, hi: float) -> float:
        # sum_k b^k ((k + hi)^(p+1) - (k + lo)^(p+1)) / (p + 1), expanded in powers of k
        q = power + 1
        total = 0.0
        for m in range(q + 1):
            total += math.comb(q, m) * (hi ** (q - m) - lo ** (q - m)) * s[m]
        return total / q

    scale = sensitivity ** (power + 1)
    return 2.0 * a * scale * (moment(0.0, gamma) + b * moment(gamma, 1.0))


def staircase_loss(*, epsilon: float, sensitivity: float = 1.0, loss: str = "l1") -> float:
    """``E|X|`` or ``E X^2`` of the optimal staircase noise (ε-DP, Geng & Viswanath 2016)."""
    owner = "staircase_loss"
    power = 1 if _loss_name(loss, owner) == "l1" else 2
    eps = check.check_positive(epsilon, "epsilon", owner)
    sens = check.check_positive(sensitivity, "sensitivity", owner)
    b = math.exp(-eps)
    # golden-section search over gamma in [0, 1] (the loss is unimodal in gamma)
    lo, hi = 0.0, 1.0
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(100):
        x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if _staircase(x1, b, sens, power) < _staircase(x2, b, sens, power):
            hi = x2
        else:
            lo = x1
    return _staircase((lo + hi) / 2, b, sens, power)
