"""Calibrated belief propagation on a junction tree, with precomputed plans.

The upward pass sends log-sum-exp messages (Shafer-Shenoy) from the leaves to the
root; the downward pass multiplies each clique's conditional distribution given its
parent separator by that separator's marginal in the calibrated parent (the Hugin
update; Koller & Friedman, *Probabilistic Graphical Models*, 2009, Sec. 10.2-10.3),
on probabilities, which lie in ``[0, total]``, so it needs no logarithms.

Speed comes from memory traffic, not arithmetic: marginalising a table is done by
:class:`Reduction`, which merges adjacent axes, sums a trailing block with ``einsum``
(not a BLAS product, whose threads busy-wait on a loaded machine) and the others slab
by slab (NumPy's multi-axis ``sum`` over inner, strided axes is several times slower),
and work tables are reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpkit.synth._junction import FloatArray, JunctionTree

__all__ = ["BeliefPropagation", "Reduction"]

# exp(-700) is still a normal float64: below this a scalar shift may underflow.
_TINY = 1e-300


class Reduction:
    """Sum a C-contiguous table of a fixed ``shape`` over fixed ``axes``.

    The result keeps the other axes in order (no ``keepdims``).
    """

    def __init__(self, shape: Sequence[int], axes: Sequence[int]) -> None:
        blocks: list[list[int]] = []  # [size, reduced] of runs of adjacent axes
        for i, n in enumerate(shape):
            reduced = int(i in axes)
            if blocks and blocks[-1][1] == reduced:
                blocks[-1][0] *= n
            else:
                blocks.append([n, reduced])
        self.merged = tuple(b[0] for b in blocks)
        self.tail = blocks[-1][0] if blocks and blocks[-1][1] else 0
        body = blocks[:-1] if self.tail else blocks
        self.slabs = tuple(i for i in reversed(range(len(body))) if body[i][1])
        self.out = tuple(n for i, n in enumerate(shape) if i not in axes)
        self.identity = not any(i in axes for i in range(len(shape)))

    def __call__(self, x: FloatArray) -> FloatArray:
        if self.identity:
            return x
        y = x.reshape(self.merged)
        if self.tail:
            y = np.einsum("ij->i", y.reshape(-1, self.tail)).reshape(self.merged[:-1])
        for axis in self.slabs:
            y = y.sum(axis=axis)
        return np.reshape(y, self.out)


@dataclass(frozen=True, slots=True)
class _Edge:
    child: int
    parent: int
    up: Reduction  # child table -> separator
    down: Reduction  # parent table -> separator
    child_axes: tuple[int, ...]
    in_child: tuple[int, ...]  # separator table broadcast against the child
    in_parent: tuple[int, ...]  # ... and against the parent


class BeliefPropagation:
    """Message plan for one junction tree.

    :meth:`marginals` maps log-potentials (one table per clique, axes in the clique's
    column order) to calibrated clique marginals, each scaled to sum to ``total``.
    """

    def __init__(self, tree: JunctionTree) -> None:
        self.tree = tree
        self.root = tree.order[0]
        edges = []
        for c in tree.order[1:]:
            p = tree.parent[c]
            sep = tree.separator(c)
            outside = tree.axes_outside(c, sep)
            edges.append(
                _Edge(
                    c,
                    p,
                    Reduction(tree.shape(c), outside),
                    Reduction(tree.shape(p), tree.axes_outside(p, sep)),
                    outside,
                    tree.broadcast_shape(c, sep),
                    tree.broadcast_shape(p, sep),
                )
            )
        self.edges = tuple(edges)
        self._work = [np.empty(tree.shape(i)) for i in range(len(tree.cliques))]
        self._direction: Sequence[FloatArray | None] = ()
        self._step = 0.0

    def marginals(
        self,
        potentials: Sequence[FloatArray],
        total: float,
        direction: Sequence[FloatArray | None] = (),
        step: float = 0.0,
    ) -> list[FloatArray]:
        """Calibrated clique marginals (counts summing to ``total``).

        The log-potentials are ``potentials - step * direction`` (``direction[i]`` of
        ``None``: zero), formed inside the work tables to save a pass over memory.
        """
        self._direction, self._step = direction, step
        incoming: list[list[FloatArray]] = [[] for _ in potentials]
        norms: list[FloatArray] = [np.ones(())] * len(potentials)
        for e in reversed(self.edges):  # upward: children before their parents
            ex = self._belief(potentials, incoming, e.child)
            top = float(np.max(ex))
            ex -= top
            np.exp(ex, out=ex)
            norm = e.up(ex)
            shift: float | FloatArray = top
            if norm.size and float(np.min(norm)) < _TINY:
                # Some separator value's beliefs all sit far below the clique's maximum:
                # shift per separator value instead (a rare, slower path).
                norm, shift = self._stable(potentials, incoming, e)
            norms[e.child] = norm.reshape(e.in_child)
            incoming[e.parent].append((np.log(norm) + shift).reshape(e.in_parent))
        ex = self._belief(potentials, incoming, self.root)
        ex -= np.max(ex)
        np.exp(ex, out=ex)
        out = [ex] * len(potentials)
        out[self.root] = ex * (total / float(np.sum(ex)))
        for e in self.edges:  # downward: mu_c = p(C \ S | S) * mu_parent(S)
            sep = e.down(out[e.parent]).reshape(e.in_child)
            out[e.child] = self._work[e.child] * (sep / norms[e.child])
        return out

    def _belief(
        self, potentials: Sequence[FloatArray], incoming: list[list[FloatArray]], c: int
    ) -> FloatArray:
        """Potential of clique ``c`` plus its incoming log-messages, in a work table."""
        b = self._work[c]
        d = self._direction[c] if self._direction else None
        if d is None:
            np.copyto(b, potentials[c])
        else:
            np.multiply(d, -self._step, out=b)
            b += potentials[c]
        for m in incoming[c]:
            b += m
        return b

    def _stable(
        self, potentials: Sequence[FloatArray], incoming: list[list[FloatArray]], e: _Edge
    ) -> tuple[FloatArray, FloatArray]:
        """Leave ``exp(b - max_S b)`` in the work table; return its separator sums and
        the shifts ``max_S b``, both over the separator."""
        b = self._belief(potentials, incoming, e.child)
        top = np.max(b, axis=e.child_axes, keepdims=True)
        b -= top
        np.exp(b, out=b)
        return e.up(b), np.reshape(top, e.up.out)
