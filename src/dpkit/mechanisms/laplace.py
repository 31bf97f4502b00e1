"""The Laplace mechanism, for real-valued and for integer-valued queries.

Privacy (Dwork, McSherry, Nissim & Smith 2006): adding Laplace(0, b) noise to every
coordinate of a query whose L1 sensitivity is ``s`` is ``(s / b)``-DP, under whatever
neighbouring relation ``s`` was computed for (add/remove or replace one person).
The discrete version (integer noise with P(z) proportional to ``e^{-|z|/t}``) is
``(s / t)``-DP for an integer-valued query of L1 sensitivity ``s`` (Ghosh, Roughgarden
& Sundararajan 2009; Canonne, Kamath & Steinke 2020).

Floating point: :class:`Laplace` releases the exact real ``x + X`` rounded to a
power-of-two grid (see :func:`dpkit.noise.laplace`); the rounding is post-processing,
so the guarantee above holds exactly and the output hides the low-order bits of ``x``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Final, TypeVar

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit import noise
from dpkit.accounting._math.rounding import div_down, div_up, up
from dpkit.accounting.events import DiscreteLaplaceEvent, Event, LaplaceEvent
from dpkit.accounting.guarantees import PureDP
from dpkit.errors import InvalidParameter
from dpkit.mechanisms._base import ErrorBound, Mechanism, Release
from dpkit.mechanisms._tails import symmetric_half_width
from dpkit.random import Random, RandomLike

__all__ = ["DiscreteLaplace", "Laplace", "discrete_laplace", "laplace"]


class _Omitted:
    """The type of :data:`OMITTED`: "the caller passed no ``sensitivity=``"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<omitted: deprecated default 1>"


#: Default of ``sensitivity=`` in the one-call wrappers (``dp.laplace`` and friends):
#: tells an omitted argument apart from an explicit ``sensitivity=1``.
OMITTED: Final = _Omitted()
_S = TypeVar("_S", int, float)


def resolve_sensitivity(sensitivity: _S | _Omitted, owner: str) -> _S | int:
    """``sensitivity``, or 1 with a :class:`DeprecationWarning` when it was omitted.

    The one-call wrappers used to assume sensitivity 1 silently (issue 32): a query
    whose sensitivity is not 1 then got too little noise with no sign of it.
    """
    if isinstance(sensitivity, _Omitted):
        warnings.warn(
            f"{owner}: pass sensitivity= explicitly (the query's sensitivity, e.g. "
            "sensitivity=1 for a count); the default of 1 will be removed in the next release.",
            DeprecationWarning,
            stacklevel=3,
        )
        return 1
    return sensitivity


class Laplace(Mechanism):
    """Laplace mechanism for real-valued (scalar or vector) queries.

    Parameters
    ----------
    scale:
        Noise scale ``b`` per coordinate.
    sensitivity:
        L1 sensitivity ``s`` of the query (for a vector: the largest L1 distance
        between the answers on neighbouring datasets).
    granularity:
        Output grid step (a power of two); default ~2^-20 * scale.

    Privacy
    -------
    ``(s / b)``-DP (reported rounded up). Event: ``LaplaceEvent(noise_multiplier=b/s)``.

    Accuracy
    --------
    Per coordinate, ``P(|release - x| > b ln(1/(1-c)) + g/2) <= 1 - c``; the noise
    standard deviation is ``sqrt(2) b``.

    Examples
    --------
    >>> import warnings, dpkit as dp
    >>> warnings.simplefilter("ignore", dp.InsecureRandomWarning)
    >>> mechanism = dp.Laplace.calibrate(epsilon=1.0, sensitivity=1.0)
    >>> mechanism.guarantee
    PureDP(epsilon=1.0)
    >>> release = mechanism.release(42.0, rng=0)
    >>> round(release.error.half_width, 3)  # 95% of releases are this close
    2.996
    """

    def __init__(
        self, *, scale: float, sensitivity: float = 1.0, granularity: float | None = None
    ) -> None:
        owner = "Laplace"
        self.scale = check.check_positive(scale, "scale", owner)
        self.sensitivity = check.check_positive(sensitivity, "sensitivity", owner)
        if self.scale > noise.MAX_SCALE:
            raise InvalidParameter.for_parameter(
                "scale", owner, f"a float in (0, {noise.MAX_SCALE:g}]", scale
            )
        self.granularity = (
            noise.default_granularity(self.scale)
            if granularity is None
            else noise.check_granularity(granularity, self.scale, owner)
        )
        # epsilon = s / b, rounded up so the stated guarantee is never optimistic.
        self._epsilon = div_up(self.sensitivity, self.scale)

    @classmethod
    def calibrate(
        cls, *, epsilon: float, sensitivity: float = 1.0, granularity: float | None = None
    ) -> Laplace:
        """The Laplace mechanism that is ``epsilon``-DP for the given L1 sensitivity."""
        epsilon = check.check_epsilon(epsilon, "Laplace.calibrate")
        sensitivity = check.check_positive(sensitivity, "sensitivity", "Laplace.calibrate")
        # b = s / epsilon rounded up: a larger scale is never less private.
        mechanism = cls(
            scale=div_up(sensitivity, epsilon), sensitivity=sensitivity, granularity=granularity
        )
        # The scale is >= s/epsilon exactly, so the request is a valid statement.
        mechanism._epsilon = epsilon
        return mechanism

    @property
    def epsilon(self) -> float:
        """The pure-DP epsilon of one release."""
        return self._epsilon

    @property
    def event(self) -> Event:
        # Rounded down: an accountant reads epsilon = 1 / noise_multiplier.
        return LaplaceEvent(noise_multiplier=div_down(self.scale, self.sensitivity))

    @property
    def guarantee(self) -> PureDP:
        return PureDP(self._epsilon)

    def _error(self, confidence: float) -> ErrorBound:
        return ErrorBound(
            standard_deviation=math.sqrt(2.0) * self.scale,
            half_width=up(self.scale * -math.log1p(-confidence) + self.granularity / 2),
            confidence=confidence,
        )

    def _check_value(self, value: Any) -> npt.NDArray[np.float64]:
        return check.check_array(value, "value", "Laplace.release")

    def _sample(self, value: npt.NDArray[np.float64], rng: Random) -> Any:
        return noise.laplace(value, scale=self.scale, granularity=self.granularity, rng=rng)

    def _repr_fields(self) -> tuple[str, ...]:
        return ("scale", "sensitivity")


