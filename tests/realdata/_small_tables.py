"""Small real tables shipped inside installed packages, and their truth computed by pandas.

For the real-data tests of ``describe`` on small and wide tables (issue 28): tables under
1,000 rows and one with 65 columns, each read from a package that is installed (nothing
is downloaded), with the column dtypes that package gives (integers int64, floats
float64; a categorical column would become strings).

========================  ===========  =============================================
loader                    rows x cols  from
========================  ===========  =============================================
:func:`breast_cancer`     569 x 31     scikit-learn ``load_breast_cancer``
:func:`star98`            303 x 22     statsmodels ``datasets.star98``
:func:`anes96`            944 x 11     statsmodels ``datasets.anes96``
:func:`digits`            1,797 x 65   scikit-learn ``load_digits`` (8x8 pixels, 0-16)
========================  ===========  =============================================

:func:`truth` computes, with pandas, what a private summary of a table estimates (row
count, per column: values, missing share, mean, percentiles, max, 0/1-ness, distinct
values, share of the most common value), and :func:`rank_of` gives a value's rank
interval among a column's values, to check a released percentile against its stated
rank accuracy.

The test suite runs with ``--import-mode=importlib`` and ``tests/`` is not a package, so a
test loads this module by path::

    spec = importlib.util.spec_from_file_location(
        "_small_tables", Path(__file__).parent / "_small_tables.py"
    )
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "PERCENTILES",
    "TABLES",
    "anes96",
    "as_given",
    "breast_cancer",
    "digits",
    "rank_of",
    "star98",
    "truth",
]

PERCENTILES = (5, 25, 50, 75, 95)


def as_given(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with integer columns as int64, floats as float64 and categorical (or
    other non-numeric) columns as strings, missing values kept missing."""
    out = {}
    for name, values in frame.items():
        if pd.api.types.is_bool_dtype(values):
            out[name] = values
        elif pd.api.types.is_integer_dtype(values):
            out[name] = values.astype("int64")
        elif pd.api.types.is_float_dtype(values):
            out[name] = values.astype("float64")
        else:
            out[name] = values.astype("str")  # pandas keeps NaN as missing here
    return pd.DataFrame(out, index=frame.index)


def breast_cancer() -> pd.DataFrame:
    """Wisconsin breast cancer, 569 x 31: 30 float64 measurements and ``target`` (int64,
    0/1). scikit-learn ``load_breast_cancer(as_frame=True).frame``."""
    from sklearn.datasets import load_breast_cancer

    return as_given(load_breast_cancer(as_frame=True).frame)


def star98() -> pd.DataFrame:
    """California schools' 1998 test results (STAR98), 303 x 22 (counts of students,
    shares, spending), float64 as statsmodels gives them.
    ``statsmodels.datasets.star98``."""
    from statsmodels.datasets import star98 as data

    return as_given(data.load_pandas().data)


def anes96() -> pd.DataFrame:
    """American National Election Study 1996, 944 x 11, all float64 as statsmodels gives
    them (integer codes such as ``PID`` 0-6 and ``vote`` 0/1, and ``popul``, ``logpopul``).
    statsmodels ``datasets.anes96.load_pandas().data``."""
    from statsmodels.datasets import anes96 as data

    return as_given(data.load_pandas().data)


def digits() -> pd.DataFrame:
    """Handwritten digits, 1,797 x 65: 64 pixel columns ``pixel_0_0`` .. ``pixel_7_7``
    (float64 holding the integers 0-16, several constant 0) and ``target`` (int64,
    0-9). scikit-learn ``load_digits(as_frame=True).frame``."""
    from sklearn.datasets import load_digits

    return as_given(load_digits(as_frame=True).frame)


TABLES: dict[str, Callable[[], pd.DataFrame]] = {
    "breast_cancer": breast_cancer,
    "star98": star98,
    "anes96": anes96,
    "digits": digits,
}


def rank_of(values: Iterable[Any], x: float) -> tuple[int, int]:
    """The rank interval of ``x`` among ``values`` (missing values dropped):
    ``(number of values < x, number of values <= x)``.

    A released percentile ``x`` for the fraction ``q`` of ``n`` values is exact when
    ``q * n`` lies in this interval; its rank error is the distance from ``q * n`` to it.
    """
    data = pd.Series(list(values)).dropna().to_numpy(dtype=float)
    return int(np.count_nonzero(data < x)), int(np.count_nonzero(data <= x))


def _column_truth(values: pd.Series, rows: int) -> dict[str, Any]:
    present = values.dropna()
    count = len(present)
    counts = present.value_counts()
    out: dict[str, Any] = {
        "rows": rows,
        "count": count,
        "missing_share": 1.0 - count / rows if rows else 0.0,
        "distinct": len(counts),
        "top_share": float(counts.iloc[0] / count) if count else None,
        "is_binary": False,
        "mean": None,
        "max": None,
        **{f"p{p}": None for p in PERCENTILES},
    }
    if pd.api.types.is_numeric_dtype(values) and count:  # bool counts as numeric
        data = present.astype("float64")
        out["is_binary"] = bool(data.isin((0.0, 1.0)).all())
        out["mean"] = float(data.mean())
        out["max"] = float(data.max())
        quantiles = data.quantile([p / 100 for p in PERCENTILES])  # linear interpolation
        out.update({f"p{p}": float(q) for p, q in zip(PERCENTILES, quantiles, strict=True)})
    return out


def truth(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """The true statistics of every column of ``frame``, computed with pandas.

    Returns ``{column: stats}``, where ``stats`` has (plain Python numbers, ``None``
    where a statistic does not apply: non-numeric column, or no values):

    - ``rows``: the table's row count (the same in every column's entry);
    - ``count``: non-missing values; ``missing_share``: ``1 - count / rows``;
    - ``mean``, ``max``, and ``p5``, ``p25``, ``p50``, ``p75``, ``p95``: pandas'
      ``Series.quantile`` (linear interpolation between order statistics; use
      :func:`rank_of` to judge a released percentile by rank instead);
    - ``is_binary``: the column has values and every one is 0 or 1 (a column of only 0s
      counts; a non-numeric column never does);
    - ``distinct``: distinct non-missing values;
    - ``top_share``: the share of the most common value among the non-missing values.
    """
    rows = len(frame)
    return {str(name): _column_truth(values, rows) for name, values in frame.items()}
