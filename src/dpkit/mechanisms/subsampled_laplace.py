"""The subsampled Laplace mechanism: a bounded sum estimated from a Poisson sample.

Each person's value is clamped to public bounds ``[L, U]``; each person is kept
independently with probability ``p``; the sample's sum gets Laplace noise of scale
``b = D / eps_p`` with ``D = max(|L|, |U|)``; the result is divided by ``p``:

    release = ( sum_{i in S_p(x)} clamp(x_i) + Laplace(b) ) / p.

Privacy. Under adding/removing one person the sample sum has sensitivity ``D``, so the
inner mechanism is ``eps_p = D / b``-DP, and the whole is
``ln(1 + p (e^eps_p - 1))``-DP by amplification by Poisson subsampling (Balle, Barthe
& Gaboardi 2018, Thm 8; "Privacy Amplification by Subsampling", differentialprivacy.org
2025, Thm 1 and eq. 5, where this estimator is the example). :meth:`calibrate` picks
``eps_p`` with :func:`~dpkit.accounting.epsilon_before_sampling` so the
whole is ``eps``-DP. Under the replace-one relation this analysis does not apply.

Accuracy. The estimator is unbiased for ``sum_i clamp(x_i)`` up to the grid rounding
below, with mean squared error

    (1 - p)/p * sum_i clamp(x_i)^2 + 2 b^2 / p^2  <=  (1 - p)/p * n D^2 + 2 b^2 / p^2

(the post, eq. 8, for sums instead of means). The first term is sampling error and
depends on the data; :attr:`~dpkit.mechanisms.Release.error` states the noise term only,
and :meth:`SubsampledLaplace.mean_squared_error` the whole bound for a public ``n``.
Amplification is nearly free only when ``eps`` is of the order of ``p``: the noise is
``1 / noise_ratio(eps, p)`` times that of the plain Laplace mechanism on all the data
(see :mod:`dpkit.accounting.subsampling`).

Exactness. Sampling uses an exact Bernoulli(p) (a uniform 64-bit integer compared with
the binary expansion of ``p``, refined bit by bit on ties). Each clamped value is
rounded *towards zero* to the noise grid ``g`` (a power of two ~2^-20 b), so the sample
sum is an exact integer multiple of ``g`` whose sensitivity is at most ``D`` exactly, and
:func:`dpkit.noise.laplace` adds exact Laplace noise on that grid. The rounding moves
each value by less than ``g`` towards zero.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit import noise
from dpkit.accounting._math.rounding import div_down, div_up, up
from dpkit.accounting.events import Event, LaplaceEvent, PoissonSampledEvent, pure_epsilon
from dpkit.accounting.guarantees import PureDP
from dpkit.accounting.subsampling import amplified_epsilon, epsilon_before_sampling
from dpkit.errors import DataError, InvalidParameter
from dpkit.mechanisms._base import ErrorBound, Mechanism, Release
from dpkit.random import Random, RandomLike

__all__ = ["SubsampledLaplace", "poisson_sample_mask", "subsampled_laplace"]

_WORD = 64


def poisson_sample_mask(
    size: int, sampling_probability: float, rng: Random
) -> npt.NDArray[np.bool_]:
    """``size`` independent exact Bernoulli(``p``) draws (True = record sampled).

    ``p`` is the exact value of the float, a dyadic rational ``m / 2^k``. A uniform
    64-bit integer ``u`` is compared with the first 64 bits of ``p``; only on a tie
    (probability 2^-64 per draw) are more uniform bits drawn and compared with the rest
    of the expansion, so ``P[True] = p`` exactly.
    """
    owner = "poisson_sample_mask"
    n = check.check_count(size, "size", owner, minimum=0)
    rate = check.check_probability(sampling_probability, "sampling_probability", owner)
    if rate == 1.0:
        return np.ones(n, dtype=np.bool_)
    if rate == 0.0:
        return np.zeros(n, dtype=np.bool_)
    exact = Fraction(rate)
    bits = exact.denominator.bit_length() - 1  # denominator is 2^bits
    scaled = exact * (1 << _WORD)
    head = int(scaled)  # first 64 bits of p, in [0, 2^64)
    tail = scaled - head  # the rest, in [0, 1)
    draws = rng.uint64(n)
    out = draws < np.uint64(head)
    if tail:
        # Ties continue the comparison on the remaining bits of p.
        extra_bits = bits - _WORD
        threshold = int(tail * (1 << extra_bits))
        for i in np.flatnonzero(draws == np.uint64(head)):
            out[i] = rng.getrandbits(extra_bits) < threshold
    return out


class SubsampledLaplace(Mechanism):
    """Laplace noise on the sum of a Poisson sample, rescaled by ``1/p``.

    Parameters
    ----------
    scale:
        Laplace scale ``b`` added to the sample sum.
    sampling_probability:
        ``p`` in (0, 1]: each person is kept independently with this probability.
    bounds:
        ``(L, U)`` with ``L <= U``: public bounds on one person's value; values are
        clamped to them. The sensitivity is ``D = max(|L|, |U|)`` (add/remove one person).

    Privacy
    -------
    ``ln(1 + p(e^{D/b} - 1))``-DP w.r.t. adding/removing one person (amplification by
    Poisson subsampling; see the module docstring). Event:
    ``PoissonSampledEvent(LaplaceEvent(noise_multiplier=b/D), p)``.

    Accuracy
    --------
    ``release.value`` estimates ``sum_i clamp(x_i)`` without bias.
    ``release.error`` covers the noise only: ``|value - S/p| <= (b/p) ln(1/(1-c))`` with
    probability ``c``, where ``S`` is the sample sum. :meth:`mean_squared_error` adds the
    sampling error for a public number of people.

    Examples
    --------
    >>> import dpkit as dp
    >>> from dpkit.mechanisms.subsampled_laplace import SubsampledLaplace
    >>> from dpkit.testing import seeded
    >>> mechanism = SubsampledLaplace.calibrate(
    ...     epsilon=0.1, sampling_probability=0.05, bounds=(0.0, 1.0))
    >>> mechanism.guarantee
    PureDP(epsilon=0.1)
    >>> release = mechanism.release([1.0] * 1000, rng=seeded(0))
    >>> release.event.sampling_probability
    0.05
    """

    def __init__(
        self,
        *,
        scale: float,
        sampling_probability: float,
        bounds: tuple[float, float] = (0.0, 1.0),
    ) -> None:
        owner = "SubsampledLaplace"
        self.scale = check.check_positive(scale, "scale", owner)
        if self.scale > noise.MAX_SCALE:
            raise InvalidParameter.for_parameter(
                "scale", owner, f"a float in (0, {noise.MAX_SCALE:g}]", scale
            )
        self.sampling_probability = check.check_probability(
            sampling_probability, "sampling_probability", owner, open_low=True
        )
        self.bounds = _check_bounds(bounds, owner)
        self.sensitivity = max(abs(self.bounds[0]), abs(self.bounds[1]))
        if self.sensitivity == 0.0:
            raise InvalidParameter.for_parameter(
                "bounds", owner, "bounds that are not both 0", bounds
            )
        self.granularity = noise.default_granularity(self.scale)
        # The inner epsilon D/b rounded up, then amplified (rounded up): never optimistic.
        inner = div_up(self.sensitivity, self.scale)
        self._epsilon = max(
            amplified_epsilon(inner, sampling_probability=self.sampling_probability),
            self._event_epsilon(),
        )

    @classmethod
    def calibrate(
        cls,
        *,
        epsilon: float,
        sampling_probability: float,
        bounds: tuple[float, float] = (0.0, 1.0),
    ) -> SubsampledLaplace:
        """The subsampled Laplace mechanism that is ``epsilon``-DP as a whole.

        The inner budget is ``eps_p = ln(1 + (e^eps - 1)/p)`` rounded down
        (:func:`~dpkit.accounting.epsilon_before_sampling`), the scale is
        ``D / eps_p`` rounded up, and the stated event is checked to cost at most
        ``epsilon`` (an accountant reading it never sees more than the request).
        """
        owner = "SubsampledLaplace.calibrate"
        epsilon = check.check_epsilon(epsilon, owner)
        rate = check.check_probability(
            sampling_probability, "sampling_probability", owner, open_low=True
        )
        low, high = _check_bounds(bounds, owner)
        sensitivity = max(abs(low), abs(high))
        if sensitivity == 0.0:
            raise InvalidParameter.for_parameter(
                "bounds", owner, "bounds that are not both 0", bounds
            )
        inner = epsilon_before_sampling(epsilon, sampling_probability=rate)
        scale = div_up(sensitivity, inner)
        mechanism = cls(scale=scale, sampling_probability=rate, bounds=(low, high))
        # The event rounds its noise multiplier down; if that costs an ulp more than the
        # request, widen the noise until it does not.
        while mechanism._event_epsilon() > epsilon:
            scale = up(scale, 1)
            mechanism = cls(scale=scale, sampling_probability=rate, bounds=(low, high))
        mechanism._epsilon = epsilon  # scale >= D / eps_p exactly, and eps_p amplifies to <= eps
        return mechanism

    def _event_epsilon(self) -> float:
        """The epsilon an accountant reads from :attr:`event`."""
        try:
            value = pure_epsilon(self.event)
        except OverflowError:
            # PoissonSampledEvent overflows for inner epsilons above ~709 (math.expm1);
            # the same bound, computed in log space.
            inner = div_up(1.0, div_down(self.scale, self.sensitivity))
            return amplified_epsilon(inner, sampling_probability=self.sampling_probability)
        assert value is not None  # a sampled Laplace event always has a pure epsilon
        return value

    @property
    def epsilon(self) -> float:
        """The pure-DP epsilon of one release (add/remove one person)."""
        return self._epsilon

    @property
    def event(self) -> Event:
        # Rounded down: an accountant reads the inner epsilon as 1 / noise_multiplier.
        inner = LaplaceEvent(noise_multiplier=div_down(self.scale, self.sensitivity))
        return PoissonSampledEvent(inner, self.sampling_probability)

    @property
    def guarantee(self) -> PureDP:
        return PureDP(self._epsilon)

    def mean_squared_error(self, population_size: int) -> float:
        """Upper bound on the mean squared error of one release for ``n`` people.

        ``(1 - p)/p * n D^2 + 2 b^2 / p^2`` (sampling error at its worst, when every
        value sits at a bound, plus the Laplace noise variance), ignoring the grid
        rounding of at most ``g`` per value. ``n`` must be public (or a public upper
        bound on the number of people).
        """
        n = check.check_count(population_size, "population_size", "mean_squared_error", minimum=0)
        p = self.sampling_probability
        sampling = (1.0 - p) / p * n * self.sensitivity**2
        return up(sampling + 2.0 * (self.scale / p) ** 2)

    def _error(self, confidence: float) -> ErrorBound:
        # Laplace(b)/p: P(|X|/p > (b/p) ln(1/(1-c))) = 1 - c; the grid adds at most g/2.
        p = self.sampling_probability
        return ErrorBound(
            standard_deviation=up(math.sqrt(2.0) * self.scale / p),
            half_width=up((self.scale * -math.log1p(-confidence) + self.granularity / 2) / p),
            confidence=confidence,
        )

    def _check_value(self, value: Any) -> npt.NDArray[np.float64]:
        data = check.check_array(value, "data", "SubsampledLaplace.release", allow_empty=True)
        if data.ndim != 1:
            raise DataError(
                "SubsampledLaplace.release: 'data' must be one value per person (1-dimensional)."
            )
        clamped: npt.NDArray[np.float64] = np.clip(data, self.bounds[0], self.bounds[1])
        return clamped

    def _sample(self, value: npt.NDArray[np.float64], rng: Random) -> Any:
        step = self.granularity
        mask = poisson_sample_mask(value.size, self.sampling_probability, rng)
        # Towards zero onto the grid: |k_i g| <= |x_i| <= D, so the integer sum has
        # sensitivity at most D exactly and no floating-point rounding.
        units = np.trunc(value[mask] / step)
        total = int(units.astype(np.int64).sum()) if units.size else 0
        noisy = noise.laplace(float(total) * step, scale=self.scale, granularity=step, rng=rng)
        return float(noisy) / self.sampling_probability

    def _repr_fields(self) -> tuple[str, ...]:
        return ("scale", "sampling_probability", "bounds")


def _check_bounds(bounds: object, owner: str) -> tuple[float, float]:
    expected = "a pair (low, high) of finite floats with low <= high"
    if not isinstance(bounds, tuple | list) or len(bounds) != 2:
        raise InvalidParameter.for_parameter("bounds", owner, expected, bounds)
    low = check.check_finite_float(bounds[0], "bounds", owner)
    high = check.check_finite_float(bounds[1], "bounds", owner)
    if low > high:
        raise InvalidParameter.for_parameter("bounds", owner, expected, bounds)
    return low, high


def subsampled_laplace(
    data: npt.ArrayLike,
    *,
    epsilon: float,
    sampling_probability: float,
    bounds: tuple[float, float] = (0.0, 1.0),
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Estimate ``sum(clamp(data))`` from a Poisson sample, ``epsilon``-DP as a whole.

    Shorthand for ``SubsampledLaplace.calibrate(...).release(data)``; ``data`` holds one
    value per person. For a count pass indicators with ``bounds=(0, 1)``; for a mean
    divide by a public ``n``. See :class:`SubsampledLaplace`.
    """
    mechanism = SubsampledLaplace.calibrate(
        epsilon=epsilon, sampling_probability=sampling_probability, bounds=bounds
    )
    return mechanism.release(data, confidence=confidence, rng=rng)
