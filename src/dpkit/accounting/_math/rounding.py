"""Conservative rounding for privacy bounds.

A privacy bound (an epsilon, a delta, a rho, a noise scale) computed in floating point
can land a little below the true value. Every bound dpkit returns is rounded in the
safe direction with the helpers below:

- :func:`sum_up`, :func:`mul_up`, :func:`div_up` and :func:`fraction_up` are exact:
  they compute the true rational value with :class:`fractions.Fraction` and return the
  smallest float that is not below it.
- :func:`up` steps a computed value a few units in the last place towards +inf, and
  :func:`up_terms` adds a few ulps of the largest term of a short sum (whose error is
  absolute, not relative, when the terms cancel). They are used after closed forms and
  after root finders (whose answer is first moved to the safe side of the bracket).
- :func:`inflate` multiplies by ``1 + rel`` (rounded up) for long computations (sums of
  many terms, special functions) whose relative error is bounded by ``rel``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from fractions import Fraction

__all__ = [
    "div_down",
    "div_up",
    "down",
    "fraction_down",
    "fraction_up",
    "inflate",
    "mul_up",
    "product_up",
    "settle_up",
    "sum_up",
    "up",
    "up_terms",
]


def fraction_up(value: Fraction) -> float:
    """The smallest float that is >= ``value`` (``inf`` on overflow)."""
    try:
        # int / int true division (used by Fraction.__float__) is correctly rounded.
        result = float(value)
    except OverflowError:
        return math.inf
    if Fraction(result) < value:
        result = math.nextafter(result, math.inf)
    return result


def sum_up(values: Iterable[float]) -> float:
    """The exact sum of finite or infinite non-NaN floats, rounded up."""
    total = Fraction(0)
    for value in values:
        if math.isinf(value):
            if value > 0:
                return math.inf
            raise ValueError("sum_up got -inf")  # never a privacy parameter
        total += Fraction(value)
    return fraction_up(total)


def mul_up(count: int, value: float) -> float:
    """The exact product ``count * value``, rounded up (``value`` may be ``inf``)."""
    if math.isinf(value):
        return math.inf if count > 0 else 0.0
    return fraction_up(count * Fraction(value))


def product_up(a: float, b: float) -> float:
    """The exact product of two finite floats, rounded up."""
    return fraction_up(Fraction(a) * Fraction(b))


def div_up(numerator: float, denominator: float) -> float:
    """The exact quotient of two positive finite floats, rounded up."""
    return fraction_up(Fraction(numerator) / Fraction(denominator))


def fraction_down(value: Fraction) -> float:
    """The largest float that is <= ``value`` (for parameters that must not grow)."""
    result = float(value)
    if Fraction(result) > value:
        result = math.nextafter(result, -math.inf)
    return result


def div_down(numerator: float, denominator: float) -> float:
    """The exact quotient of two positive finite floats, rounded down.

    For example a noise multiplier ``scale / sensitivity`` stated in an event: rounding
    it down can only overstate the privacy cost the event implies.
    """
    return fraction_down(Fraction(numerator) / Fraction(denominator))


def up(value: float, ulps: int = 2) -> float:
    """``value`` moved ``ulps`` representable floats towards +inf."""
    for _ in range(ulps):
        value = math.nextafter(value, math.inf)
    return value


def down(value: float, ulps: int = 2) -> float:
    """``value`` moved ``ulps`` representable floats towards -inf."""
    for _ in range(ulps):
        value = math.nextafter(value, -math.inf)
    return value


def up_terms(value: float, *terms: float, ulps: int = 8) -> float:
    """``value`` plus ``ulps`` units in the last place of its largest term, rounded up.

    For a closed form computed as a short sum of ``terms`` (each correctly rounded or
    within a few ulps): the absolute error is a few ulps of the largest term even when
    the terms cancel and ``value`` is much smaller than they are.
    """
    scale = max(abs(term) for term in terms) if terms else abs(value)
    return up(value + ulps * math.ulp(scale), 1)


def inflate(value: float, rel: float) -> float:
    """``value * (1 + rel)`` rounded up, for a non-negative ``value``."""
    if value == 0.0 or math.isinf(value):
        return value
    return up(value * (1.0 + rel), 2)


def settle_up(excess: Callable[[float], float], guess: float, safe: float) -> float:
    """A point at or above ``guess`` where ``excess <= 0``, two ulps above another such point.

    For root finders. ``excess`` is non-increasing up to rounding noise and
    ``excess(safe) <= 0``. Brent's answer may sit a hair on the wrong side of the root,
    so we step up through ulps (and, if that is slow, bisect towards ``safe``) until
    ``excess`` is non-positive both at a point and two ulps above it; the upper point is
    returned, so the check holds exactly at the value the caller reports.
    """
    x = guess
    for _ in range(256):
        if excess(x) <= 0.0:
            candidate = up(x, 2)
            if excess(candidate) <= 0.0:
                return candidate
            x = candidate
        else:
            x = math.nextafter(x, math.inf) if x > 0 else math.ulp(0.0)
    lo, hi = x, safe
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if excess(mid) <= 0.0:
            hi = mid
        else:
            lo = mid
    candidate = up(hi, 2)
    return candidate if excess(candidate) <= 0.0 else safe
