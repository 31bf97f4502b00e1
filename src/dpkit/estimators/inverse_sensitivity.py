"""The inverse sensitivity mechanism (Asi & Duchi 2020; folklore).

For a function ``f`` and a finite set of candidate outputs ``Y``, the *inverse
sensitivity loss* ``loss(x, y)`` is the number of records one must add/remove (or
replace) in ``x`` to make ``f`` equal ``y``. It changes by at most 1 between
neighbouring datasets whatever ``f`` is (it is a distance to a set: Lemma 1 of the
inverse-sensitivity post), so the exponential mechanism on the scores ``-loss`` with
sensitivity 1,

    ``P[M(x) = y]  ∝  exp(-(epsilon / 2) loss(x, y))``,

is ``epsilon``-DP and ``epsilon^2 / 8``-zCDP (Thm 2 of the post; bounded range,
Cesar & Rogers 2021), and its output has loss below ``(2 / epsilon) ln(|Y| / beta)``
with probability at least ``1 - beta`` (Lemma 3), hence is within the ``k``-local
sensitivity of ``f(x)`` (Thm 4). dpkit samples it exactly with
:class:`dpkit.selection.ExponentialMechanism` (an exact Gumbel argmax over the real
scores; 10^6 candidates take about 50 ms).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.errors import InvalidParameter
from dpkit.mechanisms._base import Release
from dpkit.random import RandomLike, as_random
from dpkit.selection.exponential import ExponentialMechanism

__all__ = ["inverse_sensitivity", "loss_radius", "select_by_loss"]

T = TypeVar("T")
Loss = Callable[[Any, Any], npt.ArrayLike]


def loss_radius(n_candidates: int, *, coefficient: float, confidence: float) -> int:
    """``k``: with probability >= ``confidence`` the released candidate has loss <= ``k``.

    Lemma 3 of the inverse-sensitivity post, ``P[loss < ln(|Y| / beta) / c] >= 1 - beta``
    for ``P ∝ exp(-c loss)`` when some candidate has loss 0 (``c = epsilon / 2``;
    here the coefficient actually used, rounded down). ``k = floor(ln(|Y|/beta) / c)``
    (the post's Thm 4), computed rounded up so float error never makes it smaller.
    """
    beta = 1.0 - confidence
    bound = (math.log(n_candidates) - math.log(beta)) / coefficient
    return math.floor(bound * (1.0 + 1e-12) + 1e-12)


def select_by_loss(
    loss: npt.NDArray[np.float64], *, epsilon: float, rng: RandomLike | None, owner: str
) -> tuple[int, ExponentialMechanism, bool]:
    """Index drawn with probability ∝ ``exp(-(epsilon/2) loss)`` exactly; +inf loss never drawn.

    Returns the index, the mechanism (for its event, guarantee and coefficient) and
    whether the random source was secure.
    """
    mechanism = ExponentialMechanism(epsilon=epsilon, sensitivity=1.0)
    random = as_random(rng)
    finite = np.isfinite(loss)
    if finite.all():
        index = mechanism.release(-loss, rng=random).value
        return int(index), mechanism, random.secure
    reachable = np.flatnonzero(finite)
    if reachable.size == 0:
        # Under a sensitivity-1 loss, whether a loss is finite cannot change between
        # neighbours, so saying so reveals nothing the contract does not fix.
        raise InvalidParameter(
            f"{owner}: the loss is +inf for every candidate; an inverse-sensitivity loss "
            "is 0 at the true answer, so at least one candidate must have a finite loss."
        )
    # exp(-c * inf) = 0: those candidates have probability exactly 0, dropping them
    # leaves the distribution of the others unchanged.
    index = mechanism.release(-loss[reachable], rng=random).value
    return int(reachable[int(index)]), mechanism, random.secure


def inverse_sensitivity(
    data: Any,
    candidates: Sequence[T] | npt.NDArray[Any],
    loss: Loss,
    *,
    epsilon: float,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Release a candidate with the inverse sensitivity mechanism.

    Parameters
    ----------
    data:
        The private dataset, passed unchanged to ``loss``.
    candidates:
        The finite output set ``Y`` (a sequence or 1-D array), public.
    loss:
        ``loss(data, candidates)`` -> one number per candidate: the path length
        ``min{dist(data, z) : f(z) = y}``, an integer or float ``>= 0``, ``+inf`` where
        ``y`` is unreachable. **Contract**: for every candidate it changes by at
        most 1 between neighbouring datasets, under the neighbouring relation you
        claim privacy for (add/remove one record, replace one record, or one person
        with all their records). The exact path length always meets it (Lemma 1);
        an approximation must meet it too, or the release is not private. dpkit
        cannot check this.
    epsilon:
        Privacy parameter, a float in (0, inf).
    rng:
        Random source (see :func:`dpkit.random.as_random`); None for the secure default.

    Returns
    -------
    Release
        ``value`` is the chosen candidate (an element of ``candidates``), drawn with
        probability exactly ``exp(-c loss_y) / sum_y' exp(-c loss_y')``, ``c`` =
        ``epsilon / 2`` rounded down; ``error`` is None (see ``loss_radius``).

    Privacy
    -------
    ``epsilon``-DP and ``epsilon^2/8``-zCDP under the loss's neighbouring relation
    (Thm 2 of the inverse-sensitivity post; McSherry & Talwar 2007 with sensitivity 1;
    bounded range, Cesar & Rogers 2021). Event: ``ExponentialMechanismEvent(epsilon)``.

    Accuracy
    --------
    With probability ``>= 1 - beta`` the released ``y`` has ``loss(data, y) <= k``,
    ``k = floor((2/epsilon) ln(|Y| / beta))`` (Lemma 3), so ``|y - f(data)|`` is at
    most the ``k``-local sensitivity ``LS_f^k(data)`` (Thm 4; Asi & Duchi 2020),
    provided some candidate has loss 0.

    Raises
    ------
    InvalidParameter
        Bad epsilon; candidates empty or not 1-D; a loss of the wrong length, NaN or
        negative, or +inf everywhere.

    Examples
    --------
    The median of ``(1, 2, 2, 9)`` over the candidates 0..10 under replacement
    (the digest's formula ``max(0, L - m + 1, m - LE)``, ``m = 2``):

    >>> import numpy as np
    >>> from dpkit.estimators import inverse_sensitivity
    >>> from dpkit.testing import seeded
    >>> def median_loss(x, ys):
    ...     x = np.sort(x)
    ...     below = np.searchsorted(x, ys, side="left")
    ...     at_or_below = np.searchsorted(x, ys, side="right")
    ...     return np.maximum(0, np.maximum(below - 1, 2 - at_or_below))
    >>> release = inverse_sensitivity(
    ...     [1, 2, 2, 9], np.arange(11), median_loss, epsilon=2.0, rng=seeded(3))
    >>> int(release.value), release.guarantee
    (3, PureDP(epsilon=2.0))
    """
    owner = "inverse_sensitivity"
    epsilon = check.check_epsilon(epsilon, owner)
    n = len(candidates)
    if n == 0 or (isinstance(candidates, np.ndarray) and candidates.ndim != 1):
        raise InvalidParameter.for_parameter(
            "candidates", owner, "a non-empty 1-D sequence", f"<{type(candidates).__name__}>"
        )
    if not callable(loss):
        raise InvalidParameter.for_parameter("loss", owner, "a callable", type(loss).__name__)
    values = np.asarray(loss(data, candidates), dtype=np.float64)
    if values.shape != (n,):
        raise InvalidParameter(
            f"{owner}: loss(data, candidates) must return one value per candidate "
            f"(shape ({n},)); got shape {values.shape}."
        )
    if np.isnan(values).any() or (values < 0).any():
        raise InvalidParameter(
            f"{owner}: loss(data, candidates) returned NaN or negative values; a path "
            "length is >= 0 (+inf allowed)."
        )
    index, mechanism, secure = select_by_loss(values, epsilon=epsilon, rng=rng, owner=owner)
    return Release(
        value=candidates[index],
        error=None,
        event=mechanism.event,
        guarantee=mechanism.guarantee,
        mechanism="InverseSensitivity",
        secure=secure,
    )
