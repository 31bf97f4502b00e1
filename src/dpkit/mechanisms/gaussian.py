"""The Gaussian mechanism, for real-valued and for integer-valued queries.

Privacy: adding N(0, sigma^2) to every coordinate of a query with L2 sensitivity
``s`` is ``s^2 / (2 sigma^2)``-zCDP (Bun & Steinke 2016, Prop. 1.6) and
``(epsilon, delta)``-DP exactly when ``delta >= Phi(s/(2 sigma) - epsilon sigma/s)
- e^epsilon Phi(-s/(2 sigma) - epsilon sigma/s)`` (Balle & Wang 2018, Thm. 8). The
discrete Gaussian N_Z(0, sigma^2) on an integer query of L2 sensitivity ``s`` is
``s^2/(2 sigma^2)``-zCDP as well (Canonne, Kamath & Steinke 2020, Thm. 4; for vectors
Renyi divergences of independent coordinates add up).

Calibration for (epsilon, delta): ``method="analytic"`` (default) solves the exact
condition above for the smallest sigma (rounded up); ``method="classic"`` is the
textbook ``sigma = s sqrt(2 ln(1.25/delta)) / epsilon``, valid only for epsilon < 1
(Dwork & Roth 2014, Thm. A.1) and always larger.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit import noise
from dpkit.accounting._math.gaussian import (
    gaussian_rho,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
)
from dpkit.accounting._math.rounding import div_down, up
from dpkit.accounting.events import DiscreteGaussianEvent, Event, GaussianEvent
from dpkit.accounting.guarantees import ZCDP, ApproxDP
from dpkit.errors import InvalidParameter
from dpkit.mechanisms._base import ErrorBound, Mechanism, Release
from dpkit.mechanisms._tails import symmetric_half_width
from dpkit.mechanisms.laplace import OMITTED, _Omitted, resolve_sensitivity
from dpkit.random import Random, RandomLike

__all__ = ["DiscreteGaussian", "Gaussian", "discrete_gaussian", "gaussian"]

CalibrationMethod = Literal["analytic", "classic"]


def _sigma_for(
    owner: str,
    epsilon: float | None,
    delta: float | None,
    rho: float | None,
    sensitivity: float,
    method: CalibrationMethod,
) -> tuple[float, ZCDP | ApproxDP]:
    """The smallest (rounded-up) sigma for the target, and the guarantee it meets."""
    if rho is not None:
        if epsilon is not None or delta is not None:
            raise InvalidParameter(f"{owner}: give either rho, or epsilon and delta, not both.")
        rho = check.check_positive(rho, "rho", owner)
        return up(sensitivity / math.sqrt(2.0 * rho), 2), ZCDP(rho)
    if epsilon is None or delta is None:
        raise InvalidParameter(f"{owner}: give rho, or both epsilon and delta.")
    epsilon = check.check_epsilon(epsilon, owner)
    delta = check.check_delta(delta, owner, allow_zero=False)
    if method == "analytic":
        sigma = gaussian_sigma_analytic(epsilon, delta, sensitivity)
    elif method == "classic":
        sigma = gaussian_sigma_classic(epsilon, delta, sensitivity)
    else:
        raise InvalidParameter.for_parameter("method", owner, "'analytic' or 'classic'", method)
    return sigma, ApproxDP(epsilon, delta)


def _gaussian_error(sigma: float, confidence: float, extra: float) -> ErrorBound:
    from scipy.special import ndtri  # deferred: SciPy is slow to import

    z = float(ndtri((1 + confidence) / 2))
    return ErrorBound(sigma, up(sigma * z * (1 + 1e-12) + extra), confidence)


class Gaussian(Mechanism):
    """Gaussian mechanism for real-valued (scalar or vector) queries.

    Parameters
    ----------
    sigma:
        Noise standard deviation per coordinate.
    sensitivity:
        L2 sensitivity of the query.
    granularity:
        Output grid step (power of two); default ~2^-20 * sigma.

    Privacy
    -------
    ``rho = s^2/(2 sigma^2)``-zCDP and the exact (epsilon, delta) profile of the
    Gaussian mechanism. :attr:`guarantee` is the target it was calibrated for (zCDP
    when built directly). Event: ``GaussianEvent(noise_multiplier=sigma/s)``.

    Accuracy
    --------
    Per coordinate, ``|release - x| <= sigma Phi^{-1}((1+c)/2) + g/2`` with
    probability ``c``.

    Examples
    --------
    >>> import dpkit as dp
    >>> mechanism = dp.Gaussian.calibrate(epsilon=1.0, delta=1e-5)
    >>> round(mechanism.sigma, 4)  # analytic calibration (Balle & Wang 2018)
    3.7306
    >>> round(dp.Gaussian.calibrate(epsilon=0.9, delta=1e-5, method="classic").sigma, 4)
    5.3831
    """

    def __init__(
        self, *, sigma: float, sensitivity: float = 1.0, granularity: float | None = None
    ) -> None:
        owner = "Gaussian"
        self.sigma = check.check_positive(sigma, "sigma", owner)
        self.sensitivity = check.check_positive(sensitivity, "sensitivity", owner)
        if self.sigma > noise.MAX_SCALE:
            raise InvalidParameter.for_parameter(
                "sigma", owner, f"a float in (0, {noise.MAX_SCALE:g}]", sigma
            )
        self.granularity = (
            noise.default_granularity(self.sigma)
            if granularity is None
            else noise.check_granularity(granularity, self.sigma, owner)
        )
        self._guarantee: ZCDP | ApproxDP = ZCDP(self.rho)

    @classmethod
    def calibrate(
        cls,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        sensitivity: float = 1.0,
        method: CalibrationMethod = "analytic",
    ) -> Gaussian:
        """The Gaussian mechanism meeting ``rho``-zCDP or ``(epsilon, delta)``-DP."""
        sensitivity = check.check_positive(sensitivity, "sensitivity", "Gaussian.calibrate")
        sigma, target = _sigma_for("Gaussian.calibrate", epsilon, delta, rho, sensitivity, method)
        mechanism = cls(sigma=sigma, sensitivity=sensitivity)
        mechanism._guarantee = target
        return mechanism

    @property
    def rho(self) -> float:
        """zCDP parameter ``s^2 / (2 sigma^2)`` (rounded up)."""
        return gaussian_rho(self.sigma, self.sensitivity)  # exact, rounded up

    @property
    def event(self) -> Event:
        # Rounded down: a smaller noise multiplier only overstates the cost.
        return GaussianEvent(noise_multiplier=div_down(self.sigma, self.sensitivity))

    @property
    def guarantee(self) -> ZCDP | ApproxDP:
        return self._guarantee

    def _error(self, confidence: float) -> ErrorBound:
        return _gaussian_error(self.sigma, confidence, self.granularity / 2)

    def _check_value(self, value: Any) -> npt.NDArray[np.float64]:
        return check.check_array(value, "value", "Gaussian.release")

    def _sample(self, value: npt.NDArray[np.float64], rng: Random) -> Any:
        return noise.gaussian(value, sigma=self.sigma, granularity=self.granularity, rng=rng)

    def _repr_fields(self) -> tuple[str, ...]:
        return ("sigma", "sensitivity")


class DiscreteGaussian(Mechanism):
    """Discrete Gaussian mechanism for integer-valued (scalar or vector) queries.

    Parameters
    ----------
    sigma:
        Scale parameter: P(z) proportional to exp(-z^2 / (2 sigma^2)) per coordinate.
    sensitivity:
        L2 sensitivity of the integer query.

    Privacy
    -------
    ``s^2/(2 sigma^2)``-zCDP (CKS20, Thm. 4); :meth:`calibrate` takes a zCDP target.
    For an (epsilon, delta) statement convert the guarantee
    (``mechanism.guarantee.to_approx(delta)``), proven for any zCDP mechanism.
    Event: ``DiscreteGaussianEvent(sigma, sensitivity)``.

    Accuracy
    --------
    The interval at confidence ``c`` is ``value +- h`` with ``h`` the smallest integer
    such that ``P(|Z| > h) <= 1 - c``, the tail computed by a certified sum (within a
    relative 1e-9 of the exact tail, rounded up, so ``h`` is the exact quantile
    except within that margin). It is narrower than the sub-Gaussian width
    ``sigma sqrt(2 ln(2/(1-c)))`` of CKS20, Cor. 9 (by 28% at ``c = 0.95`` for large
    sigma, as OpenDP's ``discrete_gaussian_scale_to_accuracy``).

    Examples
    --------
    >>> import dpkit as dp
    >>> dp.DiscreteGaussian.calibrate(rho=0.5).sigma
    1.0000000000000004
    """

    def __init__(self, *, sigma: float, sensitivity: float = 1.0) -> None:
        owner = "DiscreteGaussian"
        self.sigma = check.check_positive(sigma, "sigma", owner)
        if self.sigma > noise.MAX_SCALE:
            raise InvalidParameter.for_parameter(
                "sigma", owner, f"a float in (0, {noise.MAX_SCALE:g}]", sigma
            )
        self.sensitivity = check.check_positive(sensitivity, "sensitivity", owner)
        self._guarantee: ZCDP | ApproxDP = ZCDP(self.rho)

    @classmethod
    def calibrate(cls, *, rho: float, sensitivity: float = 1.0) -> DiscreteGaussian:
        """The discrete Gaussian mechanism that is ``rho``-zCDP."""
        sensitivity = check.check_positive(sensitivity, "sensitivity", "DiscreteGaussian.calibrate")
        sigma, target = _sigma_for(
            "DiscreteGaussian.calibrate", None, None, rho, sensitivity, "analytic"
        )
        mechanism = cls(sigma=sigma, sensitivity=sensitivity)
        # sigma >= s / sqrt(2 rho) exactly, so the request is a valid statement.
        mechanism._guarantee = target
        return mechanism

    @property
    def rho(self) -> float:
        """zCDP parameter ``s^2 / (2 sigma^2)`` (rounded up)."""
        return gaussian_rho(self.sigma, self.sensitivity)  # exact, rounded up

    @property
    def event(self) -> Event:
        """The event of a scalar release.

        An integer query moves by an integer, so a 1-D sensitivity ``s`` means a
        shift of at most ``floor(s)`` (and at least 1 for a non-constant query).
        """
        return DiscreteGaussianEvent(
            sigma=self.sigma, sensitivity=max(1, math.floor(self.sensitivity))
        )

    def _event_for(self, value: npt.NDArray[np.int64]) -> Event:
        if value.size <= 1:
            return self.event
        # Vectors: the exact 1-D profile does not transfer; the event carries the
        # dimension and the real L2 sensitivity (zCDP holds in every dimension).
        return DiscreteGaussianEvent(
            sigma=self.sigma, sensitivity=self.sensitivity, dimension=value.size
        )

    @property
    def guarantee(self) -> ZCDP | ApproxDP:
        return self._guarantee

    def _error(self, confidence: float) -> ErrorBound:
        # The smallest integer h whose certified two-sided tail (term-by-term sum with
        # a proven remainder; Poisson summation for the normaliser) is at most 1 - c.
        half_width = symmetric_half_width("gaussian", self.sigma, confidence)
        return ErrorBound(self.sigma, float(half_width), confidence)

    def _check_value(self, value: Any) -> npt.NDArray[np.int64]:
        return check.check_array(value, "value", "DiscreteGaussian.release", integer=True)

    def _sample(self, value: npt.NDArray[np.int64], rng: Random) -> Any:
        draws = noise.discrete_gaussian(self.sigma, size=value.size, rng=rng)
        return value + draws.reshape(value.shape)

    def _repr_fields(self) -> tuple[str, ...]:
        return ("sigma", "sensitivity")


def gaussian(
    value: npt.ArrayLike,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    rho: float | None = None,
    sensitivity: float | _Omitted = OMITTED,
    method: CalibrationMethod = "analytic",
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Release a real-valued query with the Gaussian mechanism.

    Give ``rho`` (zCDP) or ``epsilon`` and ``delta``; ``sensitivity`` is the L2
    sensitivity, required (omitting it assumes 1 with a :class:`DeprecationWarning`,
    an error in the next release). See :class:`Gaussian`.
    """
    resolved = resolve_sensitivity(sensitivity, "dp.gaussian")
    mechanism = Gaussian.calibrate(
        epsilon=epsilon, delta=delta, rho=rho, sensitivity=resolved, method=method
    )
    return mechanism.release(value, confidence=confidence, rng=rng)


def discrete_gaussian(
    value: npt.ArrayLike,
    *,
    rho: float,
    sensitivity: float | _Omitted = OMITTED,
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Release an integer-valued query with the discrete Gaussian mechanism (``rho``-zCDP).

    ``sensitivity`` is the L2 sensitivity, required (omitting it assumes 1 with a
    :class:`DeprecationWarning`, an error in the next release).
    """
    resolved = resolve_sensitivity(sensitivity, "dp.discrete_gaussian")
    mechanism = DiscreteGaussian.calibrate(rho=rho, sensitivity=resolved)
    return mechanism.release(value, confidence=confidence, rng=rng)
