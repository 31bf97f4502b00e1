"""Shared steps of every design: validation, the two LPs, the exact re-check."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.accounting._math.rounding import mul_up
from dpkit.accounting.guarantees import ApproxDP
from dpkit.design import _exact, _lp
from dpkit.design._losses import Loss, check_unimodal
from dpkit.errors import InvalidParameter, WeakGuaranteeWarning

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The upper-bound LP is solved for delta (1 - 1e-6): the quantisation of the masses
#: to multiples of 2^-60 and the solver's 1e-10 feasibility tolerance then stay inside
#: the target when re-checked exactly.
_DELTA_MARGIN = 1e-6
_REPAIRS = 3
#: A design solved on a window (see :func:`certified_window`) is kept when its LP loss
#: is within this relative distance of the window relaxation's optimum.
WINDOW_TOLERANCE = 1e-6
#: Smallest delta a design accepts: HiGHS' feasibility tolerance is 1e-10 (absolute),
#: and at delta 2e-11 it reports feasible targets infeasible (found by review).
MIN_DELTA = 1e-9


@dataclass(frozen=True)
class Grid:
    """Validated grid parameters: intervals of width ``beta``, ``k = sensitivity / beta``,
    noise support ``[-half beta, half beta)``."""

    epsilon: float
    delta: float
    sensitivity: float
    beta: float
    shifts: int
    half: int


def check_grid(
    epsilon: object,
    delta: object,
    sensitivity: object,
    granularity: object,
    support: object,
    owner: str,
) -> Grid:
    """Validate the privacy target and the discretisation (before anything is solved)."""
    eps = check.check_epsilon(epsilon, owner)
    dlt = check.check_delta(delta, owner)
    if dlt == 0.0:
        raise InvalidParameter(
            f"The 'delta' parameter of {owner} must be a float in (0, 1): noise with a "
            f"bounded support is never pure epsilon-DP. Got 0.0 instead. (dpkit.design."
            f"noise_lower_bound accepts delta=0; the staircase mechanism is the known "
            f"optimum there.)"
        )
    if dlt < MIN_DELTA:
        raise InvalidParameter(
            f"The 'delta' parameter of {owner} must be at least {MIN_DELTA:g}: below that "
            f"the LP solver's feasibility tolerance (1e-10) is a large share of delta, and "
            f"it can call a feasible target infeasible or return noise that misses it. Got "
            f"{dlt!r}. (Truncated Laplace noise, dpkit.noise, meets any delta > 0.)"
        )
    sens = check.check_positive(sensitivity, "sensitivity", owner)
    beta = check.check_positive(granularity, "granularity", owner)
    width = check.check_positive(support, "support", owner)
    shifts = round(sens / beta)
    if shifts < 1 or abs(shifts * beta - sens) > 1e-9 * sens:
        raise InvalidParameter.for_parameter(
            "granularity",
            owner,
            f"the sensitivity ({sens!r}) divided by a whole number",
            granularity,
        )
    # Only shifts that are whole multiples of beta are constrained and re-checked, and
    # between them the divergence is linear in the shift: so k beta must cover the
    # sensitivity *exactly*, or a shift just above k beta (up to 1e-9 relative, allowed
    # above) would borrow from the far larger divergence at (k + 1) beta. beta is
    # nudged up to the smallest float with k beta >= sensitivity in exact arithmetic
    # (a change of a few ulps).
    beta = sens / shifts
    while shifts * Fraction(beta) < Fraction(sens):
        beta = math.nextafter(beta, math.inf)
    half = math.ceil(width / beta - 1e-9)
    if half < shifts:
        raise InvalidParameter.for_parameter(
            "support", owner, f"at least the sensitivity ({sens!r})", support
        )
    return Grid(eps, dlt, sens, beta, shifts, half)


def check_memory(max_memory: object, owner: str) -> int:
    """``None``: half of this machine's memory."""
    if max_memory is None:
        return _lp.available_memory() // 2
    return check.check_count(max_memory, "max_memory", owner)


