"""The exact inverse-sensitivity loss of a quantile, from grid counts, in O(1) per grid point.

Definitions. Data ``x`` is a multiset of grid points, ``n = |x|``. The quantile level
is a rational ``q = p / d`` in lowest terms (``0 <= p <= d``; a float ``q`` is read as
the closest fraction with denominator at most 2^20, exact for every decimal with up to
6 digits such as 0.5, 0.9, 0.95, 0.999). For ``N >= 1`` let

    ``lo(N) = max(1, ceil(q N))``  and  ``hi(N) = min(N, floor(q N) + 1)``

(``hi = lo`` unless ``q N`` is an integer in ``[1, N - 1]``, then ``hi = lo + 1``).
A point ``y`` is *a q-quantile* of ``z`` when ``z_(lo) <= y <= z_(hi)``: the usual
quantile interval (for the median of an even number of records, the whole closed gap
between the two middle records; otherwise a single order statistic). The loss is

    ``loss(x, y) = min{ dist(x, z) : y is a q-quantile of z }``

(Asi & Duchi 2020; eq. 4 of the inverse-sensitivity post, with the quantile as a set-
valued function), where ``dist`` counts records added or removed (``"add_remove"``,
n private) or records replaced (``"replace"``, n public). As a distance to a set it
changes by at most 1 between neighbours (the post's Lemma 1), for either relation,
whatever the data. Taking the interval rather than one order statistic (say the lower
median) makes the loss 0 on the whole central gap, symmetric about the middle, instead
of 0 on one record and 1 on the gap next to it: at the same epsilon it puts
``exp(epsilon/2)`` more relative mass there.

When is ``y`` a q-quantile of ``z``? Let ``A', E', B'`` be the numbers of records of
``z`` below, at and above ``y`` and ``N' = A' + E' + B'``. ``z_(lo) <= y`` iff
``A' + E' >= lo(N')`` and ``y <= z_(hi)`` iff ``A' < hi(N')``. With ``s = d - p``,
``Phi' := s A' - p (E' + B')`` and ``Psi' := p B' - s (A' + E')``:

    (a) ``Phi' <= 0``  (``A' <= q N'``),        (b) ``Psi' <= 0``  (``A' + E' >= q N'``),
    (c) ``A' + E' >= 1``,                          (d) ``E' + B' >= 1``.

Note ``Phi' + Psi' = -d E'``: with ``E' = 0``, (a) and (b) say ``s A' = p B'``.

Add/remove closed form (proof). Reaching counts ``(A', E', B')`` costs
``|A - A'| + |E - E'| + |B - B'|`` (records of one class are interchangeable). Let
``g = max(s, p)`` and ``a0 = [E = 0]``. One added or removed record changes ``Phi``
and ``Psi`` by at most ``g``; adding a record at ``y`` lowers ``Phi`` by exactly ``p``
and ``Psi`` by ``s``. ``Phi > 0`` and ``Psi > 0`` cannot both hold (their sum is
``-d E <= 0``). Split the targets by ``E'``:

* ``E' >= 1`` (then (c), (d) hold). If ``E = 0`` some record must be added at ``y``.
  If ``Phi > 0`` every such target lowers ``Phi`` by at least ``Phi``, so costs at
  least ``a0 + max(0, ceil((Phi - p a0) / g))``. That is reached: add ``a0`` records
  at ``y``, then the rest of the most effective kind -- removals below if ``s >= p``
  (each lowers ``Phi`` by ``s``), else additions at ``y``. Additions at ``y`` lower
  ``Psi``; after ``r >= 1`` needed removals below, ``Psi' = -Phi' - d E'`` with
  ``-Phi' < s`` (the last removal was needed) and ``d E' >= d >= s``, so (b) holds.
  Symmetrically, if ``Psi > 0``: ``a0 + max(0, ceil((Psi - s a0) / g))``, with
  removals above if ``p >= s`` (each lowers ``Psi`` by ``p``, raises ``Phi`` by ``p``;
  ``Phi' = -Psi' - d E' < p - d E' <= 0``). If neither is positive: ``a0``.
* ``E' = 0`` (only for ``0 < q < 1``; at ``q`` in {0, 1} (a)-(d) force ``E' >= 1``).
  ``p`` and ``s`` are coprime, so ``s A' = p B'`` with (c), (d) means
  ``(A', B') = (k p, k s)`` for an integer ``k >= 1``; the cost is
  ``E + min_k (|A - k p| + |B - k s|)``. The summand is convex piecewise linear in
  ``k`` with kinks at ``A / p`` and ``B / s``, so the integer minimum over ``k >= 1``
  is at ``max(1, floor or ceil)`` of one of them: four candidates.

The loss is the smaller of the two.

Replacement closed form (``n`` fixed, ``lo = lo(n)``, ``hi = hi(n)``): a replacement
moves one record between classes. If ``A + E < lo``, ``lo - A - E`` records above must
move to ``y`` (or below), and that suffices; if ``A >= hi``, ``A - hi + 1`` records
below must move to ``y``; both cannot happen (``lo <= hi``). So
``loss = max(0, A - hi + 1, lo - A - E)`` (with ``hi = lo`` this is the digest's
``max(0, L - m + 1, m - LE)``).

Lower bound over a cell (used by the refined sampler, :mod:`dpkit.estimators._refine`).
Write ``L = A`` and ``LE = A + E``, ``n`` fixed, so ``Phi = d L - p n`` and
``Psi = p n - d LE``. Every target of either kind ends with ``Phi' <= 0`` and
``Psi' <= 0`` and each step moves them by at most ``g``, so the add/remove loss is at
least ``max(ceil(Phi / g), ceil(Psi / g), 0)``: non-decreasing in ``L`` and
non-increasing in ``LE``. The replacement loss ``max(0, L - hi + 1, lo - LE)`` is of
the same shape. So for every ``y`` with ``L(y) >= L0`` and ``LE(y) <= LE1`` the loss is
at least the same expressions at ``(L0, LE1)``.

Both closed forms are checked against a breadth-first search over datasets, for every
dataset of up to 6 records on a small grid (``tests/estimators/test_quantiles.py``).

Integer arithmetic throughout (``int64``): ``d <= 2^20`` and ``n <= 2^40`` keep every
product below 2^61.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError

__all__ = [
    "MAX_DENOMINATOR",
    "MAX_RECORDS",
    "Neighbouring",
    "loss_lower_bound",
    "quantile_loss",
    "rational_level",
]

Neighbouring = Literal["add_remove", "replace"]
IntArray = npt.NDArray[np.int64]

#: Largest denominator of the rational quantile level.
MAX_DENOMINATOR = 1 << 20
#: Largest number of records the int64 arithmetic is proven for.
MAX_RECORDS = 1 << 40


def rational_level(q: float) -> tuple[int, int]:
    """``(p, d)`` with ``p / d`` the closest fraction to ``q`` with ``d <= 2^20``."""
    fraction = Fraction(q).limit_denominator(MAX_DENOMINATOR)
    return fraction.numerator, fraction.denominator


def _ceil_div(numerator: IntArray, denominator: int) -> IntArray:
    result: IntArray = -((-numerator) // denominator)
    return result


def _ranks(n: int, p: int, d: int) -> tuple[int, int]:
    """``(lo(n), hi(n))`` of the module docstring, for ``n >= 1``."""
    lo = max(1, -((-p * n) // d))
    hi = min(n, (p * n) // d + 1)
    return lo, hi


def _gap_cost(below: IntArray, above: IntArray, p: int, s: int) -> IntArray:
    """``min over k >= 1`` of ``|A - k p| + |B - k s|`` (targets with no record at ``y``).

    Convex piecewise linear in ``k`` with kinks at ``A / p`` and ``B / s``: the integer
    minimum over ``k >= 1`` is at one of four candidates (module docstring).
    """
    best = np.full(below.shape, np.iinfo(np.int64).max, dtype=np.int64)
    for k in (below // p, _ceil_div(below, p), above // s, _ceil_div(above, s)):
        k = np.maximum(k, 1)
        best = np.minimum(best, np.abs(below - k * p) + np.abs(above - k * s))
    return best


def quantile_loss(counts: IntArray, level: tuple[int, int], neighbouring: Neighbouring) -> IntArray:
    """The exact loss at every grid point, from the grid counts (see the module docstring)."""
    p, d = level
    n = int(counts.sum())
    if n > MAX_RECORDS:
        raise DataError(
            f"quantile: more than {MAX_RECORDS} records is beyond the exact integer "
            "arithmetic of the loss; quantile a sample or a coarser aggregate."
        )
    below = np.cumsum(counts) - counts  # A
    equal = counts  # E
    above = n - below - equal  # B
    if neighbouring == "replace":
        lo, hi = _ranks(n, p, d)
        replaced: IntArray = np.maximum(np.maximum(below - hi + 1, lo - below - equal), 0)
        return replaced
    s = d - p
    g = max(s, p)
    a0 = (equal == 0).astype(np.int64)
    phi = s * below - p * (equal + above)
    psi = p * above - s * (below + equal)
    too_low = a0 + np.maximum(0, _ceil_div(phi - p * a0, g))
    too_high = a0 + np.maximum(0, _ceil_div(psi - s * a0, g))
    loss: IntArray = np.where(phi > 0, too_low, np.where(psi > 0, too_high, a0))
    if 0 < p < d:  # targets with no record at y: y strictly inside a gap of z
        loss = np.minimum(loss, equal + _gap_cost(below, above, p, s))
    return loss


def loss_lower_bound(
    below: IntArray,
    through: IntArray,
    n: int,
    level: tuple[int, int],
    neighbouring: Neighbouring,
) -> IntArray:
    """A lower bound on the loss at every ``y`` with ``L(y) >= below``, ``LE(y) <= through``.

    ``L(y) = #{x < y}``, ``LE(y) = #{x <= y}``, ``n`` records (module docstring,
    "Lower bound over a cell"). For a grid cell holding ``C`` records with ``A``
    records in earlier cells, pass ``below = A`` and ``through = A + C``.
    """
    p, d = level
    if neighbouring == "replace":
        lo, hi = _ranks(max(n, 1), p, d)
        bound: IntArray = np.maximum(np.maximum(below - hi + 1, lo - through), 0)
        return bound
    g = max(d - p, p)
    phi = d * below - p * n
    psi = p * n - d * through
    result: IntArray = np.maximum(np.maximum(_ceil_div(phi, g), _ceil_div(psi, g)), 0)
    return result
