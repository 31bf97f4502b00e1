"""Certified decisions on lazily refined uniform random numbers.

Every exact sampler in :mod:`dpkit.noise` works by *inversion*: it draws a uniform
real number ``U`` in (0, 1) and outputs a discrete value that is a step function of
``U`` (an integer ``floor(F(U))`` or a comparison ``F(U) > 0`` for a monotone ``F``).
The output is exact when every such decision is taken on the true real number ``U``,
not on a rounded copy of it. We never hold ``U`` in full; we hold a prefix of its
binary expansion, i.e. an interval ``[k/2^b, (k+1)/2^b)`` that contains it, and
extend the prefix with fresh random bits only when the decision is not yet determined
by the interval (the "partially sampled random number" idea; Karney 2016, Devroye
1986 Ch. 2). Because the decision taken is the one the infinite-precision ``U`` would
give, the output distribution is exactly the mathematical one.

Two layers:

* a vectorised *filter* in float64 (this module's callers): compute ``F`` at the
  interval's end with NumPy and accept the decision only when it is separated from
  every decision boundary by a margin ``FLOAT_MARGIN`` times the magnitude of the
  operands -- ``2^-44``, over 500 times the error of a few correctly-rounded or
  4-ulp (SIMD ``log``) operations on doubles. Almost every draw is decided here.
* a scalar *fallback* (:func:`refine`) for the few undecided draws (about one in
  10^10 per boundary crossing): it extends the prefix by 64 random bits at a time and
  re-evaluates ``F`` at both ends of the shrinking interval in Python's
  :mod:`decimal`, whose ``ln``/``exp`` are correctly rounded, with the interval ends
  rounded outwards and a padding of ``10^(6-precision)`` times the operands'
  magnitude. Precision grows with the prefix, so the loop ends with probability 1.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from decimal import Decimal
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from dpkit.errors import InternalError
from dpkit.random import Random

__all__ = [
    "FLOAT_MARGIN",
    "PREFIX_BITS",
    "floor_decision",
    "refine",
    "sign_decision",
    "uniform_prefix",
]

T = TypeVar("T")

#: Bits of ``U`` taken from each 64-bit word by the float filter (the other 11 bits
#: of the word are free for a sign).
PREFIX_BITS = 53
#: Relative error margin of the float filter (see the module docstring).
FLOAT_MARGIN = 2.0**-44
_EXTRA_BITS = 64
_START_PRECISION = 50
_PRECISION_STEP = 25
_MAX_ROUNDS = 200


def uniform_prefix(
    words: npt.NDArray[np.uint64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Split 64-bit words into 53-bit uniform prefixes.

    Returns ``(k, a)``: ``k`` is the prefix as a float (an exact integer below
    2^53) and ``a = k * 2^-53`` the left end of the interval ``[a, a + 2^-53)`` that
    holds ``U``. Both are exact in float64.
    """
    k = (words >> np.uint64(64 - PREFIX_BITS)).astype(np.float64)
    return k, k * 2.0**-PREFIX_BITS


def floor_decision(
    low: npt.NDArray[np.float64], high: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """``floor`` of a value known to lie in ``[low, high]``, and where it is determined."""
    with np.errstate(invalid="ignore"):
        floor_low = np.floor(low)
        decided = (floor_low == np.floor(high)) & np.isfinite(floor_low)
    return np.where(decided, floor_low, 0).astype(np.int64), decided


def sign_decision(
    low: npt.NDArray[np.float64], high: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Whether a value known to lie in ``[low, high]`` is positive, and where determined."""
    with np.errstate(invalid="ignore"):
        positive = low > 0
        decided = positive | (high < 0)
    return positive, decided


def refine(
    prefix: int,
    evaluate: Callable[[Decimal], tuple[Decimal, Decimal]],
    decide: Callable[[Decimal, Decimal], T | None],
    rng: Random,
    *,
    prefix_bits: int = PREFIX_BITS,
) -> T:
    """Decide exactly on a uniform ``U`` known to lie in ``[prefix, prefix+1) / 2^bits``.

    Parameters
    ----------
    prefix:
        The known leading bits of ``U``.
    evaluate:
        ``u -> (F(u), magnitude)`` computed in the active :mod:`decimal` context; ``F``
        must be monotone in ``u`` and ``magnitude`` must bound the absolute size of
        the operands of the computation (it scales the rounding padding).
    decide:
        ``(low, high) -> decision or None`` for a value known to lie in ``[low, high]``.
    rng:
        Source of the extra bits.

    Returns
    -------
    The decision the real number ``U`` gives.
    """
    numerator, bits, precision = prefix, prefix_bits, _START_PRECISION
    for _ in range(_MAX_ROUNDS):
        numerator = (numerator << _EXTRA_BITS) | rng.getrandbits(_EXTRA_BITS)
        bits += _EXTRA_BITS
        precision += _PRECISION_STEP
        with decimal.localcontext() as context:
            context.prec = precision
            context.Emin, context.Emax = -999_999_999, 999_999_999
            context.traps[decimal.Overflow] = False
            context.traps[decimal.DivisionByZero] = False
            context.traps[decimal.InvalidOperation] = False
            denominator = Decimal(2) ** bits  # exact: 2^bits has far fewer digits than precision
            context.rounding = decimal.ROUND_FLOOR
            u_low = Decimal(numerator) / denominator
            context.rounding = decimal.ROUND_CEILING
            u_high = Decimal(numerator + 1) / denominator
            context.rounding = decimal.ROUND_HALF_EVEN
            value_low, magnitude_low = evaluate(u_low)
            value_high, magnitude_high = evaluate(u_high)
            if not (value_low.is_finite() and value_high.is_finite()):
                continue
            padding = (abs(magnitude_low) + abs(magnitude_high) + 1) * Decimal(10) ** (
                6 - precision
            )
            low = min(value_low, value_high) - padding
            high = max(value_low, value_high) + padding
            result = decide(low, high)
        if result is not None:
            return result
    raise InternalError("An exact sampler could not decide after 200 refinements.")


def decide_floor(low: Decimal, high: Decimal) -> int | None:
    """The common ``floor`` of ``[low, high]``, or None when the interval spans an integer."""
    floor_low = int(low.to_integral_value(rounding=decimal.ROUND_FLOOR))
    floor_high = int(high.to_integral_value(rounding=decimal.ROUND_FLOOR))
    return floor_low if floor_low == floor_high else None


def decide_sign(low: Decimal, high: Decimal) -> bool | None:
    """True if ``[low, high]`` is above zero, False if below, None if it contains zero."""
    if low > 0:
        return True
    if high < 0:
        return False
    return None
