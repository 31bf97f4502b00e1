"""Exact statistics on a fixed-point grid, and their noisy release.

Why fixed point: a floating-point sum of clamped values does not have the sensitivity
its formula says (rounding depends on the order and the other values; Casacuberta et
al. 2022 turn this into attacks). Here every clamped value is snapped to a grid of
step ``g`` (a power of two, ``2^-bits`` of the public range), the sums are computed
exactly in integers, and each statistic handed to the noise is an exact rational.

The snap ``x -> y0 = rint((clamp(x) - lower) / g)``, clipped to ``[0, M]``, is a fixed
per-record map into a public integer range, so the sensitivities below are exact
whatever the floating-point arithmetic inside it does.

Release of one exact rational ``q`` of sensitivity ``D`` (:func:`release`): choose an
output step ``h`` (a power of two about ``2^-30`` noise scales), round ``q/h`` to the
nearest integer (two neighbours' rounded values differ by at most ``ceil(D/h) + 1``)
and add discrete Laplace noise (pure DP) or discrete Gaussian noise (zCDP) of that
integer sensitivity, drawn by dpkit's exact samplers (Canonne, Kamath & Steinke 2020).
The output is ``h`` times a noisy integer: no floating-point trace of ``q``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit.accounting.events import Event
from dpkit.errors import InvalidParameter
from dpkit.mechanisms._base import ErrorBound
from dpkit.mechanisms.gaussian import DiscreteGaussian
from dpkit.mechanisms.laplace import DiscreteLaplace
from dpkit.random import Random
from dpkit.tools._checks import Budget

__all__ = ["Noisy", "Snapped", "output_step", "release", "snap"]

#: Output step of a release: about 2^-30 noise scales, so rounding to it is invisible.
_OUTPUT_BITS = 30
#: Rows per exact int64 partial sum (|y| < 2^41 keeps a chunk's sum below 2^62).
_CHUNK = 1 << 20


def _power_of_two_below(x: Fraction) -> int:
    """The exponent ``e`` with ``2^e <= x < 2^(e+1)``, for a positive rational ``x``."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    return e


@dataclass(frozen=True, slots=True)
class Snapped:
    """Exact integer statistics of the data snapped to the grid ``lower + g * {0..M}``."""

    lower: Fraction
    step: Fraction  # g, a power of two
    top: int  # M: snapped values are lower + g y0 with 0 <= y0 <= M
    n: int
    sum: int  # sum of y0
    centred_squares: int | None  # sum of (y0 - M // 2)^2, when asked for

    @property
    def centre(self) -> int:
        return self.top // 2

    @property
    def radius(self) -> int:
        """``max |y0 - centre|`` over the grid: ``ceil(M / 2)``."""
        return self.top - self.centre

    @property
    def centred_sum(self) -> int:
        return self.sum - self.n * self.centre


def snap(
    values: npt.NDArray[np.float64], bounds: tuple[float, float], bits: int, squares: bool
) -> Snapped:
    """Clamp ``values`` (NaN already dropped) to ``bounds`` and snap them to the grid."""
    lower, upper = Fraction(bounds[0]), Fraction(bounds[1])
    width = upper - lower
    step = Fraction(2) ** (_power_of_two_below(width) - bits)
    top = math.floor(width / step)  # in [2^bits, 2^(bits+1))
    g = float(step)
    y0 = np.empty(values.size, dtype=np.int64)
    total = 0
    squares_total = 0
    centre = top // 2
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, values.size, _CHUNK):
            block = np.clip(values[start : start + _CHUNK], bounds[0], bounds[1])
            scaled = np.rint((block - bounds[0]) / g)
            np.clip(scaled, 0, top, out=scaled)  # also catches an overflowed inf
            part = scaled.astype(np.int64)
            y0[start : start + part.size] = part
            total += int(part.sum())
            if squares:
                squares_total += _square_sum(part - centre)
    return Snapped(lower, step, top, int(values.size), total, squares_total if squares else None)


