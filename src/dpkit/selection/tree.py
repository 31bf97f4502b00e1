"""Selection through noisy low-sensitivity queries: the binary-tree algorithm.

Steinke's open problem (differentialprivacy.org, 2025-05-02, "Selection via
Low-Sensitivity Queries", first posed in 2019) asks whether selection can be done
with nothing but noisy answers to sensitivity-1 queries, as well as the exponential
mechanism does it: expected excess loss ``O(log |Y|)``. The post's partial solution,
implemented here, walks down a binary tree over the candidates and asks one query
per level,

    q(x) = min_{y in left subtree} l(x, y) / 2  -  min_{y in right subtree} l(x, y) / 2,

which has sensitivity 1 when every loss ``l(x, y)`` does, going right iff the noisy
answer is positive. With ``k = ceil(log2 |Y|)`` levels and Gaussian noise of
variance ``s^2`` the expected excess loss is at most ``2 k s max_v v P[N(0,1) >= v]
<= 0.34 s k`` (the post's Eq. 3), which is ``0.34 k^{3/2} = O((log |Y|)^{3/2})`` at
the post's normalisation ``s^2 = k`` (1/2-zCDP). With Laplace noise of scale ``b``
each level costs at most ``max_q q e^{-q/b} = b / e``, so ``k b / e``, i.e.
``O((log |Y|)^2)`` at ``b = k`` (1-DP).

Tree shape: a node holding ``m >= 2`` consecutive candidates splits into its first
``ceil(m/2)`` (left) and last ``floor(m/2)`` (right), so no subtree is empty (an
empty minimum would be +inf) and the depth is ``ceil(log2 |Y|)``. The tree is
implicit: level ``d`` is a partition of ``0..|Y|-1`` into intervals, a leaf reached
early is carried down unchanged, and subtree minima are computed bottom-up with one
``minimum.reduceat`` per level, ``O(|Y|)`` in total (level ``d`` has at most
``min(2^d, |Y|)`` intervals).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit import noise
from dpkit.accounting._math.rounding import div_up, up
from dpkit.accounting.events import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    RepeatedEvent,
    pure_epsilon,
    zcdp_rho,
)
from dpkit.accounting.guarantees import ZCDP, PureDP
from dpkit.errors import DataError, InvalidParameter
from dpkit.mechanisms._base import Mechanism, Release
from dpkit.random import Random, RandomLike, as_random

__all__ = ["TreeSelection", "select_by_tree"]

ORACLES = ("gaussian", "laplace")

#: ``2 max_{v >= 0} v P[N(0,1) >= v]`` = 2 * 0.169971... (at v = 0.75179...), rounded
#: up to the post's constant; the slack (2e-4 relative) also covers the output grid.
GAUSSIAN_EXCESS_CONSTANT = 0.34
#: The noisy answer is rounded to a grid of step ``g <= 2^-20 * scale`` (see
#: :func:`dpkit.noise.default_granularity`), so "answer > 0" means "q + noise >= g/2":
#: the Laplace per-level bound ``b/e`` grows by at most ``e^{g/(2b)} < 1 + 2^-20``.
_GRID_SLACK = 1.0 + 2.0**-20


@dataclass(frozen=True, slots=True)
class _Tree:
    """The implicit tree: per level, each node's first child and whether it splits.

    ``first_child[d][j]`` is the index, within level ``d + 1``, of node ``j``'s first
    child; ``split[d][j]`` is True when node ``j`` has two children (``first_child + 1``
    is the right one). ``minima[d][j]`` is the smallest loss in node ``j``'s subtree.
    Level ``depth`` holds the single candidates in order.
    """

    first_child: tuple[npt.NDArray[np.int64], ...]
    split: tuple[npt.NDArray[np.bool_], ...]
    minima: tuple[npt.NDArray[np.float64], ...]

    @property
    def depth(self) -> int:
        return len(self.first_child)


def tree_depth(n_candidates: int) -> int:
    """``ceil(log2 n)``: the number of levels (and of queries on the longest path)."""
    return (n_candidates - 1).bit_length()


@functools.lru_cache(maxsize=8)
def _shape(
    n_candidates: int,
) -> tuple[tuple[npt.NDArray[np.int64], ...], tuple[npt.NDArray[np.bool_], ...]]:
    """First children and split flags of every level of the tree over ``n`` candidates.

    The shape depends on ``n`` alone (public), so it is cached (read-only arrays) for
    repeated selections over the same candidates.
    """
    sizes = np.array([n_candidates], dtype=np.int64)
    first_children: list[npt.NDArray[np.int64]] = []
    splits: list[npt.NDArray[np.bool_]] = []
    while sizes.max() > 1:
        split = sizes >= 2
        counts = 1 + split.astype(np.int64)
        first = np.cumsum(counts) - counts
        left = (sizes + 1) // 2  # ceil(m/2) on the left, floor(m/2) on the right
        children = np.empty(int(counts.sum()), dtype=np.int64)
        children[first] = np.where(split, left, sizes)
        children[first[split] + 1] = sizes[split] - left[split]
        first.setflags(write=False)
        split.setflags(write=False)
        first_children.append(first)
        splits.append(split)
        sizes = children
    return tuple(first_children), tuple(splits)


def build_tree(losses: npt.NDArray[np.float64]) -> _Tree:
    """The tree over ``losses`` with every subtree's minimum, in ``O(|Y|)``."""
    first_children, splits = _shape(losses.size)
    minima = [losses]
    for first in reversed(first_children):
        # Children of one node are consecutive, so each node's minimum is a reduceat
        # over the level below (one or two entries per node).
        minima.append(np.minimum.reduceat(minima[-1], first))
    minima.reverse()
    return _Tree(first_children, splits, tuple(minima))