def check_size(
    grid: Grid,
    distributions: int,
    pairs: list[tuple[int, int, int]],
    *,
    lower_bound: bool,
    max_memory: int,
    owner: str,
    symmetric: bool = False,
) -> None:
    """Refuse LPs above ``max_memory`` before any cost is computed or anything solved.

    ``symmetric``: the LP will be solved folded (a known even loss or symmetric noise),
    so it is estimated at that size; the window can only make it smaller."""
    for pad in (0, grid.shifts) if lower_bound else (0,):
        skeleton = _lp.Problem(
            distributions=distributions,
            lo=-grid.half - pad,
            hi=grid.half + pad,
            central=(-grid.half, grid.half),
            costs=np.zeros(0),
            weights=np.ones(distributions),
            pairs=pairs,
            exp_epsilon=1.0,
            delta=grid.delta,
            tail_costs=(0.0, 0.0) if pad else None,
            symmetric=symmetric,
        )
        _lp.refuse_if_too_large(skeleton, max_memory, owner)


def interval_costs(
    loss: Loss, lo: int, hi: int, beta: float, owner: str
) -> tuple[FloatArray, FloatArray]:
    """Average and infimum of the loss on the intervals ``lo .. hi - 1``."""
    edges = np.arange(lo, hi + 1, dtype=np.float64) * beta
    check_unimodal(loss, edges, owner)
    return loss.average(edges[:-1], edges[1:]), loss.infimum(edges[:-1], edges[1:])


def exact_delta(
    counts: list[IntArray], pairs: list[tuple[int, int, int]], epsilon: float
) -> Fraction:
    """The largest exact hockey-stick divergence over the pair constraints."""
    bound = _exact.exp_lower(epsilon)
    worst = Fraction(0)
    for d, e, j in pairs:
        worst = max(worst, _exact.hockey_stick(counts[d], counts[e], j, bound))
    return worst


def certified_window(
    problem: _lp.Problem, *, max_memory: int, owner: str
) -> tuple[_lp.Problem, _lp.Solver]:
    """The upper-bound LP on a window around 0, when that provably loses (almost) nothing.

    Only the terms of the pair constraints for intervals inside ``[-m, m)`` get slack
    variables for the shifts below the largest; outside, the noise is restricted to be
    monotone and those terms are bounded by the largest shift's (``_lp.Problem.
    restrict_tails``): a restriction, so the design stays feasible and private (and is
    re-checked exactly on every shift anyway). With the restriction switched off the
    same LP is a relaxation (``_lp.Problem.window``), whose optimum bounds the full
    LP's from below. ``m`` doubles from twice the largest shift until the two optima
    are within :data:`WINDOW_TOLERANCE` (relative), so the design is that close to the
    full LP's optimum; a window of half the support or more falls back to the full LP.
    The slack count drops from ~N k to ~4 m k (N intervals, k the largest shift).

    Returns the problem to solve (windowed or not) and its solver, warm at the target.
    """
    largest = max(abs(j) for _, _, j in problem.pairs)
    solved_for = problem.delta * (1.0 - _DELTA_MARGIN)
    reducible = (
        problem.distributions == 1
        and not problem.monotone
        and problem.lo == -problem.hi
        and any(abs(j) < largest for _, _, j in problem.pairs)
    )
    width = 2 * largest
    while reducible and 4 * width <= problem.hi - problem.lo:
        windowed = replace(problem, window=(-width, width), restrict_tails=True)
        solver = _lp.Solver(windowed, max_memory=max_memory, owner=owner)
        solver.restrict(False)
        relaxed = solver.solve(solved_for).objective  # infeasible here: infeasible in full
        solver.restrict(True)
        try:
            restricted = solver.solve(solved_for).objective
        except InvalidParameter:  # the restriction alone is infeasible: widen
            width *= 2
            continue
        if restricted - relaxed <= WINDOW_TOLERANCE * abs(restricted):
            return windowed, solver
        width *= 2
    return problem, _lp.Solver(problem, max_memory=max_memory, owner=owner)


