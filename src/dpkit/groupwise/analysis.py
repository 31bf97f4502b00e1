"""Numerical analysis of Algorithm 1 (:class:`~dpkit.groupwise.TwoStageNoise`).

**Everything here is numerical evidence, not a guarantee.** Nothing in dpkit's
accounting reads these numbers; the proven guarantee of Algorithm 1 is rho-zCDP.

For a true count ``x`` the output is ``Y = X W`` with ``X ~ N(x, sigma^2)`` and
``W ~ N(1, r^2)`` independent (a Gaussian scale mixture; derivation and error control
in ``dpkit/groupwise/_quadrature.py``). This module computes

* its density and distribution function by quadrature (``output_density``,
  ``output_cdf``), normalised to within 1e-12 in the tested range;
* Renyi divergences ``D_a(P_x || P_x')`` between neighbouring counts
  (``renyi_divergence``) and the per-group "effective rho"
  ``v(x) = max_a max_directions D_a / a`` over a grid of orders (``effective_rho``),
  which the problem of Pujol & Desfontaines (2023) asks about;
* the expected absolute error ``E|Y - x|`` and the distance of the output law from
  its moment-matched Gaussian (``gaussian_approximation_distance``).

Scope: ``sigma > 0`` and ``relative_error`` either 0 (the Gaussian mechanism, computed
in closed form) or in ``[0.01, 10]`` (smaller positive values need grids too fine to
be practical here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.errors import InvalidParameter
from dpkit.groupwise import _quadrature as quad

__all__ = [
    "DEFAULT_ORDERS",
    "EVIDENCE",
    "EffectiveRho",
    "RenyiDivergences",
    "effective_rho",
    "expected_absolute_error",
    "gaussian_approximation_distance",
    "nonincreasing_envelope",
    "output_cdf",
    "output_density",
    "output_log_density",
    "renyi_divergence",
]

FloatArray = npt.NDArray[np.float64]

#: The label every result of this module carries.
EVIDENCE = "numerical evidence, not a guarantee"
#: Renyi orders of the effective-rho grid (the digest's 1.5 ... 64).
DEFAULT_ORDERS: tuple[float, ...] = (1.5, 2.0, 3.0, 5.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0)
#: Share of a Renyi integral carried by the outermost grid nodes above which the
#: result is flagged unresolved (the grid would have cut off a relevant tail).
EDGE_TOLERANCE = 1e-12
_EDGE_NODES = 16  # two local scales of the integrand at STEPS_PER_SCALE = 8
_MIN_R = 0.01
_MAX_R = 10.0


def _check_model(sigma: float, relative_error: float, owner: str) -> tuple[float, float]:
    sigma = check.check_positive(sigma, "sigma", owner)
    r = check.check_nonnegative(relative_error, "relative_error", owner)
    if r != 0.0 and not _MIN_R <= r <= _MAX_R:
        raise InvalidParameter.for_parameter(
            "relative_error", owner, f"0 or a float in [{_MIN_R}, {_MAX_R}]", relative_error
        )
    return sigma, r


def _check_steps(steps: int, owner: str) -> int:
    return check.check_count(steps, "steps", owner, minimum=2)


def _normal_log_pdf(y: FloatArray, mean: float, sigma: float) -> FloatArray:
    result: FloatArray = -0.5 * ((y - mean) / sigma) ** 2 - math.log(sigma * math.sqrt(2 * math.pi))
    return result


def output_log_density(
    y: npt.ArrayLike,
    *,
    count: float,
    sigma: float,
    relative_error: float,
    steps: int = quad.STEPS_PER_SCALE,
) -> FloatArray:
    """``ln p_count(y)``: log density of Algorithm 1's output for a true ``count``.

    Quadrature over the first-stage value (see ``_quadrature.py``): relative
    accuracy better than 1e-12 where the density is not astronomically small, and
    no underflow (log space). ``y = 0`` gives ``+inf`` when ``r > 0`` (the density has
    a logarithmic spike there). ``steps`` is the number of nodes per local scale.
    Numerical evidence, not a guarantee.
    """
    owner = "output_log_density"
    sigma, r = _check_model(sigma, relative_error, owner)
    count = check.check_finite_float(count, "count", owner)
    steps = _check_steps(steps, owner)
    values = np.asarray(check.check_array(y, "y", owner, allow_empty=True), dtype=np.float64)
    flat = values.reshape(-1)
    if r == 0.0:
        return _normal_log_pdf(flat, count, sigma).reshape(values.shape)
    y_max = max(float(np.max(np.abs(flat), initial=0.0)), quad.output_y_max(count, sigma, r, 2))
    nodes = quad.t_nodes(count, sigma, r, y_max, steps)
    out = np.full(flat.size, np.inf)
    nonzero = flat != 0.0
    out[nonzero] = quad.log_density_on(flat[nonzero], count, sigma, r, nodes)
    return out.reshape(values.shape)


def output_density(
    y: npt.ArrayLike, *, count: float, sigma: float, relative_error: float
) -> FloatArray:
    """``p_count(y)``, the density of Algorithm 1's output (see :func:`output_log_density`)."""
    result: FloatArray = np.exp(
        output_log_density(y, count=count, sigma=sigma, relative_error=relative_error)
    )
    return result