def _queries(
    tree: _Tree, level: int, nodes: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """For splitting ``nodes`` of ``level``: first child, left and right subtree minima."""
    first = tree.first_child[level][nodes]
    below = tree.minima[level + 1]
    return first, below[first], below[first + 1]


Sampler = Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]


def walk(tree: _Tree, repetitions: int, sample: Sampler) -> npt.NDArray[np.int64]:
    """``repetitions`` independent walks from the root; the leaf index of each.

    ``sample(q)`` returns one noisy answer per entry of ``q`` (the oracle). A query
    with an unreachable (+inf) side is not asked: by the sensitivity contract which
    candidates are unreachable does not depend on the data, so going to the finite
    side is post-processing of public information.
    """
    nodes = np.zeros(repetitions, dtype=np.int64)
    for level in range(tree.depth):
        split = tree.split[level][nodes]
        asking = np.flatnonzero(split)
        first, left, right = _queries(tree, level, nodes[asking])
        right_open = np.isinf(left)  # +inf only: -inf and NaN are rejected on input
        noisy = np.isfinite(left) & np.isfinite(right)
        go_right = right_open.copy()
        if noisy.any():
            # Halve before subtracting: no overflow, and each half is exact.
            q = 0.5 * left[noisy] - 0.5 * right[noisy]
            go_right[noisy] = sample(q) > 0.0
        children = tree.first_child[level][nodes]
        children[asking] = first + go_right
        nodes = children
    return nodes


def leaf_probabilities(tree: _Tree, right_probability: Sampler) -> npt.NDArray[np.float64]:
    """The exact output distribution: ``right_probability(q)`` = P[go right | query q]."""
    mass = np.ones(1)
    for level in range(tree.depth):
        nodes = np.arange(mass.size)
        split = tree.split[level]
        first, left, right = _queries(tree, level, nodes[split])
        p_right = np.where(np.isinf(left), 1.0, 0.0)
        finite = np.isfinite(left) & np.isfinite(right)
        p_right[finite] = right_probability(0.5 * left[finite] - 0.5 * right[finite])
        below = np.zeros(tree.minima[level + 1].size)
        below[tree.first_child[level]] = mass
        below[first] = mass[split] * (1.0 - p_right)
        below[first + 1] = mass[split] * p_right
        mass = below
    return mass


