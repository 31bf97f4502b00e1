"""Training rows as a DP fit must see them: what is out of domain is dropped, never refused.

A fit is a function of the whole table, and "it raised" is one of its outputs. So
whether ``fit`` succeeds must not depend on any one row (DESIGN.md: out-of-domain data
is clamped or dropped as the guarantee says). These helpers drop each row that cannot
be used -- a non-finite feature, a label outside the public classes, a non-finite
target -- which is a per-row transformation: adding or removing a row changes the kept
rows by at most that row, so every sensitivity argument holds unchanged. An empty
table (all rows dropped, or none given) is fitted like any other: noise only.
Only the *schema* (not numeric, not 2-D, no feature, y of the wrong length) raises.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError, InvalidParameter
from dpkit.learn._base import MAX_ROWS, FloatArray
from dpkit.random import Random, RandomLike, as_random


def training_features(X: Any, owner: str) -> FloatArray:
    """``X`` as a 2-D float64 array with at least one column (any number of rows).

    Raises only for the schema; non-finite values stay (see :func:`finite_rows`).
    """
    try:
        array = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise DataError(f"{owner}: X must be numeric (a 2-D array of numbers).") from err
    if array.ndim != 2:
        raise DataError(f"{owner}: X must be 2-D (rows x features); got {array.ndim} dimension(s).")
    if array.shape[1] == 0:
        raise DataError(f"{owner}: X has no feature column.")
    if array.shape[0] >= MAX_ROWS:
        # 2^32 rows of float64 take 32 GiB per feature: beyond what a NumPy fit holds in
        # memory, where it would fail anyway. Exact sums are proven below this size.
        raise DataError(f"{owner}: at most {MAX_ROWS - 1} rows are supported; fit on a sample.")
    return array


def training_target(y: Any, rows: int, owner: str) -> npt.NDArray[Any]:
    """``y`` as a 1-D array with one entry per row of X (schema check only)."""
    array = np.asarray(y)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1 or array.shape[0] != rows:
        raise DataError(f"{owner}: y must be 1-D with one entry per row of X.")
    return array


def finite_rows(features: FloatArray) -> npt.NDArray[np.bool_]:
    """Rows whose features are all finite (the others are dropped)."""
    mask: npt.NDArray[np.bool_] = np.asarray(np.isfinite(features).all(axis=1), dtype=bool)
    return mask


def real_target(y: npt.NDArray[Any], owner: str) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """A real target and the mask of its finite entries."""
    try:
        values = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise DataError(f"{owner}: y must be numeric.") from err
    return values, np.isfinite(values)


def regression_rows(X: Any, y: Any, owner: str) -> tuple[FloatArray, FloatArray]:
    """The rows a regressor uses: a finite feature row and a finite real target.

    The others are dropped (per row, never refused); only the schema raises. One
    helper for ``LinearRegression.fit`` and ``dp.tune``'s validation rows, so a row
    ``fit`` would not train on is never scored either.
    """
    features = training_features(X, owner)
    target, finite_target = real_target(training_target(y, features.shape[0], owner), owner)
    keep = finite_target & finite_rows(features)
    return features[keep], target[keep]


def model_random(rng: RandomLike | None, owner: str) -> Random:
    """The model's random source; NumPy generators are refused.

    scikit-learn's ``clone`` deep-copies parameters: clones of a model holding a NumPy
    generator would start from the same state and draw the same noise, and the
    difference of two such fits on neighbouring tables is the row itself. dpkit's own
    generators are shared by ``clone`` instead (``Random.__deepcopy__``).
    """
    # Generator, RandomState, BitGenerator, ... all live in numpy.random.
    if isinstance(rng, np.random.Generator) or type(rng).__module__.startswith("numpy.random"):
        raise InvalidParameter.for_parameter(
            "rng",
            owner,
            "None (secure), a dpkit Random, or an int seed (tests only); not a NumPy "
            "generator, which clone() would copy into identical noise",
            rng,
        )
    return as_random(rng)


def scaled_norms(rows: FloatArray) -> FloatArray:
    """L2 norms of the rows without overflow or underflow (inf only past float range).

    Each row is divided by its largest magnitude first (``m * ||x / m||``), as LAPACK's
    ``nrm2`` does; a row of zeros has norm 0.
    """
    scale = np.max(np.abs(rows), axis=1) if rows.shape[1] else np.zeros(rows.shape[0])
    safe = np.where(scale > 0, scale, 1.0)
    with np.errstate(over="ignore"):
        unit = rows / safe[:, None]
        norms: FloatArray = scale * np.sqrt(np.einsum("ij,ij->i", unit, unit))
    return norms


def clip_then_scale(values: FloatArray, lower: FloatArray, upper: FloatArray) -> FloatArray:
    """Clip to ``[lower, upper]`` first, then map to [-1, 1] (no overflow on huge rows)."""
    centre = lower / 2 + upper / 2  # halves first: no overflow for wide finite bounds
    radius = upper / 2 - lower / 2
    scaled: FloatArray = np.clip((np.clip(values, lower, upper) - centre) / radius, -1.0, 1.0)
    return scaled


def clip_to_norm(values: FloatArray, norm: float) -> FloatArray:
    """Rows scaled down (never up) to L2 norm at most ``norm`` (a hair below it).

    Norms come from :func:`scaled_norms` (no overflow); a row of norm 0 stays 0 and a
    row whose norm overflows becomes 0. The 2^-40 margin exceeds the rounding of the
    norm and of the product, so a clipped row's norm never exceeds ``norm``.
    """
    norms = scaled_norms(values)
    target = norm * (1.0 - 2.0**-40)
    factor = np.where(norms > target, target / np.where(norms > target, norms, 1.0), 1.0)
    with np.errstate(under="ignore"):
        clipped: FloatArray = values * factor[:, None]
    return clipped
