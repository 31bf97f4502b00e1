"""Boundary validation shared by every public entry point.

Each checker returns the validated value converted to its canonical type, or raises
:class:`~dpkit.errors.InvalidParameter` / :class:`~dpkit.errors.DataError` with the
standard message. Booleans are rejected where numbers are expected (``True`` is an
``int`` in Python, but ``epsilon=True`` is always a mistake).
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError, InvalidParameter, WeakGuaranteeWarning

__all__ = [
    "check_array",
    "check_count",
    "check_delta",
    "check_epsilon",
    "check_finite_float",
    "check_nonnegative",
    "check_positive",
    "check_probability",
]

#: Above this epsilon a guarantee is legal but meaningless in practice.
WEAK_EPSILON = 10.0


def _as_real(value: object, name: str, owner: str, expected: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidParameter.for_parameter(name, owner, expected, value)
    result = float(value)
    if math.isnan(result):
        raise InvalidParameter.for_parameter(name, owner, expected, value)
    return result


def check_finite_float(value: object, name: str, owner: str) -> float:
    """A finite real number."""
    expected = "a finite float"
    result = _as_real(value, name, owner, expected)
    if not math.isfinite(result):
        raise InvalidParameter.for_parameter(name, owner, expected, value)
    return result


def check_positive(value: object, name: str, owner: str, *, allow_inf: bool = False) -> float:
    """A real number in (0, inf) (or (0, inf] when ``allow_inf``)."""
    expected = "a float in (0, inf]" if allow_inf else "a float in (0, inf)"
    result = _as_real(value, name, owner, expected)
    if not result > 0 or (math.isinf(result) and not allow_inf):
        raise InvalidParameter.for_parameter(name, owner, expected, value)
    return result


def check_nonnegative(value: object, name: str, owner: str, *, allow_inf: bool = False) -> float:
    """A real number in [0, inf) (or [0, inf] when ``allow_inf``)."""
    expected = "a float in [0, inf]" if allow_inf else "a float in [0, inf)"
    result = _as_real(value, name, owner, expected)
    if not result >= 0 or (math.isinf(result) and not allow_inf):
        raise InvalidParameter.for_parameter(name, owner, expected, value)
    return result


def check_epsilon(value: object, owner: str, *, name: str = "epsilon") -> float:
    """A privacy parameter epsilon in (0, inf); warns when it is above 10."""
    result = check_positive(value, name, owner)
    if result > WEAK_EPSILON:
        warnings.warn(
            f"{owner}: {name}={result:g} gives a very weak guarantee (above {WEAK_EPSILON:g}).",
            WeakGuaranteeWarning,
            stacklevel=3,
        )
    return result


def check_delta(
    value: object, owner: str, *, name: str = "delta", allow_zero: bool = True
) -> float:
    """A privacy parameter delta in [0, 1) (or (0, 1) when zero is not allowed)."""
    expected = "a float in [0, 1)" if allow_zero else "a float in (0, 1)"
    result = _as_real(value, name, owner, expected)
    low_ok = result >= 0 if allow_zero else result > 0
    if not (low_ok and result < 1):
        raise InvalidParameter.for_parameter(name, owner, expected, value)
    return result


def check_probability(
    value: object, name: str, owner: str, *, open_low: bool = False, open_high: bool = False
) -> float:
    """A probability in [0, 1], with either end optionally excluded."""
    lo, hi = "(" if open_low else "[", ")" if open_high else "]"
    expected = f"a float in {lo}0, 1{hi}"
    result = _as_real(value, name, owner, expected)
    if result < 0 or result > 1 or (open_low and result == 0) or (open_high and result == 1):
        raise InvalidParameter.for_parameter(name, owner, expected, value)
    return result


def check_count(value: object, name: str, owner: str, *, minimum: int = 1) -> int:
    """An integer at least ``minimum``."""
    expected = f"an int >= {minimum}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < minimum:
        raise InvalidParameter.for_parameter(name, owner, expected, value)
    return int(value)


def check_array(
    data: Any,
    name: str,
    owner: str,
    *,
    integer: bool = False,
    allow_empty: bool = False,
    ndim: int | None = None,
) -> npt.NDArray[Any]:
    """Data as a finite float64 (or int64) NumPy array.

    Raises :class:`DataError` for empty input, non-numeric dtypes and NaN/inf; the
    message never shows the offending values (they may be private).
    """
    try:
        array = np.asarray(data)
    except (TypeError, ValueError) as err:
        raise DataError(f"{owner}: {name!r} could not be read as a numeric array.") from err
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise DataError(
            f"{owner}: {name!r} must hold numbers (integer or float); got dtype {array.dtype}."
        )
    if ndim is not None and array.ndim != ndim:
        raise DataError(f"{owner}: {name!r} must be {ndim}-dimensional; got {array.ndim} dims.")
    if array.size == 0 and not allow_empty:
        raise DataError(f"{owner}: {name!r} is empty.")
    if integer:
        if not np.issubdtype(array.dtype, np.integer):
            raise DataError(f"{owner}: {name!r} must hold integers; got dtype {array.dtype}.")
        return array.astype(np.int64, copy=False)
    array = array.astype(np.float64, copy=False)
    if not np.all(np.isfinite(array)):
        raise DataError(f"{owner}: {name!r} contains NaN or infinite values.")
    return array
