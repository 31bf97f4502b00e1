"""Data-independent optimal noise (Selvi, Liu & Wiesemann, arXiv 2304.12681, §2).

:func:`design_noise` solves two linear programs over mixtures of uniform
distributions on intervals of width ``beta`` (the paper's ``P(L, beta)`` and
``D(L, beta)``, in the compact form of ``shared/papers/optimal-noise.md`` A.3-A.4):

* the *upper bound*: a distribution on ``[-support, support)`` that is
  (epsilon, delta)-DP for every shift ``|phi| <= sensitivity`` (Lemma 1 and Prop. 1:
  the constraints at the grid shifts imply DP for all shifts and all Borel events),
  with the smallest expected loss among such distributions;
* the *lower bound*: the same program with infimum losses on each interval, the
  support padded by ``sensitivity`` on each side plus two free tail masses, and the DP
  constraints only on the central intervals. Every (epsilon, delta)-DP additive noise,
  of any shape and support, maps to a feasible point of it (its interval masses),
  so its optimum bounds the optimal loss from below (Prop. 3; valid for losses that
  are non-increasing on (-inf, 0] and non-decreasing on [0, inf)). The value
  reported is a weak-duality bound from the solver's dual, never above that optimum
  (``_lp.Solver.dual_bound``).

Both bounds meet as the grid gets finer and the support wider (Theorem 1).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.design import _core, _lp
from dpkit.design._distribution import PiecewiseUniform
from dpkit.design._exact import round_up
from dpkit.design._losses import Loss, LossLike, make_loss
from dpkit.design._release import EntrywiseDesign
from dpkit.mechanisms._base import ErrorBound
from dpkit.random import Random, RandomLike

__all__ = ["NoiseDesign", "design_noise", "noise_lower_bound"]


class NoiseDesign(EntrywiseDesign):
    """Optimised additive noise for a scalar query: the result of :func:`design_noise`.

    Privacy
    -------
    ``(epsilon, delta)``-DP for a query of sensitivity ``sensitivity`` (replacement or
    add/remove, whichever the sensitivity was computed for). The statement is checked
    on the exact masses that the sampler uses (``achieved_delta``), in integer
    arithmetic with a rational lower bound on ``e^epsilon``, never taken from the
    solver. Event: ``ApproxEvent(epsilon, delta)``.

    Accuracy
    --------
    :attr:`expected_loss` is the exact expected loss of the released noise;
    :meth:`error` gives the smallest ``h`` with ``P(|X| <= h) >= confidence`` plus half
    a grid step.

    Attributes
    ----------
    epsilon:
        The design's epsilon.
    delta:
        The design's stated delta (see ``achieved_delta``).
    sensitivity:
        The query's sensitivity.
    granularity:
        The interval width.
    support:
        The noise lives on ``[-support, support)``.
    loss:
        Name of the loss.
    weights:
        Probability of each interval ``[edges[i], edges[i + 1])`` (exact dyadic masses,
        shown as floats).
    edges:
        Interval ends.
    upper_bound:
        Expected loss of this (feasible, private) distribution: an upper bound on the
        optimal loss of any (epsilon, delta)-DP additive noise.
    lower_bound:
        A lower bound on that optimal loss (``None`` when not computed).
    achieved_delta:
        The exact largest hockey-stick divergence of this noise over all shifts
        ``|phi| <= sensitivity``, rounded up to a float.
    """

    def __init__(
        self,
        *,
        distribution: PiecewiseUniform,
        loss: Loss,
        grid: _core.Grid,
        delta: float,
        achieved_delta: float,
        lower_bound: float | None,
        constraints: tuple[str, ...] = (),
    ) -> None:
        self._distribution = distribution
        self._loss = loss
        self.epsilon = grid.epsilon
        self.delta = delta
        self.sensitivity = grid.sensitivity
        self.granularity = grid.beta
        self.support = grid.half * grid.beta
        self.achieved_delta = achieved_delta
        self.upper_bound = distribution.expected(loss)
        self.lower_bound = lower_bound
        self.constraints = constraints

    @property
    def loss(self) -> str:
        return self._loss.name

    @property
    def weights(self) -> npt.NDArray[np.float64]:
        return self._distribution.masses

    @property
    def edges(self) -> npt.NDArray[np.float64]:
        return self._distribution.edges

    @property
    def expected_loss(self) -> float:
        """Expected loss of the released noise (= ``upper_bound``)."""
        return self.upper_bound

    @property
    def gap(self) -> float | None:
        """``upper_bound - lower_bound``: how far from optimal this design can be."""
        return None if self.lower_bound is None else self.upper_bound - self.lower_bound

    def pdf(self, x: npt.ArrayLike) -> Any:
        """Density of the noise at ``x``."""
        return self._distribution.pdf(x)

    def cdf(self, x: npt.ArrayLike) -> Any:
        """Distribution function of the noise at ``x``."""
        return self._distribution.cdf(x)

    def plot(self, ax: Any = None, **style: Any) -> Any:
        """Plot the noise density (matplotlib; returns the axis)."""
        if ax is None:
            import matplotlib.pyplot as plt  # optional dependency, imported on use

            _, ax = plt.subplots(figsize=(6, 3.5))
        style.setdefault("fill", True)
        style.setdefault("alpha", 0.6)
        style.setdefault("label", f"{self.loss}, eps={self.epsilon:g}, delta={self.delta:g}")
        self._distribution.plot_on(ax, **style)
        ax.set_xlabel("noise x")
        ax.set_ylabel("density")
        return ax

    def sample(self, size: int | None = None, *, rng: RandomLike | None = None) -> Any:
        """Draws of the noise alone, rounded to the release grid (``None``: one float)."""
        count = (
            1 if size is None else check.check_count(size, "size", "NoiseDesign.sample", minimum=0)
        )
        # Noise alone (no data): parallel=True only skips the composition bookkeeping.
        draws = (
            self.release(np.zeros(count), parallel=True, rng=rng).value if count else np.zeros(0)
        )
        return float(draws[0]) if size is None else np.asarray(draws)

    def _error(self, confidence: float) -> ErrorBound:
        _, deviation = self._distribution.moments()
        # grid rounding moves a release by at most half a step; one ulp up for the sum
        half = self._distribution.half_width(confidence) + self._distribution.step / 2
        half = math.nextafter(half, math.inf)
        return ErrorBound(standard_deviation=deviation, half_width=half, confidence=confidence)

    def _check_value(self, value: Any) -> npt.NDArray[np.float64]:
        return check.check_array(value, "value", "NoiseDesign.release", allow_empty=True)

    def _sample(self, value: npt.NDArray[np.float64], rng: Random) -> Any:
        return self._distribution.release(value, rng)

    def _repr_fields(self) -> tuple[str, ...]:
        return ("epsilon", "delta", "sensitivity", "granularity", "support", "loss")


def _problem(
    grid: _core.Grid, loss: Loss, *, lower: bool, symmetric: bool, monotone: bool, owner: str
) -> _lp.Problem:
    k, half, beta = grid.shifts, grid.half, grid.beta
    pad = k if lower else 0
    lo, hi = -half - pad, half + pad
    average, infimum = _core.interval_costs(loss, lo, hi, beta, owner)
    costs = infimum if lower else average
    tails = None
    if lower:
        # Mass beyond the padded support costs at least c at its edge (unimodal loss).
        tails = (
            float(loss.infimum(np.array([-np.inf]), np.array([lo * beta]))[0]),
            float(loss.infimum(np.array([hi * beta]), np.array([np.inf]))[0]),
        )
    # A loss whose interval costs mirror exactly (l1, l2, any even c) makes the LP
    # mirror-invariant: the mirror image of a feasible noise is feasible with the same
    # cost, and so is the average of the two (the constraints are convex). Restricting
    # to symmetric noise then loses nothing, and the LP is solved folded (_lp).
    mirrored = np.array_equal(costs, costs[::-1]) and (tails is None or tails[0] == tails[1])
    return _lp.Problem(
        distributions=1,
        lo=lo,
        hi=hi,
        central=(-half, half),
        costs=costs,
        weights=np.ones(1),
        pairs=_lp_shifts(k, monotone),
        exp_epsilon=float(np.exp(grid.epsilon)),
        delta=grid.delta,
        tail_costs=tails,
        symmetric=symmetric or mirrored,
        monotone=monotone,
    )


def _all_shifts(k: int) -> list[tuple[int, int, int]]:
    """Every grid shift ``j beta``, ``0 < |j| <= k`` (what the exact re-check covers)."""
    return [(0, 0, j) for j in range(-k, k + 1) if j != 0]


def _lp_shifts(k: int, monotone: bool) -> list[tuple[int, int, int]]:
    """The shifts the LP constrains: all of them, or only ``+-k`` for monotone noise.

    For a density non-decreasing up to its mode and non-increasing after it (the
    monotone constraint; the mode is interval -1 or 0), every term of the shift-``j``
    constraint, ``max(0, p(i) - e^eps p(i - j))`` for ``0 < j <= k``, is at most the
    same term for ``k``: if ``i - j`` is at or past the mode, ``p(i - j) >= p(i)`` and the
    term is 0; otherwise ``i - k < i - j`` both lie before the mode, where ``p`` is
    non-decreasing, so ``p(i - k) <= p(i - j)``. Negative shifts mirror this. The exact
    re-check still covers every shift.
    """
    return [(0, 0, -k), (0, 0, k)] if monotone else _all_shifts(k)


def design_noise(
    *,
    epsilon: float,
    delta: float,
    sensitivity: float = 1.0,
    loss: LossLike = "l1",
    granularity: float,
    support: float,
    symmetric: bool = False,
    monotone: bool = False,
    lower_bound: bool = True,
    max_memory: int | None = None,
) -> NoiseDesign:
    """The (epsilon, delta)-DP additive noise with the smallest expected loss, by LP.

    Selvi, Liu & Wiesemann, "Differential Privacy via Distributionally Robust
    Optimization" (arXiv 2304.12681): Prop. 1 (upper bound ``P(L, beta)``), Prop. 3
    (lower bound ``D(L, beta)``), Theorem 1 (both converge as ``beta -> 0`` and the
    support grows). See the module docstring.

    Parameters
    ----------
    epsilon, delta:
        Privacy target; ``delta`` in (0, 1) (bounded noise is never pure DP).
    sensitivity:
        Sensitivity ``Δf`` of the scalar query.
    loss:
        ``"l1"`` (``|x|``), ``"l2"`` (``x^2``) or a vectorised callable ``c(x) >= 0``,
        non-increasing on (-inf, 0] and non-decreasing on [0, inf) (e.g. the paper's
        asymmetric ``|x| + 1[x > 0] |x|``).
    granularity:
        Interval width ``beta``; ``sensitivity / beta`` must be a whole number.
    support:
        The noise lives on ``[-support, support)`` (rounded up to whole intervals);
        at least the sensitivity.
    symmetric, monotone:
        Restrict to noise symmetric about 0, or with density non-increasing away from
        0 (the paper's appendix shows both can cost loss).
    lower_bound:
        Also solve the lower-bound LP (about as costly as the design itself).
    max_memory:
        Refuse LPs estimated to need more bytes (default: half of this machine's memory).

    Returns
    -------
    NoiseDesign
        A mechanism (``release``, ``event``, ``guarantee``) with its weights, bounds,
        ``pdf``/``cdf``/``plot`` and a floating-point-safe sampler.

    Raises
    ------
    InvalidParameter
        Bad parameters, a support narrower than the sensitivity, an infeasible target,
        or an LP larger than ``max_memory`` (the message gives the size it needs).
    """
    owner = "design_noise"
    grid = _core.check_grid(epsilon, delta, sensitivity, granularity, support, owner)
    measure = make_loss(loss, owner)
    memory = _core.check_memory(max_memory, owner)
    pairs = _lp_shifts(grid.shifts, monotone)
    # l1 and l2 are even, so their LPs are solved folded (see _problem)
    folded = symmetric or measure.name in ("l1", "l2")
    _core.check_size(
        grid,
        1,
        pairs,
        lower_bound=lower_bound,
        max_memory=memory,
        owner=owner,
        symmetric=folded,
    )
    upper = _problem(
        grid, measure, lower=False, symmetric=symmetric, monotone=monotone, owner=owner
    )
    lower = _problem(grid, measure, lower=True, symmetric=symmetric, monotone=monotone, owner=owner)
    upper, solver = _core.certified_window(upper, max_memory=memory, owner=owner)
    counts, achieved = _core.solve_verified(
        upper,
        epsilon=grid.epsilon,
        max_memory=memory,
        owner=owner,
        checked_pairs=_all_shifts(grid.shifts),
        solver=solver,
    )
    # the window relaxation of the lower-bound LP is still a lower bound (fewer terms)
    lower = dataclasses.replace(lower, window=upper.window)
    bound = None
    if lower_bound:
        bound = _core.certified_lower_bound(lower, max_memory=memory, owner=owner)
    constraints = tuple(
        name for name, on in (("symmetric", symmetric), ("monotone", monotone)) if on
    )
    return NoiseDesign(
        distribution=PiecewiseUniform(counts[0], -grid.half, grid.beta),
        loss=measure,
        grid=grid,
        delta=_core.stated_delta(grid.delta, achieved, owner),
        achieved_delta=round_up(achieved),
        lower_bound=bound,
        constraints=constraints,
    )


def noise_lower_bound(
    *,
    epsilon: float,
    delta: float,
    sensitivity: float = 1.0,
    loss: LossLike = "l1",
    granularity: float,
    support: float,
    symmetric: bool = False,
    monotone: bool = False,
    max_memory: int | None = None,
) -> float:
    """A lower bound on the expected loss of every (epsilon, delta)-DP additive noise.

    The lower-bound LP of :func:`design_noise` alone (Prop. 3); unlike the design it
    accepts ``delta = 0`` (pure DP), where the staircase mechanism is the known optimum
    (Geng & Viswanath 2016) and the bound approaches its loss as ``granularity -> 0``.
    """
    owner = "noise_lower_bound"
    dlt = check.check_delta(delta, owner)
    grid = _core.check_grid(
        epsilon, dlt if dlt > 0 else 0.5, sensitivity, granularity, support, owner
    )
    grid = dataclasses.replace(grid, delta=dlt)
    measure = make_loss(loss, owner)
    problem = _problem(
        grid, measure, lower=True, symmetric=symmetric, monotone=monotone, owner=owner
    )
    memory = _core.check_memory(max_memory, owner)
    return _core.certified_lower_bound(problem, max_memory=memory, owner=owner)
