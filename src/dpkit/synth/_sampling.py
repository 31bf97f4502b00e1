"""Synthetic records from a calibrated junction tree, by forward sampling.

The root clique's columns are drawn first, then, clique after clique down the tree,
the new columns given the separator values already drawn:
``p(x) = p(x_root) * prod_c p(x_{C \\ S} | x_S)`` (the junction-tree factorisation).

Instead of independent draws, each step *rounds expected counts*, as Private-PGM's
``synthetic_data`` does: among the ``n`` rows that share a separator value, a value of
the new columns with conditional probability ``q`` gets ``floor(n * q)`` rows, plus one
more with probability ``frac(n * q)``. Those extra rows are allotted by systematic
sampling (Madow, Ann. Math. Statist. 1949): one uniform offset, then every unit step
along the cumulated fractions, which gives each value exactly that inclusion
probability (Private-PGM draws them without replacement with weights ``frac``, which
does not). So exactly ``rows`` records come out, every count of a clique's value is
within one of its expectation given the separator, counts are unbiased, and the
values are then given to the group's rows in a uniformly random order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dpkit.synth._junction import FloatArray, JunctionTree

__all__ = ["rounded_counts", "sample_tree"]

IntArray = npt.NDArray[np.int64]
_CHUNK = 1 << 22  # cells of the (groups x values) table processed at once


def rounded_counts(n: IntArray, prob: FloatArray, rng: np.random.Generator) -> IntArray:
    """Integer counts per row of ``prob`` (groups x values) summing to ``n`` per group.

    ``prob`` rows are normalised here; an all-zero row is treated as uniform (it can
    only be reached through rounding error in the model's marginals).
    """
    mass = prob.sum(axis=1, keepdims=True)
    k = prob.shape[1]
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(mass > 0, prob / mass, 1.0 / k)
    expected = n[:, None] * q
    base = np.floor(expected)
    frac = expected - base
    counts = base.astype(np.int64)
    extra = n - counts.sum(axis=1)  # = sum of frac, an integer up to rounding
    scale = frac.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac *= np.where(scale > 0, extra / scale, 0.0)[:, None]
    edges = np.cumsum(frac, axis=1)
    edges[:, -1] = extra  # end exactly at the number of extra rows
    u = rng.random(len(n))[:, None]
    # Points u, u + 1, ..., u + extra - 1: how many land in each (edge_{k-1}, edge_k].
    hits = np.floor(edges - u)
    hits = np.diff(hits, axis=1, prepend=np.floor(-u))
    out: IntArray = counts + hits.astype(np.int64)
    return out


def _assign(
    group: IntArray, probs: FloatArray, rng: np.random.Generator
) -> tuple[IntArray, IntArray]:
    """Values (flat codes of the new columns) for rows with separator code ``group``.

    Returns the rows' positions in processing order and their values.
    """
    keys, inverse, sizes = np.unique(group, return_inverse=True, return_counts=True)
    k = probs.shape[1]
    step = max(1, _CHUNK // k)
    values = []
    for lo in range(0, len(keys), step):
        counts = rounded_counts(sizes[lo : lo + step], probs[keys[lo : lo + step]], rng)
        values.append(np.repeat(np.tile(np.arange(k), counts.shape[0]), counts.ravel()))
    # Rows sorted by group, in random order within it, receive the group's values.
    rows = np.lexsort((rng.random(len(group)), inverse))
    return rows, np.concatenate(values) if values else np.zeros(0, dtype=np.int64)


def sample_tree(
    tree: JunctionTree, mu: Sequence[FloatArray], rows: int, rng: np.random.Generator
) -> IntArray:
    """``rows`` records (codes, columns in domain order) from calibrated marginals ``mu``."""
    out = np.zeros((rows, len(tree.sizes)), dtype=np.int64)
    if rows == 0:
        return out
    for c in tree.order:
        clique = tree.cliques[c]
        sep = tree.separator(c)
        new = tuple(v for v in clique if v not in sep)
        perm = [clique.index(v) for v in sep + new]
        sep_cells = math.prod(tree.sizes[v] for v in sep)
        table = np.transpose(mu[c], perm).reshape(sep_cells, -1)
        if sep:
            group = np.ravel_multi_index(
                tuple(out[:, v] for v in sep), tuple(tree.sizes[v] for v in sep)
            ).astype(np.int64)
        else:
            group = np.zeros(rows, dtype=np.int64)
        order, values = _assign(group, table, rng)
        codes = np.unravel_index(values, tuple(tree.sizes[v] for v in new))
        for v, code in zip(new, codes, strict=True):
            out[order, v] = code
    return out[rng.permutation(rows)]
