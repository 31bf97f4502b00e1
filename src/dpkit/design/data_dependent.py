"""Data-dependent optimal noise (Selvi, Liu & Wiesemann, arXiv 2304.12681, §3).

The noise may depend on the cell of a partition of the query range that holds the
true answer: one distribution ``p_k`` per cell ``Φ_k = [b_k, b_{k+1})`` (the last cell
closed; answers outside ``[b_0, b_K]`` are clamped to it, which keeps the
sensitivity). The design minimises ``sum_k w_k E[c(X_k)]`` subject to
(epsilon, delta)-DP between every pair of cells that neighbouring answers can fall in:
for answers ``ϕ ∈ Φ_k``, ``ϕ' ∈ Φ_m`` with ``|ϕ - ϕ'| <= Δf`` the outputs
``ϕ + X_k`` and ``ϕ' + X_m`` must be (epsilon, delta)-indistinguishable, i.e. the
hockey-stick divergence of ``p_k`` from ``p_m`` shifted by ``φ = ϕ' - ϕ`` is at most
``delta`` for every ``φ`` in ``[max(b_m - b_{k+1}, -Δf), min(b_{m+1} - b_k, Δf)]``.
With cell ends on the noise grid ``beta Z``, the divergence is linear in ``φ`` between
grid points (see ``dpkit/design/_exact.py``), so the grid shifts of that range are
enough: the paper's ``P'(L, beta)`` (Prop. 5) for uniform cells, and its extension to
non-uniform partitions (App. C.3; the seed's cylinder-bands example). Optional
per-instance constraints ``E[c(X_k)] <= o`` (instance optimality, seed 003).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.design import _core, _exact, _lp
from dpkit.design._distribution import PiecewiseUniform
from dpkit.design._losses import Loss, LossLike, make_loss
from dpkit.design._release import EntrywiseDesign
from dpkit.errors import InvalidParameter
from dpkit.random import Random

__all__ = ["DataDependentDesign", "design_data_dependent_noise"]


def _check_cells(cells: object, beta: float, owner: str) -> npt.NDArray[np.int64]:
    try:
        ends = np.asarray(cells, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameter.for_parameter(
            "cells", owner, "an increasing array of cell ends", cells
        ) from None
    if (
        ends.ndim != 1
        or ends.size < 2
        or not np.all(np.isfinite(ends))
        or np.any(np.diff(ends) <= 0)
    ):
        raise InvalidParameter.for_parameter(
            "cells", owner, "at least two finite, strictly increasing cell ends", cells
        )
    units = np.rint(ends / beta)
    if np.any(np.abs(units * beta - ends) > 1e-9 * np.maximum(1.0, np.abs(ends))):
        raise InvalidParameter.for_parameter(
            "cells", owner, f"cell ends that are multiples of the granularity ({beta!r})", cells
        )
    return units.astype(np.int64)


def _pairs(ends: npt.NDArray[np.int64], shifts: int) -> list[tuple[int, int, int]]:
    """(k, m, j) for every pair of cells and grid shift j that neighbours can realise."""
    pairs: list[tuple[int, int, int]] = []
    count = ends.size - 1
    for k in range(count):
        for m in range(count):
            low = max(int(ends[m] - ends[k + 1]), -shifts)
            high = min(int(ends[m + 1] - ends[k]), shifts)
            pairs.extend((k, m, j) for j in range(low, high + 1) if not (k == m and j == 0))
    return pairs


class DataDependentDesign(EntrywiseDesign):
    """One optimised noise per cell of the query range: the result of
    :func:`design_data_dependent_noise`.

    Privacy
    -------
    ``(epsilon, delta)``-DP for a query of sensitivity ``sensitivity``: the answer is
    clamped to the cells' range, its cell picks the distribution, and the divergence
    between every pair of cells that neighbouring answers can reach is re-checked
    exactly on the released masses (``achieved_delta``). Event:
    ``ApproxEvent(epsilon, delta)``; ``release`` composes over the entries of an array
    unless ``parallel=True``, as :meth:`dpkit.design.NoiseDesign.release`.

    Accuracy
    --------
    ``Release.error`` is None: the accuracy depends on the cell, which is private.

    Attributes
    ----------
    cells:
        Cell ends ``b_0 < ... < b_K``.
    distributions:
        Per cell, the interval masses (rows) over the common ``edges``.
    objective:
        Weighted expected loss of the design.
    lower_bound:
        A lower bound on the optimum of that loss.
    expected_losses:
        Expected loss of each cell's noise.
    """

    def __init__(
        self,
        *,
        parts: list[PiecewiseUniform],
        cells: npt.NDArray[np.float64],
        weights: npt.NDArray[np.float64],
        loss: Loss,
        grid: _core.Grid,
        delta: float,
        achieved_delta: float,
        lower_bound: float | None,
    ) -> None:
        self._parts = parts
        self._loss = loss
        self.cells = cells
        self.weights = weights
        self.epsilon = grid.epsilon
        self.delta = delta
        self.sensitivity = grid.sensitivity
        self.granularity = grid.beta
        self.achieved_delta = achieved_delta
        self.expected_losses = np.array([part.expected(loss) for part in parts])
        self.objective = float(weights @ self.expected_losses)
        self.lower_bound = lower_bound

    @property
    def distributions(self) -> npt.NDArray[np.float64]:
        return np.stack([part.masses for part in self._parts])

    @property
    def edges(self) -> npt.NDArray[np.float64]:
        return self._parts[0].edges

    def cell_of(self, value: npt.ArrayLike) -> Any:
        """Index of the cell holding each (clamped) value."""
        clamped = np.clip(np.asarray(value, dtype=np.float64), self.cells[0], self.cells[-1])
        index = np.searchsorted(self.cells, clamped, side="right") - 1
        return np.minimum(index, self.cells.size - 2)

    def plot(self, ax: Any = None, **style: Any) -> Any:
        """Plot every cell's noise density (matplotlib; returns the axis)."""
        if ax is None:
            import matplotlib.pyplot as plt  # optional dependency, imported on use

            _, ax = plt.subplots(figsize=(6, 3.5))
        for k, part in enumerate(self._parts):
            label = f"cell [{self.cells[k]:g}, {self.cells[k + 1]:g})"
            part.plot_on(ax, label=label, **style)
        ax.set_xlabel("noise x")
        ax.set_ylabel("density")
        return ax

    def _check_value(self, value: Any) -> npt.NDArray[np.float64]:
        return check.check_array(value, "value", "DataDependentDesign.release", allow_empty=True)

    def _sample(self, value: npt.NDArray[np.float64], rng: Random) -> Any:
        clamped = np.clip(value, self.cells[0], self.cells[-1])
        cell = self.cell_of(clamped).reshape(-1)
        flat = clamped.reshape(-1)
        out = np.empty_like(flat)
        for k, part in enumerate(self._parts):
            chosen = np.flatnonzero(cell == k)
            if chosen.size:
                out[chosen] = part.release(flat[chosen], rng)
        return out.reshape(value.shape)

    def _repr_fields(self) -> tuple[str, ...]:
        return ("epsilon", "delta", "sensitivity", "granularity")