class DiscreteLaplace(Mechanism):
    """Discrete Laplace mechanism for integer-valued (scalar or vector) queries.

    Parameters
    ----------
    scale:
        Noise scale ``t``: P(z) proportional to ``exp(-|z| / t)`` per coordinate.
    sensitivity:
        L1 sensitivity of the integer query.

    Privacy
    -------
    ``(s / t)``-DP (rounded up). Event:
    ``DiscreteLaplaceEvent(scale=t, sensitivity=s)``.

    Accuracy
    --------
    Per coordinate, ``P(|Z| > m) = 2 r^{m+1} / (1 + r)`` with ``r = e^{-1/t}``;
    :meth:`error` reports the smallest such ``m`` at the confidence asked.

    Examples
    --------
    >>> import warnings, dpkit as dp
    >>> warnings.simplefilter("ignore", dp.InsecureRandomWarning)
    >>> dp.DiscreteLaplace.calibrate(epsilon=0.5, sensitivity=1).release(100, rng=3).value
    101
    """

    def __init__(self, *, scale: float, sensitivity: int = 1) -> None:
        owner = "DiscreteLaplace"
        self.scale = check.check_positive(scale, "scale", owner)
        if self.scale > noise.MAX_SCALE:
            raise InvalidParameter.for_parameter(
                "scale", owner, f"a float in (0, {noise.MAX_SCALE:g}]", scale
            )
        self.sensitivity = check.check_count(sensitivity, "sensitivity", owner)
        self._epsilon = div_up(self.sensitivity, self.scale)

    @classmethod
    def calibrate(cls, *, epsilon: float, sensitivity: int = 1) -> DiscreteLaplace:
        """The discrete Laplace mechanism that is ``epsilon``-DP."""
        epsilon = check.check_epsilon(epsilon, "DiscreteLaplace.calibrate")
        sensitivity = check.check_count(sensitivity, "sensitivity", "DiscreteLaplace.calibrate")
        mechanism = cls(scale=div_up(sensitivity, epsilon), sensitivity=sensitivity)
        mechanism._epsilon = epsilon  # scale >= s/epsilon exactly
        return mechanism

    @property
    def epsilon(self) -> float:
        """The pure-DP epsilon of one release."""
        return self._epsilon

    @property
    def event(self) -> Event:
        return DiscreteLaplaceEvent(scale=self.scale, sensitivity=self.sensitivity)

    @property
    def guarantee(self) -> PureDP:
        return PureDP(self._epsilon)

    def _error(self, confidence: float) -> ErrorBound:
        r = math.exp(-1.0 / self.scale)
        # Smallest m with 2 r^(m+1) / (1 + r) <= 1 - c (exact tail).
        m = symmetric_half_width("laplace", self.scale, confidence)
        variance = 2 * r / (1 - r) ** 2
        return ErrorBound(math.sqrt(variance), float(m), confidence)

    def _check_value(self, value: Any) -> npt.NDArray[np.int64]:
        return check.check_array(value, "value", "DiscreteLaplace.release", integer=True)

    def _sample(self, value: npt.NDArray[np.int64], rng: Random) -> Any:
        draws = noise.discrete_laplace(self.scale, size=value.size, rng=rng)
        return value + draws.reshape(value.shape)

    def _repr_fields(self) -> tuple[str, ...]:
        return ("scale", "sensitivity")


def laplace(
    value: npt.ArrayLike,
    *,
    epsilon: float,
    sensitivity: float | _Omitted = OMITTED,
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Release a real-valued query with the Laplace mechanism (``epsilon``-DP).

    Shorthand for ``Laplace.calibrate(epsilon=..., sensitivity=...).release(value)``;
    ``sensitivity`` is the L1 sensitivity of the query under the neighbouring relation
    you mean (e.g. 1 for a count under add/remove). It is required: omitting it still
    assumes 1 for this release, with a :class:`DeprecationWarning`, and will be an
    error in the next one. See :class:`Laplace`.
    """
    resolved = resolve_sensitivity(sensitivity, "dp.laplace")
    return Laplace.calibrate(epsilon=epsilon, sensitivity=resolved).release(
        value, confidence=confidence, rng=rng
    )


def discrete_laplace(
    value: npt.ArrayLike,
    *,
    epsilon: float,
    sensitivity: int | _Omitted = OMITTED,
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Release an integer-valued query with the discrete Laplace mechanism (``epsilon``-DP).

    ``sensitivity`` (an int) is the L1 sensitivity of the query; required (omitting it
    assumes 1 with a :class:`DeprecationWarning`, an error in the next release).
    """
    resolved = resolve_sensitivity(sensitivity, "dp.discrete_laplace")
    return DiscreteLaplace.calibrate(epsilon=epsilon, sensitivity=resolved).release(
        value, confidence=confidence, rng=rng
    )
