"""Report-noisy-max with Gumbel, exponential or Laplace noise, and permute-and-flip.

Report-noisy-max adds independent noise of scale ``b`` to every candidate's score and
releases only the index of the largest noisy score. With scores of sensitivity ``D``:

* any noise whose hazard rate is at most ``1 / b`` -- Laplace, exponential and Gumbel
  all qualify -- makes it ``(2 D / b)``-DP, and ``(D / b)``-DP when the scores are
  monotonic (they all move in the same direction between neighbours). This is the
  proof of Dwork & Roth 2014, Claim 3.9: fixing the other noises, candidate ``i``
  wins on the neighbour whenever its noise exceeds the smallest winning value by
  ``2 D`` (``D`` if monotonic), which costs a factor ``e^{2D/b}`` (``e^{D/b}``) of
  probability at most.
* with **Gumbel** noise it *is* the exponential mechanism, by the Gumbel-max trick;
* with **exponential** noise it *is* permute-and-flip (McKenna & Sheldon 2020;
  Ding, Kifer, Saghaian, Steinke, Wang, Xiao & Zhang 2021, "The permute-and-flip
  mechanism is identical to report-noisy-max with exponential noise"). Permute-and-flip
  is never worse than the exponential mechanism in expected score and can be up to
  twice as good (McKenna & Sheldon 2020).

The argmax is computed on the real numbers, not on float roundings of the noisy
scores (``dpkit/selection/_argmax.py``), so each mechanism samples exactly the
distribution its proof is about.
"""

from __future__ import annotations

from typing import Any

import numpy.typing as npt

from dpkit.accounting.events import (
    Event,
    ExponentialMechanismEvent,
    PermuteAndFlipEvent,
    ReportNoisyMaxEvent,
)
from dpkit.errors import InvalidParameter
from dpkit.mechanisms._base import Release
from dpkit.random import RandomLike
from dpkit.selection._argmax import NOISE_KINDS
from dpkit.selection._base import NoisyArgmax

__all__ = ["PermuteAndFlip", "ReportNoisyMax", "permute_and_flip", "report_noisy_max"]


class ReportNoisyMax(NoisyArgmax):
    """Report-noisy-max: the index of ``max_i (s_i + b N_i)`` for i.i.d. standard noise ``N_i``.

    Parameters
    ----------
    epsilon:
        Privacy parameter, a float in (0, inf).
    sensitivity:
        The largest change of any one score between neighbouring datasets.
    noise:
        ``"gumbel"`` (the default; the exponential mechanism), ``"exponential"``
        (permute-and-flip) or ``"laplace"``.
    monotonic:
        True when, between any two neighbouring datasets, either no score decreases
        or no score increases; halves the noise.

    Exact distribution
    ------------------
    The release is exactly ``argmax_i (c s_i + N_i)`` for the float64 scores taken as
    real numbers, standard noise ``N_i`` (Gumbel, exponential with mean 1, or Laplace
    with scale 1) and ``c`` = :attr:`coefficient`, ``epsilon / (2 sensitivity)``
    (``epsilon / sensitivity`` if monotonic) rounded down: noise of scale ``b = 1 / c``
    in score units, at least ``2 sensitivity / epsilon`` (``sensitivity / epsilon``).

    Privacy
    -------
    ``epsilon``-DP for each noise (Dwork & Roth 2014, Claim 3.9 and its proof; see the
    module docstring). Event: ``ExponentialMechanismEvent(epsilon)`` for Gumbel noise
    (also ``epsilon^2/8``-zCDP, Cesar & Rogers 2021), ``PermuteAndFlipEvent(epsilon)``
    for exponential noise (Ding et al. 2021), ``ReportNoisyMaxEvent(epsilon)`` for
    Laplace noise.

    Accuracy
    --------
    With probability at least ``confidence``, the released candidate's score is within
    ``accuracy(n, confidence=...)`` of the best score (a union bound over the other
    ``n - 1`` candidates, exact in the noise: see :meth:`accuracy`).

    References
    ----------
    Dwork & Roth, "The algorithmic foundations of differential privacy", 2014, Sec. 3.3.
    McKenna & Sheldon, "Permute-and-flip: a new mechanism for differentially private
    selection", NeurIPS 2020.
    Ding et al., "The permute-and-flip mechanism is identical to report-noisy-max with
    exponential noise", arXiv 2105.07260, 2021.

    Examples
    --------
    >>> from dpkit.testing import seeded  # a seeded generator, for a reproducible example
    >>> from dpkit.selection import ReportNoisyMax
    >>> counts = [120.0, 80.0, 310.0, 95.0]
    >>> mechanism = ReportNoisyMax(epsilon=1.0, noise="laplace", monotonic=True)
    >>> mechanism.scale  # Laplace noise of scale sensitivity / epsilon
    1.0
    >>> mechanism.release(counts, rng=seeded(1)).value
    2
    """

    def __init__(
        self,
        *,
        epsilon: float,
        sensitivity: float = 1.0,
        noise: str = "gumbel",
        monotonic: bool = False,
    ) -> None:
        if not isinstance(noise, str) or noise not in NOISE_KINDS:
            raise InvalidParameter.for_parameter(
                "noise", type(self).__name__, "'gumbel', 'exponential' or 'laplace'", noise
            )
        self._noise = noise
        super().__init__(epsilon=epsilon, sensitivity=sensitivity, monotonic=monotonic)

    @property
    def event(self) -> Event:
        if self._noise == "gumbel":
            return ExponentialMechanismEvent(self.epsilon)
        if self._noise == "exponential":
            return PermuteAndFlipEvent(self.epsilon)
        return ReportNoisyMaxEvent(self.epsilon)

    def _repr_fields(self) -> tuple[str, ...]:
        return ("epsilon", "sensitivity", "noise", "monotonic")