def _check_losses(losses: Any, owner: str) -> npt.NDArray[np.float64]:
    try:
        array = np.asarray(losses)
    except (TypeError, ValueError) as err:
        raise DataError(f"{owner}: 'losses' could not be read as a numeric array.") from err
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise DataError(
            f"{owner}: 'losses' must hold numbers (integer or float); got dtype {array.dtype}."
        )
    if array.ndim != 1 or array.size == 0:
        raise DataError(
            f"{owner}: 'losses' must be a non-empty 1-D array (one loss per candidate); "
            f"got shape {array.shape}."
        )
    array = array.astype(np.float64, copy=False)
    if np.isnan(array).any() or (array == -np.inf).any():
        raise DataError(
            f"{owner}: 'losses' contains NaN or -inf; losses must be finite, or +inf for a "
            "candidate that is unreachable on every dataset."
        )
    if np.isinf(array).all():
        raise DataError(f"{owner}: every loss is +inf, so no candidate can be selected.")
    return array


def _resolve_oracle(oracle: object, rho: object, epsilon: object, owner: str) -> str:
    if oracle is None:
        oracle = "laplace" if rho is None and epsilon is not None else "gaussian"
    if oracle not in ORACLES:
        raise InvalidParameter.for_parameter("oracle", owner, f"one of {ORACLES}", oracle)
    needed, other = ("rho", epsilon) if oracle == "gaussian" else ("epsilon", rho)
    given = rho if oracle == "gaussian" else epsilon
    if given is None or other is not None:
        raise InvalidParameter(
            f"{owner}: the {oracle!r} oracle is calibrated by {needed!r} alone "
            f"({'rho-zCDP' if oracle == 'gaussian' else 'pure epsilon-DP'}); got "
            f"rho={rho!r}, epsilon={epsilon!r}."
        )
    return str(oracle)


