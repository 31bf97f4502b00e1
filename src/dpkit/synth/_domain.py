"""The discrete domain that synthesis works on, and one noisy marginal measurement.

Every column of a synthetic table is coded as an integer ``0 .. size - 1`` over a
*public* domain (categories from public keys or private key selection, numeric and date
columns as bins of public or privately released ranges, NULL as a value of its own).
A marginal over columns ``(a, b)`` is then a dense array of shape ``(size_a, size_b)``
of counts, and everything the private algorithms (MST, AIM) and the model fitted to
their measurements exchange is such arrays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit.errors import InvalidParameter

__all__ = ["Domain", "Measurement", "marginal_counts"]


@dataclass(frozen=True, slots=True)
class Domain:
    """Column names and the number of codes of each (public)."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.names) != len(self.sizes) or len(set(self.names)) != len(self.names):
            raise InvalidParameter(
                f"Domain: names must be distinct and match sizes; got {self.names!r}, "
                f"{self.sizes!r}."
            )
        for name, size in zip(self.names, self.sizes, strict=True):
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise InvalidParameter(
                    f"Domain: the size of {name!r} must be a positive integer; got {size!r}."
                )

    def size_of(self, name: str) -> int:
        """Number of codes of column ``name``."""
        return self.sizes[self.index(name)]

    def index(self, name: str) -> int:
        """Position of column ``name``."""
        try:
            return self.names.index(name)
        except ValueError:
            raise InvalidParameter(
                f"Domain: no column {name!r}; columns: {list(self.names)}."
            ) from None

    def shape(self, columns: Sequence[str]) -> tuple[int, ...]:
        """Shape of the marginal over ``columns`` (in the order given)."""
        return tuple(self.size_of(c) for c in columns)

    def cells(self, columns: Sequence[str]) -> int:
        """Number of cells of the marginal over ``columns``."""
        return math.prod(self.shape(columns))

    def project(self, columns: Sequence[str]) -> Domain:
        """The domain of ``columns`` (in the order given)."""
        return Domain(tuple(columns), self.shape(columns))


@dataclass(frozen=True, slots=True)
class Measurement:
    """A noisy marginal: ``values`` = true counts over ``columns`` + N(0, sigma^2) noise
    per cell (discrete Gaussian in dpkit; its variance is at most sigma^2).

    ``values`` has the shape ``domain.shape(columns)``. The model is fitted by weighted
    least squares with weight ``1 / sigma`` (Private-PGM's loss, McKenna, Sheldon &
    Miklau, ICML 2019).
    """

    columns: tuple[str, ...]
    values: npt.NDArray[np.float64]
    sigma: float


def marginal_counts(
    codes: npt.NDArray[np.int64], domain: Domain, columns: Sequence[str]
) -> npt.NDArray[np.float64]:
    """Counts of the rows of ``codes`` (one column per domain column) over ``columns``."""
    shape = domain.shape(columns)
    if codes.shape[0] == 0:
        return np.zeros(shape)
    index = [domain.index(c) for c in columns]
    cells = np.ravel_multi_index(tuple(codes[:, i] for i in index), shape)
    return np.bincount(cells, minlength=math.prod(shape)).astype(np.float64).reshape(shape)
