"""UCI Adult as a numeric design matrix for the DP models, scaled with public bounds only.

Numeric columns are clipped to :data:`dpkit.data.ADULT_PUBLIC_BOUNDS` and mapped to
[0, 1] (capital gains and losses on a log scale, ``log1p(x) / log1p(upper)``, because
they are mostly 0 with a long tail); categorical columns are one-hot encoded over
their documented categories (the vocabulary of ``adult.names``, as found in the
bundled file; ``"?"`` is its own category). Nothing is fitted to the data, so using
the matrix costs no privacy budget beyond what a model spends on it.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

#: Numeric features scaled linearly to [0, 1] within the public bounds.
LINEAR_FEATURES: Final = ("age", "education_num", "hours_per_week")
#: Numeric features scaled by log1p within the public bounds.
LOG_FEATURES: Final = ("capital_gain", "capital_loss")
#: Categorical features, one-hot encoded.
CATEGORICAL_FEATURES: Final = (
    "workclass",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
)


def load_adult_features() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], list[str]]:
    """``(X, y, names)``: Adult's 32,561 rows as features in [0, 1] and ``y = income > 50K``.

    Every row of ``X`` has L2 norm at most ``sqrt(5 + 6) < 3.32`` (five numeric features
    in [0, 1] and one 1 per categorical column): a public ``data_norm``.

    Examples
    --------
    >>> from dpkit.data import load_adult_features
    >>> X, y, names = load_adult_features()
    >>> X.shape, int(y.sum()) > 0, names[0]
    ((32561, 49), True, 'age')
    >>> bool(X.min() >= 0 and X.max() <= 1)
    True
    """
    from dpkit.data import ADULT_PUBLIC_BOUNDS, load_adult

    adult = load_adult()
    columns: list[npt.NDArray[np.float64]] = []
    names: list[str] = []
    for name in LINEAR_FEATURES:
        low, high = ADULT_PUBLIC_BOUNDS[name]
        columns.append((np.clip(adult[name], low, high) - low) / (high - low))
        names.append(name)
    for name in LOG_FEATURES:
        low, high = ADULT_PUBLIC_BOUNDS[name]
        columns.append(np.log1p(np.clip(adult[name], low, high) - low) / np.log1p(high - low))
        names.append(name)
    for name in CATEGORICAL_FEATURES:
        for category in np.unique(adult[name]):
            columns.append((adult[name] == category).astype(np.float64))
            names.append(f"{name}={category}")
    X = np.column_stack(columns).astype(np.float64)
    y = (adult["income"] == ">50K").astype(np.int64)
    return X, y, names
