"""The two exact reductions of the design LP give the optimum of the full LP.

* Folding (symmetric noise on half the columns, shifts j > 0 only) is what
  ``design_noise`` solves for every loss whose interval costs mirror (l1, l2, any even
  loss): by the mirror-and-average argument the optimum of the full LP is attained by
  symmetric noise, so both optima must agree.
* Monotone noise needs only the shifts +-k (``noise_design._lp_shifts``): the optimum
  with all shifts and the one with +-k must agree.

Each check solves both LPs from scratch on the full, unreduced formulation built here,
so a wrong reduction (a dropped constraint, a double-counted mass) moves an optimum.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dpkit as dp
from dpkit.design import _core, _lp, design_noise, noise_lower_bound
from dpkit.design._losses import make_loss
from dpkit.design.noise_design import _all_shifts, _problem

from .conftest import counts_of, max_divergence

CASES = [
    # (epsilon, delta, sensitivity, granularity, support, loss)
    (1.0, 0.2, 1.0, 0.1, 4.0, "l1"),
    (0.5, 1e-3, 1.0, 0.25, 12.0, "l2"),
    (1.0, 0.4, 10.0, 0.5, 30.0, "l1"),  # the non-monotone optimum's regime
    (2.0, 1e-5, 2.0, 0.25, 20.0, "l1"),
]


def _optimum(problem: _lp.Problem) -> float:
    return _lp.solve(problem, max_memory=1 << 33, owner="test").objective


def _problems(case: tuple[float, ...], *, lower: bool, monotone: bool) -> tuple[_lp.Problem, ...]:
    epsilon, delta, sensitivity, granularity, support, loss = case
    grid = _core.check_grid(epsilon, delta, sensitivity, granularity, support, "test")
    reduced = _problem(
        grid, make_loss(loss, "test"), lower=lower, symmetric=False, monotone=monotone, owner="t"
    )
    full = dataclasses.replace(reduced, symmetric=False, pairs=_all_shifts(grid.shifts))
    return reduced, full


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("lower", [False, True])
def test_folding_a_symmetric_loss_keeps_the_optimum(case, lower):
    reduced, full = _problems(case, lower=lower, monotone=False)
    assert reduced.folded and not full.folded
    assert reduced.slack_count() < 0.51 * full.slack_count()
    assert _optimum(reduced) == pytest.approx(_optimum(full), rel=1e-7, abs=1e-10)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("lower", [False, True])
def test_two_shifts_suffice_for_monotone_noise(case, lower):
    reduced, full = _problems(case, lower=lower, monotone=True)
    assert len(reduced.pairs) == 2
    unfolded = dataclasses.replace(reduced, symmetric=False)
    for candidate in (reduced, unfolded):
        assert _optimum(candidate) == pytest.approx(_optimum(full), rel=1e-7, abs=1e-10)


def test_a_loss_without_mirror_symmetry_is_not_folded():
    def asymmetric(x: np.ndarray) -> np.ndarray:
        return np.abs(x) + (x > 0) * np.abs(x)

    grid = _core.check_grid(1.0, 0.2, 1.0, 0.05, 4.0, "test")
    problem = _problem(
        grid, make_loss(asymmetric, "test"), lower=False, symmetric=False, monotone=False, owner="t"
    )
    assert not problem.folded and not problem.symmetric


def test_monotone_design_is_checked_on_every_shift():
    # The LP sees shifts +-k only; the released noise is still private at every shift
    # (re-checked here independently, on a grid finer than beta).
    design = design_noise(
        epsilon=1.0, delta=0.05, sensitivity=1.0, granularity=0.25, support=6.0, monotone=True
    )
    counts = counts_of(design)
    assert max_divergence(counts, counts, 4, 1.0, refine=3) <= 0.05
    assert design.lower_bound <= design.upper_bound


def test_folded_design_matches_the_full_lp_at_small_delta():
    # The regime that was slow (issue 18): delta 1e-6. Lower bound from the folded LP
    # against the full one, and the design's loss between them and the textbook noises.
    setting = {"epsilon": 1.0, "delta": 1e-6, "granularity": 0.1, "support": 16.0}
    folded = noise_lower_bound(**setting)
    grid = _core.check_grid(1.0, 1e-6, 1.0, 0.1, 16.0, "test")
    _, full = _problems((1.0, 1e-6, 1.0, 0.1, 16.0, "l1"), lower=True, monotone=False)
    assert folded == pytest.approx(_optimum(full), rel=1e-7)
    assert folded <= _optimum(full)
    design = design_noise(**setting, lower_bound=False)
    assert folded <= design.upper_bound <= 1.0  # Laplace's loss is 1 / eps = 1
    assert grid.shifts == 10


# --- the window (_core.certified_window) -------------------------------------------


def _asymmetric(x: np.ndarray) -> np.ndarray:
    return np.abs(x) + (x > 0) * np.abs(x)


WINDOW_CASES = [
    # (epsilon, delta, sensitivity, granularity, support, loss, window it settles on)
    (1.0, 0.1, 1.0, 0.1, 8.0, "l1", (-40, 40)),  # 20 fails, doubles once
    (1.0, 0.3, 1.0, 0.05, 6.0, "l2", (-40, 40)),
    (1.0, 0.2, 1.0, 0.05, 6.0, _asymmetric, (-40, 40)),  # unfolded: both tails
    (1.0, 0.4, 10.0, 0.5, 40.0, "l1", (-40, 40)),  # the non-monotone optimum's regime
    (0.5, 1e-3, 1.0, 0.1, 20.0, "l1", None),  # no window certified: the full LP
]


@pytest.mark.parametrize("case", WINDOW_CASES, ids=lambda c: f"{c[1]}-{c[2]}-{c[3]}")
def test_a_certified_window_keeps_the_full_optimum(case):
    epsilon, delta, sensitivity, granularity, support, loss, expected = case
    grid = _core.check_grid(epsilon, delta, sensitivity, granularity, support, "test")
    problem = _problem(
        grid, make_loss(loss, "test"), lower=False, symmetric=False, monotone=False, owner="t"
    )
    windowed, solver = _core.certified_window(problem, max_memory=1 << 33, owner="test")
    assert windowed.window == expected
    target = delta * (1 - 1e-6)
    design = solver.solve(target).objective
    full = _optimum(dataclasses.replace(problem, delta=target))
    # a restriction: never below the full optimum; certified: within the tolerance
    assert full - 1e-9 * full <= design <= full * (1 + _core.WINDOW_TOLERANCE)


def test_the_window_restricts_and_relaxes_on_both_sides_of_the_full_lp():
    # A window too small for this target (certified_window rejects it): the restricted
    # LP is strictly worse than the full one and the relaxed LP strictly better, which
    # is what the certificate detects.
    grid = _core.check_grid(1.0, 0.1, 1.0, 0.1, 8.0, "test")
    problem = _problem(
        grid, make_loss("l1", "test"), lower=False, symmetric=False, monotone=False, owner="t"
    )
    full = _optimum(problem)
    windowed = dataclasses.replace(problem, window=(-20, 20), restrict_tails=True)
    solver = _lp.Solver(windowed, max_memory=1 << 33, owner="test")
    solver.restrict(False)
    relaxed = solver.solve().objective
    solver.restrict(True)
    restricted = solver.solve().objective
    assert relaxed < full * (1 - 1e-4) and restricted > full * (1 + 1e-4)
    # built without the toggle, the two LPs give the same optima
    assert _optimum(windowed) == pytest.approx(restricted, rel=1e-9)
    relaxation = dataclasses.replace(problem, window=(-20, 20))
    assert _optimum(relaxation) == pytest.approx(relaxed, rel=1e-9)


def test_the_windowed_lower_bound_is_below_the_full_one():
    setting = {"epsilon": 1.0, "delta": 1e-4, "granularity": 0.05, "support": 12.0}
    design = design_noise(**setting)
    full = noise_lower_bound(**setting)  # the full lower-bound LP
    assert design.lower_bound <= full
    assert design.lower_bound >= full * (1 - 1e-5)  # and nearly as tight, here
    counts = counts_of(design)
    assert max_divergence(counts, counts, 20, 1.0, refine=1) <= 1e-4


def _divergences(masses: np.ndarray, shifts: int, exp_epsilon: float) -> np.ndarray:
    """sum_i max(0, p(i) - e^eps p(i - j)) for every 0 < |j| <= shifts (p = 0 outside)."""
    out = []
    for j in [*range(-shifts, 0), *range(1, shifts + 1)]:
        other = np.zeros_like(masses)
        if j > 0:
            other[j:] = masses[:-j]
        else:
            other[:j] = masses[-j:]
        out.append(np.maximum(masses - exp_epsilon * other, 0.0).sum())
    return np.array(out)


@pytest.mark.parametrize("folded", [True, False])
@pytest.mark.parametrize("seed", range(40))
def test_every_vertex_of_the_restricted_lp_is_private(seed, folded):
    # The restricted LP must be a restriction of the full one for *any* objective, not
    # only for the losses tried above: random costs (positive and negative) drive the
    # solver to many different vertices, each checked on every shift.
    rng = np.random.default_rng(seed)
    grid = _core.check_grid(1.0, 0.05, 1.0, 0.125, 6.0, "test")
    problem = _problem(
        grid, make_loss("l1", "test"), lower=False, symmetric=False, monotone=False, owner="t"
    )
    costs = rng.normal(size=problem.costs.size)
    # Around each end of the window, where the proof's monotone stretch and the tail
    # sums meet: reward mass just outside it and penalise mass within k inside it, the
    # shape a missing constraint there would let through.
    k, edge = grid.shifts, 16
    for sign in (1, -1):
        far = sign * int(rng.integers(edge, edge + k)) - (sign < 0)
        near = sign * int(rng.integers(edge - k, edge)) - (sign < 0)
        costs[far - problem.lo] -= 20.0
        costs[near - problem.lo] += 20.0
    if folded:
        costs = costs + costs[::-1]
    windowed = dataclasses.replace(
        problem, costs=costs, symmetric=folded, window=(-16, 16), restrict_tails=True
    )
    assert windowed.folded == folded
    masses = _lp.solve(windowed, max_memory=1 << 33, owner="test").masses[0]
    assert _divergences(masses, grid.shifts, problem.exp_epsilon).max() <= 0.05 + 1e-9


# --- the certified lower bound (_lp.Solver.dual_bound) ------------------------------


@pytest.mark.parametrize("case", CASES)
def test_the_dual_bound_is_just_below_the_optimum(case):
    lower, _ = _problems(case, lower=True, monotone=False)
    solver = _lp.Solver(lower, max_memory=1 << 33, owner="test")
    optimum = solver.solve().objective
    bound = solver.dual_bound()
    assert optimum * (1 - 1e-7) <= bound <= optimum


@pytest.mark.parametrize("seed", range(5))
def test_any_multipliers_give_a_valid_bound(seed):
    # Weak duality holds for every y, so the bound must stay below the optimum for
    # perturbed and random multipliers too (a wrong sign convention or a missing
    # column bound would let some of them overshoot).
    rng = np.random.default_rng(seed)
    lower, _ = _problems(CASES[0], lower=True, monotone=False)
    solver = _lp.Solver(lower, max_memory=1 << 33, owner="test")
    optimum = solver.solve().objective
    y = np.asarray(solver._highs.getSolution().row_dual, dtype=np.float64)
    for candidate in (y * (1 + 0.01 * rng.normal(size=y.size)), rng.normal(size=y.size), -y):
        assert solver.dual_bound(candidate) <= optimum
    # and the solver's own multipliers are the tight ones
    assert solver.dual_bound(y) > solver.dual_bound(y * (1 + 0.01 * rng.normal(size=y.size)))


def test_a_windowed_lp_that_turns_infeasible_falls_back_to_the_full_lp(monkeypatch):
    # Make the windowed solver refuse its delta as infeasible (a restriction can be
    # infeasible where the full LP is not): the design must come from the full LP.
    grid = _core.check_grid(1.0, 0.1, 1.0, 0.05, 6.0, "test")
    problem = _problem(
        grid, make_loss("l1", "test"), lower=False, symmetric=False, monotone=False, owner="t"
    )
    windowed = dataclasses.replace(problem, window=(-40, 40), restrict_tails=True)
    solver = _lp.Solver(windowed, max_memory=1 << 33, owner="test")
    real = _lp.Solver.solve
    calls = []

    def refuse_windowed(self, delta=None):
        calls.append(self._problem.window)
        if self._problem.window is not None:
            raise dp.errors.InvalidParameter("test: infeasible")
        return real(self, delta)

    monkeypatch.setattr(_lp.Solver, "solve", refuse_windowed)
    _, achieved = _core.solve_verified(
        windowed,
        epsilon=1.0,
        max_memory=1 << 33,
        owner="test",
        checked_pairs=_all_shifts(grid.shifts),
        solver=solver,
    )
    assert calls[0] == (-40, 40) and calls[-1] is None
    assert achieved <= 0.1


def test_the_memory_limit_is_checked_on_the_folded_lp_for_even_losses():
    # l1 is solved folded: a limit between the folded and the unfolded size must let the
    # design through (it was refused on the unfolded size), and a limit below the folded
    # size must still refuse it, naming the size.
    grid = _core.check_grid(1.0, 0.1, 1.0, 0.1, 6.0, "test")
    problem = _problem(
        grid, make_loss("l1", "test"), lower=False, symmetric=False, monotone=False, owner="t"
    )
    folded = problem.memory_estimate()
    unfolded = dataclasses.replace(problem, symmetric=False).memory_estimate()
    assert folded < 0.55 * unfolded
    setting = {"epsilon": 1.0, "delta": 0.1, "granularity": 0.1, "support": 6.0}
    design = design_noise(**setting, lower_bound=False, max_memory=(folded + unfolded) // 2)
    assert design.achieved_delta <= 0.1
    with pytest.raises(dp.errors.InvalidParameter, match="would need about"):
        design_noise(**setting, lower_bound=False, max_memory=folded // 2)
