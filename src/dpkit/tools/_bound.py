"""The accuracy statement of the array tools: an :class:`ErrorBound` cut to a valid range."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpkit.mechanisms._base import ErrorBound

__all__ = ["ClippedErrorBound"]


@dataclass(frozen=True, slots=True)
class ClippedErrorBound(ErrorBound):
    """An :class:`~dpkit.ErrorBound` whose interval is also cut to ``[lower, upper]``.

    As for every ``ErrorBound``: with probability at least ``confidence``,
    ``|released - exact| <= half_width`` (for each coordinate). In addition the exact
    value lies in ``[lower, upper]`` on that same event, so :meth:`interval` returns
    ``[value - half_width, value + half_width]`` intersected with it. ``[lower, upper]``
    is either the statistic's public range (a count is >= 0, a mean lies within the
    bounds, a variance in ``[0, (upper - lower)^2 / 4]``) or, for a ratio (mean,
    variance, standard deviation), the interval propagated from its components'
    intervals, cut to that range.

    ``uninformative`` is True when the noisy count was too small for a ratio: the count's
    own interval reaches 0, so nothing bounds the ratio and the interval is the whole
    public range. The value is still the (clamped) estimate, but it is mostly noise; a
    report should say "too few records for a mean" rather than show it as a number.
    ``standard_deviation`` is then, and for every ratio, a first-order (delta-method)
    approximation; ``half_width`` and :meth:`interval` are rigorous.
    """

    lower: float
    upper: float
    uninformative: bool = False

    def interval(self, value: Any) -> tuple[Any, Any]:
        """``[value - half_width, value + half_width]`` cut to ``[lower, upper]``."""
        low, high = ErrorBound.interval(self, value)
        # fmax/fmin: an end that overflowed to NaN (inf - inf) is the public end.
        if np.ndim(low) == 0:
            return float(np.fmax(low, self.lower)), float(np.fmin(high, self.upper))
        return np.fmax(low, self.lower), np.fmin(high, self.upper)
