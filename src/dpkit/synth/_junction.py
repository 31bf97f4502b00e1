"""Junction trees over a :class:`Domain`, and marginals of calibrated ones.

A set of cliques (column sets) defines a Markov network: one node per column, an edge
between two columns that share a clique. Exact inference needs a *chordal* cover of
that graph; we triangulate by greedy elimination (Koller & Friedman, *Probabilistic
Graphical Models*, 2009, Sec. 9.4.3: min-fill and min-weight heuristics, keeping the
one with fewer cells), take the maximal cliques of the triangulated graph, and join
them by a maximum-weight spanning tree on separator sizes, which has the
running-intersection property for the maximal cliques of a chordal graph (Koller &
Friedman, Thm 10.3; Jensen & Jensen, UAI 1994).

Every clique lists its columns by their position in the domain, so a separator has the
same axis order in both cliques it joins and tables broadcast without transposes.
Belief propagation is in ``_propagation``; :func:`tree_marginal` answers marginal
queries on its calibrated output."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit.synth._domain import Domain

__all__ = ["JunctionTree", "build_junction_tree", "junction_tree_cells", "tree_marginal"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class JunctionTree:
    """A rooted junction tree; clique 0 is the root.

    Attributes
    ----------
    sizes:
        Number of codes of each column, by domain position.
    cliques:
        Maximal cliques as sorted tuples of domain positions.
    parent:
        ``parent[i]`` is the parent clique of ``i`` (``-1`` for the root).
    order:
        The cliques in pre-order (root first): every parent precedes its children.
    """

    sizes: tuple[int, ...]
    cliques: tuple[tuple[int, ...], ...]
    parent: tuple[int, ...]
    order: tuple[int, ...]

    def shape(self, i: int) -> tuple[int, ...]:
        """Shape of clique ``i``'s table."""
        return tuple(self.sizes[v] for v in self.cliques[i])

    def separator(self, i: int) -> tuple[int, ...]:
        """Columns clique ``i`` shares with its parent (empty for the root)."""
        p = self.parent[i]
        if p < 0:
            return ()
        return tuple(v for v in self.cliques[i] if v in self.cliques[p])

    def axes_outside(self, i: int, keep: Sequence[int]) -> tuple[int, ...]:
        """Axes of clique ``i`` whose columns are not in ``keep``."""
        return tuple(a for a, v in enumerate(self.cliques[i]) if v not in keep)

    def broadcast_shape(self, i: int, scope: Sequence[int]) -> tuple[int, ...]:
        """Shape that broadcasts a table over ``scope`` (sorted) against clique ``i``."""
        return tuple(self.sizes[v] if v in scope else 1 for v in self.cliques[i])

    def cells(self) -> int:
        """Total number of cells of the clique tables."""
        return sum(math.prod(self.shape(i)) for i in range(len(self.cliques)))


def _elimination_cliques(
    sizes: Sequence[int], edges: list[set[int]], by_weight: bool
) -> list[tuple[int, ...]]:
    """Eliminate every node greedily; return the cliques formed, in elimination order.

    ``by_weight``: pick the node whose clique (node and neighbours) has the fewest
    cells, ties broken by fill-in; otherwise pick the node adding the fewest fill-in
    edges, ties broken by cells. Remaining ties go to the lowest position, so the
    result is deterministic.
    """
    adj = [set(e) for e in edges]
    alive = set(range(len(sizes)))
    formed: list[tuple[int, ...]] = []
    while alive:
        best: tuple[int, int, int] | None = None
        for v in sorted(alive):
            nb = sorted(adj[v])
            fill = sum(1 for i, a in enumerate(nb) for b in nb[i + 1 :] if b not in adj[a])
            weight = math.prod(sizes[u] for u in nb) * sizes[v]
            key = (weight, fill, v) if by_weight else (fill, weight, v)
            if best is None or key < best:
                best = key
        assert best is not None
        v = best[2]
        nb = sorted(adj[v])
        for a in nb:
            adj[a].update(u for u in nb if u != a)
            adj[a].discard(v)
        formed.append(tuple(sorted([v, *nb])))
        alive.discard(v)
    return formed