def solve_verified(
    problem: _lp.Problem,
    *,
    epsilon: float,
    max_memory: int,
    owner: str,
    checked_pairs: list[tuple[int, int, int]] | None = None,
    solver: _lp.Solver | None = None,
) -> tuple[list[IntArray], Fraction]:
    """Solve the upper-bound LP, quantise, re-check exactly; tighten and re-solve if needed.

    ``checked_pairs``: the pair constraints the exact re-check covers (default: the
    LP's own; a reduced LP passes the full set, so the check never trusts a reduction).
    ``solver``: a solver of ``problem`` to reuse (e.g. from :func:`certified_window`).
    Returns the exact masses of each distribution and their exact worst divergence.
    A windowed LP whose design misses the target is replaced by the full LP (once). If
    three solves of the full LP still exceed the target, the divergence actually achieved
    is returned (the caller states it as the guarantee and warns). The re-solves start
    from the previous basis (:class:`_lp.Solver`).
    """
    target = problem.delta
    pairs = problem.pairs if checked_pairs is None else checked_pairs
    solved_for = target * (1.0 - _DELTA_MARGIN)
    if solver is None:
        solver = _lp.Solver(problem, max_memory=max_memory, owner=owner)
    solves = 0
    while True:
        try:
            solution = solver.solve(solved_for)
        except InvalidParameter:
            if problem.window is None:
                raise
            # a tightened delta can leave a windowed LP infeasible where the full one is
            # not (its restriction is stronger): go on with the full LP
            problem, solver = _full(problem, max_memory, owner)
            solution = solver.solve(solved_for)
        shaped = [_shaped(row, problem) for row in solution.masses]
        counts = [_exact.quantize(row, symmetric=problem.symmetric) for row in shaped]
        achieved = exact_delta(counts, pairs, epsilon)
        if achieved <= target:
            return counts, achieved
        if problem.window is not None:
            # The window's argument holds in exact arithmetic; the solver meets the
            # monotone rows only to its tolerance, and with a large e^eps at a tiny
            # delta that slack can add up (found by review: 2x delta at eps 8, delta
            # 1e-9). Go on with the full LP, without spending a repair.
            problem, solver = _full(problem, max_memory, owner)
            continue
        solves += 1
        if solves >= _REPAIRS:
            return counts, achieved
        # aim below the target by twice the overshoot (at least 1e-9 of the target),
        # or, for an overshoot that large, by the ratio of the two
        overshoot = float(achieved) - target
        solved_for = max(
            solved_for - max(2.0 * overshoot, 1e-9 * target),
            solved_for * target / (2.0 * float(achieved)),
        )


def _full(problem: _lp.Problem, max_memory: int, owner: str) -> tuple[_lp.Problem, _lp.Solver]:
    full = replace(problem, window=None, restrict_tails=False)
    return full, _lp.Solver(full, max_memory=max_memory, owner=owner)


def _shaped(masses: FloatArray, problem: _lp.Problem) -> FloatArray:
    """The solver's masses with the shape its constraints impose, made exact."""
    return _exact.impose_shape(
        masses, problem.lo, symmetric=problem.symmetric, monotone=problem.monotone
    )


def stated_delta(target: float, achieved: Fraction, owner: str) -> float:
    """The delta a design states: the target, or (after a failed repair) what it achieves."""
    if achieved <= target:
        return target
    delta = _exact.round_up(achieved)
    warnings.warn(
        f"{owner}: after rounding, the solver's distribution reaches delta={delta!r}, above "
        f"the target {target!r}; the design states delta={delta!r}.",
        WeakGuaranteeWarning,
        stacklevel=3,
    )
    return delta


def certified_lower_bound(problem: _lp.Problem, *, max_memory: int, owner: str) -> float:
    """Solve a lower-bound LP and return a bound certified by its dual
    (:meth:`_lp.Solver.dual_bound`), never above the LP's true optimum; losses are >= 0."""
    solver = _lp.Solver(problem, max_memory=max_memory, owner=owner)
    solver.solve()
    return max(0.0, solver.dual_bound())


def composed_guarantee(epsilon: float, delta: float, size: int, owner: str) -> ApproxDP:
    """``(size eps, size delta)`` by basic composition, rounded up; refused when the
    composed delta reaches 1 (no guarantee at all), before anything is drawn."""
    total_delta = mul_up(size, delta)
    if total_delta >= 1.0:
        raise InvalidParameter(
            f"{owner}: {size} entries composed give delta >= 1, no guarantee. Use "
            "parallel=True if one person changes at most one entry, a design with a "
            "smaller delta, or fewer entries per release."
        )
    return ApproxDP(mul_up(size, epsilon), total_delta)
