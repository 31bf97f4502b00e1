"""The loss Private-PGM minimises, over the clique marginals of a junction tree.

``L(mu) = sum_r 1/2 ||(M_r(mu) - y_r) / sigma_r||^2`` (McKenna, Sheldon & Miklau,
ICML 2019, Sec. 3; Private-PGM's default ``norm="l2"``), with its gradient in ``mu``
and the validation of the measurements it is built from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpkit.errors import InvalidParameter
from dpkit.synth._domain import Domain, Measurement
from dpkit.synth._junction import FloatArray, JunctionTree
from dpkit.synth._propagation import Reduction

__all__ = ["Objective", "check_measurement", "column_positions", "estimate_total", "targets"]

Checked = tuple[list[int], FloatArray, float]


def _dot(a: FloatArray, b: FloatArray) -> float:
    """Inner product without BLAS: OpenBLAS's threads busy-wait after a large ``ddot``
    and, on a machine with few free cores, slow every NumPy call that follows."""
    return float(np.einsum("i,i->", a.ravel(), b.ravel()))


def column_positions(domain: Domain, columns: Sequence[str], owner: str) -> list[int]:
    """Domain positions of ``columns`` (distinct names of the domain), else
    :class:`InvalidParameter` naming ``owner``."""
    if isinstance(columns, str):
        raise InvalidParameter(f"{owner}: columns must be a sequence of names, not a string.")
    idx = []
    for c in columns:
        if c not in domain.names:
            raise InvalidParameter(f"{owner}: no column {c!r}; columns: {list(domain.names)}.")
        idx.append(domain.names.index(c))
    if len(set(idx)) != len(idx):
        raise InvalidParameter(f"{owner}: columns must be distinct; got {list(columns)}.")
    return idx


@dataclass(frozen=True, slots=True)
class _Target:
    """Measurements of one column set, merged: sum_r w_r/2 ||x - y_r||^2 equals
    w/2 ||x - y||^2 + const with w = sum w_r, y = sum w_r y_r / w."""

    clique: int  # the junction-tree clique it belongs to
    source: int  # the earlier target it is summed from, or -1: from the clique's table
    reduce: Reduction  # the source table -> this marginal
    shape: tuple[int, ...]  # this marginal broadcast against the clique
    values: FloatArray  # axes in domain order
    weight: float
    constant: float


def check_measurement(domain: Domain, m: object, k: int) -> Checked:
    """Validate measurement number ``k``: its column positions, values, sigma."""
    owner = f"estimate (measurement {k})"
    if not isinstance(m, Measurement):
        raise InvalidParameter(f"{owner}: expected a Measurement, got {type(m).__name__}.")
    idx = column_positions(domain, m.columns, owner)
    values = np.asarray(m.values, dtype=np.float64)
    shape = tuple(domain.sizes[v] for v in idx)
    if values.shape != shape:
        raise InvalidParameter(
            f"{owner}: values over {list(m.columns)} must have shape {shape}; got {values.shape}."
        )
    if not np.all(np.isfinite(values)):
        raise InvalidParameter(f"{owner}: values must be finite (no NaN or inf).")
    sigma = m.sigma
    if (
        isinstance(sigma, bool)
        or not isinstance(sigma, int | float | np.floating | np.integer)
        or not math.isfinite(sigma)
        or sigma <= 0
    ):
        raise InvalidParameter.for_parameter("sigma", owner, "a finite float > 0", sigma)
    return idx, values, float(sigma)


def targets(domain: Domain, tree: JunctionTree, checked: list[Checked]) -> list[_Target]:
    """One merged target per measured column set, placed in the smallest clique that
    holds it, in an order where every target follows the one it is summed from."""
    groups: dict[tuple[int, ...], list[tuple[FloatArray, float]]] = {}
    for idx, values, sigma in checked:
        order = sorted(idx)
        y = np.transpose(values, [idx.index(v) for v in order])
        groups.setdefault(tuple(order), []).append((y, 1.0 / sigma**2))
    placed = []
    for scope in groups:
        holders = [i for i, c in enumerate(tree.cliques) if set(scope) <= set(c)]
        placed.append((min(holders, key=lambda h: (math.prod(tree.shape(h)), h)), scope))
    # Larger marginals first, so a smaller one can be summed from the smallest larger
    # one of its clique instead of from the (bigger) clique table.
    placed.sort(key=lambda cs: (cs[0], -len(cs[1]), cs[1]))
    targets: list[_Target] = []
    scopes: list[tuple[int, ...]] = []
    for clique, scope in placed:
        items = groups[scope]
        weight = sum(w for _, w in items)
        y = np.zeros(tuple(domain.sizes[v] for v in scope))
        for v, w in items:
            y += (w / weight) * v
        constant = sum(0.5 * w * _dot(v - y, v - y) for v, w in items)
        supersets = [
            k for k, t in enumerate(targets) if t.clique == clique and set(scope) <= set(scopes[k])
        ]
        source = min(supersets, key=lambda k: (targets[k].values.size, k), default=-1)
        over = tree.cliques[clique] if source < 0 else scopes[source]
        shape = tuple(domain.sizes[v] for v in over)
        drop = tuple(a for a, v in enumerate(over) if v not in scope)
        targets.append(
            _Target(
                clique,
                source,
                Reduction(shape, drop),
                tree.broadcast_shape(clique, scope),
                y,
                weight,
                constant,
            )
        )
        scopes.append(scope)
    return targets


def estimate_total(checked: list[Checked]) -> float:
    """Inverse-variance weighted mean of the measured totals, at least 1.

    Private-PGM's ``minimum_variance_unbiased_total``: a marginal over ``n`` cells with
    noise ``sigma`` gives the total with variance ``n * sigma**2``.
    """
    if not checked:
        return 1.0
    w = np.array([1.0 / (s**2 * v.size) for _, v, s in checked])
    est = np.array([float(np.sum(v)) for _, v, _ in checked])
    return max(1.0, float(np.sum(w * est) / np.sum(w)))


class Objective:
    """The loss, its gradient, and the directional term of the line search."""

    def __init__(self, tree: JunctionTree, targets: list[_Target]) -> None:
        self.tree = tree
        self.targets = targets
        self.constant = sum(t.constant for t in targets)

    def residuals(self, mu: Sequence[FloatArray]) -> tuple[float, list[FloatArray]]:
        """Loss and the measured marginals ``M_r(mu)`` of every target."""
        loss = self.constant
        fitted: list[FloatArray] = []
        for t in self.targets:
            x = t.reduce(mu[t.clique] if t.source < 0 else fitted[t.source])
            d = x - t.values
            loss += 0.5 * t.weight * _dot(d, d)
            fitted.append(x)
        return loss, fitted

    def gradient(
        self, fitted: list[FloatArray]
    ) -> tuple[list[FloatArray | None], list[FloatArray]]:
        """``dL/dmu`` per clique (the weighted residuals broadcast over their clique),
        and the weighted residuals themselves."""
        grad: list[FloatArray | None] = [None] * len(self.tree.cliques)
        res = []
        for t, x in zip(self.targets, fitted, strict=True):
            r = t.weight * (x - t.values)
            res.append(r)
            cur = grad[t.clique]
            if cur is None:
                grad[t.clique] = cur = np.zeros(self.tree.shape(t.clique))
            cur += r.reshape(t.shape)
        return grad, res

    @staticmethod
    def directional(res: list[FloatArray], old: list[FloatArray], new: list[FloatArray]) -> float:
        """``<dL/dmu(old), mu_old - mu_new>``, from the measured marginals alone."""
        return sum(_dot(r, a - b) for r, a, b in zip(res, old, new, strict=True))

    def lipschitz(self) -> float:
        """Largest eigenvalue of the loss's Hessian in ``mu`` (block-diagonal by clique):
        ``max_C sum_{r in C} w_r |C| / |r|``, exact for marginal queries (the uniform
        vector is the top eigenvector of every marginalisation)."""
        blocks: dict[int, float] = {}
        for t in self.targets:
            ratio = math.prod(self.tree.shape(t.clique)) / t.values.size
            blocks[t.clique] = blocks.get(t.clique, 0.0) + t.weight * ratio
        return max(blocks.values(), default=1.0)
