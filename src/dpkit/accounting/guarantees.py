"""Privacy guarantees as values: pure DP, approximate DP, zCDP and Renyi DP.

A guarantee is a statement "this mechanism is ... -DP" with respect to the neighbouring
relation of the mechanism that produced it. Guarantees are frozen, validated on
construction, compose with ``+`` (like with like) and ``k * g`` (k-fold composition),
and convert explicitly to weaker definitions, never looser than the tight conversion in
the literature. Every number a conversion returns is a bound and is rounded up.

Definitions (for neighbouring inputs x, x' and the output distributions P = M(x),
Q = M(x')):

- ``PureDP(eps)``: ``P(S) <= e^eps Q(S)`` for every event S.
- ``ApproxDP(eps, delta)``: ``P(S) <= e^eps Q(S) + delta`` for every event S.
- ``ZCDP(rho)``: ``D_a(P || Q) <= rho * a`` for every order ``a > 1`` (Bun & Steinke 2016).
- ``XiZCDP(rho, xi)``: ``D_a(P || Q) <= xi + rho * a`` for every ``a > 1`` ((xi, rho)-zCDP,
  Bun & Steinke 2016, Def. 1.1; ``xi = 0`` is rho-zCDP).
- ``RDP(orders, epsilons)``: ``D_a(P || Q) <= eps_a`` at each listed order (Mironov 2017).
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from dpkit._validation import (
    check_count,
    check_delta,
    check_nonnegative,
    check_positive,
)
from dpkit.accounting._math import conversions
from dpkit.accounting._math.rounding import mul_up, product_up, sum_up, up
from dpkit.errors import InvalidParameter

__all__ = ["DEFAULT_ORDERS", "RDP", "ZCDP", "ApproxDP", "Guarantee", "PureDP", "XiZCDP"]


def _default_orders() -> tuple[float, ...]:
    # A superset of dp_accounting's DEFAULT_RDP_ORDERS (1 + x/10 for x = 1..99, 11..63,
    # 128, 256, 512, 1024), with the same floats, refined near 1 where compositions of
    # many small-epsilon mechanisms and conversions at moderate delta are decided.
    fine = [1.0 + x / 100.0 for x in range(1, 100) if x % 10]
    coarse = [1.0 + x / 10.0 for x in range(1, 100)]
    integers = [float(a) for a in range(11, 64)]
    large = [80.0, 96.0, 128.0, 192.0, 256.0, 384.0, 512.0, 768.0, 1024.0]
    return tuple(sorted(set(fine + coarse + integers + large)))


#: Default grid of Renyi orders (251 orders in (1, 1024]): 1.01..1.99 by 0.01,
#: 2.0..10.9 by 0.1, 11..63, and 80..1024. Every dp_accounting default order is included.
DEFAULT_ORDERS: tuple[float, ...] = _default_orders()


def _check_multiplier(count: object, owner: str) -> int | None:
    if not isinstance(count, numbers.Number):
        return None
    return check_count(count, "count", owner)


class Guarantee:
    """Base class of privacy guarantees (for ``isinstance`` checks and typing)."""

    __slots__ = ()

    def _mismatch(self, other: object) -> InvalidParameter:
        return InvalidParameter(
            f"Cannot compose {type(self).__name__} with {type(other).__name__}: only "
            "guarantees of the same kind add up. Convert one first (for example "
            "PureDP.to_zcdp() or ZCDP.to_approx(delta))."
        )


@dataclass(frozen=True, slots=True)
class PureDP(Guarantee):
    """epsilon-differential privacy (Dwork, McSherry, Nissim, Smith 2006).

    Parameters
    ----------
    epsilon:
        A finite float >= 0 (0 describes a mechanism whose output ignores its input).

    Notes
    -----
    Composition (adaptive): epsilons add. Conversions: :meth:`to_zcdp`,
    :meth:`to_rdp` (both tight), :meth:`to_approx`.
    """

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_nonnegative(self.epsilon, "epsilon", "PureDP"))

    def __add__(self, other: object) -> PureDP:
        if isinstance(other, PureDP):
            return PureDP(sum_up((self.epsilon, other.epsilon)))
        if isinstance(other, Guarantee):
            raise self._mismatch(other)
        return NotImplemented

    def __radd__(self, other: object) -> PureDP:
        if other == 0:  # lets sum() start from 0
            return self
        return NotImplemented

    def __mul__(self, count: object) -> PureDP:
        k = _check_multiplier(count, "PureDP.__mul__")
        if k is None:
            return NotImplemented
        return PureDP(mul_up(k, self.epsilon))

    __rmul__ = __mul__

    def to_zcdp(self) -> ZCDP:
        """The tight zCDP guarantee ``rho = eps * tanh(eps / 2)``.

        Steinke 2024 ("Tight RDP & zCDP bounds from pure DP", Thm 5); never above the
        classical ``eps^2 / 2`` (Bun & Steinke 2016, Prop. 3.3).
        """
        return ZCDP(conversions.pure_to_zcdp_rho(self.epsilon))

    def to_rdp(self, orders: Iterable[float] = DEFAULT_ORDERS) -> RDP:
        """The tight RDP curve of an eps-DP mechanism at ``orders`` (Steinke 2024, Thm 4).

        ``eps_hat(a) = eps - log((1 + e^-eps) / (1 + e^-(2a-1)eps)) / (a - 1) <= eps``,
        attained by binary randomized response.
        """
        grid = RDP._check_orders(orders, "PureDP.to_rdp")
        return RDP(grid, tuple(conversions.pure_to_rdp_epsilon(self.epsilon, a) for a in grid))

    def to_approx(self) -> ApproxDP:
        """``(eps, 0)``-DP, the same statement."""
        return ApproxDP(self.epsilon, 0.0)


@dataclass(frozen=True, slots=True)
class ApproxDP(Guarantee):
    """(epsilon, delta)-differential privacy (Dwork, Kenthapadi, McSherry, Mironov, Naor 2006).

    Parameters
    ----------
    epsilon:
        A finite float >= 0.
    delta:
        A float in [0, 1).

    Notes
    -----
    Composition with ``+``: the basic theorem, epsilons add and deltas add (a sum of
    deltas reaching 1 raises). For tighter composition of many (eps, delta) mechanisms
    see :func:`dpkit.accounting.optimal_composition` and
    :func:`dpkit.accounting.advanced_composition`. There is no conversion from
    (eps, delta)-DP to pure DP, zCDP or RDP: (eps, delta)-DP does not imply any finite
    guarantee of those kinds (a mechanism may reveal everything with probability delta).
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        owner = "ApproxDP"
        object.__setattr__(self, "epsilon", check_nonnegative(self.epsilon, "epsilon", owner))
        object.__setattr__(self, "delta", check_delta(self.delta, owner))

    def _composed(self, epsilon: float, delta: float) -> ApproxDP:
        if delta >= 1.0:
            raise InvalidParameter(
                f"Basic composition of ApproxDP guarantees gives delta = {delta!r} >= 1, "
                "which guarantees nothing. Use smaller deltas or fewer compositions."
            )
        return ApproxDP(epsilon, delta)

    def __add__(self, other: object) -> ApproxDP:
        if isinstance(other, ApproxDP):
            return self._composed(
                sum_up((self.epsilon, other.epsilon)), sum_up((self.delta, other.delta))
            )
        if isinstance(other, Guarantee):
            raise self._mismatch(other)
        return NotImplemented

    def __radd__(self, other: object) -> ApproxDP:
        if other == 0:
            return self
        return NotImplemented

    def __mul__(self, count: object) -> ApproxDP:
        k = _check_multiplier(count, "ApproxDP.__mul__")
        if k is None:
            return NotImplemented
        return self._composed(mul_up(k, self.epsilon), mul_up(k, self.delta))

    __rmul__ = __mul__


