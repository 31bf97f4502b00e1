"""Estimators beyond global sensitivity.

* :func:`inverse_sensitivity` -- the inverse sensitivity mechanism (Asi & Duchi 2020)
  for a user-supplied path-length loss over a finite grid;
* :func:`quantile`, :func:`quantiles`, :func:`median` -- inverse-sensitivity quantiles
  on linear or logarithmic :class:`Grid` s;
* :func:`shifted_inverse_sensitivity` -- Fang, Dong & Yi's shifted inverse for monotone
  functions, by noisy binary search or the exponential mechanism;
* :func:`max`, :func:`min`, :func:`user_sum`, :func:`user_count`, :func:`count_distinct`
  -- its ready applications, at the level of a person with any number of rows.
"""

from dpkit.estimators.grid import Grid
from dpkit.estimators.inverse_sensitivity import inverse_sensitivity
from dpkit.estimators.monotone import count_distinct, user_count, user_sum
from dpkit.estimators.monotone import maximum as max
from dpkit.estimators.monotone import minimum as min
from dpkit.estimators.quantiles import median, quantile, quantiles
from dpkit.estimators.shifted_inverse import shifted_inverse_sensitivity

__all__ = [
    "Grid",
    "count_distinct",
    "inverse_sensitivity",
    "max",
    "median",
    "min",
    "quantile",
    "quantiles",
    "shifted_inverse_sensitivity",
    "user_count",
    "user_sum",
]