class TreeSelection(Mechanism):
    """Selection by a walk down a binary tree of noisy sensitivity-1 queries.

    Parameters
    ----------
    n_candidates:
        ``|Y|``, an int >= 1 (public). The tree has ``k = ceil(log2 |Y|)`` levels.
    rho:
        Target zCDP parameter, for the Gaussian oracle: each query gets
        ``N(0, s^2)`` noise with ``s^2 = k / (2 rho)`` (rounded up).
    epsilon:
        Target pure-DP parameter, for the Laplace oracle: each query gets
        ``Laplace(b)`` noise with ``b = k / epsilon`` (rounded up).
    oracle:
        ``"gaussian"`` or ``"laplace"``; by default the one the given parameter calls
        for (``rho`` -> Gaussian, ``epsilon`` -> Laplace).

    Privacy
    -------
    Each query has sensitivity 1 (when every loss has), and a path asks at most
    ``k`` of them (paths through leaves at depth ``k - 1`` ask one fewer; the
    guarantee is for the longest). Gaussian: ``k`` adaptively composed
    ``1/(2 s^2)``-zCDP queries (Bun & Steinke 2016, Prop. 1.6 and Lemma 2.3), total
    ``rho``-zCDP. Laplace: ``k`` queries of ``(1/b)``-DP, total ``epsilon``-DP by
    basic composition. The noisy answers are exact samples rounded to a grid
    (:mod:`dpkit.noise`), and only their signs are used: post-processing.
    Event: ``RepeatedEvent(GaussianEvent(s) | LaplaceEvent(b), count=k)``, or
    ``NoOpEvent()`` for one candidate (``k = 0``; nothing is asked).

    Accuracy
    --------
    ``E[l(x, Y)] - min_y l(x, y) <=`` :meth:`expected_excess_bound`: ``0.34 s k``
    (Gaussian; the post's Eq. 3, ``0.34 k^{3/2}`` at ``rho = 1/2``) or ``k b / e``
    (Laplace; ``k^2 / e`` at ``epsilon = 1``), for every loss vector. The exponential
    mechanism's is ``O(log |Y| / epsilon)``; whether noisy queries alone can match it
    is the open problem.

    References
    ----------
    T. Steinke, "Open Problem: Selection via Low-Sensitivity Queries",
    differentialprivacy.org, 2025-05-02 (the algorithm and its analysis).

    Examples
    --------
    >>> from dpkit.testing import seeded
    >>> mechanism = TreeSelection(8, rho=0.5)
    >>> mechanism.depth, round(mechanism.scale**2, 9), mechanism.guarantee
    (3, 3.0, ZCDP(rho=0.5))
    >>> mechanism.release([9.0, 7.0, 8.0, 0.0, 9.0, 9.0, 9.0, 9.0], rng=seeded(0)).value
    3
    """

    def __init__(
        self,
        n_candidates: int,
        *,
        rho: float | None = None,
        epsilon: float | None = None,
        oracle: str | None = None,
    ) -> None:
        owner = type(self).__name__
        self.n_candidates = check.check_count(n_candidates, "n_candidates", owner)
        self.oracle = _resolve_oracle(oracle, rho, epsilon, owner)
        self.depth = tree_depth(self.n_candidates)
        levels = max(self.depth, 1)
        self._guarantee: ZCDP | PureDP
        if self.oracle == "gaussian":
            self.rho = check.check_positive(rho, "rho", owner)
            self.scale = up(math.sqrt(levels / (2.0 * self.rho)), 2)
            self._guarantee = ZCDP(self.rho)
        else:
            self.epsilon = check.check_epsilon(epsilon, owner)
            self.scale = div_up(float(levels), self.epsilon)
            self._guarantee = PureDP(self.epsilon)
        if self.scale > noise.MAX_SCALE:
            raise InvalidParameter(
                f"{owner}: rho/epsilon so small that the noise scale exceeds "
                f"{noise.MAX_SCALE:g}; got rho={rho!r}, epsilon={epsilon!r}."
            )
        self._settle_scale()
        self.granularity = noise.default_granularity(self.scale)

    def _settle_scale(self) -> None:
        # The event's cost is recomputed from the rounded scale with its own rounding;
        # step the scale up until that cost is within the target (a few ulps at most).
        for _ in range(64):
            cost = self._event_cost()
            if cost is not None and cost <= self._target:
                return
            self.scale = up(self.scale, 1)
        raise InvalidParameter(f"{type(self).__name__}: could not calibrate the noise scale.")

    @property
    def _target(self) -> float:
        return self.rho if self.oracle == "gaussian" else self.epsilon

    def _event_cost(self) -> float | None:
        event = self.event
        return zcdp_rho(event) if self.oracle == "gaussian" else pure_epsilon(event)

    @property
    def event(self) -> Event:
        if self.depth == 0:
            return NoOpEvent()
        per_query: Event = (
            GaussianEvent(noise_multiplier=self.scale)
            if self.oracle == "gaussian"
            else LaplaceEvent(noise_multiplier=self.scale)
        )
        return RepeatedEvent(per_query, count=self.depth)

    @property
    def guarantee(self) -> ZCDP | PureDP:
        return self._guarantee

    def expected_excess_bound(self) -> float:
        """Upper bound on ``E[l(x, Y)] - min_y l(x, y)``, for every loss vector.

        ``0.34 s k`` for the Gaussian oracle (Steinke 2025, Eq. 3: each level adds at
        most ``2 |q| P[N(0, s^2) >= |q|] <= 2 s * 0.16998``) and ``k b / e`` for the
        Laplace oracle (each level adds at most ``2 |q| P[Lap(b) >= |q|] = |q|
        e^{-|q|/b} <= b / e``), both rounded up. Public values only.
        """
        if self.depth == 0:
            return 0.0
        if self.oracle == "gaussian":
            return up(GAUSSIAN_EXCESS_CONSTANT * self.scale * self.depth, 4)
        return up(self.depth * self.scale / math.e * _GRID_SLACK, 4)

    def right_probability(self, q: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P[the walk goes right] for a query whose exact answer is ``q``.

        The rounded answer is positive iff ``q + noise >= g/2`` (``g`` the grid step).
        """
        from scipy import special  # deferred: SciPy is slow to import

        shifted = np.asarray(q, dtype=np.float64) - self.granularity / 2.0
        if self.oracle == "gaussian":
            return np.asarray(special.ndtr(shifted / self.scale), dtype=np.float64)
        tail = 0.5 * np.exp(-np.abs(shifted) / self.scale)
        return np.where(shifted >= 0.0, 1.0 - tail, tail)

    def distribution(self, losses: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The exact probability of releasing each candidate (for tests and analysis).

        Computed from the data: not private, never release it.
        """
        tree = build_tree(self._check_value(losses))
        return leaf_probabilities(tree, self.right_probability)

    def _check_value(self, value: Any) -> npt.NDArray[np.float64]:
        losses = _check_losses(value, f"{type(self).__name__}.release")
        if losses.size != self.n_candidates:
            raise DataError(
                f"{type(self).__name__}.release: expected {self.n_candidates} losses (one per "
                f"candidate); got {losses.size}."
            )
        return losses

    def sampler(self, rng: Random) -> Sampler:
        """The oracle: noisy answers to an array of queries, from :mod:`dpkit.noise`."""
        if self.oracle == "gaussian":
            return lambda q: np.asarray(
                noise.gaussian(q, sigma=self.scale, granularity=self.granularity, rng=rng)
            )
        return lambda q: np.asarray(
            noise.laplace(q, scale=self.scale, granularity=self.granularity, rng=rng)
        )

    def _sample(self, value: npt.NDArray[np.float64], rng: Random) -> int:
        return int(walk(build_tree(value), 1, self.sampler(rng))[0])

    def sample_many(
        self, losses: npt.ArrayLike, repetitions: int, *, rng: RandomLike | None = None
    ) -> npt.NDArray[np.int64]:
        """``repetitions`` independent selections on the same losses, vectorised.

        Each entry is distributed as one :meth:`release`'s value; together they cost
        ``repetitions`` times the privacy of one release. For simulations.
        """
        count = check.check_count(repetitions, "repetitions", f"{type(self).__name__}.sample_many")
        tree = build_tree(self._check_value(losses))
        return walk(tree, count, self.sampler(as_random(rng)))

    def _repr_fields(self) -> tuple[str, ...]:
        name = "rho" if self.oracle == "gaussian" else "epsilon"
        return ("n_candidates", name, "oracle")


def select_by_tree(
    losses: npt.ArrayLike,
    *,
    rho: float | None = None,
    epsilon: float | None = None,
    oracle: str | None = None,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Select a low-loss candidate using only noisy sensitivity-1 queries.

    The binary-tree algorithm of Steinke's open-problem post (differentialprivacy.org,
    2025): from the root of a balanced binary tree over the candidates, ask at each
    node the noisy value of ``q = min(left)/2 - min(right)/2`` and go right iff it is
    positive; release the leaf reached. See ``TreeSelection``.

    Parameters
    ----------
    losses:
        ``l(x, y)`` for every candidate ``y`` (a 1-D array; lower is better). Contract:
        each loss has sensitivity 1, i.e. changes by at most 1 between neighbouring
        datasets (rescale losses of sensitivity ``D`` by ``1/D``). ``+inf`` marks a
        candidate that is unreachable on *every* dataset (never selected); NaN and
        -inf are rejected.
    rho:
        zCDP target for the Gaussian oracle (noise variance ``k / (2 rho)`` per query).
    epsilon:
        Pure-DP target for the Laplace oracle (noise scale ``k / epsilon`` per query).
    oracle:
        ``"gaussian"`` or ``"laplace"``; inferred from ``rho`` / ``epsilon`` if None.
    rng:
        Random source (see :func:`dpkit.random.as_random`); None for the secure default.

    Returns
    -------
    Release
        ``value``: the selected index (an int); ``error``: None; ``event``: ``k``
        repeated Gaussian or Laplace events (``NoOpEvent`` for one candidate, which
        is returned without any query); ``guarantee``: ``ZCDP(rho)`` or
        ``PureDP(epsilon)``.

    Privacy
    -------
    ``rho``-zCDP (Gaussian) or ``epsilon``-DP (Laplace) over the ``k = ceil(log2 |Y|)``
    queries of the longest path (Bun & Steinke 2016; basic composition).

    Accuracy
    --------
    Expected excess loss at most ``0.34 s k`` with ``s = sqrt(k / (2 rho))``
    (Gaussian; ``0.34 k^{3/2}`` at ``rho = 1/2``) or ``k b / e`` with ``b = k / epsilon``
    (Laplace); see ``TreeSelection.expected_excess_bound``.

    Examples
    --------
    >>> from dpkit.testing import seeded
    >>> release = select_by_tree([5.0, 3.0, 0.0, 4.0, 6.0], rho=0.5, rng=seeded(1))
    >>> release.value, release.guarantee
    (2, ZCDP(rho=0.5))
    """
    owner = "select_by_tree"
    array = _check_losses(losses, owner)
    mechanism = TreeSelection(array.size, rho=rho, epsilon=epsilon, oracle=oracle)
    return mechanism.release(array, rng=rng)
