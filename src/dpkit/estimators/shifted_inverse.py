"""The shifted inverse sensitivity mechanism for monotone functions (Fang, Dong & Yi 2022).

For a monotone ``f`` (removing persons never increases it) and a sorted grid ``Y`` of
candidate answers, the loss

    l(x, y)     = fewest persons to remove from x so that f <= y      (eq. 4 of the post)
    lbar(x, y)  = fewest persons to remove from x so that f <  y      (footnote 4, eq. A)

both change by at most 1 when one person is added or removed (Prop. 3 of the
down-sensitivity post; the proof for ``lbar`` is the same). ``l`` is non-increasing in
``y`` and ``l(x, f(x)) = 0``. The mechanism looks for a ``y`` whose loss is near a
shift ``tau > 0``: about ``tau`` persons would have to go to bring ``f`` down to ``y``.
The answer is therefore an *under-estimate*, by at most the ``2 tau``-down sensitivity.

Two ways to find it:

* ``method="binary_search"`` (default): :mod:`dpkit.selection.binary_search` on ``l``,
  with discrete Laplace noise (``epsilon=``, pure DP) or discrete Gaussian noise
  (``rho=``, zCDP); at most ``ceil(log2(|Y| - 1))`` noisy queries.
* ``method="exponential"``: the exponential mechanism with the loss
  ``l*(x, y) = max(l(x, y) - tau, tau - lbar(x, y))`` of the post's footnote 4 (the naive
  ``|l - tau|`` is not accurate: for the maximum of ``(1, ..., 1)`` no ``y`` has
  ``0 < l < n``), pure DP.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.accounting._math.rounding import fraction_down, fraction_up
from dpkit.accounting.events import ExponentialMechanismEvent
from dpkit.accounting.guarantees import PureDP
from dpkit.errors import DataError, InvalidParameter
from dpkit.mechanisms._base import DownSensitivityBound, Release
from dpkit.random import Random, RandomLike, as_random
from dpkit.selection._argmax import noisy_argmax
from dpkit.selection.binary_search import _loss_value, plan_search, run_search
from dpkit.selection.exponential import ExponentialMechanism

__all__ = ["exponential_threshold", "release_monotone", "shifted_inverse_sensitivity"]

Method = Literal["binary_search", "exponential"]
LossLike = Callable[[float], Any] | npt.ArrayLike


def exponential_threshold(n_finite: int, epsilon: float, beta: float) -> tuple[int, float]:
    """``tau`` and the exponential mechanism's coefficient ``c`` for the ``l*`` version.

    ``tau`` is the smallest integer with ``(n_finite - 1) e^{-c tau} <= beta``, where
    ``c`` is the coefficient dpkit's exponential mechanism really uses (``epsilon/2``
    rounded down). Why it suffices: the witness ``y_hat`` of the footnote has
    ``l* <= 0``, so every other candidate with ``l* >= tau`` has at most ``e^{-c tau}``
    times its probability; there are at most ``n_finite - 1`` of them. (The post uses
    ``ceil((2/epsilon) ln(|Y|/beta))``, which is never smaller.)
    """
    c = ExponentialMechanism(epsilon=epsilon, sensitivity=1.0).coefficient
    others = max(n_finite - 1, 1)
    tau = max(1, math.ceil(math.log(others / beta) / c))
    while others * math.exp(-c * tau) * (1.0 + 1e-12) > beta:
        tau += 1
    return tau, c


def _check_method(method: object, owner: str) -> Method:
    if method == "binary_search":
        return "binary_search"
    if method == "exponential":
        return "exponential"
    raise InvalidParameter.for_parameter(
        "method", owner, "'binary_search' or 'exponential'", method
    )


def _check_candidates(candidates: npt.ArrayLike, owner: str) -> npt.NDArray[np.float64]:
    try:
        grid = np.asarray(candidates, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise InvalidParameter(f"{owner}: 'candidates' must be a 1-D array of numbers.") from err
    if grid.ndim != 1 or grid.size < 2:
        raise InvalidParameter(
            f"{owner}: 'candidates' must be 1-D with at least 2 entries (the two sentinels); "
            f"got shape {grid.shape}."
        )
    if np.isnan(grid).any() or np.isinf(grid[1:]).any() or grid[0] == math.inf:
        raise InvalidParameter(
            f"{owner}: 'candidates' must be finite (only the first, the bottom sentinel, "
            "may be -inf)."
        )
    if not np.all(np.diff(grid) > 0):
        raise InvalidParameter(f"{owner}: 'candidates' must be strictly increasing.")
    return grid


def _loss_array(
    loss: LossLike, grid: npt.NDArray[np.float64], name: str, owner: str
) -> npt.NDArray[np.float64]:
    if callable(loss):
        values = [_loss_value(loss(float(y)), owner) for y in grid]
        return np.asarray(values, dtype=np.float64)
    array = np.asarray(loss, dtype=np.float64)
    if array.shape != grid.shape:
        raise InvalidParameter(
            f"{owner}: {name!r} must have one value per candidate ({grid.size}); "
            f"got shape {array.shape}."
        )
    ok = (array == np.inf) | ((array >= 0) & np.isfinite(array) & (array == np.floor(array)))
    if not ok.all():
        raise DataError(f"{owner}: {name!r} must hold non-negative integers or +inf.")
    return array


def _exponential_release(
    loss: npt.NDArray[np.float64],
    strict: npt.NDArray[np.float64],
    epsilon: float,
    beta: float,
    rng: Random,
) -> tuple[int, int, float]:
    """Sample the ``l*`` exponential mechanism; returns ``(index, removals, confidence)``."""
    # Candidates whose loss is infinite (below f of the empty dataset) have
    # probability 0 for every dataset: leave them out.
    finite = np.flatnonzero(np.isfinite(loss))
    if finite.size == 0:
        raise DataError("shifted_inverse_sensitivity: every candidate has an infinite loss.")
    tau, c = exponential_threshold(int(finite.size), epsilon, beta)
    with np.errstate(invalid="ignore"):
        star = np.maximum(loss[finite] - tau, tau - strict[finite])  # lbar = inf gives -inf
    chosen = noisy_argmax("gumbel", -star, c, rng)
    # l*(M) < tau gives l(M) <= 2 tau - 1 and lbar(M) > 0 (footnote 4).
    failure = fraction_up(max(finite.size - 1, 1) * Fraction(math.exp(-c * tau) * (1 + 1e-12)))
    return int(finite[chosen]), 2 * tau - 1, fraction_down(1 - Fraction(min(failure, 1.0)))


def release_monotone(
    grid: npt.NDArray[np.float64],
    loss: Callable[[int], Any] | npt.NDArray[np.float64],
    strict: Callable[[], npt.NDArray[np.float64]] | None,
    *,
    epsilon: float | None,
    rho: float | None,
    beta: float,
    method: object,
    rng: RandomLike | None,
    owner: str,
    mechanism: str,
) -> tuple[Release[float], int]:
    """The shared core: validated grid and losses in, a Release and the index out.

    ``loss`` is indexed by grid position (a callable of the index or an array);
    ``strict`` builds the ``lbar`` array (needed only by the exponential method).
    """
    chosen_method = _check_method(method, owner)
    if chosen_method == "exponential":
        if epsilon is None or rho is not None:
            raise InvalidParameter(
                f"{owner}: method='exponential' is pure DP: give epsilon= (and not rho=); "
                f"got epsilon={epsilon!r}, rho={rho!r}."
            )
        epsilon = check.check_epsilon(epsilon, owner)
        beta = check.check_probability(beta, "beta", owner, open_low=True, open_high=True)
        if strict is None:
            raise InvalidParameter(
                f"{owner}: method='exponential' needs the strict loss (strict_loss=)."
            )
        random = as_random(rng)
        full = (
            loss
            if isinstance(loss, np.ndarray)
            else np.array([_loss_value(loss(k), owner) for k in range(grid.size)])
        )
        index, removals, confidence = _exponential_release(full, strict(), epsilon, beta, random)
        event: Any = ExponentialMechanismEvent(epsilon)
        guarantee: Any = PureDP(epsilon)
    else:
        plan = plan_search(grid.size, epsilon=epsilon, rho=rho, beta=beta, owner=owner)
        random = as_random(rng)
        function = loss if callable(loss) else (lambda k: loss[k])
        index = run_search(plan, function, random, owner)
        removals, confidence = plan.removals, plan.confidence
        event, guarantee = plan.event, plan.guarantee
    release = Release(
        value=float(grid[index]),
        error=DownSensitivityBound(removals=removals, confidence=confidence),
        event=event,
        guarantee=guarantee,
        mechanism=mechanism,
        secure=random.secure,
    )
    return release, index


def shifted_inverse_sensitivity(
    candidates: npt.ArrayLike,
    loss: LossLike,
    strict_loss: LossLike | None = None,
    *,
    epsilon: float | None = None,
    rho: float | None = None,
    beta: float = 0.05,
    method: Method = "binary_search",
    rng: RandomLike | None = None,
) -> Release[float]:
    """Estimate a monotone function from below, with error set by its down sensitivity.

    Parameters
    ----------
    candidates:
        The sorted output grid ``y_0 < y_1 < ... < y_{J-1}`` (``J >= 2``), with two
        *sentinels*: ``y_0`` must be below ``f`` of the empty dataset (so that
        ``l(x, y_0) = inf`` for every ``x``; ``-inf`` is allowed and is never released)
        and ``y_{J-1}`` at or above every value ``f`` can take (``l(x, y_{J-1}) = 0``).
        Every value ``f`` takes on subsets of the data should be a grid point (round
        the data down onto the grid first); otherwise read ``f`` below as "the largest
        grid point at most ``f``".
    loss:
        ``l(x, y)`` of eq. 4: a callable ``loss(y)`` of a candidate value, or an array
        with one value per candidate. Non-negative integers, ``inf`` exactly where it
        is infinite for every dataset. With the binary search a callable is evaluated
        only at the (at most ``ceil(log2(J-1))``) queried candidates.
    strict_loss:
        ``lbar(x, y)`` (strict inequality ``f < y``); required for ``method="exponential"``.
    epsilon, rho:
        Exactly one for the binary search: ``epsilon`` (discrete Laplace, pure DP) or
        ``rho`` (discrete Gaussian, zCDP). The exponential method takes ``epsilon``.
    beta:
        Failure probability of the accuracy statement, in (0, 1).
    method:
        ``"binary_search"`` (default) or ``"exponential"``.
    rng:
        Random source (see :func:`dpkit.random.as_random`).

    Returns
    -------
    Release
        ``value`` is a candidate (a float); ``error`` is a
        :class:`~dpkit.mechanisms.DownSensitivityBound`.

    Contract
    --------
    ``f`` must be monotone (``x' subset of x`` implies ``f(x') <= f(x)``) and the losses
    must be the exact eq.-4 losses of ``f`` (or any functions with the same
    sensitivity-1 property, Prop. 3): privacy rests on it.

    Privacy
    -------
    Binary search: ``epsilon``-DP or ``rho``-zCDP for adding or removing one person
    (:func:`dpkit.selection.noisy_binary_search`; event ``RepeatedEvent`` of
    ``DiscreteLaplaceEvent`` / ``DiscreteGaussianEvent``). Exponential: ``epsilon``-DP
    (McSherry & Talwar 2007 on the sensitivity-1 loss ``l*``; event
    ``ExponentialMechanismEvent``, also ``epsilon^2/8``-zCDP).

    Accuracy
    --------
    With probability at least ``error.confidence`` (at least ``1 - beta``),
    ``f(x) >= value >= f(x) - DS_f^k(x)`` with ``k = error.removals``: ``2 t`` for the
    binary search with integer threshold ``t`` (Thm 5 of the post and its Laplace
    analogue), ``2 tau - 1`` for the exponential method (Thm 4 with footnote 4).

    References
    ----------
    Fang, Dong & Yi, "Shifted inverse: a general mechanism for monotonic functions under
    user differential privacy", CCS 2022; Steinke, "Beyond local sensitivity via down
    sensitivity", differentialprivacy.org, 2023.
    """
    owner = "shifted_inverse_sensitivity"
    grid = _check_candidates(candidates, owner)
    chosen = _check_method(method, owner)
    index_loss: Callable[[int], Any] | npt.NDArray[np.float64]
    if callable(loss) and chosen == "binary_search":
        function = loss
        index_loss = lambda k: function(float(grid[k]))  # noqa: E731
    else:
        index_loss = _loss_array(loss, grid, "loss", owner)
    strict_builder = None
    if strict_loss is not None:
        given = strict_loss
        strict_builder = lambda: _loss_array(given, grid, "strict_loss", owner)  # noqa: E731
    release, _ = release_monotone(
        grid,
        index_loss,
        strict_builder,
        epsilon=epsilon,
        rho=rho,
        beta=beta,
        method=chosen,
        rng=rng,
        owner=owner,
        mechanism="ShiftedInverseSensitivity",
    )
    return release