def _maximal(cliques: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The cliques not contained in another one, sorted, without duplicates."""
    unique = sorted(set(cliques), key=lambda c: (-len(c), c))
    kept: list[tuple[int, ...]] = []
    for c in unique:
        if not any(set(c) <= set(k) for k in kept):
            kept.append(c)
    return sorted(kept)


def _triangulate(domain: Domain, cliques: Sequence[Sequence[str]]) -> list[tuple[int, ...]]:
    """Maximal cliques of a triangulation of the cliques' graph (the smaller of two)."""
    n = len(domain.names)
    edges: list[set[int]] = [set() for _ in range(n)]
    for clique in cliques:
        idx = [domain.index(c) for c in clique]
        for a in idx:
            edges[a].update(b for b in idx if b != a)
    candidates = [
        _maximal(_elimination_cliques(domain.sizes, edges, by_weight=w)) for w in (False, True)
    ]

    def cost(cl: list[tuple[int, ...]]) -> int:
        return sum(math.prod(domain.sizes[v] for v in c) for c in cl)

    # min-fill first: on an already chordal graph it adds no edge at all.
    return min(candidates, key=cost)


def _spanning_tree(cliques: list[tuple[int, ...]]) -> list[tuple[int, int]]:
    """Maximum-weight spanning tree (Kruskal) with weight = separator size.

    Empty separators are allowed, so disconnected components still form one tree.
    """
    k = len(cliques)
    pairs = sorted(
        (-len(set(cliques[i]) & set(cliques[j])), i, j) for i in range(k) for j in range(i + 1, k)
    )
    root = list(range(k))

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    tree: list[tuple[int, int]] = []
    for _, i, j in pairs:
        ri, rj = find(i), find(j)
        if ri != rj:
            root[ri] = rj
            tree.append((i, j))
    return tree


def build_junction_tree(domain: Domain, cliques: Sequence[Sequence[str]]) -> JunctionTree:
    """Junction tree whose maximal cliques cover ``cliques`` and every column.

    Columns in no clique become cliques of their own. The root is the largest clique
    (most cells; ties to the first), which keeps the unconditioned table large and the
    conditional ones small.
    """
    maximal = _triangulate(domain, cliques)
    sizes = domain.sizes
    cells = [math.prod(sizes[v] for v in c) for c in maximal]
    root = min(range(len(maximal)), key=lambda i: (-cells[i], i))
    neighbours: list[list[int]] = [[] for _ in maximal]
    for i, j in _spanning_tree(maximal):
        neighbours[i].append(j)
        neighbours[j].append(i)
    parent = [-1] * len(maximal)
    order = [root]
    seen = {root}
    for i in order:  # breadth-first; ``order`` grows while we walk it
        for j in sorted(neighbours[i]):
            if j not in seen:
                seen.add(j)
                parent[j] = i
                order.append(j)
    return JunctionTree(sizes, tuple(maximal), tuple(parent), tuple(order))


def junction_tree_cells(domain: Domain, cliques: Sequence[Sequence[str]]) -> int:
    """Total cells of the maximal cliques of the junction tree for ``cliques``.

    This is the number of float64 parameters of the model :func:`estimate` would fit
    (times 8 / 2**20 for megabytes, AIM's model-size measure; McKenna et al., VLDB 2022,
    Sec. 4). Columns in no clique count their own size.
    """
    return build_junction_tree(domain, cliques).cells()


def _steiner(tree: JunctionTree, columns: Sequence[int]) -> list[int]:
    """A small connected set of cliques covering ``columns`` (greedy: nearest first)."""
    depth = [0] * len(tree.cliques)
    for c in tree.order[1:]:
        depth[c] = depth[tree.parent[c]] + 1

    def path(a: int, b: int) -> set[int]:
        nodes = {a, b}
        while a != b:
            if depth[a] < depth[b]:
                a, b = b, a
            a = tree.parent[a]
            nodes.add(a)
        return nodes

    chosen: set[int] = set()
    for v in columns:
        holders = [i for i, c in enumerate(tree.cliques) if v in c]
        if any(i in chosen for i in holders):
            continue
        if not chosen:
            chosen.add(min(holders, key=lambda i: (math.prod(tree.shape(i)), i)))
            continue
        anchor = min(chosen)
        best = min((path(anchor, h) | chosen for h in holders), key=lambda s: (len(s), sorted(s)))
        # ``path`` to one member joins the sets: the chosen set is connected.
        chosen = best
    return sorted(chosen, key=tree.order.index)


def _product(
    a: tuple[tuple[int, ...], FloatArray], b: tuple[tuple[int, ...], FloatArray]
) -> tuple[tuple[int, ...], FloatArray]:
    """Pointwise product of two tables whose axes are sorted column positions."""
    scope = tuple(sorted(set(a[0]) | set(b[0])))

    def spread(f: tuple[tuple[int, ...], FloatArray]) -> FloatArray:
        shape = tuple(f[1].shape[f[0].index(v)] if v in f[0] else 1 for v in scope)
        return f[1].reshape(shape)

    return scope, spread(a) * spread(b)


def tree_marginal(
    tree: JunctionTree, mu: Sequence[FloatArray], columns: Sequence[int]
) -> FloatArray:
    """Marginal over ``columns`` (distinct, sorted positions) of calibrated counts ``mu``.

    Inside one clique this is a sum. Otherwise it eliminates variables over a connected
    set of cliques, the top one contributing its marginal and each other one its
    conditional given its parent separator; each table is first summed down to the
    columns asked for and its separators, so the work stays near the clique sizes.
    """
    want = set(columns)
    holders = [i for i, c in enumerate(tree.cliques) if want <= set(c)]
    if holders:
        i = min(holders, key=lambda h: (math.prod(tree.shape(h)), h))
        return np.asarray(np.sum(mu[i], axis=tree.axes_outside(i, columns)), dtype=np.float64)
    nodes = _steiner(tree, columns)
    inside = set(nodes)
    seps = {c: tree.separator(c) for c in nodes[1:]}
    tables: dict[int, tuple[tuple[int, ...], FloatArray]] = {}
    for c in nodes:
        keep = want | set(seps.get(c, ()))
        keep |= {v for d in nodes[1:] if tree.parent[d] == c for v in seps[d]}
        scope = tuple(v for v in tree.cliques[c] if v in keep)
        table = np.sum(mu[c], axis=tree.axes_outside(c, scope))
        if c != nodes[0]:
            sep = seps[c]
            den = np.sum(mu[c], axis=tree.axes_outside(c, sep))
            shape = tuple(tree.sizes[v] if v in sep else 1 for v in scope)
            with np.errstate(invalid="ignore", divide="ignore"):
                table = np.where(den.reshape(shape) > 0, table / den.reshape(shape), 0.0)
        tables[c] = (scope, table)
    for c in reversed(nodes[1:]):  # children before parents: eliminate upwards
        scope, table = tables.pop(c)
        keep = want | set(seps[c])
        out = tuple(v for v in scope if v in keep)
        table = np.sum(table, axis=tuple(a for a, v in enumerate(scope) if v not in keep))
        p = tree.parent[c]
        assert p in inside
        tables[p] = _product(tables[p], (out, table))
    scope, table = tables[nodes[0]]
    drop = tuple(a for a, v in enumerate(scope) if v not in want)
    return np.asarray(np.sum(table, axis=drop), dtype=np.float64)
