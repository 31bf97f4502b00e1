"""AIM: McKenna, Mullins, Sheldon & Miklau, "AIM: An Adaptive and Iterative Mechanism
for Differentially Private Synthetic Data", PVLDB 15(11), 2022, Algorithm 1.

Given a workload of marginals (default: every pair of columns) and a zCDP budget ``rho``:

* candidates are the workload's marginals and all their subsets, each weighted by
  ``w_r = sum over workload marginals s of |r & s|``;
* with ``T = 16 d`` planned rounds, every round costs ``rho / T``: 90% for a Gaussian
  measurement, 10% for the exponential mechanism's selection; the ``d`` 1-way marginals
  are measured first;
* each round selects the candidate ``r`` maximising ``w_r (||M_r(D) - M_r(p)||_1 -
  sqrt(2 / pi) sigma n_r)`` (``p`` the current model, ``n_r`` the marginal's cells)
  among those that keep the model under ``size_limit * spent / rho`` (a candidate
  inside an existing clique is free), measures it, refits the model (warm start), and
  halves sigma (doubling epsilon) when the new measurement moved the model by less than
  the expected noise, ``sqrt(2 / pi) sigma n_r`` in L1 (annealing; post-processing);
* when what remains is less than two rounds at the current scales, the last round uses
  it all (10% / 90%).

One person changes a score by at most ``w_r`` times the L1 change of the marginal,
``k`` (the rows a person keeps), so the selection's sensitivity is ``k max_r w_r`` over
the round's candidates (public). Every cost is charged exactly by
:class:`~dpkit.synth._marginals.PrivateMarginals`; the loop stops when the budget is
spent, so the run is ``rho``-zCDP (the paper's Theorem 1, by adaptive composition).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from itertools import combinations

import numpy as np
import numpy.typing as npt

from dpkit.synth._domain import Measurement
from dpkit.synth._graphical import GraphicalModel, estimate, junction_tree_cells
from dpkit.synth._marginals import (
    PrivateMarginals,
    epsilon_for,
    gaussian_cost,
    selection_cost,
    sigma_for,
)

__all__ = ["DEFAULT_MODEL_MB", "run_aim", "workload_candidates"]

#: AIM's default limit on the model's size (the paper's 80 MB of float64 cells).
DEFAULT_MODEL_MB = 80.0
_SELECT_SHARE = Fraction(1, 10)
#: Iterations of each round's refit: this fraction of the final fit's, at least ROUND_MIN.
ROUND_SHARE = 10
ROUND_MIN = 50


def workload_candidates(
    workload: Sequence[tuple[str, ...]],
) -> dict[tuple[str, ...], float]:
    """Every non-empty subset of a workload marginal, with AIM's weight."""
    weights: dict[tuple[str, ...], float] = {}
    for marginal in workload:
        for size in range(1, len(marginal) + 1):
            for subset in combinations(marginal, size):
                if subset not in weights:
                    weights[subset] = float(sum(len(set(subset) & set(s)) for s in workload))
    return weights


def _size_mb(cells: int) -> float:
    return cells * 8 / 2**20


def run_aim(
    data: PrivateMarginals,
    workload: Sequence[tuple[str, ...]] | None = None,
    *,
    max_model_mb: float = DEFAULT_MODEL_MB,
    iterations: int = 1000,
    progress: Callable[[str], None] | None = None,
) -> tuple[GraphicalModel, list[Measurement]]:
    """Run AIM on ``data`` with its whole budget (see the module docstring)."""
    tell = progress or (lambda _message: None)
    domain = data.domain
    d = len(domain.names)
    rho = data.budget
    if workload is None:
        workload = list(combinations(domain.names, 2)) or [tuple(domain.names)]
    candidates = workload_candidates(workload)
    rounds = 16 * d
    per_round = rho / rounds
    sigma = sigma_for(per_round * (1 - _SELECT_SHARE), data.sensitivity)
    epsilon = epsilon_for(per_round * _SELECT_SHARE)
    tell(f"AIM: measuring {d} one-way marginals")
    measured = [data.measure_with_sigma((name,), sigma) for name in domain.names]
    # Refits between rounds are warm-started and short (ROUND_SHARE of the iterations);
    # the final fit runs them all. The selection only needs a model close to the
    # measurements, and the refits were 90%+ of AIM's time (measured on Adult).
    refit = max(ROUND_MIN, iterations // ROUND_SHARE)
    model = estimate(domain, measured, iterations=refit)
    cliques: list[tuple[str, ...]] = [(name,) for name in domain.names]
    t = 0
    while True:
        t += 1
        remaining = data.remaining
        round_cost = gaussian_cost(sigma, data.sensitivity) + selection_cost(epsilon)
        last = remaining < 2 * round_cost
        if last:
            if remaining <= 0:
                break
            epsilon = epsilon_for(remaining * _SELECT_SHARE)
            sigma = sigma_for(remaining - selection_cost(epsilon), data.sensitivity)
            round_cost = gaussian_cost(sigma, data.sensitivity) + selection_cost(epsilon)
        limit = max_model_mb * float((data.spent + round_cost) / rho)
        allowed = [
            c
            for c in candidates
            if any(set(c) <= set(q) for q in cliques)
            or _size_mb(junction_tree_cells(domain, [*cliques, c])) <= limit
        ]
        if not allowed:  # nothing fits the model: measure the best 1-way again
            allowed = [(name,) for name in domain.names]
        bias = math.sqrt(2 / math.pi) * sigma

        def score(
            c: tuple[str, ...],
            exact: npt.NDArray[np.float64],
            bias: float = bias,
            model: GraphicalModel = model,
        ) -> float:
            # The model's marginal is computed per candidate, not kept for all at once
            # (memory stays at one candidate's cells).
            error = float(np.abs(exact - model.marginal(c)).sum())
            return candidates.get(c, 1.0) * (error - bias * domain.cells(c))

        sensitivity = data.sensitivity * max(candidates.get(c, 1.0) for c in allowed)
        pick = data.select(allowed, score, epsilon=epsilon, score_sensitivity=sensitivity)
        chosen = allowed[pick]
        done = float(data.spent / rho)
        tell(f"[{done:.0%}] AIM round {t}: measuring {', '.join(chosen)}")
        measurement = data.measure_with_sigma(chosen, sigma)
        measured.append(measurement)
        before = model.marginal(chosen)
        if not any(set(chosen) <= set(q) for q in cliques):
            cliques.append(chosen)
        model = estimate(domain, measured, iterations=refit, warm_start=model)
        if last:
            break
        moved = float(np.abs(model.marginal(chosen) - before).sum())
        if moved <= bias * domain.cells(chosen):
            sigma /= 2
            epsilon *= 2
    tell(f"[100%] AIM: {t} rounds, {len(measured)} measurements; fitting the final model")
    model = estimate(domain, measured, iterations=iterations, warm_start=model)
    return model, measured
