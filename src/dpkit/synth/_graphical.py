"""Fit a graphical model to noisy marginals (Private-PGM) and query or sample it.

This is the post-processing half of MST and AIM (McKenna, Mullins, Sheldon & Miklau,
VLDB 2022): given noisy marginals ``y_r = M_r(data) + noise``, find the distribution
whose marginals best explain them, as Private-PGM does (McKenna, Sheldon & Miklau,
"Graphical-model based estimation and inference for differential privacy", ICML 2019).

The estimate minimises Private-PGM's default L2 loss (its ``MirrorDescent`` with
``norm="l2"``; the Gaussian negative log-likelihood up to a constant)::

    L(mu) = sum_r  1/2 * || (M_r(mu) - y_r) / sigma_r ||_2^2

over the clique marginals ``mu`` of a graphical model whose cliques cover every
measured column set; ``mu`` is scaled to sum to the number of records. By ICML 2019,
Thm 1, a minimiser of ``L`` over the marginal polytope is attained by such a model, so
the search runs over its log-potentials ``theta`` by entropic mirror descent
(ICML 2019, Alg. 1): ``theta <- theta - alpha * dL/dmu``, with ``mu`` from belief
propagation on a junction tree (``_junction``, ``_propagation``); sampling is in
``_sampling``. Everything here is post-processing of
the measurements, so it has no privacy cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dpkit.errors import InvalidParameter
from dpkit.synth._domain import Domain, Measurement
from dpkit.synth._junction import (
    FloatArray,
    JunctionTree,
    build_junction_tree,
    junction_tree_cells,
    tree_marginal,
)
from dpkit.synth._loss import (
    Objective,
    check_measurement,
    column_positions,
    estimate_total,
    targets,
)
from dpkit.synth._propagation import BeliefPropagation
from dpkit.synth._sampling import sample_tree

__all__ = ["GraphicalModel", "estimate", "junction_tree_cells"]

_MAX_HALVINGS = 25  # Private-PGM's line search gives up after 25 halvings
# Growth of the step between iterations. Private-PGM 1 doubles the last accepted step
# (then backtracks), Private-PGM 2 grows it by 1.01 (and skips the iteration on a
# failure); 1.1 with backtracking reached a lower loss per belief propagation than
# either on Adult workloads (benchmarks/results/synth_inference.md).
_GROWTH = 1.1
_WINDOW = 10  # iterations over which convergence is judged


class GraphicalModel:
    """A fitted distribution over a :class:`Domain`, scaled to ``total`` records.

    The model factorises over the maximal cliques of a junction tree; it stores the
    log-potentials (for warm starts) and the calibrated clique marginals.

    Attributes
    ----------
    domain:
        The domain the model is over.
    cliques:
        Maximal cliques of the junction tree, as column names in domain order.
    total:
        Number of records the marginals sum to.
    loss:
        Value of the L2 loss of :func:`estimate` at the fitted model.
    iterations:
        Mirror-descent iterations taken by the fit.
    """

    def __init__(
        self,
        domain: Domain,
        tree: JunctionTree,
        potentials: Sequence[FloatArray],
        marginals: Sequence[FloatArray],
        total: float,
        *,
        loss: float = math.nan,
        iterations: int = 0,
    ) -> None:
        self.domain = domain
        self.total = float(total)
        self.loss = float(loss)
        self.iterations = int(iterations)
        self._tree = tree
        self._potentials = tuple(potentials)
        self._marginals = tuple(marginals)
        self._step = 0.0  # last accepted mirror-descent step, for warm starts
        self.cliques: tuple[tuple[str, ...], ...] = tuple(
            tuple(domain.names[v] for v in c) for c in tree.cliques
        )

    def __repr__(self) -> str:
        return (
            f"GraphicalModel(cliques={self.cliques!r}, total={self.total:g}, "
            f"cells={self._tree.cells()})"
        )

    @property
    def cells(self) -> int:
        """Number of parameters: cells of all clique tables (8 bytes each)."""
        return self._tree.cells()

    def marginal(self, columns: Sequence[str]) -> FloatArray:
        """Estimated counts over ``columns``, shape ``domain.shape(columns)``.

        Columns may span several cliques (then variables are eliminated over the
        smallest connected part of the junction tree that covers them).
        """
        idx = column_positions(self.domain, columns, "GraphicalModel.marginal")
        order = sorted(idx)
        table = tree_marginal(self._tree, self._marginals, order)
        return np.ascontiguousarray(np.transpose(table, [order.index(v) for v in idx]))

    def sample(self, rows: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """Draw ``rows`` records, codes per column in domain order.

        Forward sampling along the junction tree with rounded expected counts; see
        ``_sampling`` for the scheme.
        """
        if not isinstance(rows, int | np.integer) or isinstance(rows, bool) or rows < 0:
            raise InvalidParameter.for_parameter(
                "rows", "GraphicalModel.sample", "a non-negative integer", rows
            )
        if not isinstance(rng, np.random.Generator):
            raise InvalidParameter.for_parameter(
                "rng", "GraphicalModel.sample", "a numpy.random.Generator", rng
            )
        return sample_tree(self._tree, self._marginals, int(rows), rng)


def _expand(old: GraphicalModel, tree: JunctionTree) -> list[FloatArray]:
    """Log-potentials on ``tree`` that reproduce ``old``'s distribution where possible.

    Each old clique's potential goes to the smallest new clique containing it (exact
    when every old clique fits, the usual case as AIM only adds measurements). If one
    does not fit (the new triangulation dropped a fill-in edge), its log-sum-exp
    projection goes to the new clique sharing most of its columns: only a start point.
    """
    theta = [np.zeros(tree.shape(i)) for i in range(len(tree.cliques))]
    for c, pot in zip(old._tree.cliques, old._potentials, strict=True):

        def overlap(i: int, c: tuple[int, ...] = c) -> tuple[int, int, int]:
            n = len(set(c) & set(tree.cliques[i]))
            return (-n, math.prod(tree.shape(i)), i)

        i = min(range(len(tree.cliques)), key=overlap)
        keep = tuple(v for v in c if v in tree.cliques[i])
        drop = tuple(a for a, v in enumerate(c) if v not in keep)
        if drop:
            top = np.max(pot, axis=drop, keepdims=True)
            pot = np.squeeze(
                np.log(np.sum(np.exp(pot - top), axis=drop, keepdims=True)) + top, drop
            )
        theta[i] = theta[i] + pot.reshape(tree.broadcast_shape(i, keep))
    return theta


def estimate(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    total: float | None = None,
    iterations: int = 1000,
    warm_start: GraphicalModel | None = None,
    cliques: Sequence[Sequence[str]] = (),
    tolerance: float = 1e-7,
) -> GraphicalModel:
    """Fit a graphical model to noisy marginal measurements (Private-PGM).

    Minimises the L2 loss ``sum_r 1/2 ||(M_r(mu) - y_r) / sigma_r||^2`` (Private-PGM's
    default, ``norm="l2"``) by mirror descent on the clique log-potentials (McKenna,
    Sheldon & Miklau, ICML 2019, Alg. 1).

    Step size: backtracking line search with Private-PGM's sufficient-decrease test
    ``L(old) - L(new) >= alpha/2 * <dL/dmu(old), mu_old - mu_new>``: each iteration
    first tries 1.1 times the last accepted step and halves it (at most 25 times)
    until the test holds (Private-PGM 1 tries twice the last step, Private-PGM 2
    1.01 times it without retrying; 1.1 converged fastest per belief propagation on
    Adult). The first step is ``2 / (L_max * total)``, ``L_max`` the Lipschitz
    constant of ``dL/dmu`` (Private-PGM 2's start); a warm start resumes from the
    previous fit's last step. It stops after ``iterations`` accepted steps, when no
    step passes the test, or when the loss fell by at most ``tolerance * loss`` over
    the last 10 iterations.

    Parameters
    ----------
    domain:
        Columns and their sizes.
    measurements:
        Noisy marginals; columns need not be in domain order.
    total:
        Number of records. ``None``: Private-PGM's estimate, the inverse-variance
        weighted mean of the measured totals (each marginal's sum, variance
        ``cells * sigma**2``), at least 1.
    iterations:
        Maximum number of mirror-descent iterations.
    warm_start:
        A model over the same domain (e.g. the previous fit in AIM's loop): start from
        its potentials instead of the uniform distribution.
    cliques:
        Extra column sets the model must contain (beyond the measured ones).
    tolerance:
        Relative loss decrease over 10 iterations below which the fit stops.

    Returns
    -------
    GraphicalModel
        The fitted model. Its ``loss`` and ``iterations`` report the fit.

    Notes
    -----
    Post-processing of the measurements: no privacy cost, and nothing here depends on
    the data except through ``measurements``. Deterministic given its inputs.
    """
    if not isinstance(domain, Domain):
        raise InvalidParameter.for_parameter("domain", "estimate", "a Domain", domain)
    checked = [check_measurement(domain, m, k) for k, m in enumerate(measurements)]
    extra = [column_positions(domain, c, "estimate (cliques)") for c in cliques]
    if total is None:
        total = estimate_total(checked)
    elif (
        isinstance(total, bool)
        or not isinstance(total, int | float)
        or not math.isfinite(total)
        or total <= 0
    ):
        raise InvalidParameter.for_parameter(
            "total", "estimate", "a finite float > 0 or None", total
        )
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
        raise InvalidParameter.for_parameter(
            "iterations", "estimate", "an integer >= 0", iterations
        )
    if not math.isfinite(tolerance) or tolerance < 0:
        raise InvalidParameter.for_parameter("tolerance", "estimate", "a float >= 0", tolerance)
    if warm_start is not None and (
        not isinstance(warm_start, GraphicalModel) or warm_start.domain != domain
    ):
        raise InvalidParameter(
            "estimate: warm_start must be a GraphicalModel over the same domain."
        )
    names = [[domain.names[v] for v in idx] for idx, _, _ in checked]
    names += [[domain.names[v] for v in idx] for idx in extra]
    tree = build_junction_tree(domain, names)
    objective = Objective(tree, targets(domain, tree, checked))
    if warm_start is None:
        theta = [np.zeros(tree.shape(i)) for i in range(len(tree.cliques))]
        alpha = 0.0
    else:
        theta = _expand(warm_start, tree)
        # Its last accepted step, rescaled: steps scale as 1 / total.
        alpha = warm_start._step * warm_start.total / float(total)
    theta, mu, loss, steps, alpha = _mirror_descent(
        BeliefPropagation(tree), objective, theta, float(total), iterations, tolerance, alpha
    )
    model = GraphicalModel(domain, tree, theta, mu, float(total), loss=loss, iterations=steps)
    model._step = alpha
    return model


def _mirror_descent(
    bp: BeliefPropagation,
    objective: Objective,
    theta: list[FloatArray],
    total: float,
    iterations: int,
    tolerance: float,
    alpha: float,
) -> tuple[list[FloatArray], list[FloatArray], float, int, float]:
    mu = bp.marginals(theta, total)
    loss, fitted = objective.residuals(mu)
    if alpha <= 0:
        alpha = 2.0 / (objective.lipschitz() * total)
    history = [loss]
    steps = 0
    while steps < iterations and loss > objective.constant:
        grad, res = objective.gradient(fitted)
        alpha *= _GROWTH
        for _ in range(_MAX_HALVINGS):
            new_mu = bp.marginals(theta, total, grad, alpha)
            new_loss, new_fitted = objective.residuals(new_mu)
            if loss - new_loss >= 0.5 * alpha * objective.directional(res, fitted, new_fitted):
                break
            alpha *= 0.5
        else:
            break  # no step decreases the loss: converged to machine precision
        theta = [t if g is None else t - alpha * g for t, g in zip(theta, grad, strict=True)]
        mu, loss, fitted = new_mu, new_loss, new_fitted
        steps += 1
        history.append(loss)
        if steps >= _WINDOW and history[-1 - _WINDOW] - loss <= tolerance * loss:
            break
    return theta, mu, loss, steps, alpha
