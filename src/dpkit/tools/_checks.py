"""Boundary checks of the array tools: data, bounds, budget, relation, confidence.

Everything here runs before any randomness is drawn, and every refusal depends on
public parameters and the data's public shape and type only (never on its values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.accounting.guarantees import ZCDP, PureDP
from dpkit.errors import DataError, InvalidParameter

__all__ = [
    "Budget",
    "Neighbouring",
    "check_bounds",
    "check_budget",
    "check_confidence",
    "check_neighbouring",
    "numeric_values",
    "present_count",
]

Neighbouring = Literal["add_remove", "replace"]
_NEIGHBOURING = ("add_remove", "replace")


@dataclass(frozen=True, slots=True)
class Budget:
    """A pure-DP ``epsilon`` (discrete Laplace noise) or a zCDP ``rho`` (discrete Gaussian)."""

    kind: Literal["epsilon", "rho"]
    total: float

    @property
    def guarantee(self) -> PureDP | ZCDP:
        return PureDP(self.total) if self.kind == "epsilon" else ZCDP(self.total)

    def split(self, parts: int) -> float:
        """``total / parts`` rounded down, so ``parts`` shares never sum above the total
        (basic composition of pure DP and of zCDP both add the parameters)."""
        share = self.total / parts
        while Fraction(share) * parts > Fraction(self.total):
            share = math.nextafter(share, 0.0)
        return share


def check_budget(epsilon: object, rho: object, owner: str) -> Budget:
    """Exactly one of ``epsilon`` (pure DP) and ``rho`` (zCDP), as for ``dp.max``."""
    if (epsilon is None) == (rho is None):
        raise InvalidParameter(
            f"{owner}: give exactly one of epsilon= (pure DP, discrete Laplace noise) and "
            f"rho= (zCDP, discrete Gaussian noise); got epsilon={epsilon!r}, rho={rho!r}."
        )
    if epsilon is not None:
        return Budget("epsilon", check.check_epsilon(epsilon, owner))
    return Budget("rho", check.check_positive(rho, "rho", owner))


def check_neighbouring(value: object, owner: str) -> Neighbouring:
    if value not in _NEIGHBOURING:
        raise InvalidParameter.for_parameter(
            "neighbouring", owner, f"one of {_NEIGHBOURING}", value
        )
    return value  # type: ignore[return-value]


def check_confidence(value: object, owner: str) -> float:
    return check.check_probability(value, "confidence", owner, open_low=True, open_high=True)


def check_bounds(bounds: object, owner: str, name: str = "bounds") -> tuple[float, float]:
    """Public ``(lower, upper)``: finite floats, ``lower < upper``; required."""
    expected = "a pair (lower, upper) of finite floats with lower < upper"
    if bounds is None:
        raise InvalidParameter(
            f"{owner}: {name}=(lower, upper) is required: public bounds of the data, known "
            "without looking at it (values outside are clamped to them). dpkit never "
            "derives bounds from the data silently; for private bounds use dp.quantiles."
        )
    if isinstance(bounds, str | bytes):
        raise InvalidParameter.for_parameter(name, owner, expected, bounds)
    try:
        pair: tuple[object, ...] = tuple(bounds)  # type: ignore[arg-type]
        lower, upper = pair
    except (TypeError, ValueError):
        raise InvalidParameter.for_parameter(name, owner, expected, bounds) from None
    lo = check.check_finite_float(lower, f"{name}[0]", owner)
    hi = check.check_finite_float(upper, f"{name}[1]", owner)
    if not lo < hi:
        raise InvalidParameter.for_parameter(name, owner, expected, bounds)
    return lo, hi


def _array(data: object, owner: str, name: str) -> npt.NDArray[Any]:
    if isinstance(data, str | bytes) or np.isscalar(data) or data is None:
        raise InvalidParameter.for_parameter(
            name, owner, "a 1-D array, list or pandas Series", type(data).__name__
        )
    to_numpy = getattr(data, "to_numpy", None)  # pandas/polars: nullable dtypes -> NaN
    array: npt.NDArray[Any]
    if callable(to_numpy):
        try:
            array = np.asarray(to_numpy(dtype=np.float64, na_value=np.nan))
        except (TypeError, ValueError):
            array = np.asarray(to_numpy())
    else:
        try:
            array = np.asarray(data)
        except (TypeError, ValueError) as err:
            raise DataError(f"{owner}: {name!r} could not be read as an array.") from err
    if array.ndim != 1:
        raise InvalidParameter.for_parameter(
            name, owner, "1-D (one value per record)", f"an array of shape {array.shape}"
        )
    return array


def numeric_values(
    data: object, owner: str, name: str = "data", *, drop_nan: bool = True
) -> npt.NDArray[np.float64]:
    """The data as a 1-D float64 array with NaN dropped (as ``dp.quantile`` does).

    Infinities stay: the callers clamp them to the bounds. A non-numeric dtype (strings,
    booleans, objects) is a :class:`DataError` (booleans: cast to int first).
    """
    array = _array(data, owner, name)
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise DataError(
            f"{owner}: {name!r} must hold numbers (integer or float); got dtype {array.dtype}."
        )
    values = array.astype(np.float64, copy=False)
    return values[~np.isnan(values)] if drop_nan else values


def _missing(array: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    if np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.complexfloating):
        return np.asarray(np.isnan(array), dtype=np.bool_)
    if np.issubdtype(array.dtype, np.datetime64) or np.issubdtype(array.dtype, np.timedelta64):
        return np.asarray(np.isnat(array), dtype=np.bool_)
    if array.dtype == object:
        out = np.zeros(array.shape, dtype=np.bool_)
        for i, v in enumerate(array):
            # None, float NaN, pandas NA/NaT: the values that are not equal to themselves
            # (or refuse to say) count as missing.
            try:
                out[i] = v is None or bool(v != v)
            except (TypeError, ValueError):
                out[i] = True
        return out
    return np.zeros(array.shape, dtype=np.bool_)


def present_count(data: object, owner: str) -> int:
    """The number of non-missing records of a 1-D array of any dtype."""
    to_numpy = getattr(data, "to_numpy", None)
    isna = getattr(data, "isna", None)
    if callable(to_numpy) and callable(isna):  # pandas Series: its own notion of missing
        array = np.asarray(to_numpy())
        if array.ndim != 1:
            raise InvalidParameter.for_parameter(
                "data", owner, "1-D (one value per record)", f"an array of shape {array.shape}"
            )
        return int(array.size - int(np.asarray(isna()).sum()))
    array = _array(data, owner, "data")
    return int(array.size - int(_missing(array).sum()))
