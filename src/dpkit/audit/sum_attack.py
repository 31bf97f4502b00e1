"""The floating-point summation attack on a naive clamped sum (Casacuberta et al. 2022).

Casacuberta, Shoemate, Vadhan & Wagaman, "Widespread underestimation of sensitivity
in differentially private libraries and how to fix it" (ACM CCS 2022, arXiv
2207.10635) observe that the sensitivity libraries state for a sum of values clamped to
``[L, U]`` -- ``U - L`` when one record is replaced and the number of records ``n`` is
public -- holds for the sum over the reals, not for the IEEE-754 sum a computer
returns. Each floating-point addition rounds the running total to the doubles near it,
which are ``ulp(total)`` apart, and *whether* each rounding goes up or down depends on
every record. Near a total of ``n max(|L|, |U|)`` the doubles are about
``n max(|L|, |U|) 2^-52`` apart, so when the bounds are far from zero compared with their
width, replacing one record moves the float sum by far more than ``U - L``: Laplace
noise calibrated to ``U - L`` then hides nothing.

This module builds the three pieces of that attack:

* :func:`naive_clamped_sum` -- the vulnerable mechanism: a float sum (NumPy's pairwise
  ``np.sum``, or left to right) of the clamped values plus textbook Laplace noise of
  scale ``(U - L) / epsilon`` from NumPy's float sampler (on purpose);
* :func:`float_sum_neighbours` -- a replace-one neighbouring pair whose float sums
  differ by about one unit in the last place of the total;
* :func:`float_sum_gap` -- the float sums' actual difference against the claimed
  sensitivity, and :func:`float_sum_sensitivity`, a sensitivity that does hold for any
  summation order (the kind of correction the paper proposes).

:func:`session_sum_mechanism` draws releases of dpkit's own Session sum for the black-box
auditor (:func:`dpkit.audit.audit`): dpkit rounds each clamped value to a power-of-two
grid and sums exact integers (see :mod:`dpkit.analytics._plan`), so the result does not
depend on rounding of a running total, and its sensitivity covers the per-row rounding.

An audit gives a lower bound on epsilon at a confidence, never a certificate of privacy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.audit.blackbox import Mechanism
from dpkit.audit.float_attack import textbook_laplace
from dpkit.errors import DataError, InvalidParameter
from dpkit.random import Random, RandomLike

__all__ = [
    "FloatSumGap",
    "SummationOrder",
    "float_sum_gap",
    "float_sum_neighbours",
    "float_sum_sensitivity",
    "naive_clamped_sum",
    "session_sum_mechanism",
]

FloatArray = npt.NDArray[np.float64]
#: ``"pairwise"``: NumPy's ``np.sum`` (blocked pairwise summation); ``"sequential"``:
#: left to right, one rounding per record.
SummationOrder = Literal["pairwise", "sequential"]

_UNIT_ROUNDOFF = Fraction(1, 2**53)  # IEEE-754 double, round to nearest
# Values of the repeated record tried by float_sum_neighbours: evenly spaced in [L, U].
_CANDIDATES = 17


def _check_bounds(bounds: object, owner: str) -> tuple[float, float]:
    expected = "a tuple (lower, upper) of finite floats with lower < upper"
    if not isinstance(bounds, tuple | list) or len(bounds) != 2:
        raise InvalidParameter.for_parameter("bounds", owner, expected, bounds)
    lower = check.check_finite_float(bounds[0], "bounds", owner)
    upper = check.check_finite_float(bounds[1], "bounds", owner)
    if not lower < upper or not math.isfinite(upper - lower):
        raise InvalidParameter.for_parameter("bounds", owner, expected, bounds)
    return lower, upper


def _check_order(order: object, owner: str) -> SummationOrder:
    if order == "pairwise":
        return "pairwise"
    if order == "sequential":
        return "sequential"
    raise InvalidParameter.for_parameter("order", owner, "'pairwise' or 'sequential'", order)


def _float_sum(values: FloatArray, order: SummationOrder) -> float:
    if order == "pairwise":
        return float(np.sum(values))
    # np.add.accumulate adds left to right, rounding after every record.
    return float(np.add.accumulate(values)[-1])


@overload
def naive_clamped_sum(
    values: npt.ArrayLike,
    *,
    bounds: tuple[float, float],
    epsilon: float,
    order: SummationOrder = ...,
    size: None = None,
    rng: RandomLike | None = None,
) -> float: ...


@overload
def naive_clamped_sum(
    values: npt.ArrayLike,
    *,
    bounds: tuple[float, float],
    epsilon: float,
    order: SummationOrder = ...,
    size: int,
    rng: RandomLike | None = None,
) -> FloatArray: ...


def naive_clamped_sum(
    values: npt.ArrayLike,
    *,
    bounds: tuple[float, float],
    epsilon: float,
    order: SummationOrder = "pairwise",
    size: int | None = None,
    rng: RandomLike | None = None,
) -> float | FloatArray:
    """The textbook bounded sum that the float-summation attack breaks. Audits only.

    Clamps ``values`` to ``bounds = (L, U)``, sums them in double precision (``order``)
    and adds Laplace noise of scale ``(U - L) / epsilon`` drawn the way NumPy's
    ``Generator.laplace`` draws it (:func:`~dpkit.audit.textbook_laplace`).

    Parameters
    ----------
    values:
        The records (a 1-D array of finite numbers); their number is public.
    bounds:
        ``(L, U)``, the clamping bounds.
    epsilon:
        The epsilon the mechanism *claims*.
    order:
        ``"pairwise"`` (NumPy's ``np.sum``, the default) or ``"sequential"``.
    size:
        ``None`` for one release (a float), or the number of independent releases on
        the same data (an array; the sum is computed once).
    rng:
        Random source for the noise.

    Returns
    -------
    float or numpy.ndarray
        The noisy sum(s).

    Privacy
    -------
    Claims epsilon-DP for replace-one neighbours with ``n`` public, with the
    idealised sensitivity ``U - L`` of the real-number sum. The claim is **false**: the
    float sum moves by up to ``ulp(n max(|L|, |U|))`` between neighbours
    (:func:`float_sum_neighbours`), and NumPy's float sampler leaks through its
    low-order bits (Mironov 2012). Casacuberta, Shoemate, Vadhan & Wagaman, CCS 2022.

    Accuracy
    --------
    ``|release - sum| <= (U - L) / epsilon * ln(1 / beta)`` with probability
    ``1 - beta``, plus the float sum's rounding error.
    """
    owner = "naive_clamped_sum"
    lower, upper = _check_bounds(bounds, owner)
    epsilon = check.check_epsilon(epsilon, owner)
    order = _check_order(order, owner)
    data = check.check_array(values, "values", owner, ndim=1)
    count = 1 if size is None else check.check_count(size, "size", owner)
    total = _float_sum(np.clip(data, lower, upper), order)
    noisy = textbook_laplace(total, scale=(upper - lower) / epsilon, size=count, rng=rng)
    return float(noisy[0]) if size is None else noisy


def float_sum_neighbours(
    n: int, *, bounds: tuple[float, float], order: SummationOrder = "pairwise"
) -> tuple[FloatArray, FloatArray]:
    """A replace-one neighbouring pair on which a float sum moves by much more than ``U - L``.

    Every record of ``x`` equals one value ``v`` in ``[L, U]`` but one, which is ``U``
    in ``x`` and ``L`` in ``x_prime``. The attacker tries the record at the first and
    at the last position and ``17`` evenly spaced values ``v`` (plus ``L``, ``U`` and
    their neighbouring doubles) and keeps the pair whose float sums (in ``order``)
    differ most. The exact sums differ by ``U - L``; the float sums typically by one
    unit in the last place of the total, about ``n max(|L|, |U|) 2^-52``: with bounds
    far from zero relative to their width, far more (Casacuberta, Shoemate, Vadhan &
    Wagaman, CCS 2022).

    Parameters
    ----------
    n:
        Number of records (at least 2).
    bounds:
        ``(L, U)``, the clamping bounds the data respects.
    order:
        The summation order attacked (``"pairwise"`` or ``"sequential"``).

    Returns
    -------
    (x, x_prime)
        Two float arrays of length ``n`` inside the bounds, differing in one position.

    Notes
    -----
    When the bounds include zero, the gap is at most ``U - L`` plus about
    ``n^2 2^-53 max(|L|, |U|)`` (the rounding error of the two sums), which needs
    ``n`` near ``2^26`` to matter in double precision; the attack bites when
    ``max(|L|, |U|) / (U - L)`` is large, as for values near ``10^15`` clamped to a
    narrow range.
    """
    owner = "float_sum_neighbours"
    count = check.check_count(n, "n", owner, minimum=2)
    lower, upper = _check_bounds(bounds, owner)
    order = _check_order(order, owner)
    grid = np.linspace(lower, upper, _CANDIDATES)
    edges = [np.nextafter(lower, upper), np.nextafter(upper, lower)]
    candidates = np.unique(np.clip(np.concatenate([grid, edges, [lower, upper]]), lower, upper))
    best: tuple[float, FloatArray, FloatArray] | None = None
    for position in (0, count - 1):
        for v in candidates:
            x = np.full(count, v, dtype=np.float64)
            x_prime = x.copy()
            x[position], x_prime[position] = upper, lower
            gap = abs(_float_sum(x, order) - _float_sum(x_prime, order))
            if best is None or gap > best[0]:
                best = (gap, x, x_prime)
    assert best is not None
    return best[1], best[2]


def float_sum_sensitivity(n: int, *, bounds: tuple[float, float]) -> float:
    """A sensitivity of the double-precision sum of ``n`` clamped values that holds.

    ``(U - L) + 2 gamma_{n-1} n max(|L|, |U|)`` with ``gamma_k = k u / (1 - k u)``,
    ``u = 2^-53``: the idealised sensitivity plus the worst rounding error of each of
    the two sums. Any order of summation of ``n`` doubles errs by at most
    ``gamma_{n-1} sum |x_i|`` (Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2nd ed., Sec. 4.2), and ``sum |x_i| <= n max(|L|, |U|)``. Adding such a
    rounding term to the sensitivity is the fix Casacuberta et al. (CCS 2022) propose
    for float sums (OpenDP's "relaxation"). Computed exactly, rounded up.

    Parameters
    ----------
    n:
        Number of records (public), with ``(n - 1) 2^-53 < 1``.
    bounds:
        ``(L, U)``.

    Returns
    -------
    float
        An upper bound on ``|fl_sum(x) - fl_sum(x')|`` over replace-one neighbours.
    """
    owner = "float_sum_sensitivity"
    count = check.check_count(n, "n", owner)
    lower, upper = _check_bounds(bounds, owner)
    steps = (count - 1) * _UNIT_ROUNDOFF
    if steps >= 1:
        raise InvalidParameter.for_parameter("n", owner, "an int below 2^53", n)
    gamma = steps / (1 - steps)
    magnitude = Fraction(max(abs(lower), abs(upper)))
    exact = Fraction(upper) - Fraction(lower) + 2 * gamma * count * magnitude
    value = float(exact)
    # float() rounds to nearest: step up one double if that fell below the bound.
    return value if Fraction(value) >= exact else math.nextafter(value, math.inf)


@dataclass(frozen=True, slots=True)
class FloatSumGap:
    """How far a float sum moves between two replace-one neighbours.

    Attributes
    ----------
    float_sum, float_sum_prime:
        The double-precision sums of the clamped ``x`` and ``x_prime`` in ``order``.
    float_difference:
        ``|float_sum - float_sum_prime|``.
    exact_difference:
        The difference of the exact (real-number) sums of the clamped values, rounded
        once to a double.
    claimed_sensitivity:
        ``U - L``, the idealised sensitivity a naive sum calibrates its noise to.
    sound_sensitivity:
        :func:`float_sum_sensitivity`: a bound that holds for the float sum.
    order:
        The summation order.
    """

    float_sum: float
    float_sum_prime: float
    float_difference: float
    exact_difference: float
    claimed_sensitivity: float
    sound_sensitivity: float
    order: str

    @property
    def ratio(self) -> float:
        """``float_difference / claimed_sensitivity``: above 1, the claim is broken."""
        return self.float_difference / self.claimed_sensitivity

    @property
    def exceeds_claim(self) -> bool:
        """Whether the float sums differ by more than the claimed sensitivity."""
        return self.float_difference > self.claimed_sensitivity


def float_sum_gap(
    x: npt.ArrayLike,
    x_prime: npt.ArrayLike,
    *,
    bounds: tuple[float, float],
    order: SummationOrder = "pairwise",
) -> FloatSumGap:
    """The float sums' actual difference on a replace-one pair, against ``U - L``.

    Parameters
    ----------
    x, x_prime:
        1-D arrays of the same length that differ in at most one position (records
        are clamped to ``bounds`` first, as :func:`naive_clamped_sum` does).
    bounds:
        ``(L, U)``.
    order:
        ``"pairwise"`` (NumPy's ``np.sum``) or ``"sequential"``.

    Returns
    -------
    FloatSumGap
        ``ratio > 1`` means Laplace noise calibrated to ``U - L`` is too small for this
        pair (Casacuberta, Shoemate, Vadhan & Wagaman, CCS 2022).
    """
    owner = "float_sum_gap"
    lower, upper = _check_bounds(bounds, owner)
    order = _check_order(order, owner)
    first = np.clip(check.check_array(x, "x", owner, ndim=1), lower, upper)
    second = np.clip(check.check_array(x_prime, "x_prime", owner, ndim=1), lower, upper)
    if first.size != second.size or np.count_nonzero(first != second) > 1:
        raise DataError(
            f"{owner}: x and x_prime must have the same length and differ in at most one "
            f"position (replace-one neighbours); got lengths {first.size} and {second.size}."
        )
    total, total_prime = _float_sum(first, order), _float_sum(second, order)
    # math.fsum returns the exact sum rounded once (Shewchuk's algorithm).
    exact = abs(math.fsum(np.concatenate([first, -second]).tolist()))
    return FloatSumGap(
        float_sum=total,
        float_sum_prime=total_prime,
        float_difference=abs(total - total_prime),
        exact_difference=exact,
        claimed_sensitivity=upper - lower,
        sound_sensitivity=float_sum_sensitivity(first.size, bounds=(lower, upper)),
        order=order,
    )


def session_sum_mechanism(*, bounds: tuple[float, float], epsilon: float) -> Mechanism:
    """dpkit's Session sum as an auditable mechanism ``f(values, n, rng)``.

    ``f`` returns ``n`` independent releases of ``.sum("value", bounds=bounds)`` at
    ``PureDP(epsilon)`` on a table with one person per record of ``values``. To make
    ``n`` releases in one query, the table holds ``n`` copies of the records (each copy
    with its own persons) grouped by copy with public keys: disjoint groups get
    independent noise, so each group's sum is one draw of the mechanism.

    Parameters
    ----------
    bounds:
        ``(L, U)``, the Session's clamping bounds.
    epsilon:
        The Session's (and the query's) budget.

    Returns
    -------
    Mechanism
        For :func:`dpkit.audit.audit`.

    Privacy
    -------
    Each release is ``epsilon``-DP when one person (one record) is added or removed,
    so ``2 epsilon``-DP between tables where one person's value is replaced (group
    privacy): audit a replace-one pair against ``2 epsilon``.
    """
    owner = "session_sum_mechanism"
    lower, upper = _check_bounds(bounds, owner)
    epsilon = check.check_epsilon(epsilon, owner)

    def draw(values: Any, n: int, rng: Random) -> FloatArray:
        import pandas as pd  # type: ignore[import-untyped]

        from dpkit.accounting import PureDP
        from dpkit.analytics import KeySet, Query, Session

        records = check.check_array(values, "values", owner, ndim=1)
        size = records.size
        table = pd.DataFrame(
            {
                "copy": np.repeat(np.arange(n), size),
                "person": np.arange(n * size),
                "value": np.tile(records, n),
            }
        )
        session = Session.from_pandas(table, privacy_unit="person", budget=PureDP(epsilon), rng=rng)
        query = (
            Query()
            .group_by("copy", keys=KeySet.from_values(copy=range(n)))
            .bound(max_groups=1, max_rows=1)
            .sum("value", bounds=(lower, upper), name="total")
        )
        frame = session.evaluate(query, budget=PureDP(epsilon)).dataframe
        return np.asarray(frame["total"], dtype=np.float64)

    return draw
