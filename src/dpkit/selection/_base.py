"""What the report-noisy-max family shares: calibration, validation, accuracy.

Every mechanism here releases ``argmax_i (c s_i + N_i)`` for i.i.d. standard noise
``N_i`` (Gumbel, exponential or Laplace) and a coefficient ``c`` set from epsilon and
the scores' sensitivity; :mod:`dpkit.selection._argmax` computes that argmax exactly.
Subclasses choose the noise and the privacy event; everything else lives here.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.accounting._math.rounding import fraction_up
from dpkit.accounting.guarantees import PureDP
from dpkit.errors import InvalidParameter
from dpkit.mechanisms._base import Mechanism
from dpkit.random import Random
from dpkit.selection._argmax import NOISE_KINDS, noisy_argmax

__all__ = ["NoisyArgmax", "coefficient", "noise_tail_inverse"]

#: Smallest coefficient accepted: below it ``c (s_i - s_max)`` could round to -inf for
#: scores whose real contribution is still moderate (and the output would be uniform
#: to any precision anyway).
MIN_COEFFICIENT = 2.0**-900


def coefficient(epsilon: float, sensitivity: float, monotonic: bool, owner: str) -> float:
    """``c = epsilon / (2 sensitivity)`` (``epsilon / sensitivity`` if monotonic), rounded down.

    Every mechanism in the family is ``(k c sensitivity)``-DP with ``k = 2`` (``1`` for
    monotonic scores), increasing in ``c``; rounding ``c`` down keeps the real
    mechanism at most ``epsilon``-DP.
    """
    exact = Fraction(epsilon) / (Fraction(sensitivity) * (1 if monotonic else 2))
    try:
        result = float(exact)
    except OverflowError:
        result = float(np.finfo(np.float64).max)
    if Fraction(result) > exact:
        result = math.nextafter(result, 0.0)
    if not result >= MIN_COEFFICIENT:
        raise InvalidParameter(
            f"{owner}: epsilon={epsilon!r} and sensitivity={sensitivity!r} give a score "
            f"coefficient below {MIN_COEFFICIENT:.3g}, too small to compute with (the "
            "selection would be uniform)."
        )
    return result


def check_monotonic(value: object, owner: str) -> bool:
    """``monotonic`` must be a real bool (a truthy string is always a mistake)."""
    if not isinstance(value, bool | np.bool_):
        raise InvalidParameter.for_parameter("monotonic", owner, "True or False", value)
    return bool(value)


def noise_tail_inverse(noise: str, probability: float) -> float:
    """Smallest ``z >= 0`` with ``P(N_1 - N_2 > z) <= probability`` for i.i.d. standard noise.

    The difference of two standard Gumbels is logistic, ``P = 1 / (1 + e^z)``; of two
    exponentials it is Laplace, ``P = e^-z / 2``; of two Laplaces, ``P = (2 + z) e^-z / 4``.
    The result is nudged up so that float rounding never makes it optimistic.
    """
    if probability >= 0.5:
        return 0.0  # every tail is 1/2 at z = 0
    if noise == "gumbel":
        z = math.log1p(-probability) - math.log(probability)  # ln(1/p - 1)
    elif noise == "exponential":
        z = -math.log(2.0 * probability)
    else:
        low, high = 0.0, 1.0
        while (2.0 + high) * math.exp(-high) / 4.0 > probability:
            low, high = high, 2.0 * high
        for _ in range(200):  # bisection to float resolution
            middle = (low + high) / 2.0
            if middle in (low, high):
                break
            if (2.0 + middle) * math.exp(-middle) / 4.0 > probability:
                low = middle
            else:
                high = middle
        z = high
    return z * (1.0 + 1e-12) + 1e-300


class NoisyArgmax(Mechanism):
    """Base of the selection mechanisms: ``argmax_i (c s_i + N_i)``, computed exactly.

    Subclasses set ``_noise`` (one of ``"gumbel"``, ``"exponential"``, ``"laplace"``)
    and define :attr:`event`.
    """

    _noise: str = "gumbel"

    def __init__(
        self, *, epsilon: float, sensitivity: float = 1.0, monotonic: bool = False
    ) -> None:
        owner = type(self).__name__
        self.epsilon = check.check_epsilon(epsilon, owner)
        self.sensitivity = check.check_positive(sensitivity, "sensitivity", owner)
        self.monotonic = check_monotonic(monotonic, owner)
        if self._noise not in NOISE_KINDS:
            raise InvalidParameter.for_parameter(
                "noise", owner, f"one of {NOISE_KINDS}", self._noise
            )
        self._coefficient = coefficient(self.epsilon, self.sensitivity, self.monotonic, owner)

    @property
    def noise(self) -> str:
        """The noise added to each scaled score: ``"gumbel"``, ``"exponential"``, ``"laplace"``."""
        return self._noise

    @property
    def coefficient(self) -> float:
        """``c``: candidate ``i``'s noisy score is ``c s_i + N_i`` with standard noise ``N_i``.

        ``epsilon / (2 sensitivity)``, or ``epsilon / sensitivity`` for monotonic
        scores, rounded down to a float and used as that exact real number.
        """
        return self._coefficient

    @property
    def scale(self) -> float:
        """The noise scale in score units, ``1 / c`` (rounded up): ``s_i + scale N_i``."""
        return fraction_up(1 / Fraction(self._coefficient))

    @property
    def guarantee(self) -> PureDP:
        return PureDP(self.epsilon)

    def accuracy(self, n_candidates: int, *, confidence: float = 0.95) -> float:
        """A bound on how far below the best score the released candidate's score may be.

        With probability at least ``confidence``, ``s_best - s_released`` is at most
        the returned value, for any scores of ``n_candidates`` candidates. Union bound
        over the ``n - 1`` other candidates of ``P(c s_i + N_i > c s_best + N_best)``
        (the tail of the difference of two noises; see ``noise_tail_inverse``),
        which for Gumbel noise is the exponential mechanism's bound of Dwork & Roth
        2014, Thm 3.11 (slightly sharper). Depends on public values only.
        """
        owner = f"{type(self).__name__}.accuracy"
        n = check.check_count(n_candidates, "n_candidates", owner)
        confidence = check.check_probability(
            confidence, "confidence", owner, open_low=True, open_high=True
        )
        if n == 1:
            return 0.0
        z = noise_tail_inverse(self._noise, (1.0 - confidence) / (n - 1))
        return float(np.nextafter(z / self._coefficient, np.inf))

    def _check_value(self, value: Any) -> npt.NDArray[np.float64]:
        return check.check_array(value, "scores", f"{type(self).__name__}.release", ndim=1)

    def _sample(self, value: npt.NDArray[np.float64], rng: Random) -> int:
        return noisy_argmax(self._noise, value, self._coefficient, rng)

    def _repr_fields(self) -> tuple[str, ...]:
        return ("epsilon", "sensitivity", "monotonic")
