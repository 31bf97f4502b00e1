"""The public domain of a synthesized column, as the analyst gives it.

:class:`Categories` (a public list of values), :class:`Bins` (equal-width bins over
public bounds), :class:`PrivateBins` (bins of a numeric column whose range and edges are
found privately, inside the run's one charge) and :class:`Cuts` (bins cut at edges
released inside the run; made by :mod:`dpkit.analytics._synthesis_domains`, not by
users). :mod:`dpkit.synth._columns` turns them into codings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dpkit.analytics.query import KeySet
from dpkit.errors import InvalidParameter

__all__ = ["DEFAULT_BINS", "MAX_PRIVATE_BINS", "Bins", "Categories", "Cuts", "PrivateBins"]

#: Default number of bins of a numeric column (AIM's and MST's preprocessing: ~32).
DEFAULT_BINS = 32
#: How the bins of a numeric column whose domain is found privately are cut.
PRIVATE_EDGES = ("quantile", "equal")
#: The most bins a column found privately may ask for (quantile cuts may add up to half
#: as many again for values that hold several quantiles: see ``quantile_cuts``).
MAX_PRIVATE_BINS = 512


@dataclass(frozen=True, slots=True)
class Categories:
    """A public list of a column's values (not read from the private data)."""

    values: tuple[Any, ...]
    nulls: bool = True

    def __init__(self, values: Sequence[Any] | KeySet, *, nulls: bool = True) -> None:
        if isinstance(values, KeySet):
            if len(values.columns) != 1:
                raise InvalidParameter(
                    f"Categories: a KeySet of one column is needed; got {values.columns}."
                )
            values = [key[0] for key in values.keys]
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise InvalidParameter(
                f"Categories: values must be a list of public values; got {values!r}."
            )
        object.__setattr__(self, "values", tuple(values))
        object.__setattr__(self, "nulls", bool(nulls))


@dataclass(frozen=True, slots=True)
class Bins:
    """Equal-width bins over public bounds ``[low, high]`` (numbers, dates or datetimes)."""

    low: Any
    high: Any
    bins: int = DEFAULT_BINS
    nulls: bool = True


@dataclass(frozen=True, slots=True)
class PrivateBins:
    """Bins of a numeric, date or timestamp column whose range is found privately, inside
    the run's charge.

    ``edges="quantile"`` cuts the found range at private quantiles of the column (levels
    ``1/bins .. (bins-1)/bins``; a value holding several of them -- a point mass such
    as the zeros of a mostly-zero column -- gets a bin of its own), the range first
    narrowed to the quantiles at ``1/(2 bins)`` and ``1 - 1/(2 bins)``; ``"equal"`` cuts it
    into ``bins`` equal-width bins. The domain string ``"private"`` means
    ``PrivateBins()`` for a numeric column.
    """

    bins: int = DEFAULT_BINS
    edges: str = "quantile"
    nulls: bool = True

    def __post_init__(self) -> None:
        bins = self.bins
        if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_PRIVATE_BINS:
            raise InvalidParameter.for_parameter(
                "bins", "PrivateBins", f"an integer in [1, {MAX_PRIVATE_BINS}]", bins
            )
        if self.edges not in PRIVATE_EDGES:
            raise InvalidParameter.for_parameter(
                "edges", "PrivateBins", "'quantile' or 'equal'", self.edges
            )
        if not isinstance(self.nulls, bool):
            raise InvalidParameter.for_parameter("nulls", "PrivateBins", "a bool", self.nulls)


@dataclass(frozen=True, slots=True)
class Cuts:
    """Bins over ``[low, high]`` cut at ``cuts`` (strictly increasing, inside the bounds):
    released edges (``quantile_cuts``), not a public parameter of users."""

    low: Any
    high: Any
    cuts: tuple[float, ...]
    nulls: bool = True