def output_cdf(
    y: npt.ArrayLike, *, count: float, sigma: float, relative_error: float
) -> FloatArray:
    """``P(Y <= y)`` for Algorithm 1's output: ``E[Phi((y/X - 1)/r)]`` over ``X > 0`` plus
    ``E[Phi(-(y/X - 1)/r)]`` over ``X < 0``, by the same quadrature (absolute error
    below 1e-12). Numerical evidence, not a guarantee."""
    from scipy.special import ndtr  # deferred: SciPy is slow to import

    owner = "output_cdf"
    sigma, r = _check_model(sigma, relative_error, owner)
    count = check.check_finite_float(count, "count", owner)
    values = np.asarray(check.check_array(y, "y", owner, allow_empty=True), dtype=np.float64)
    flat = values.reshape(-1)
    if r == 0.0:
        return np.asarray(ndtr((flat - count) / sigma)).reshape(values.shape)
    y_max = max(float(np.max(np.abs(flat), initial=0.0)), quad.output_y_max(count, sigma, r, 2))
    nodes = quad.t_nodes(count, sigma, r, y_max, quad.STEPS_PER_SCALE)
    return np.clip(quad.cdf_on(flat, count, sigma, r, nodes), 0.0, 1.0).reshape(values.shape)


@dataclass(frozen=True)
class RenyiDivergences:
    """``D_a(P_p || P_q)`` for the outputs of Algorithm 1 at counts ``p`` and ``q``.

    ``edge_share`` is the largest share of any of the integrals carried by the
    outermost grid nodes; ``resolved`` is False when it exceeds ``EDGE_TOLERANCE``
    (then a tail was cut and the value is a lower estimate). ``label`` is always
    :data:`EVIDENCE`.
    """

    count_p: int
    count_q: int
    orders: tuple[float, ...]
    divergences: tuple[float, ...]
    edge_share: float
    resolved: bool
    label: str = EVIDENCE


def _check_orders(orders: object, owner: str) -> tuple[float, ...]:
    try:
        values = tuple(check.check_finite_float(a, "orders", owner) for a in orders)  # type: ignore[attr-defined]
    except TypeError:
        raise InvalidParameter.for_parameter(
            "orders", owner, "a non-empty sequence of floats > 1", orders
        ) from None
    if not values or min(values) <= 1.0:
        raise InvalidParameter.for_parameter(
            "orders", owner, "a non-empty sequence of floats > 1", orders
        )
    return values