def _square_sum(y: npt.NDArray[np.int64]) -> int:
    """``sum(y^2)`` exactly for ``|y| < 2^31``: ``y = a 2^16 + b``, three int64 sums."""
    a = y >> 16  # floor division: b in [0, 2^16)
    b = y - (a << 16)
    aa, ab, bb = int((a * a).sum()), int((a * b).sum()), int((b * b).sum())
    return (aa << 32) + (ab << 17) + bb


@dataclass(frozen=True, slots=True)
class Noisy:
    """One released statistic: value and interval in real units, with its event."""

    value: float
    half_width: float  # |value - q| <= half_width with the component's confidence
    standard_deviation: float
    event: Event
    secure: bool

    def interval(self) -> tuple[float, float]:
        return self.value - self.half_width, self.value + self.half_width

    def error(self, confidence: float) -> ErrorBound:
        return ErrorBound(self.standard_deviation, self.half_width, confidence)


def output_step(sensitivity: Fraction, budget: Budget, share: float) -> Fraction:
    """The output step ``h`` of a release of ``sensitivity`` at ``share`` of ``budget``
    (module docstring); public parameters only. Raises :class:`InvalidParameter` when
    the noise is beyond the floats (bounds near the float limits with a small budget),
    so that the tools refuse before any noise is drawn."""
    scale = (
        sensitivity / Fraction(share)
        if budget.kind == "epsilon"
        else sensitivity / Fraction(math.sqrt(2.0 * share))
    )
    step = Fraction(2) ** (_power_of_two_below(scale) - _OUTPUT_BITS)
    if step > _LARGEST_STEP:
        raise InvalidParameter(
            "The noise of this release is beyond the range of floats: give narrower "
            "bounds or a larger budget."
        )
    _mechanism(math.ceil(sensitivity / step) + 1, budget, share)  # its own refusals
    return step


def _mechanism(k: int, budget: Budget, share: float) -> DiscreteLaplace | DiscreteGaussian:
    """The discrete noise of integer sensitivity ``k`` at ``share`` of ``budget``."""
    if budget.kind == "epsilon":
        return DiscreteLaplace.calibrate(epsilon=share, sensitivity=k)
    return DiscreteGaussian.calibrate(rho=share, sensitivity=k)


#: The largest output step whose noise scale (2^30 steps) and interval stay floats.
_LARGEST_STEP = Fraction(2) ** (1023 - _OUTPUT_BITS - 8)


def _to_float(x: Fraction) -> float:
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def release(
    q: Fraction | int,
    sensitivity: Fraction | int,
    budget: Budget,
    share: float,
    confidence: float,
    rng: Random,
    *,
    integer: bool = False,
) -> Noisy:
    """``q`` plus discrete noise calibrated to ``share`` of the budget (module docstring).

    ``integer=True``: ``q`` and ``sensitivity`` are integers (counts) and are released
    on the integers themselves (step 1).
    """
    if integer:
        step = Fraction(1)
        q_int = int(q)
        k = int(sensitivity)
    else:
        d = Fraction(sensitivity)
        step = output_step(d, budget, share)
        q_int = round(Fraction(q) / step)
        # |round(a) - round(b)| <= |a - b| + 1 for neighbours' a, b.
        k = math.ceil(d / step) + 1
    mechanism = _mechanism(k, budget, share)
    # Noise drawn around 0 and added in Python integers: no int64 limit on q.
    noise = mechanism.release(0, confidence=confidence, rng=rng)
    assert isinstance(noise.error, ErrorBound)
    h = float(step)  # finite: output_step checked it before the noise
    half = 0.0 if integer else h / 2  # the rounding of q to the output step
    return Noisy(
        # Correctly rounded, +-inf beyond the floats (a sum of huge values): never an
        # OverflowError, whose raising would depend on the data, after the noise.
        value=_to_float(Fraction(q_int + int(noise.value)) * step),
        half_width=noise.error.half_width * h + half,
        standard_deviation=noise.error.standard_deviation * h,
        event=noise.event,
        secure=noise.secure,
    )
