"""The exponential mechanism (McSherry & Talwar 2007), sampled exactly.

Given a score ``s_i`` for every candidate, where each score changes by at most
``sensitivity`` between neighbouring datasets, the exponential mechanism releases
candidate ``i`` with probability proportional to ``exp(epsilon s_i / (2 sensitivity))``.
When the scores are *monotonic* -- on any pair of neighbours they all move in the same
direction (counts under adding a person, for instance) -- ``exp(epsilon s_i /
sensitivity)`` is already ``epsilon``-DP, which concentrates twice as fast on the best
candidates: the privacy loss ``c (s'_i - s_i) + ln(Z / Z')`` is a sum of two terms in
``[0, c sensitivity]`` and ``[-c sensitivity, 0]`` (or the reverse), so it lies in
``[-c sensitivity, c sensitivity]`` (the argument of Dwork & Roth 2014, Thm 3.10, with
the factor 2 saved because the two terms cannot add up).

Sampling: by the Gumbel-max trick, ``argmax_i (c s_i + G_i)`` with i.i.d. standard
Gumbel ``G_i`` has exactly the exponential mechanism's distribution. dpkit computes
that argmax on the real numbers, not on their float roundings (see
``dpkit/selection/_argmax.py``), so the sampled distribution is exactly the one below.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy.typing as npt

from dpkit.accounting._math.rounding import fraction_up
from dpkit.accounting.events import Event, ExponentialMechanismEvent
from dpkit.accounting.guarantees import ZCDP
from dpkit.mechanisms._base import Release
from dpkit.random import RandomLike
from dpkit.selection._base import NoisyArgmax

__all__ = ["ExponentialMechanism", "exponential"]


class ExponentialMechanism(NoisyArgmax):
    """The exponential mechanism: release candidate ``i`` with probability ∝ ``exp(c s_i)``.

    Parameters
    ----------
    epsilon:
        Privacy parameter, a float in (0, inf).
    sensitivity:
        The largest change of any one score between neighbouring datasets.
    monotonic:
        True when, between any two neighbouring datasets, either no score decreases
        or no score increases; halves the noise.

    Exact distribution
    ------------------
    ``release(scores)`` returns ``i`` with probability exactly
    ``exp(c s_i) / sum_j exp(c s_j)``, where the scores are the float64 values given,
    taken as exact real numbers, and ``c`` is :attr:`coefficient`:
    ``epsilon / (2 sensitivity)`` (``epsilon / sensitivity`` if ``monotonic``) rounded
    *down* to a float. No floating-point rounding enters the choice: equal scores
    are chosen with exactly equal probability, and the output reveals nothing about
    the scores beyond this distribution.

    Privacy
    -------
    ``epsilon``-DP (McSherry & Talwar 2007; Dwork & Roth 2014, Thm 3.10; for monotonic
    scores see the module docstring): the rounded-down ``c`` makes the real mechanism
    at most ``epsilon``-DP. It is also
    ``epsilon``-bounded-range (Durfee & Rogers 2019), hence ``epsilon^2 / 8``-zCDP
    (Cesar & Rogers 2021, Lemma 3.2), four times less than the generic pure-DP
    conversion gives; see :attr:`rho`. Event: ``ExponentialMechanismEvent(epsilon)``.

    Accuracy
    --------
    With probability at least ``confidence`` the released candidate's score is within
    ``accuracy(n, confidence=...)`` of the best, about
    ``(ln(n - 1) + ln(1 / (1 - confidence))) / c`` (Dwork & Roth 2014, Thm 3.11).

    References
    ----------
    McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007.
    Dwork & Roth, "The algorithmic foundations of differential privacy", 2014, Sec. 3.4.
    Cesar & Rogers, "Bounding, concentrating, and truncating: unifying privacy loss
    composition for data analytics", ALT 2021.

    Examples
    --------
    >>> from dpkit.testing import seeded  # a seeded generator, for a reproducible example
    >>> from dpkit.selection import ExponentialMechanism
    >>> mechanism = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    >>> mechanism.guarantee, mechanism.rho
    (PureDP(epsilon=1.0), 0.125)
    >>> release = mechanism.release([3.0, 40.0, 5.0], rng=seeded(0))
    >>> release.value
    1
    """

    _noise = "gumbel"

    @property
    def event(self) -> Event:
        return ExponentialMechanismEvent(self.epsilon)

    @property
    def rho(self) -> float:
        """The zCDP parameter ``epsilon^2 / 8`` (bounded range; Cesar & Rogers 2021), rounded up."""
        return fraction_up(Fraction(self.epsilon) ** 2 / 8)

    @property
    def zcdp(self) -> ZCDP:
        """The zCDP guarantee of one release, ``ZCDP(epsilon^2 / 8)``."""
        return ZCDP(self.rho)


def exponential(
    scores: npt.ArrayLike,
    *,
    epsilon: float,
    sensitivity: float = 1.0,
    monotonic: bool = False,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Select a candidate with the exponential mechanism.

    Shorthand for ``ExponentialMechanism(...).release(scores, rng=rng)``.

    Parameters
    ----------
    scores:
        One finite score per candidate (a 1-D array or sequence of numbers).
    epsilon, sensitivity, monotonic:
        As for :class:`ExponentialMechanism`.
    rng:
        Random source (see :func:`dpkit.random.as_random`); None for the secure default.

    Returns
    -------
    Release
        ``value`` is the chosen index (an int) drawn with probability exactly
        proportional to ``exp(c s_i)``; ``error`` is None.

    Privacy
    -------
    ``epsilon``-DP and ``epsilon^2/8``-zCDP (McSherry & Talwar 2007; Dwork & Roth
    2014, Thm 3.10; Cesar & Rogers 2021). Event: ``ExponentialMechanismEvent``.

    Accuracy
    --------
    See :meth:`ExponentialMechanism.accuracy` (Dwork & Roth 2014, Thm 3.11).
    """
    mechanism = ExponentialMechanism(epsilon=epsilon, sensitivity=sensitivity, monotonic=monotonic)
    return mechanism.release(scores, rng=rng)