def _log_densities(
    counts: tuple[int, ...], sigma: float, r: float, max_order: float, steps: int
) -> tuple[quad.Nodes, dict[int, FloatArray]]:
    """Log densities of several counts on one common output grid."""
    top = max(counts)
    if r == 0.0:
        spread = max(counts) - min(counts)
        lo = min(counts) - quad.X_WIDTH * sigma - max_order * spread
        hi = top + quad.X_WIDTH * sigma + max_order * spread
        h = sigma / steps
        y = lo + h * np.arange(math.ceil((hi - lo) / h) + 1, dtype=np.float64)
        grid = quad.Nodes(y, np.full(y.size, math.log(h)))
        return grid, {c: _normal_log_pdf(y, c, sigma) for c in counts}
    y_max = quad.output_y_max(top, sigma, r, max_order)
    grid = quad.y_nodes(top, sigma, r, y_max, steps)
    densities = {
        c: quad.log_density_on(grid.points, c, sigma, r, quad.t_nodes(c, sigma, r, y_max, steps))
        for c in counts
    }
    return grid, densities


def _divergences(
    grid: quad.Nodes, log_p: FloatArray, log_q: FloatArray, orders: tuple[float, ...]
) -> tuple[list[float], float]:
    values, edge = [], 0.0
    n = grid.points.size
    half = n // 2  # y-grids are symmetric: [negative branch | positive branch]
    edges = np.zeros(n, dtype=bool)
    edges[:_EDGE_NODES] = edges[-_EDGE_NODES:] = True
    if np.all(grid.points[:half] < 0) and np.all(grid.points[half:] > 0):
        edges[half - _EDGE_NODES : half + _EDGE_NODES] = True  # the ends near y = 0
    for a in orders:
        terms = grid.log_weights + a * log_p + (1.0 - a) * log_q
        total = float(quad.log_sum_exp(terms))
        values.append(total / (a - 1.0))
        edge = max(edge, float(np.exp(quad.log_sum_exp(terms[edges]) - total)))
    return values, edge


def renyi_divergence(
    count_p: int,
    count_q: int,
    *,
    sigma: float,
    relative_error: float,
    orders: tuple[float, ...] = DEFAULT_ORDERS,
    steps: int = quad.STEPS_PER_SCALE,
) -> RenyiDivergences:
    """Renyi divergences ``D_a(P_p || P_q)`` of Algorithm 1's outputs for two counts.

    ``D_a = ln(int p^a q^(1-a) dy) / (a - 1)``, the integral by the trapezoid rule on
    an output grid that reaches the tilted tails of order ``max(orders)`` (log space).
    For ``relative_error = 0`` the densities are exact normals, so the result can be
    checked against ``a (p - q)^2 / (2 sigma^2)``. Numerical evidence, not a guarantee.
    """
    owner = "renyi_divergence"
    sigma, r = _check_model(sigma, relative_error, owner)
    p = check.check_count(count_p, "count_p", owner, minimum=0)
    q = check.check_count(count_q, "count_q", owner, minimum=0)
    orders = _check_orders(orders, owner)
    steps = _check_steps(steps, owner)
    grid, logs = _log_densities((p, q), sigma, r, max(orders), steps)
    values, edge = _divergences(grid, logs[p], logs[q], orders)
    return RenyiDivergences(p, q, orders, tuple(values), edge, edge <= EDGE_TOLERANCE)


@dataclass(frozen=True)
class EffectiveRho:
    """``v(x) = max_a max_directions D_a / a`` for neighbours ``x -> x +- 1``.

    ``per_order`` holds ``max_directions D_a / a`` for each order of ``orders``;
    ``value`` is their maximum, attained at ``order``. A supremum over all orders
    ``a > 1`` is NOT established by a finite grid (large orders are governed by the
    tails); ``label`` is always :data:`EVIDENCE`.
    """

    count: int
    value: float
    order: float
    orders: tuple[float, ...]
    per_order: tuple[float, ...]
    edge_share: float
    resolved: bool
    label: str = EVIDENCE


