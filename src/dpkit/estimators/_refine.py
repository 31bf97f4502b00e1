"""Exact refined quantile: the inverse sensitivity mechanism on a fine grid, by rejection.

Target. Given a linear or log :class:`~dpkit.estimators.Grid` of ``J`` points, the
*fine grid* ``F`` cuts the position axis into ``|F| = (J - 1) 2^b`` equal cells: in
units of coarse steps (log-steps for a log grid), fine cell ``i`` is
``[i / 2^b, (i + 1) / 2^b)``, ``0 <= i < |F|``, and its point is the cell's left end,
so coarse point ``j`` is fine point ``j 2^b``. Coarse cell ``j`` (the snapping region
``[j - 1/2, j + 1/2)`` of coarse point ``j``, clipped to ``[0, J - 1]``) is the union
of fine cells ``[j 2^b - 2^(b-1), j 2^b + 2^(b-1))`` clipped to ``[0, |F|)``: fine
cells are nested in coarse cells. A record ``x`` is *fine-snapped* to
``clip(floor(t(x) 2^b), first(j), last(j))`` where ``j`` is its coarse index by the
exact cut rule of :mod:`dpkit.estimators.grid` and ``t(x)`` its float position
(``(x - lower) / step``, or ``(ln x - ln lower) / h``). That is a fixed, public
per-record map, and by construction the coarse histogram of the fine-snapped data is
exactly :meth:`Grid.histogram`. The released fine point ``i`` is the float
``lower + (i * step) / 2^b`` (linear: ``i`` is exact, one rounded product, an exact
power-of-two division, one rounded sum) or ``exp(ln lower + (i * h) / 2^b)`` (log,
Python's ``math.exp``), clamped to the bounds, except that the fine points
``j 2^b`` are released as the grid's own ``points[j]``: a deterministic public map.

The target mechanism is the exponential mechanism over ``F`` with the exact
inverse-sensitivity loss ``loss(y)`` of the fine-snapped data:
``P(y) ∝ exp(-c loss(y))``, ``c`` the coefficient of
:class:`~dpkit.selection.ExponentialMechanism` (``epsilon / 2`` rounded down). Its
privacy is the theorem of :mod:`dpkit.estimators.inverse_sensitivity` on the grid
``F`` (the loss has sensitivity 1 for any data on ``F``; fine snapping keeps
neighbours neighbours); ``|F|`` only enters the accuracy bound.

Exact sampling (proof). With ``A_j`` the records in coarse cells before ``j`` and
``C_j`` those in ``j``, every ``y`` in cell ``j`` has ``L(y) >= A_j`` and
``LE(y) <= A_j + C_j``, so ``loss(y) >= lam_j`` (:func:`loss_lower_bound`);
``lam_j`` is the maximum of a non-decreasing and a non-increasing sequence in ``j``,
so ``{j : lam_j <= T}`` is an interval of cells, the *near* cells. One pass over the
data fetches the records of the near cells (compared with the stored cuts, the exact
snapping rule); sorted and fine-snapped, they split the near fine points into *runs*
of constant loss (a fine point holding records, or a gap of empty fine points between
two of them), each with its exact loss and integer length. Every *far* cell is one
proposal candidate of length ``len_j`` (its fine points) and loss ``lam_j``. The
proposal ``Q`` draws a candidate with probability ``∝ len * exp(-c loss)`` exactly
(Gumbel-max with integer multiplicities, :func:`dpkit.selection._argmax.noisy_argmax`)
and then a uniform fine point inside it (:meth:`Random.integers`, exact). So, with
``W`` the total proposal weight, ``Q(y) = exp(-c loss(y)) / W`` on near points
and ``Q(y) = exp(-c lam_j) / W >= exp(-c loss(y)) / W`` on the far points of cell
``j``. A near point is accepted
outright; a far point ``y`` of cell ``j`` gets its exact loss (one more pass, over that
cell's records) and is accepted with probability
``exp(-c (loss(y) - lam_j)) = Q(y)^-1 exp(-c loss(y)) / W``, as ``loss(y) - lam_j``
independent exact Bernoulli(``exp(-c)``) draws that must all succeed
(:func:`dpkit.noise.bernoulli_exp`, ``c`` taken as the exact float). On rejection the
whole draw restarts with fresh randomness. The accepted ``y`` therefore has
probability exactly ``∝ exp(-c loss(y))``: classical rejection sampling, with no
approximation anywhere. ``T`` only sets the cost: with
``T = ceil(ln(2^20 |F|) / c)`` the far cells carry at most ``2^-20`` of the
proposal's mass relative to a loss-0 point (present whenever ``n >= 1``).

Timing side channel. The work depends on the data: the near cells' record count, the
number of runs, and (with probability below ~2^-20 per draw) an extra data pass and a
restart after a far proposal. The running time therefore carries some information
about the data; like every dpkit mechanism this is not constant-time code.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from dpkit.errors import InternalError
from dpkit.estimators._quantile_loss import Neighbouring, loss_lower_bound, quantile_loss
from dpkit.estimators.grid import Grid
from dpkit.noise import bernoulli_exp
from dpkit.random import Random
from dpkit.selection._argmax import noisy_argmax

__all__ = ["FINE_BITS", "fine_size", "fine_snap", "fine_value", "refined_index", "supports"]

#: Fine points per coarse cell: 2^FINE_BITS (a million per coarse step).
FINE_BITS = 20
#: Records compared per block in the data passes (temporaries stay in cache).
_CHUNK = 1 << 18
#: Bernoulli(exp(-c)) draws per block in the far-cell acceptance test.
_BERNOULLI_BLOCK = 64

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def supports(grid: Grid) -> bool:
    """Refinement needs evenly spaced positions: linear and log grids (not symlog)."""
    return grid.kind in ("linear", "log")


def fine_size(grid: Grid, bits: int = FINE_BITS) -> int:
    """``|F| = (J - 1) 2^bits``."""
    return (grid.size - 1) << bits


def _cell_ranges(cells: IntArray, total: int, bits: int) -> tuple[IntArray, IntArray]:
    """First fine index and end (exclusive) of each coarse cell."""
    half = 1 << (bits - 1)
    first = np.maximum((cells << bits) - half, 0)
    end = np.minimum((cells << bits) + half, total)
    return first, end


def fine_snap(grid: Grid, values: FloatArray, bits: int = FINE_BITS) -> IntArray:
    """Fine index of every (non-NaN) value: nested in its exact coarse cell."""
    coarse = grid._index(values)  # the exact snapping rule
    total = fine_size(grid, bits)
    first, end = _cell_ranges(coarse, total, bits)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if grid.kind == "linear":
            position = (values - grid.lower) / grid._step
        else:
            position = np.log(np.maximum(values, grid.lower))
            position -= grid._ln_lower
            position /= grid._log_step
        position *= float(1 << bits)
        np.floor(position, out=position)
        # Clip in float first (+-inf), then into the record's own coarse cell.
        np.clip(position, -1.0, float(total), out=position)
    fine = position.astype(np.int64)
    np.clip(fine, first, end - 1, out=fine)
    return fine


def fine_value(grid: Grid, index: int, bits: int = FINE_BITS) -> float:
    """The public float of fine point ``index`` (module docstring), within the bounds."""
    if index % (1 << bits) == 0:
        return float(grid.points[index >> bits])  # a coarse point: the grid's own float
    numerator = float(index)  # exact: below 2^53
    scale = float(1 << bits)
    if grid.kind == "linear":
        value = grid.lower + (numerator * grid._step) / scale
    else:
        value = math.exp(grid._ln_lower + (numerator * grid._log_step) / scale)
    return min(max(value, grid.lower), grid.upper)


def _fetch(
    grid: Grid, data: npt.NDArray[np.generic], first_cell: int, last_cell: int
) -> FloatArray:
    """The records whose coarse index is in ``[first_cell, last_cell]`` (one pass).

    Coarse cell ``j`` is exactly ``cuts[j-1] <= x < cuts[j]`` (missing cuts are
    unbounded), the rule of :mod:`dpkit.estimators.grid`; NaN fails every comparison.
    """
    low = grid.cuts[first_cell - 1] if first_cell > 0 else -math.inf
    high = grid.cuts[last_cell] if last_cell < grid.size - 1 else math.inf
    parts = []
    for start in range(0, data.size, _CHUNK):
        block = np.asarray(data[start : start + _CHUNK], dtype=np.float64)
        mask = block >= low
        if high != math.inf:
            mask &= block < high
        if mask.any():
            parts.append(block[mask])
    return np.concatenate(parts) if parts else np.empty(0)


def _near_threshold(total: int, coefficient: float) -> int:
    """``T = ceil(ln(2^20 |F|) / c)`` (cost only; never affects the distribution)."""
    bound = (math.log(total) + 20.0 * math.log(2.0)) / coefficient
    return int(min(math.ceil(bound), 1 << 62))


def _segments(
    grid: Grid,
    counts: IntArray,
    data: npt.NDArray[np.generic],
    level: tuple[int, int],
    neighbouring: Neighbouring,
    coefficient: float,
    bits: int,
    threshold: int | None,
) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray]:
    """Proposal candidates: ``(start, length, loss, cell, below)``; ``cell = -1`` for
    near runs (exact loss), else the far cell (lower bound, its ``A_j`` in ``below``)."""
    n = int(counts.sum())
    total = fine_size(grid, bits)
    below = np.cumsum(counts) - counts
    bound = loss_lower_bound(below, below + counts, n, level, neighbouring)
    limit = _near_threshold(total, coefficient) if threshold is None else threshold
    near = np.flatnonzero(bound <= limit)
    if near.size == 0:
        near = np.array([int(np.argmin(bound))])  # only reachable through a test hook
    j_lo, j_hi = int(near[0]), int(near[-1])  # an interval (module docstring)
    fetched = _fetch(grid, data, j_lo, j_hi)
    if fetched.size != int(counts[j_lo : j_hi + 1].sum()):
        raise InternalError("The near cells' records do not match their counts.")
    points, multiplicity = np.unique(fine_snap(grid, fetched, bits), return_counts=True)
    region_start = int(_cell_ranges(np.array([j_lo]), total, bits)[0][0])
    region_end = int(_cell_ranges(np.array([j_hi]), total, bits)[1][0])
    # Interleave gap_0, point_0, gap_1, ..., point_{k-1}, gap_k over the near region.
    k = points.size
    start = np.empty(2 * k + 1, dtype=np.int64)
    end = np.empty(2 * k + 1, dtype=np.int64)
    count = np.zeros(2 * k + 1, dtype=np.int64)
    start[0::2] = np.concatenate(([region_start], points + 1))
    end[0::2] = np.concatenate((points, [region_end]))
    start[1::2], end[1::2], count[1::2] = points, points + 1, multiplicity
    keep = end > start
    start, length, count = start[keep], (end - start)[keep], count[keep]
    cells = np.arange(grid.size, dtype=np.int64)
    left, right = cells[:j_lo], cells[j_hi + 1 :]
    far = np.concatenate((left, right))
    far_first, far_end = _cell_ranges(far, total, bits)
    all_counts = np.concatenate((counts[:j_lo], count, counts[j_hi + 1 :]))
    loss = quantile_loss(all_counts, level, neighbouring)  # exact on the near runs
    cell = np.full(all_counts.size, -1, dtype=np.int64)
    is_far = np.zeros(all_counts.size, dtype=bool)
    is_far[:j_lo] = True
    is_far[j_lo + count.size :] = True
    cell[is_far] = far
    loss[is_far] = bound[far]
    starts = np.concatenate((far_first[: left.size], start, far_first[left.size :]))
    lengths = np.concatenate(
        ((far_end - far_first)[: left.size], length, (far_end - far_first)[left.size :])
    )
    cell_below = np.zeros(all_counts.size, dtype=np.int64)
    cell_below[is_far] = below[far]
    return starts, lengths, loss, cell, cell_below


def _far_loss(
    grid: Grid,
    counts: IntArray,
    data: npt.NDArray[np.generic],
    cell: int,
    below: int,
    y: int,
    level: tuple[int, int],
    neighbouring: Neighbouring,
    bits: int,
) -> int:
    """Exact loss at fine point ``y`` of far cell ``cell`` (one pass over the data)."""
    fetched = _fetch(grid, data, cell, cell)
    if fetched.size != int(counts[cell]):
        raise InternalError("A far cell's records do not match its count.")
    fine = fine_snap(grid, fetched, bits)
    a = below + int(np.count_nonzero(fine < y))
    e = int(np.count_nonzero(fine == y))
    n = int(counts.sum())
    return int(quantile_loss(np.array([a, e, n - a - e], dtype=np.int64), level, neighbouring)[1])


def _accept(excess: int, coefficient: float, rng: Random) -> bool:
    """Exact Bernoulli(exp(-c excess)): ``excess`` Bernoulli(exp(-c)) that all succeed."""
    remaining = excess
    while remaining > 0:
        block = min(remaining, _BERNOULLI_BLOCK)
        if not bool(np.all(bernoulli_exp(coefficient, block, rng=rng))):
            return False
        remaining -= block
    return True


def refined_index(
    grid: Grid,
    counts: IntArray,
    data: npt.NDArray[np.generic],
    level: tuple[int, int],
    neighbouring: Neighbouring,
    coefficient: float,
    rng: Random,
    *,
    bits: int = FINE_BITS,
    threshold: int | None = None,
) -> int:
    """A fine index drawn with probability exactly ``∝ exp(-c loss)`` over ``F``.

    ``counts`` must be ``grid.histogram(data)`` and ``data`` the flat records.
    ``threshold`` overrides ``T`` (tests use it to exercise the far-cell rejection).
    """
    starts, lengths, loss, cell, below = _segments(
        grid, counts, data, level, neighbouring, coefficient, bits, threshold
    )
    scores = -loss.astype(np.float64)
    while True:
        chosen = noisy_argmax("gumbel", scores, coefficient, rng, multiplicity=lengths)
        y = int(starts[chosen]) + rng.integers(int(lengths[chosen]))
        if cell[chosen] < 0:
            return y
        exact = _far_loss(
            grid, counts, data, int(cell[chosen]), int(below[chosen]), y, level, neighbouring, bits
        )
        excess = exact - int(loss[chosen])
        if excess < 0:
            raise InternalError("A far cell's loss fell below its lower bound.")
        if _accept(excess, coefficient, rng):
            return y
