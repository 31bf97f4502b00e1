"""Certified brackets for the output threshold of a loss that increases with the output.

For a privacy loss ``L(x)`` increasing in the scalar output ``x``, the discretisation
evaluates CDFs at ``x(e) = sup {x : L(x) <= e}`` for each grid edge ``e``. Float error
in ``e`` (at most ``de``) and in computing ``x`` moves that point; what the
discretisation needs (see :func:`.discretize.from_interval_cdfs`) is an interval
``[x_lo, x_hi]`` that provably contains the exact threshold, and a bound ``eta`` on how
far the losses inside it are from the exact edge. :func:`certified_bracket` finds it
from any approximate ``x`` and any evaluation of ``L`` that comes with an absolute
error bound.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dpkit.accounting._math.pld.pmf import FloatArray, U

__all__ = ["LossWithError", "certified_bracket"]

#: ``loss(x) -> (L(x), bound on |computed - exact|)``, vectorised.
LossWithError = Callable[[FloatArray], tuple[FloatArray, FloatArray]]

_WIDENINGS = 14


def certified_bracket(
    e: FloatArray,
    de: FloatArray,
    x: FloatArray,
    loss: LossWithError,
    scale: FloatArray,
    floor: float = -np.inf,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``[x_lo, x_hi]`` around the approximate threshold ``x``, and ``eta``.

    ``x_lo`` is certified by ``L(x_lo) + err <= e - de`` (so ``L(x_lo) <= `` the exact
    edge: ``x_lo`` is at most the exact threshold) and ``x_hi`` by
    ``L(x_hi) - err > e + de``; the steps start at a few u of ``scale`` and grow
    16-fold until both hold (at most 14 times). The bracket is then padded by
    ``8u (|x| + 1)`` for the rounding of the CDFs' arguments. ``eta`` bounds
    ``|L - exact edge|`` inside the bracket. Where ``x`` is not finite the CDFs are
    exact (0 or 1): bracket ``[x, x]``, ``eta = 0``. ``floor`` is a proven lower bound
    on ``L`` everywhere: where only the upper end is certified the bracket is
    ``(-inf, x_hi]`` and ``eta`` is bounded through the floor. Where nothing is
    certified: ``(-inf, inf)`` and ``eta = inf`` (the caller charges the edge in full).
    """
    finite = np.isfinite(x)
    xf = np.where(finite, x, 0.0)
    ef = np.where(finite, e, 0.0)
    dd = np.where(finite, de, 0.0)
    step = 4.0 * U * (np.abs(xf) + np.abs(scale)) + 1e-300
    lo_ok = ~finite
    hi_ok = ~finite
    x_lo, x_hi = xf.copy(), xf.copy()
    loss_lo = np.zeros_like(xf)
    loss_hi = np.zeros_like(xf)
    for _ in range(_WIDENINGS):
        cand_lo = np.where(lo_ok, x_lo, xf - step)
        cand_hi = np.where(hi_ok, x_hi, xf + step)
        l_lo, err_lo = loss(cand_lo)
        l_hi, err_hi = loss(cand_hi)
        new_lo = ~lo_ok & (l_lo + err_lo <= ef - dd)
        new_hi = ~hi_ok & (l_hi - err_hi > ef + dd)
        x_lo = np.where(new_lo, cand_lo, x_lo)
        x_hi = np.where(new_hi, cand_hi, x_hi)
        loss_lo = np.where(new_lo, l_lo - err_lo, loss_lo)
        loss_hi = np.where(new_hi, l_hi + err_hi, loss_hi)
        lo_ok |= new_lo
        hi_ok |= new_hi
        if bool((lo_ok & hi_ok).all()):
            break
        step = step * 16.0
    # Only the upper end certified and L bounded below: (-inf, x_hi] brackets it.
    floored = hi_ok & ~lo_ok & np.isfinite(floor)
    loss_lo = np.where(floored, floor, loss_lo)
    ok = (lo_ok | floored) & hi_ok
    pad = 8.0 * U * (np.abs(xf) + 1.0)
    x_lo = x_lo - pad - 8.0 * U * np.abs(x_lo)
    x_hi = x_hi + pad + 8.0 * U * np.abs(x_hi)
    with np.errstate(invalid="ignore"):
        spread = (loss_hi - loss_lo) * (1.0 + 4.0 * U) + 4.0 * U * np.abs(ef)
    eta = np.where(ok, spread, np.inf)
    eta = np.where(finite, eta, 0.0)
    x_lo = np.where(floored, -np.inf, x_lo)
    x_lo = np.where(finite, np.where(ok, x_lo, -np.inf), x)
    x_hi = np.where(finite, np.where(ok, x_hi, np.inf), x)
    return x_lo, x_hi, eta
