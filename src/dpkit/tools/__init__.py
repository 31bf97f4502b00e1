"""Array tools: private count, sum, mean, variance, standard deviation and histograms.

The functions diffprivlib users reach for first (``diffprivlib.tools``), on NumPy
arrays, pandas Series and lists, with dpkit's conventions: required public bounds
(never derived from the data), exact discrete noise on a fixed-point grid, an interval
with every result, and a :class:`~dpkit.Release` that composes with
:mod:`dpkit.accounting`. Quantiles, the median, max and min are in
:mod:`dpkit.estimators` (``dp.quantile``, ``dp.median``, ``dp.max``, ``dp.min``) and take
the same keywords.

* :func:`count`, :func:`sum`, :func:`mean`, :func:`var`, :func:`std`
  (``dpkit.tools._moments``);
* :func:`histogram`, :func:`histogram2d` (``dpkit.tools._histogram``);
* :class:`ClippedErrorBound`, the accuracy they report.

See docs/tools.md.
"""

from dpkit.tools._bound import ClippedErrorBound
from dpkit.tools._histogram import histogram, histogram2d
from dpkit.tools._moments import count, mean, std, var
from dpkit.tools._moments import sum as sum  # dp.sum, as dp.max and dp.min

__all__ = [
    "ClippedErrorBound",
    "count",
    "histogram",
    "histogram2d",
    "mean",
    "std",
    "sum",
    "var",
]
