"""The exact inverse-sensitivity loss of a quantile, from grid counts, in O(1) per grid point.

Definitions. Data ``x`` is a multiset of grid points, ``n = |x|``. The quantile level
is a rational ``q = p / d`` (``0 <= p <= d``; a float ``q`` is read as the closest
fraction with denominator at most 2^20, exact for every decimal with up to 6 digits
such as 0.5, 0.9, 0.95, 0.999). For ``n >= 1`` let ``m(n) = max(1, ceil(q n))`` and
``f(x) = x_(m(n))``, the ``m``-th smallest. For a grid point ``y`` let ``A``, ``E``,
``B`` be the numbers of data points below, equal to and above ``y``. The loss is

    ``loss(x, y) = min{ dist(x, z) : f(z) = y }``

(Asi & Duchi 2020; eq. 4 of the inverse-sensitivity post), where ``dist`` counts
records added or removed (``"add_remove"``, n private) or records replaced
(``"replace"``, n public). As a distance to a set it changes by at most 1 between
neighbours (the post's Lemma 1), for either relation, whatever the data.

When is ``f(z) = y``? With ``A', E', B'`` the counts of ``z`` and ``N' = A'+E'+B'``:
``f(z) = y`` iff ``A' < m(N') <= A' + E'``. Since ``A'`` is an integer,
``A' < max(1, ceil(q N'))`` iff ``A' = 0`` or ``A' < q N'``; and, given ``E' >= 1``,
``max(1, ceil(q N')) <= A' + E'`` iff ``q N' <= A' + E'``. With ``s = d - p``:

    (a) ``A' = 0``  or  ``Phi' := s A' - p (E' + B') < 0``;
    (b) ``Psi' := p B' - s (A' + E') <= 0``;
    (c) ``E' >= 1``.

Add/remove closed form (proof). The cost of reaching counts ``(A', E', B')`` is
``|A - A'| + |E - E'| + |B - B'|`` (keep what can be kept in each class; points of one
class are interchangeable for ``f``). Let ``g = max(s, p) > 0`` and ``a0 = [E = 0]``.
One added or removed record changes ``Phi`` and ``Psi`` by at most ``g`` (by ``s``
or ``p``, depending on its class), and if ``E = 0`` some record must be added at
``y`` (by (c)); that one lowers ``Phi`` by exactly ``p`` and ``Psi`` by ``s``.
(a) and (b) cannot both fail: (a) failing gives ``s A >= p (E + B) >= p B`` and (b)
failing gives ``p B > s (A + E) >= s A``.

* (a) fails (``A >= 1`` and ``Phi >= 0``, too many points below ``y``). Lower
  bound: a target with ``A' = 0`` costs at least ``A + a0``; any other must lower
  ``Phi`` by ``Phi + 1``, so costs at least
  ``a0 + ceil((Phi + 1 - p a0) / g)``. Upper bound: add ``a0`` records at ``y``,
  then ``ceil(...)`` of the most effective kind (remove below if ``s >= p``, else
  add at ``y``); this keeps (b): adding at ``y`` lowers ``Psi``, and if ``r >= 1``
  removals were needed, the last was needed, ``s (A' + 1) >= p (E' + B')``, so
  ``p B' <= s A' + s - p E' <= s (A' + E')`` because ``s <= d <= d E'``. When
  ``p >= 1`` that cost is at most ``A + a0`` (the numerator is at most ``s A``),
  and when ``p = 0`` the target ``A' = 0`` meets (b) trivially, so

      ``loss = min(a0 + max(0, ceil((Phi + 1 - p a0) / g)), A + a0)``.

* (b) fails (``Psi > 0``, too many points above). Every target must lower ``Psi``
  by ``Psi``: at least ``a0 + max(0, ceil((Psi - s a0) / g))``. The same cost is
  reached by ``a0`` additions at ``y`` and then removals above (``p >= s``) or
  additions at ``y`` (``s > p``); this keeps (a): additions at ``y`` lower ``Phi``,
  and after ``r >= 1`` needed removals ``p (B' + 1) > s (A + E')``, so
  ``p (E' + B') > s A + d E' - p >= s A``. So that is the loss.

* Neither fails: ``loss = a0`` (adding a record at ``y`` lowers both potentials).

Replacement closed form (n fixed, ``m = m(n)``; the digest's formula):
``loss = max(0, A - m + 1, m - A - E)`` -- replace the surplus points below by ``y``,
or points above by ``y`` (``L = A``, ``LE = A + E`` in the digest).

Lower bound over a cell (used by the refined sampler, :mod:`dpkit.estimators._refine`).
Write ``L = A`` and ``LE = A + E`` (n fixed). Then ``Phi = d L - p n`` and
``Psi = p n - d LE``. Dropping ``a0`` only lowers the add/remove loss (``p <= g``, so
``1 + ceil((Phi + 1 - p) / g) >= ceil((Phi + 1) / g)``, and ``A + 1 >= A``), and the
``a0 = 0`` loss equals ``max(T1(L), T2(LE))`` with
``T1 = [L >= 1, Phi >= 0] min(ceil((Phi + 1) / g), L)`` non-decreasing in ``L`` and
``T2 = [Psi > 0] ceil(Psi / g)`` non-increasing in ``LE`` (at most one is non-zero,
as (a) and (b) cannot both fail). The replacement loss is already
``max(0, L - m + 1, m - LE)``. So for every ``y`` with ``L(y) >= L0`` and
``LE(y) <= LE1`` the loss is at least the same expressions at ``(L0, LE1)``.

Both are checked against a breadth-first search over datasets for every dataset of
up to 6 records on a small grid (``tests/estimators/test_quantiles.py``).

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
        m = max(1, -((-p * n) // d))
        replaced: IntArray = np.maximum(np.maximum(below - m + 1, m - below - equal), 0)
        return replaced
    s = d - p
    g = max(s, p)
    a0 = (equal == 0).astype(np.int64)
    phi = s * below - p * (equal + above)
    psi = p * above - s * (below + equal)
    too_low = a0 + np.maximum(0, _ceil_div(phi + 1 - p * a0, g))
    too_low = np.minimum(too_low, below + a0)
    too_high = a0 + np.maximum(0, _ceil_div(psi - s * a0, g))
    loss: IntArray = np.where((below >= 1) & (phi >= 0), too_low, np.where(psi > 0, too_high, a0))
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
        m = max(1, -((-p * n) // d))
        bound: IntArray = np.maximum(np.maximum(below - m + 1, m - through), 0)
        return bound
    g = max(d - p, p)
    phi = d * below - p * n
    psi = p * n - d * through
    low_side = np.where((below >= 1) & (phi >= 0), np.minimum(_ceil_div(phi + 1, g), below), 0)
    high_side = np.where(psi > 0, _ceil_div(psi, g), 0)
    result: IntArray = np.maximum(low_side, high_side)
    return result