def _cell_weights(
    weights: object, ends: npt.NDArray[np.float64], owner: str
) -> npt.NDArray[np.float64]:
    if weights is None:
        raw = np.diff(ends)  # a uniform weight over the query range
    else:
        raw = np.asarray(weights, dtype=np.float64)
        if (
            raw.shape != (ends.size - 1,)
            or not np.all(np.isfinite(raw))
            or np.any(raw < 0)
            or raw.sum() <= 0
        ):
            raise InvalidParameter.for_parameter(
                "weights", owner, f"{ends.size - 1} finite weights >= 0, not all zero", weights
            )
    return np.asarray(raw / raw.sum(), dtype=np.float64)


def _limits(max_loss: object, count: int, owner: str) -> npt.NDArray[np.float64] | None:
    if max_loss is None:
        return None
    limits = np.broadcast_to(np.asarray(max_loss, dtype=np.float64), (count,)).copy()
    if not np.all(np.isfinite(limits)) or np.any(limits <= 0):
        raise InvalidParameter.for_parameter(
            "max_loss", owner, "a positive float (or one per cell)", max_loss
        )
    return limits


def design_data_dependent_noise(
    *,
    epsilon: float,
    delta: float,
    sensitivity: float = 1.0,
    loss: LossLike = "l1",
    granularity: float,
    support: float,
    cells: npt.ArrayLike,
    weights: npt.ArrayLike | None = None,
    max_loss: float | npt.ArrayLike | None = None,
    symmetric: bool = False,
    monotone: bool = False,
    lower_bound: bool = True,
    max_memory: int | None = None,
) -> DataDependentDesign:
    """Optimal (epsilon, delta)-DP noise that depends on the cell of the true answer.

    Selvi, Liu & Wiesemann (arXiv 2304.12681), §3 (Prop. 5, Theorem 2) and App. C.3;
    see the module docstring for the constraints and why they suffice.

    Parameters
    ----------
    epsilon, delta, sensitivity, loss, granularity:
        As in :func:`dpkit.design.design_noise`.
    support, symmetric, monotone, lower_bound, max_memory:
        As in :func:`dpkit.design.design_noise` (the support is that of every cell's noise).
    cells:
        Cell ends ``b_0 < ... < b_K``, multiples of ``granularity``; uniform or not
        (e.g. fine near 0 and coarse in the tails).
    weights:
        Importance ``w_k`` of each cell (public, never data-derived); default
        proportional to the cell widths (uniform over the range). Normalised to sum 1.
    max_loss:
        Per-instance bound ``E[c(X_k)] <= max_loss`` (a float or one per cell).

    Returns
    -------
    DataDependentDesign
    """
    owner = "design_data_dependent_noise"
    grid = _core.check_grid(epsilon, delta, sensitivity, granularity, support, owner)
    measure = make_loss(loss, owner)
    memory = _core.check_memory(max_memory, owner)
    ends = _check_cells(cells, grid.beta, owner)
    cell_weights = _cell_weights(weights, ends.astype(np.float64) * grid.beta, owner)
    limits = _limits(max_loss, ends.size - 1, owner)
    pairs = _pairs(ends, grid.shifts)
    _core.check_size(
        grid, ends.size - 1, pairs, lower_bound=lower_bound, max_memory=memory, owner=owner
    )
    problems = []
    for lower in (False, True) if lower_bound else (False,):
        pad = grid.shifts if lower else 0
        lo, hi = -grid.half - pad, grid.half + pad
        average, infimum = _core.interval_costs(measure, lo, hi, grid.beta, owner)
        costs = infimum if lower else average
        tails = (
            (
                float(measure.infimum(np.array([-np.inf]), np.array([lo * grid.beta]))[0]),
                float(measure.infimum(np.array([hi * grid.beta]), np.array([np.inf]))[0]),
            )
            if lower
            else None
        )
        problems.append(
            _lp.Problem(
                distributions=ends.size - 1,
                lo=lo,
                hi=hi,
                central=(-grid.half, grid.half),
                costs=costs,
                weights=cell_weights,
                pairs=pairs,
                exp_epsilon=float(np.exp(grid.epsilon)),
                delta=grid.delta,
                tail_costs=tails,
                symmetric=symmetric,
                monotone=monotone,
                instance_costs=costs if limits is not None else None,
                instance_limits=limits,
            )
        )
    counts, achieved = _core.solve_verified(
        problems[0], epsilon=grid.epsilon, max_memory=memory, owner=owner
    )
    bound = None
    if lower_bound:
        bound = _core.certified_lower_bound(problems[1], max_memory=memory, owner=owner)
    return DataDependentDesign(
        parts=[PiecewiseUniform(row, -grid.half, grid.beta) for row in counts],
        cells=ends.astype(np.float64) * grid.beta,
        weights=cell_weights,
        loss=measure,
        grid=grid,
        delta=_core.stated_delta(grid.delta, achieved, owner),
        achieved_delta=_exact.round_up(achieved),
        lower_bound=bound,
    )