class PermuteAndFlip(NoisyArgmax):
    """Permute-and-flip (McKenna & Sheldon 2020), sampled as noisy max with exponential noise.

    Permute-and-flip visits the candidates in a uniformly random order and stops at
    candidate ``i`` with probability ``exp(c (s_i - s_max))``. Ding et al. 2021 proved
    that its output has exactly the distribution of ``argmax_i (c s_i + E_i)`` for
    i.i.d. standard exponential ``E_i``, which dpkit computes exactly on the real
    numbers (one pass, no rejection loop).

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
    ``argmax_i (c s_i + E_i)`` for the float64 scores taken as real numbers and
    ``c`` = :attr:`coefficient`, ``epsilon / (2 sensitivity)`` (``epsilon /
    sensitivity`` if monotonic) rounded down; equivalently permute-and-flip with flip
    probabilities ``exp(c (s_i - s_max))``.

    Privacy
    -------
    ``epsilon``-DP (McKenna & Sheldon 2020; for monotonic scores, the
    report-noisy-max argument of Dwork & Roth 2014, Claim 3.9, which holds for
    exponential noise). Event: ``PermuteAndFlipEvent(epsilon)``.

    Accuracy
    --------
    Never worse than the exponential mechanism in expected score (McKenna & Sheldon
    2020). With probability at least ``confidence`` the released score is within
    :meth:`accuracy` of the best: ``(ln(n - 1) + ln(1 / (2 (1 - confidence)))) / c``.

    References
    ----------
    McKenna & Sheldon, "Permute-and-flip: a new mechanism for differentially private
    selection", NeurIPS 2020.
    Ding et al., "The permute-and-flip mechanism is identical to report-noisy-max with
    exponential noise", arXiv 2105.07260, 2021.

    Examples
    --------
    >>> from dpkit.testing import seeded  # a seeded generator, for a reproducible example
    >>> from dpkit.selection import PermuteAndFlip
    >>> PermuteAndFlip(epsilon=2.0).release([0.0, 9.0, 1.0], rng=seeded(2)).value
    1
    """

    _noise = "exponential"

    @property
    def event(self) -> Event:
        return PermuteAndFlipEvent(self.epsilon)


def report_noisy_max(
    scores: npt.ArrayLike,
    *,
    epsilon: float,
    sensitivity: float = 1.0,
    noise: str = "gumbel",
    monotonic: bool = False,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Select the candidate with the largest noisy score (report-noisy-max).

    Shorthand for ``ReportNoisyMax(...).release(scores, rng=rng)``.

    Parameters
    ----------
    scores:
        One finite score per candidate (a 1-D array or sequence of numbers).
    epsilon, sensitivity, noise, monotonic:
        As for :class:`ReportNoisyMax`.
    rng:
        Random source (see :func:`dpkit.random.as_random`); None for the secure default.

    Returns
    -------
    Release
        ``value`` is the index of the largest noisy score, computed exactly on real
        numbers; ``error`` is None.

    Privacy
    -------
    ``epsilon``-DP for each noise (Dwork & Roth 2014, Claim 3.9). Event: by noise, see
    :class:`ReportNoisyMax`.

    Accuracy
    --------
    See :meth:`ReportNoisyMax.accuracy`.
    """
    mechanism = ReportNoisyMax(
        epsilon=epsilon, sensitivity=sensitivity, noise=noise, monotonic=monotonic
    )
    return mechanism.release(scores, rng=rng)


def permute_and_flip(
    scores: npt.ArrayLike,
    *,
    epsilon: float,
    sensitivity: float = 1.0,
    monotonic: bool = False,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Select a candidate with permute-and-flip.

    Shorthand for ``PermuteAndFlip(...).release(scores, rng=rng)``.

    Parameters
    ----------
    scores:
        One finite score per candidate (a 1-D array or sequence of numbers).
    epsilon, sensitivity, monotonic:
        As for :class:`PermuteAndFlip`.
    rng:
        Random source (see :func:`dpkit.random.as_random`); None for the secure default.

    Returns
    -------
    Release
        ``value`` is the chosen index; ``error`` is None.

    Privacy
    -------
    ``epsilon``-DP (McKenna & Sheldon 2020; Ding et al. 2021). Event:
    ``PermuteAndFlipEvent``.

    Accuracy
    --------
    Never worse than the exponential mechanism in expected score; see
    :meth:`PermuteAndFlip.accuracy`.
    """
    mechanism = PermuteAndFlip(epsilon=epsilon, sensitivity=sensitivity, monotonic=monotonic)
    return mechanism.release(scores, rng=rng)
