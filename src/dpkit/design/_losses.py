"""Loss functions of a noise design and their per-interval coefficients.

The linear programs of Selvi, Liu & Wiesemann (arXiv 2304.12681, Prop. 1 and 3) need,
for every noise interval ``I_i = [a_i, b_i)``, the *average* loss
``(1 / |I_i|) * integral of c over I_i`` (the objective of the upper bound: the exact
expected loss of a uniform draw on ``I_i``) and the *infimum* ``inf of c over I_i`` (the
objective of the lower bound). Both are closed forms for l1 and l2. For a user's
callable the average is computed by Gauss-Legendre quadrature and the infimum is the
value at the end of the interval nearest to 0, which is the infimum for losses that are
non-increasing on (-inf, 0] and non-decreasing on [0, inf) ("unimodal at 0"; l1, l2
and the paper's asymmetric loss are). That shape is checked on the interval ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit.errors import InvalidParameter

FloatArray = npt.NDArray[np.float64]
LossLike = str | Callable[[FloatArray], FloatArray]

# Gauss-Legendre with 8 nodes is exact for polynomials of degree <= 15 on each interval;
# the paper's losses are polynomials on each interval (kinks fall on interval ends,
# since 0 is an interval end).
_QUADRATURE_NODES = 8


@dataclass(frozen=True)
class Loss:
    """A loss ``c(x) >= 0`` of the noise ``x``, with a name for reports."""

    name: str
    function: Callable[[FloatArray], FloatArray]

    def average(self, lower: FloatArray, upper: FloatArray) -> FloatArray:
        """Average of ``c`` over each interval ``[lower, upper)``."""
        if self.name == "l1":
            both = (lower**2 + upper**2) / (2.0 * (upper - lower))
            return np.where(
                lower >= 0, (lower + upper) / 2, np.where(upper <= 0, -(lower + upper) / 2, both)
            )
        # The forms below give bit-identical results on mirrored intervals [-b, -a) and
        # [a, b) for an even loss (each operation commutes), so the design can tell that
        # its LP is mirror-invariant (noise_design._problem).
        if self.name == "l2":
            # (b^3 - a^3) / (3 (b - a)) without the cancellation
            return (upper * upper + lower * lower + upper * lower) / 3.0
        nodes, weights = np.polynomial.legendre.leggauss(_QUADRATURE_NODES)
        middle, half = (upper + lower) / 2.0, (upper - lower) / 2.0
        points = middle[:, None] + half[:, None] * nodes[None, :]
        values = self._evaluate(points)
        # nodes and weights are symmetric: add the values at -t and t first
        pair = _QUADRATURE_NODES // 2
        paired = values[:, :pair] + values[:, ::-1][:, :pair]
        return np.asarray(paired @ weights[:pair] / 2.0, dtype=np.float64)

    def infimum(self, lower: FloatArray, upper: FloatArray) -> FloatArray:
        """Infimum of ``c`` over each interval (exact for losses unimodal at 0)."""
        nearest = np.where(lower >= 0, lower, np.where(upper <= 0, upper, 0.0))
        return self._evaluate(nearest)

    def _evaluate(self, x: FloatArray) -> FloatArray:
        values = np.asarray(self.function(np.asarray(x, dtype=np.float64)), dtype=np.float64)
        if values.shape != np.shape(x):
            raise InvalidParameter(
                f"The loss {self.name!r} must map an array of shape {np.shape(x)} to one of the "
                f"same shape (vectorised, like numpy.abs). Got shape {values.shape} instead."
            )
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise InvalidParameter(
                f"The loss {self.name!r} must return finite values >= 0 on the noise support."
            )
        return values


def make_loss(loss: object, owner: str) -> Loss:
    """Validate ``loss``: ``"l1"``, ``"l2"`` or a vectorised callable ``c(x) >= 0``."""
    if loss == "l1":
        return Loss("l1", np.abs)
    if loss == "l2":
        return Loss("l2", np.square)
    if callable(loss) and not isinstance(loss, str):
        name = getattr(loss, "__name__", type(loss).__name__)
        return Loss(str(name), loss)
    raise InvalidParameter.for_parameter(
        "loss", owner, "'l1', 'l2' or a vectorised callable c(x) >= 0", loss
    )


def check_unimodal(loss: Loss, edges: FloatArray, owner: str) -> None:
    """Refuse a callable that is not non-increasing then non-decreasing around 0.

    ``edges`` are the interval ends (sorted, including 0). The lower bound takes the
    infimum of ``c`` on an interval at its end nearest to 0, which needs that shape.
    """
    if loss.name in ("l1", "l2"):
        return
    values = loss._evaluate(edges)
    left, right = values[edges <= 0], values[edges >= 0]
    if np.any(np.diff(left) > 0) or np.any(np.diff(right) < 0):
        raise InvalidParameter(
            f"The 'loss' parameter of {owner} must be non-increasing on (-inf, 0] and "
            f"non-decreasing on [0, inf) (the lower bound takes each interval's infimum at "
            f"its end nearest to 0). Got {loss.name!r}, which is not, on the interval ends."
        )
