"""Validation of per-group counts, shared by the group-wise mechanisms."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.errors import DataError

__all__ = ["check_counts"]

# Counts are added to float64 noise: above 2^53 not every integer is a float.
_MAX_COUNT = 2**53


def check_counts(counts: Any, owner: str) -> npt.NDArray[np.float64]:
    """Per-group counts (scalar or array) as float64 holding non-negative integers.

    Integer dtypes are required (a float array is refused even when its values are
    whole: a count that arrives as a float is usually a bug upstream). Raises
    :class:`~dpkit.errors.DataError` without quoting any value (counts are private).
    """
    array = check.check_array(counts, "counts", owner, integer=True)
    if np.any(array < 0):
        raise DataError(f"{owner}: 'counts' must be non-negative integers; got a negative count.")
    if np.any(array > _MAX_COUNT):
        raise DataError(f"{owner}: 'counts' must be at most 2^53; got a larger count.")
    return array.astype(np.float64)
