"""Exact AboveThreshold comparisons: is ``a_i + b2 X_i >= T + b1 X_0``?

``X_0`` (the threshold's noise) and every ``X_i`` (a query's noise) are standard
Laplace variables, written as ``F(U)`` for the increasing Laplace inverse CDF ``F`` of
a uniform real ``U`` (see :mod:`dpkit.selection._argmax`). Each comparison is decided
on the real numbers: a float64 filter over 53-bit prefixes of the uniforms settles
almost every query (certified margin ``FLOAT_MARGIN`` times the operands'
magnitude), and the rare undecided one is settled in :mod:`decimal` after extending
both uniforms 64 bits at a time. ``U_0`` is one real number for the whole run: its
extra bits, once drawn, are kept, and the float filter keeps using its 53-bit
interval, which still contains it. Ties have probability zero, so ``>=`` and ``>``
give the same mechanism.
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal

import numpy as np
import numpy.typing as npt

from dpkit.errors import InternalError
from dpkit.noise._certified import FLOAT_MARGIN, PREFIX_BITS
from dpkit.random import Random
from dpkit.selection._argmax import (
    CHUNK,
    exact_context,
    noise_at,
    noise_exact,
    precision_for,
    uniform_ends,
)

__all__ = ["NoisyThreshold"]

FloatArray = npt.NDArray[np.float64]

_SHIFT = np.uint64(64 - PREFIX_BITS)
_EXTRA_BITS = 64
_MAX_ROUNDS = 200
_FIRST_CHUNK = 64


class _Uniform:
    """A uniform real known by the prefix ``[numerator, numerator + 1) / 2^bits``."""

    __slots__ = ("bits", "numerator")

    def __init__(self, numerator: int, bits: int = PREFIX_BITS) -> None:
        self.numerator, self.bits = numerator, bits

    def extend(self, rng: Random) -> None:
        self.numerator = (self.numerator << _EXTRA_BITS) | rng.getrandbits(_EXTRA_BITS)
        self.bits += _EXTRA_BITS

    def noise_ends(self) -> tuple[Decimal, Decimal]:
        low, high = uniform_ends(self.numerator, self.bits)
        return noise_exact("laplace", low), noise_exact("laplace", high)


class NoisyThreshold:
    """The noisy threshold ``T + b1 X_0`` of one AboveThreshold run, and its comparisons.

    Parameters
    ----------
    threshold:
        ``T``, a float with ``|T| <= 2^1000``.
    threshold_scale, query_scale:
        ``b1`` and ``b2``, positive floats at most ``2^1000``.
    rng:
        The run's random source (the threshold's uniform is drawn here).
    """

    def __init__(
        self, threshold: float, threshold_scale: float, query_scale: float, rng: Random
    ) -> None:
        self.threshold = threshold
        self.threshold_scale = threshold_scale
        self.query_scale = query_scale
        self.rng = rng
        prefix = int(rng.uint64(1)[0] >> _SHIFT)
        self._uniform = _Uniform(prefix)
        with np.errstate(divide="ignore"):  # log(0): the prefix 0 has -inf as lower end
            ends = noise_at("laplace", np.array([prefix, prefix + 1.0]))
        self._noise_low, self._noise_high = float(ends[0]), float(ends[1])

    def positives(self, answers: FloatArray, count: int) -> list[int]:
        """Indices of the first ``count`` answers reaching the noisy threshold, in order.

        The threshold noise is drawn once for the whole run and never refreshed (Lyu,
        Su & Li 2017, Alg. 1); each answer gets fresh noise. Noise drawn beyond a hit
        was never compared, so restarting after it with fresh draws samples the same
        law; with ``count = 1`` the draws are exactly those of :meth:`first_above`.
        """
        found: list[int] = []
        start = 0
        while len(found) < count and start < answers.size:
            hit = self.first_above(answers[start:])
            if hit is None:
                break
            found.append(start + hit)
            start += hit + 1
        return found

    def first_above(self, answers: FloatArray) -> int | None:
        """Index of the first answer whose noisy value reaches the noisy threshold, or None.

        Noise is drawn in chunks that double from 64, so a run that halts early draws
        little more than it uses (the unused draws do not affect the output).
        """
        start, size = 0, _FIRST_CHUNK
        while start < answers.size:
            stop = min(start + size, answers.size)
            hit = self._first_in_chunk(answers[start:stop])
            if hit is not None:
                return start + hit
            start, size = stop, min(2 * size, CHUNK)
        return None

    def _first_in_chunk(self, answers: FloatArray) -> int | None:
        words = self.rng.uint64(answers.size)
        prefixes = words >> _SHIFT
        above, below = self._float_decisions(answers, prefixes)
        for i in np.flatnonzero(~below):
            if above[i] or self._exact_above(float(answers[i]), int(prefixes[i])):
                return int(i)
        return None

    def _float_decisions(
        self, answers: FloatArray, prefixes: npt.NDArray[np.uint64]
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """Where the float filter proves ``D_i > 0`` and where it proves ``D_i < 0``.

        ``D_i = (a_i - T) + b2 X_i - b1 X_0``. Interval ends are combined so that no
        ``inf - inf`` can arise (``X``'s lower end is never ``+inf``, its upper end
        never ``-inf``); the margin is ``FLOAT_MARGIN`` times the sum of the operands'
        magnitudes, which covers the subtraction, the products and the ``log`` calls.
        """
        b1, b2 = self.threshold_scale, self.query_scale
        x = prefixes.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            q_low, q_high = noise_at("laplace", x), noise_at("laplace", x + 1.0)
            gap = answers - self.threshold
            low = gap + b2 * q_low - b1 * self._noise_high
            high = gap + b2 * q_high - b1 * self._noise_low
            noise_size = np.maximum(np.abs(q_low), np.abs(q_high)) + 1.0
            threshold_size = max(abs(self._noise_low), abs(self._noise_high)) + 1.0
            margin = FLOAT_MARGIN * (np.abs(gap) + b2 * noise_size + b1 * threshold_size)
            return low - margin > 0, high + margin < 0

    def _exact_above(self, answer: float, prefix: int) -> bool:
        """Decide ``D > 0`` exactly for one query whose float filter was inconclusive."""
        query = _Uniform(prefix)
        gap_float = (answer, self.threshold)
        b1, b2 = Decimal(self.threshold_scale), Decimal(self.query_scale)
        for _ in range(_MAX_ROUNDS):
            query.extend(self.rng)
            self._uniform.extend(self.rng)
            precision = precision_for(max(query.bits, self._uniform.bits))
            with decimal.localcontext(exact_context(precision)):
                gap = Decimal(gap_float[0]) - Decimal(gap_float[1])
                q_low, q_high = query.noise_ends()
                t_low, t_high = self._uniform.noise_ends()
                unit = Decimal(10) ** (6 - precision)
                self._tighten(t_low, t_high, unit)
                size = (
                    abs(gap)
                    + b2 * (max(abs(q_low), abs(q_high)) + 1)
                    + b1 * (max(abs(t_low), abs(t_high)) + 1)
                )
                padding = size * unit
                if gap + b2 * q_low - b1 * t_high - padding > 0:
                    return True
                if gap + b2 * q_high - b1 * t_low + padding < 0:
                    return False
        raise InternalError("An AboveThreshold comparison could not be decided.")

    def _tighten(self, low: Decimal, high: Decimal, unit: Decimal) -> None:
        """Narrow the float filter's bounds on ``X_0`` to what its refined bits say.

        Rarely matters, but when ``U_0`` fell in an end interval (``X_0`` unbounded at
        53 bits) it keeps the rest of the run on the fast float filter.
        """
        padding = (max(abs(low), abs(high)) + 1) * unit
        new_low = math.nextafter(float(low - padding), -math.inf)
        new_high = math.nextafter(float(high + padding), math.inf)
        self._noise_low = max(self._noise_low, new_low)
        self._noise_high = min(self._noise_high, new_high)