@dataclass(frozen=True, slots=True)
class ZCDP(Guarantee):
    """rho-zero-concentrated differential privacy (Bun & Steinke 2016).

    ``D_a(M(x) || M(x')) <= rho * a`` for all orders ``a > 1`` and neighbours x, x'.

    Parameters
    ----------
    rho:
        A finite float >= 0.

    Notes
    -----
    Composition (adaptive): rhos add (Bun & Steinke 2016, Lemma 2.3).
    """

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_nonnegative(self.rho, "rho", "ZCDP"))

    def __add__(self, other: object) -> ZCDP:
        if isinstance(other, ZCDP):
            return ZCDP(sum_up((self.rho, other.rho)))
        if isinstance(other, XiZCDP):
            return NotImplemented  # XiZCDP.__radd__: rho-zCDP is (0, rho)-zCDP
        if isinstance(other, Guarantee):
            raise self._mismatch(other)
        return NotImplemented

    def __radd__(self, other: object) -> ZCDP:
        if other == 0:
            return self
        return NotImplemented

    def __mul__(self, count: object) -> ZCDP:
        k = _check_multiplier(count, "ZCDP.__mul__")
        if k is None:
            return NotImplemented
        return ZCDP(mul_up(k, self.rho))

    __rmul__ = __mul__

    def to_approx(
        self, delta: float, *, method: Literal["optimal", "simple"] = "optimal"
    ) -> ApproxDP:
        """The (eps, ``delta``)-DP guarantee implied by rho-zCDP, for ``delta`` in (0, 1).

        ``method="optimal"`` (default): Canonne, Kamath & Steinke 2020, Cor. 13 (the
        conversion of their Prop. 12 minimised over a continuous order); never larger
        than the simple bound. ``method="simple"``: ``rho + 2 sqrt(rho log(1/delta))``
        (Bun & Steinke 2016, Prop. 1.3). When the mechanism is known to be Gaussian,
        :func:`dpkit.accounting.gaussian_epsilon` is exact and smaller still.
        """
        owner = "ZCDP.to_approx"
        delta = check_delta(delta, owner, allow_zero=False)
        if method == "optimal":
            return ApproxDP(conversions.zcdp_epsilon(self.rho, delta), delta)
        if method == "simple":
            return ApproxDP(conversions.zcdp_epsilon_simple(self.rho, delta), delta)
        raise InvalidParameter.for_parameter("method", owner, "'optimal' or 'simple'", method)

    def delta_for(self, epsilon: float) -> float:
        """Smallest delta such that rho-zCDP implies (``epsilon``, delta)-DP, ``epsilon`` >= 0.

        Canonne, Kamath & Steinke 2020, Cor. 13; at most the simple tail bound
        ``exp(-(eps - rho)^2 / (4 rho))`` (Bun & Steinke 2016). Rounded up.
        """
        epsilon = check_nonnegative(epsilon, "epsilon", "ZCDP.delta_for")
        return conversions.zcdp_delta(self.rho, epsilon)

    def to_rdp(self, orders: Iterable[float] = DEFAULT_ORDERS) -> RDP:
        """``(a, rho * a)``-RDP at each order (the definition of zCDP), rounded up."""
        grid = RDP._check_orders(orders, "ZCDP.to_rdp")
        return RDP(grid, tuple(product_up(self.rho, a) for a in grid))


