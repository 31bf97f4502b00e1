"""Ready-made losses with their failure bounds, for wrapping dpkit's own estimators.

* :func:`rank_loss` -- the inverse-sensitivity loss of a quantile on a grid: how many
  records must be added or removed (or replaced) for ``y`` to be a ``q``-quantile.
  Sensitivity 1 by construction (a distance to a set; Lemma 1 of the
  inverse-sensitivity post), so it meets the contract of
  :class:`~dpkit.reliability.RepeatUntilSuccess` with no extra work.
* :func:`rank_target` -- ``alpha`` for a failure probability ``beta`` of the coarse
  quantile mechanism (``dp.quantile(..., refine=False)``): ``P[loss > k] <= beta`` with
  ``k = floor(ln(|grid| / beta) / c)``, ``c = epsilon/2`` rounded down (Lemma 3 and
  Thm 4 of the post; :func:`dpkit.estimators.inverse_sensitivity.loss_radius`), for
  every dataset with at least one record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dpkit import _validation as check
from dpkit.errors import InvalidParameter
from dpkit.estimators._quantile_loss import Neighbouring, quantile_loss, rational_level
from dpkit.estimators.grid import Grid
from dpkit.estimators.inverse_sensitivity import loss_radius
from dpkit.selection.exponential import ExponentialMechanism

__all__ = ["rank_loss", "rank_target"]


def _check_grid(grid: object, owner: str) -> Grid:
    if not isinstance(grid, Grid):
        raise InvalidParameter.for_parameter("grid", owner, "a dpkit.Grid", type(grid).__name__)
    return grid


def rank_loss(
    grid: Grid, q: float = 0.5, *, neighbouring: Neighbouring = "add_remove"
) -> Callable[[float, Any], float]:
    """``loss(y, data)``: the inverse-sensitivity loss of the grid point nearest ``y``.

    The data are snapped to ``grid`` as :func:`dpkit.quantile` snaps them; the loss is
    0 when ``y`` is a ``q``-quantile of the snapped data and grows by one per record
    that would have to change. Sensitivity 1 under ``neighbouring``.
    """
    owner = "rank_loss"
    grid = _check_grid(grid, owner)
    level = rational_level(check.check_probability(q, "q", owner))
    if neighbouring not in ("add_remove", "replace"):
        raise InvalidParameter.for_parameter(
            "neighbouring", owner, "'add_remove' or 'replace'", neighbouring
        )

    def loss(y: float, data: Any) -> float:
        counts = grid.histogram(np.asarray(data))
        index = int(grid.snap(np.asarray([y]))[0])
        return float(quantile_loss(counts, level, neighbouring)[index])

    return loss


def rank_target(grid: Grid, *, epsilon: float, failure_probability: float) -> int:
    """``alpha`` with ``P[rank_loss > alpha] <= failure_probability`` for the coarse quantile.

    For ``dp.quantile(data, q, grid=grid, epsilon=epsilon, refine=False)`` on any data
    with at least one record (``rank_radius`` of its ``RankErrorBound`` at confidence
    ``1 - failure_probability``).
    """
    owner = "rank_target"
    grid = _check_grid(grid, owner)
    epsilon = check.check_epsilon(epsilon, owner)
    beta = check.check_probability(
        failure_probability, "failure_probability", owner, open_low=True, open_high=True
    )
    mechanism = ExponentialMechanism(epsilon=epsilon, sensitivity=1.0)
    return loss_radius(grid.size, coefficient=mechanism.coefficient, confidence=1.0 - beta)
