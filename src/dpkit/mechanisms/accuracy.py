"""Accuracy to noise scale and back, with OpenDP's definitions.

For additive noise ``X`` of a given kind and scale, the *accuracy at level alpha* is a
distance ``a`` such that the release ``q + X`` is farther than ``a`` from ``q`` with
probability at most ``alpha``. The definitions are those of OpenDP's ``accuracy``
module (``laplacian_scale_to_accuracy``, ``discrete_laplacian_scale_to_accuracy``,
``gaussian_scale_to_accuracy``, ``discrete_gaussian_scale_to_accuracy`` and their
inverses ``accuracy_to_*_scale``):

==================== ===================================== ============================
kind                 alpha                                  scale
==================== ===================================== ============================
``laplace``          ``P[|X| > a] = exp(-a / b)``           Laplace scale ``b``
``gaussian``         ``P[|X| > a] = erfc(a / (sigma sqrt 2))`` standard deviation sigma
``discrete_laplace`` ``P[|X| >= a]``, ``= 2 r^a / (1 + r)``  ``r = exp(-1/b)``, integer noise
                     at integer ``a``
``discrete_gaussian`` ``P[|X| >= a]``                       sigma of ``N_Z(0, sigma^2)``
==================== ===================================== ============================

Every answer is certified in the safe direction: an accuracy returned by
:func:`scale_to_accuracy` is never below the exact one (its tail probability is at most
``alpha``), and a scale returned by :func:`accuracy_to_scale` is never above the exact
one (the noise it gives meets the accuracy at level ``alpha``).
"""

from __future__ import annotations

import math
from typing import Literal

from dpkit._validation import check_positive, check_probability
from dpkit.accounting._math.rounding import down, up
from dpkit.errors import InvalidParameter
from dpkit.mechanisms._tails import discrete_gaussian_tail_upper

__all__ = ["NoiseKind", "accuracy_to_scale", "scale_to_accuracy"]

NoiseKind = Literal["laplace", "discrete_laplace", "gaussian", "discrete_gaussian"]
_KINDS = ("laplace", "discrete_laplace", "gaussian", "discrete_gaussian")

# Relative allowance for the rounding of log, log1p, expm1 and erfcinv (a few ulps each;
# SciPy's erfcinv is accurate to ~1e-15 relative on (1e-300, 1)).
_REL = 1e-12


def _check(kind: object, alpha: object, owner: str) -> tuple[str, float]:
    if kind not in _KINDS:
        raise InvalidParameter.for_parameter("kind", owner, f"one of {_KINDS!r}", kind)
    alpha = check_probability(alpha, "alpha", owner, open_low=True, open_high=True)
    return str(kind), alpha


def _discrete_laplace_accuracy(scale: float, alpha: float) -> float:
    # OpenDP: a = b ln(2 / (alpha (e^{1/b} + 1))) + 1, written without cancellation:
    # a = b (-ln alpha - log1p(expm1(-1/b) / 2)). At integer a, P[|X| >= a] = alpha.
    return scale * (-math.log(alpha) - math.log1p(math.expm1(-1.0 / scale) / 2.0))


def _discrete_gaussian_accuracy(sigma: float, alpha: float) -> int:
    # Smallest integer a >= 1 with P[|X| >= a] = 2 P[X >= a] <= alpha (upper bound).
    from scipy import special  # deferred: SciPy is slow to import

    a = max(1, math.floor(sigma * math.sqrt(2.0) * float(special.erfcinv(alpha))) - 2)
    while a > 1 and 2.0 * discrete_gaussian_tail_upper(a - 1, sigma) <= alpha:
        a -= 1
    while 2.0 * discrete_gaussian_tail_upper(a, sigma) > alpha:
        a += 1
    return a