@dataclass(frozen=True, slots=True)
class XiZCDP(Guarantee):
    """(xi, rho)-zero-concentrated differential privacy (Bun & Steinke 2016, Def. 1.1).

    ``D_a(M(x) || M(x')) <= xi + rho * a`` for all orders ``a > 1`` and neighbours x, x'.
    A separate class from :class:`ZCDP` (which code reading only ``.rho`` relies on):
    ``XiZCDP(rho, 0.0)`` states the same as ``ZCDP(rho)``.

    Parameters
    ----------
    rho, xi:
        Finite floats >= 0.

    Notes
    -----
    Composition (adaptive): xis add and rhos add (Bun & Steinke 2016, Lemma 2.3, whose
    proof adds the RDP curves ``xi_i + rho_i a``); a :class:`ZCDP` composes as
    ``xi = 0``. Conversions: :meth:`to_rdp` (the definition), :meth:`delta_for` and
    :meth:`to_approx` (Canonne, Kamath & Steinke 2020, Prop. 12 on the curve
    ``xi + rho a``).
    """

    rho: float
    xi: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_nonnegative(self.rho, "rho", "XiZCDP"))
        object.__setattr__(self, "xi", check_nonnegative(self.xi, "xi", "XiZCDP"))

    def __add__(self, other: object) -> XiZCDP:
        if isinstance(other, XiZCDP):
            return XiZCDP(sum_up((self.rho, other.rho)), sum_up((self.xi, other.xi)))
        if isinstance(other, ZCDP):
            return XiZCDP(sum_up((self.rho, other.rho)), self.xi)
        if isinstance(other, Guarantee):
            raise self._mismatch(other)
        return NotImplemented

    def __radd__(self, other: object) -> XiZCDP:
        if other == 0:
            return self
        if isinstance(other, ZCDP):
            return self + other
        return NotImplemented

    def __mul__(self, count: object) -> XiZCDP:
        k = _check_multiplier(count, "XiZCDP.__mul__")
        if k is None:
            return NotImplemented
        return XiZCDP(mul_up(k, self.rho), mul_up(k, self.xi))

    __rmul__ = __mul__

    def to_rdp(self, orders: Iterable[float] = DEFAULT_ORDERS) -> RDP:
        """``(a, xi + rho * a)``-RDP at each order (the definition), rounded up."""
        grid = RDP._check_orders(orders, "XiZCDP.to_rdp")
        return RDP(grid, tuple(sum_up((self.xi, product_up(self.rho, a))) for a in grid))

    def delta_for(self, epsilon: float) -> float:
        """Smallest delta at ``epsilon`` >= 0 implied by (xi, rho)-zCDP, rounded up.

        Canonne, Kamath & Steinke 2020, Prop. 12 on the curve ``xi + rho a`` equals their
        bound for rho-zCDP at ``epsilon - xi``: ``inf_a exp((a-1)(a rho - (eps - xi)) + a
        log(1 - 1/a)) / (a - 1)`` (minimised over a continuous order), capped by the
        grid form of :meth:`RDP.delta_for` (which adds the KL bound). At
        ``epsilon = 0`` it bounds the total variation distance.
        """
        epsilon = check_nonnegative(epsilon, "epsilon", "XiZCDP.delta_for")
        grid = self.to_rdp()
        best = conversions.rdp_delta(grid.orders, grid.epsilons, epsilon)
        if self.rho > 0.0:
            # The algebra of Prop. 12 holds for a negative shifted epsilon as well.
            best = min(best, conversions.zcdp_delta(self.rho, epsilon - self.xi))
        elif epsilon >= self.xi:
            best = 0.0  # D_inf <= xi: pure xi-DP
        else:
            # xi-DP implies (eps, (e^xi - e^eps) / (1 + e^xi))-DP (tight: binary
            # randomized response; Kairouz, Oh & Viswanath 2015).
            pure = -math.expm1(epsilon - self.xi) / (1.0 + math.exp(-self.xi))
            best = min(best, min(1.0, up(pure, 4)))
        return best

    def to_approx(self, delta: float) -> ApproxDP:
        """The (eps, ``delta``)-DP guarantee implied by (xi, rho)-zCDP, ``delta`` in (0, 1).

        ``eps = xi + eps_rho(delta)`` with ``eps_rho`` the rho-zCDP conversion of
        :meth:`ZCDP.to_approx` (Canonne, Kamath & Steinke 2020, Cor. 13, the curve
        shifted by xi), or the grid conversion of :meth:`RDP.to_approx` when smaller.
        Rounded up.
        """
        owner = "XiZCDP.to_approx"
        delta = check_delta(delta, owner, allow_zero=False)
        shifted = sum_up((self.xi, conversions.zcdp_epsilon(self.rho, delta)))
        grid = self.to_rdp()
        on_grid = conversions.rdp_epsilon(grid.orders, grid.epsilons, delta)
        return ApproxDP(min(shifted, on_grid), delta)


