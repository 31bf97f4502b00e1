"""Exact noise samplers, safe on floating-point hardware.

Every sampler here outputs exactly the distribution its privacy proof is about:

* :func:`discrete_laplace`, :func:`discrete_gaussian` and :func:`bernoulli_exp` on
  the integers (Canonne, Kamath & Steinke 2020);
* :func:`laplace`, :func:`gaussian` and :func:`truncated_laplace`: the exact real
  number ``loc + noise`` rounded to a power-of-two grid. Rounding is post-processing
  of the ideal real-valued mechanism, so the ideal guarantee holds with no extra
  privacy cost, and the output carries no floating-point trace of ``loc`` (the
  weakness of textbook ``loc + rng.laplace(scale)``, Mironov 2012).

How: inversion on lazily refined uniform random numbers, with a float64 filter whose
error margin is certified and an exact :mod:`decimal` fallback for the rare draws too
close to a boundary (see ``dpkit/noise/_certified.py`` and ``docs/noise.md``). The
integer-only algorithms of CKS20 are in ``dpkit.noise.rational`` and the tests
check both against the exact probability mass functions.

All samplers are vectorised and stream in chunks, so 10^8 draws need little memory
beyond the output array. ``rng`` is the last keyword-only argument everywhere.

Examples
--------
>>> import warnings, dpkit as dp
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore", dp.InsecureRandomWarning)
...     rng = dp.random.as_random(1)
>>> dp.noise.discrete_laplace(2.0, size=3, rng=rng).dtype
dtype('int64')
>>> x = dp.noise.laplace(10.0, scale=1.0, rng=rng)
>>> x == dp.noise.default_granularity(1.0) * round(x / dp.noise.default_granularity(1.0))
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import overload

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.errors import InvalidParameter
from dpkit.noise import _exact, _grid, rational
from dpkit.random import RandomLike, as_random

__all__ = [
    "MAX_SCALE",
    "bernoulli_exp",
    "default_granularity",
    "discrete_gaussian",
    "discrete_laplace",
    "gaussian",
    "laplace",
    "rational",
    "truncated_laplace",
]

#: Largest scale (in units of the output) the integer samplers accept: outputs must
#: stay far inside int64.
MAX_SCALE = 2.0**40
#: Grid step relative to the noise scale: the rounding moves a release by at most
#: 2^-21 noise scales, far below any statistical resolution.
_GRID_BITS_BELOW_SCALE = 20
#: Largest noise scale in grid steps: the noise in grid units then obeys the integer
#: samplers' bound MAX_SCALE, so the grid index K of a release stays below 2^54 and
#: fits an int64 (dpkit/noise/_grid.py). A finer grid would overflow it.
_MAX_SCALE_IN_STEPS = MAX_SCALE
#: Smallest positive float64 (subnormal), the finest grid step there is.
_MIN_STEP = math.ldexp(1.0, -1074)


def default_granularity(scale: float) -> float:
    """The grid step used for noise of the given scale: a power of two ~2^-20 * scale.

    Never below 2^-1074, the smallest positive float (for scales below ~2^-1053).
    """
    scale = check.check_positive(scale, "scale", "default_granularity")
    return max(_MIN_STEP, math.ldexp(1.0, math.frexp(scale)[1] - 1 - _GRID_BITS_BELOW_SCALE))


def _check_size(size: int | None, owner: str) -> int:
    if size is None:
        return 1
    return check.check_count(size, "size", owner, minimum=0)


def _check_scale(value: object, name: str, owner: str) -> float:
    result = check.check_positive(value, name, owner)
    if result > MAX_SCALE:
        raise InvalidParameter.for_parameter(name, owner, f"a float in (0, {MAX_SCALE:g}]", value)
    return result


@overload
def discrete_laplace(scale: float, size: None = None, *, rng: RandomLike | None = None) -> int: ...
@overload
def discrete_laplace(
    scale: float, size: int, *, rng: RandomLike | None = None
) -> npt.NDArray[np.int64]: ...
def discrete_laplace(
    scale: float, size: int | None = None, *, rng: RandomLike | None = None
) -> int | npt.NDArray[np.int64]:
    """Exact discrete Laplace: P(z) proportional to ``exp(-|z| / scale)`` for integers z.

    Parameters
    ----------
    scale:
        The scale ``t`` in (0, 2^40]. Adding it to an integer query of sensitivity
        ``k`` is ``(k / t)``-DP.
    size:
        Number of draws; ``None`` for a single ``int``.
    rng:
        Random source (see :func:`dpkit.random.as_random`).

    Returns
    -------
    int or numpy.ndarray of int64
    """
    scale = _check_scale(scale, "scale", "discrete_laplace")
    n = _check_size(size, "discrete_laplace")
    draws = _exact.discrete_laplace(scale, n, as_random(rng))
    return int(draws[0]) if size is None else draws


@overload
def discrete_gaussian(sigma: float, size: None = None, *, rng: RandomLike | None = None) -> int: ...
@overload
def discrete_gaussian(
    sigma: float, size: int, *, rng: RandomLike | None = None
) -> npt.NDArray[np.int64]: ...
def discrete_gaussian(
    sigma: float, size: int | None = None, *, rng: RandomLike | None = None
) -> int | npt.NDArray[np.int64]:
    """Exact discrete Gaussian: P(z) proportional to exp(-z^2 / (2 sigma^2)) for integers z.

    Canonne, Kamath & Steinke 2020, Algorithm 3. ``sigma`` is the exact value of the
    float given; adding the noise to an integer query of sensitivity ``k`` is
    ``k^2 / (2 sigma^2)``-zCDP (CKS20, Theorem 4).

    Parameters
    ----------
    sigma:
        In (0, 2^40].
    size:
        Number of draws; ``None`` for a single ``int``.
    rng:
        Random source.
    """
    sigma = _check_scale(sigma, "sigma", "discrete_gaussian")
    n = _check_size(size, "discrete_gaussian")
    draws = _exact.discrete_gaussian(sigma, n, as_random(rng))
    return int(draws[0]) if size is None else draws


@overload
def bernoulli_exp(gamma: float, size: None = None, *, rng: RandomLike | None = None) -> bool: ...
@overload
def bernoulli_exp(
    gamma: float, size: int, *, rng: RandomLike | None = None
) -> npt.NDArray[np.bool_]: ...
def bernoulli_exp(
    gamma: float, size: int | None = None, *, rng: RandomLike | None = None
) -> bool | npt.NDArray[np.bool_]:
    """Exact Bernoulli(exp(-gamma)) for ``gamma >= 0`` (the exact value of the float).

    Decided as ``U < exp(-gamma)`` on a lazily refined uniform ``U``; CKS20's
    Algorithm 1 (integer arithmetic) is :func:`~dpkit.noise.bernoulli_exp`.
    """
    gamma = check.check_nonnegative(gamma, "gamma", "bernoulli_exp")
    n = _check_size(size, "bernoulli_exp")
    draws = _exact.bernoulli_exp(np.full(n, gamma), as_random(rng))
    return bool(draws[0]) if size is None else draws


def check_granularity(granularity: float | None, scale: float, owner: str) -> float:
    """Validate a grid step for noise of the given scale (``None``: the default).

    A valid step is a power of two in ``[scale * 2^-40, scale]``: at most the noise
    scale, and fine enough for any use (2^40 grid steps per noise scale) while the
    grid index of a release still fits an int64. Raises
    :class:`~dpkit.errors.InvalidParameter` otherwise; callers validate before any
    randomness is drawn.
    """
    if granularity is None:
        return default_granularity(scale)
    value = check.check_positive(granularity, "granularity", owner)
    mantissa, _ = math.frexp(value)
    if mantissa != 0.5:
        raise InvalidParameter.for_parameter(
            "granularity", owner, "a power of two (e.g. 2.0**-20)", granularity
        )
    if value > scale:
        raise InvalidParameter.for_parameter(
            "granularity", owner, f"at most the noise scale ({scale!r})", granularity
        )
    # scale / value is exact (a power-of-two divisor, a quotient >= 1) or inf.
    if scale / value > _MAX_SCALE_IN_STEPS:
        raise InvalidParameter.for_parameter(
            "granularity",
            owner,
            f"at least the noise scale / 2^40 ({scale / _MAX_SCALE_IN_STEPS!r})",
            granularity,
        )
    return value


def _rounded(
    loc: npt.ArrayLike,
    granularity: float,
    sample: Callable[[_grid.GridOffsets], npt.NDArray[np.int64]],
    owner: str,
) -> float | npt.NDArray[np.float64]:
    # Validates every entry (finite, else DataError) before anything is drawn.
    values = check.check_array(loc, "loc", owner, allow_empty=True)
    flat = values.reshape(-1)
    out = np.empty_like(flat)
    for start in range(0, flat.size, _exact.CHUNK):
        base, offsets = _grid.split_on_grid(flat[start : start + _exact.CHUNK], granularity)
        # base + g K is the exact grid point rounded once to float: a function of it
        # alone, so the release carries no other trace of loc (Mironov 2012).
        out[start : start + base.size] = _grid.add_on_grid(base, sample(offsets), granularity)
    result = out.reshape(values.shape)
    return float(result) if result.ndim == 0 else result


def laplace(
    loc: npt.ArrayLike,
    *,
    scale: float,
    granularity: float | None = None,
    rng: RandomLike | None = None,
) -> float | npt.NDArray[np.float64]:
    """``loc + Laplace(0, scale)``, computed exactly and rounded to a grid.

    Parameters
    ----------
    loc:
        Centre(s), any shape; finite floats. Every finite float is handled exactly,
        however large or small (see Notes).
    scale:
        Laplace scale ``b`` in (0, 2^40].
    granularity:
        Grid step, a power of two in ``[scale * 2^-40, scale]``; default
        :func:`default_granularity`.
    rng:
        Random source.

    Returns
    -------
    float or numpy.ndarray
        Each entry is the exact real ``loc + X`` rounded to the nearest multiple of
        the grid step (halves up; ``X ~ Laplace(0, scale)`` independent per entry),
        then rounded once to float64. Rounding is post-processing: on a query of L1
        sensitivity ``s`` this is exactly ``(s / scale)``-DP. (Releases are always
        finite: the noise stays below 2^54, far less than the float spacing near the
        largest floats.)

    Raises
    ------
    InvalidParameter
        For an invalid ``scale`` or ``granularity``, before any randomness is drawn.
    DataError
        If ``loc`` holds NaN or infinities, before any randomness is drawn.

    Notes
    -----
    ``loc`` is split exactly as ``base + g f`` with ``base`` on the grid and
    ``|f| <= 1/2`` (``dpkit/noise/_grid.py`` proves it for every finite float). This
    includes inputs so large that ``loc / g`` overflows -- they lie on the grid
    already -- and tiny or negative inputs whose offset ``1 - 2^-1074`` would not be
    a float.
    """
    scale = _check_scale(scale, "scale", "laplace")
    step = check_granularity(granularity, scale, "laplace")
    random = as_random(rng)
    return _rounded(loc, step, lambda f: _exact.rounded_laplace(f, scale / step, random), "laplace")


def gaussian(
    loc: npt.ArrayLike,
    *,
    sigma: float,
    granularity: float | None = None,
    rng: RandomLike | None = None,
) -> float | npt.NDArray[np.float64]:
    """``loc + N(0, sigma^2)``, computed exactly and rounded to a grid.

    Same contract as :func:`laplace` (parameters, exact handling of every finite
    ``loc``, errors): each entry is the exact real ``loc + X`` rounded to the grid,
    ``X ~ N(0, sigma^2)``, so the Gaussian mechanism's exact privacy profile holds
    unchanged. ``granularity`` is a power of two in ``[sigma * 2^-40, sigma]``.
    """
    sigma = _check_scale(sigma, "sigma", "gaussian")
    step = check_granularity(granularity, sigma, "gaussian")
    random = as_random(rng)
    return _rounded(
        loc, step, lambda f: _exact.rounded_gaussian(f, sigma / step, random), "gaussian"
    )


def truncated_laplace(
    loc: npt.ArrayLike,
    *,
    scale: float,
    bound: float,
    granularity: float | None = None,
    rng: RandomLike | None = None,
) -> float | npt.NDArray[np.float64]:
    """``loc + X`` rounded to a grid, ``X`` Laplace(0, scale) conditioned on ``|X| <= bound``.

    The density of ``X`` is proportional to ``exp(-|x| / scale)`` on ``[-bound, bound]``
    (Geng et al. 2020). See :class:`dpkit.mechanisms.TruncatedLaplace` for the
    calibrations and their guarantees. Same contract as :func:`laplace` otherwise, with
    ``granularity`` a power of two in ``[m * 2^-40, m]``, ``m = min(scale, bound)``.
    """
    scale = _check_scale(scale, "scale", "truncated_laplace")
    bound = check.check_positive(bound, "bound", "truncated_laplace")
    step = check_granularity(granularity, min(scale, bound), "truncated_laplace")
    random = as_random(rng)
    return _rounded(
        loc,
        step,
        lambda f: _exact.rounded_truncated_laplace(f, scale / step, bound / step, random),
        "truncated_laplace",
    )