def scale_to_accuracy(kind: NoiseKind, scale: float, alpha: float) -> float:
    """The accuracy at level ``alpha`` of noise of ``kind`` with ``scale``, rounded up.

    Same definitions as OpenDP's ``*_scale_to_accuracy`` (see the module docstring):
    the returned ``a`` satisfies ``P[|X| > a] <= alpha`` (``laplace``, ``gaussian``) or
    ``P[|X| >= a] <= alpha`` (``discrete_laplace``, ``discrete_gaussian``; for the
    discrete Gaussian ``a`` is the smallest such integer, from a certified upper bound
    on the tail, as OpenDP's).

    Parameters
    ----------
    kind:
        ``"laplace"``, ``"discrete_laplace"``, ``"gaussian"`` or ``"discrete_gaussian"``.
    scale:
        The noise scale (Laplace ``b``, Gaussian sigma), a finite float > 0.
    alpha:
        The tail probability, in (0, 1).

    Examples
    --------
    >>> round(scale_to_accuracy("laplace", 1.0, 0.05), 6)
    2.995732
    >>> scale_to_accuracy("discrete_gaussian", 2.0, 0.05)
    5.0
    """
    owner = "scale_to_accuracy"
    kind_, alpha = _check(kind, alpha, owner)
    scale = check_positive(scale, "scale", owner)
    if kind_ == "laplace":
        return up(-scale * math.log(alpha) * (1.0 + _REL))
    if kind_ == "discrete_laplace":
        return up(_discrete_laplace_accuracy(scale, alpha) * (1.0 + _REL))
    if kind_ == "gaussian":
        from scipy import special

        return up(scale * math.sqrt(2.0) * float(special.erfcinv(alpha)) * (1.0 + _REL))
    return float(_discrete_gaussian_accuracy(scale, alpha))


def _meets(kind: str, scale: float, accuracy: float, alpha: float) -> bool:
    if kind == "discrete_laplace":
        return _discrete_laplace_accuracy(scale, alpha) * (1.0 + _REL) <= accuracy
    # discrete Gaussian: P[|X| >= a] = P[|X| >= ceil(a)] (integer noise).
    return 2.0 * discrete_gaussian_tail_upper(math.ceil(accuracy), scale) <= alpha


def accuracy_to_scale(kind: NoiseKind, accuracy: float, alpha: float) -> float:
    """The largest noise scale of ``kind`` whose accuracy at level ``alpha`` is ``accuracy``.

    Same definitions as OpenDP's ``accuracy_to_*_scale``; rounded down, so noise at the
    returned scale meets ``accuracy`` with probability at least ``1 - alpha``:
    ``laplace``: ``-a / ln(alpha)``; ``gaussian``: ``a / (sqrt 2 erfcinv(alpha))``;
    ``discrete_laplace`` and ``discrete_gaussian``: bisection on the scale (the tail
    probability at a fixed distance grows with the scale) to a relative ``1e-12``, keeping
    the side that meets the accuracy. For the discrete Gaussian a non-integer
    ``accuracy`` is rounded up (the noise is an integer, ``P[|X| >= a] =
    P[|X| >= ceil(a)]``); OpenDP truncates it instead, which is never larger.

    Parameters
    ----------
    kind:
        ``"laplace"``, ``"discrete_laplace"``, ``"gaussian"`` or ``"discrete_gaussian"``.
    accuracy:
        The distance, a finite float > 0 (>= 1 for the discrete kinds, whose noise is 0
        or at least 1 in absolute value).
    alpha:
        The tail probability, in (0, 1).

    Examples
    --------
    >>> round(accuracy_to_scale("gaussian", 1.0, 0.05), 6)
    0.510213
    """
    owner = "accuracy_to_scale"
    kind_, alpha = _check(kind, alpha, owner)
    accuracy = check_positive(accuracy, "accuracy", owner)
    if kind_ == "laplace":
        return down(accuracy / -math.log(alpha) * (1.0 - _REL))
    if kind_ == "gaussian":
        from scipy import special

        return down(accuracy / (math.sqrt(2.0) * float(special.erfcinv(alpha))) * (1.0 - _REL))
    if accuracy < 1.0:
        raise InvalidParameter.for_parameter(
            "accuracy", owner, f"a float in [1, inf) for kind={kind_!r}", accuracy
        )
    return _bisect_scale(kind_, accuracy, alpha)


def _bisect_scale(kind: str, accuracy: float, alpha: float) -> float:
    # A small enough scale always meets the accuracy (the tail vanishes as the scale
    # goes to 0); a scale with continuous-Laplace accuracy twice the target never does.
    low = accuracy / -math.log(alpha) / 64.0
    while not _meets(kind, low, accuracy, alpha):
        low /= 2.0
        if low < 1e-300:  # pragma: no cover - the tail at scale 1e-300 is 0
            raise InvalidParameter(f"accuracy_to_scale: no scale meets {accuracy!r}.")
    high = 2.0 * low
    while _meets(kind, high, accuracy, alpha):
        low, high = high, 2.0 * high
    for _ in range(200):
        if high - low <= _REL * low:
            break
        mid = 0.5 * (low + high)
        if _meets(kind, mid, accuracy, alpha):
            low = mid
        else:
            high = mid
    return low