def effective_rho(
    count: int,
    *,
    sigma: float,
    relative_error: float,
    orders: tuple[float, ...] = DEFAULT_ORDERS,
    steps: int = quad.STEPS_PER_SCALE,
) -> EffectiveRho:
    """The per-group "effective rho" of Algorithm 1 at ``count`` over a grid of orders.

    Both directions of both neighbours (``count + 1`` and, for ``count >= 1``,
    ``count - 1``), as the group-wise zCDP definition of the post asks. It can never
    exceed the proven ``1 / (2 sigma^2)`` (data processing); if it does, the numerics
    are wrong. Numerical evidence, not a guarantee.
    """
    owner = "effective_rho"
    sigma, r = _check_model(sigma, relative_error, owner)
    x = check.check_count(count, "count", owner, minimum=0)
    orders = _check_orders(orders, owner)
    steps = _check_steps(steps, owner)
    neighbours = (x + 1,) if x == 0 else (x - 1, x + 1)
    grid, logs = _log_densities((x, *neighbours), sigma, r, max(orders), steps)
    best = np.full(len(orders), -np.inf)
    edge = 0.0
    for other in neighbours:
        for a_, b_ in ((x, other), (other, x)):
            values, share = _divergences(grid, logs[a_], logs[b_], orders)
            best = np.maximum(best, np.array(values) / np.array(orders))
            edge = max(edge, share)
    index = int(np.argmax(best))
    return EffectiveRho(
        x,
        float(best[index]),
        orders[index],
        orders,
        tuple(float(v) for v in best),
        edge,
        edge <= EDGE_TOLERANCE,
    )


def nonincreasing_envelope(values: npt.ArrayLike) -> FloatArray:
    """``v(x_i) = max_{j >= i} values_j`` for values listed by increasing count: the
    smallest non-increasing curve above them (the problem's monotonicity rule)."""
    array = check.check_array(values, "values", "nonincreasing_envelope")
    return np.maximum.accumulate(array[::-1])[::-1]


def expected_absolute_error(count: float, *, sigma: float, relative_error: float) -> float:
    """``E|Y - count|`` for Algorithm 1: the mean of a folded normal with mean
    ``X - count`` and s.d. ``r |X|``, averaged over ``X`` by the first-stage quadrature."""
    from scipy.special import log_ndtr, logsumexp

    owner = "expected_absolute_error"
    sigma, r = _check_model(sigma, relative_error, owner)
    count = check.check_finite_float(count, "count", owner)
    if r == 0.0:
        return sigma * math.sqrt(2.0 / math.pi)
    nodes = quad.t_nodes(count, sigma, r, quad.output_y_max(count, sigma, r, 2), 16)
    t = nodes.points
    mu, s = t - count, r * np.abs(t)
    folded = s * math.sqrt(2 / math.pi) * np.exp(-0.5 * (mu / s) ** 2) + mu * (
        1.0 - 2.0 * np.exp(log_ndtr(-mu / s))
    )
    log_fx = _normal_log_pdf(t, count, sigma) + nodes.log_weights
    return float(np.exp(logsumexp(log_fx, b=folded)))


def gaussian_approximation_distance(count: float, *, sigma: float, relative_error: float) -> float:
    """Kolmogorov distance ``sup_y |F(y) - G(y)|`` between Algorithm 1's output law and
    the normal with the same mean ``x`` and variance ``sigma^2 + r^2 (x^2 + sigma^2)``,
    evaluated on the quadrature's output grid (a lower estimate of the supremum).
    Where it is large the "looks Gaussian" reading of the post's figure breaks."""
    from scipy.special import ndtr

    owner = "gaussian_approximation_distance"
    sigma, r = _check_model(sigma, relative_error, owner)
    count = check.check_finite_float(count, "count", owner)
    sd = math.sqrt(sigma**2 + r**2 * (count**2 + sigma**2))
    y = count + sd * np.linspace(-8.0, 8.0, 1601)
    y = y[y != 0.0]
    cdf = output_cdf(y, count=count, sigma=sigma, relative_error=r)
    return float(np.max(np.abs(cdf - ndtr((y - count) / sd))))