#: Order grids already validated (tuples of floats), at most 64 of them.
_VALID_GRIDS: set[tuple[float, ...]] = set()


@dataclass(frozen=True, slots=True)
class RDP(Guarantee):
    """Renyi differential privacy on a grid of orders (Mironov 2017).

    Parameters
    ----------
    orders:
        Strictly increasing floats > 1; the last may be ``inf``: the order-infinity
        value bounds the max-divergence ``D_inf``, which is pure DP ((inf, eps)-RDP is
        eps-DP; Mironov 2017, Sec. III).
    epsilons:
        One float per order, >= 0, ``inf`` allowed (no bound at that order).

    Notes
    -----
    Composition (adaptive): pointwise sum on identical order grids (Mironov 2017,
    Prop. 1; at order inf the max-divergences add, the basic composition of pure DP);
    composing different grids raises.
    """

    orders: tuple[float, ...]
    epsilons: tuple[float, ...]

    @staticmethod
    def _check_orders(
        orders: Iterable[float], owner: str, *, allow_inf: bool = False
    ) -> tuple[float, ...]:
        # Accountants are built with the same grid again and again (DEFAULT_ORDERS):
        # a grid of Python floats that passed once passes again (validation of 251
        # orders was most of the cost of a one-event accountant). With ``allow_inf``
        # the last order may be inf (the RDP guarantee and the RDP accountant; the
        # conversions to RDP of other guarantees stay on finite orders).
        if (
            type(orders) is tuple
            and orders in _VALID_GRIDS
            and (allow_inf or not math.isinf(orders[-1]))
        ):
            return orders
        interval = "(1, inf]" if allow_inf else "(1, inf)"
        try:
            raw = tuple(orders)
        except TypeError:
            raise InvalidParameter.for_parameter(
                "orders", owner, f"a sequence of floats in {interval}", orders
            ) from None
        expected = f"a non-empty strictly increasing sequence of floats in {interval}"
        if not raw:
            raise InvalidParameter.for_parameter("orders", owner, expected, orders)
        grid = tuple(check_positive(a, "orders", owner, allow_inf=True) for a in raw)
        if (
            grid[0] <= 1.0
            or any(b <= a for a, b in itertools.pairwise(grid))
            or (math.isinf(grid[-1]) and not allow_inf)
        ):
            raise InvalidParameter.for_parameter("orders", owner, expected, orders)
        if len(_VALID_GRIDS) < 64 and all(type(a) is float for a in grid):
            _VALID_GRIDS.add(grid)
        return grid

    def __post_init__(self) -> None:
        owner = "RDP"
        grid = self._check_orders(self.orders, owner, allow_inf=True)
        try:
            raw = tuple(self.epsilons)
        except TypeError:
            raise InvalidParameter.for_parameter(
                "epsilons", owner, "a sequence of floats in [0, inf]", self.epsilons
            ) from None
        eps = tuple(check_nonnegative(e, "epsilons", owner, allow_inf=True) for e in raw)
        if len(eps) != len(grid):
            raise InvalidParameter(
                f"The 'epsilons' parameter of RDP must have one value per order "
                f"({len(grid)}). Got {len(eps)} values instead."
            )
        object.__setattr__(self, "orders", grid)
        object.__setattr__(self, "epsilons", eps)

    def __add__(self, other: object) -> RDP:
        if isinstance(other, RDP):
            if other.orders != self.orders:
                raise InvalidParameter(
                    "Cannot compose RDP guarantees on different order grids; compute both "
                    "on the same orders (for example DEFAULT_ORDERS)."
                )
            summed = tuple(sum_up(pair) for pair in zip(self.epsilons, other.epsilons, strict=True))
            return RDP(self.orders, summed)
        if isinstance(other, Guarantee):
            raise self._mismatch(other)
        return NotImplemented

    def __radd__(self, other: object) -> RDP:
        if other == 0:
            return self
        return NotImplemented

    def __mul__(self, count: object) -> RDP:
        k = _check_multiplier(count, "RDP.__mul__")
        if k is None:
            return NotImplemented
        return RDP(self.orders, tuple(mul_up(k, e) for e in self.epsilons))

    __rmul__ = __mul__

    def to_approx(self, delta: float) -> ApproxDP:
        """The (eps, ``delta``)-DP guarantee implied by this curve, for ``delta`` in (0, 1).

        Best over the grid of the conversion of Canonne, Kamath & Steinke 2020, Prop. 12
        (= Balle et al. 2020, eq. 20): ``eps(a) + log(1 - 1/a) - (log delta + log a)/(a-1)``,
        and eps = 0 when the KL bound ``sqrt(1 - exp(-eps(a)))`` is at most delta (as
        dp_accounting does). A finite value at order ``inf`` is itself a candidate at
        every ``delta >= 0`` (``D_inf <= eps`` both ways is eps-DP), so ``delta = 0`` is
        accepted when the grid ends with a finite order-inf value. Raises if every order
        is infinite (or, at ``delta = 0``, if the order-inf value is missing or infinite).
        """
        owner = "RDP.to_approx"
        pure = math.isinf(self.orders[-1]) and not math.isinf(self.epsilons[-1])
        delta = check_delta(delta, owner, allow_zero=pure)
        epsilon = conversions.rdp_epsilon(self.orders, self.epsilons, delta)
        if math.isinf(epsilon):
            raise InvalidParameter(
                f"{owner}: every order has an infinite RDP epsilon, so no finite epsilon "
                "follows at any delta."
            )
        return ApproxDP(epsilon, delta)

    def delta_for(self, epsilon: float) -> float:
        """Smallest delta at ``epsilon`` >= 0 implied by this curve (CKS20 Prop. 12; KL bound).

        A finite value at order ``inf`` gives delta 0 for every ``epsilon`` at or above it.
        """
        epsilon = check_nonnegative(epsilon, "epsilon", "RDP.delta_for")
        return conversions.rdp_delta(self.orders, self.epsilons, epsilon)
