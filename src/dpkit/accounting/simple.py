"""The two simplest accountants: basic pure-DP composition and zCDP composition.

:class:`PureAccountant` adds epsilons (Dwork, McSherry, Nissim & Smith 2006; adaptive
composition, Dwork & Roth Thm 3.16). :class:`ZCDPAccountant` adds rhos (Bun & Steinke
2016, Lemma 2.3), converting pure-DP events with the tight ``eps tanh(eps/2)`` and
reporting (epsilon, delta) with the optimal conversion of Canonne, Kamath & Steinke
2020. Both sum exactly in rationals and round the reported bound up.
"""

from __future__ import annotations

from fractions import Fraction

from dpkit.accounting._math.rounding import fraction_up
from dpkit.accounting.accountant import Accountant
from dpkit.accounting.events import Event, pure_epsilon, zcdp_rho
from dpkit.accounting.guarantees import ZCDP, PureDP

__all__ = ["PureAccountant", "ZCDPAccountant"]


class PureAccountant(Accountant):
    """Basic composition of pure-DP events: the epsilons add up.

    Supports every event with a pure-DP guarantee (:func:`pure_epsilon` is not None).
    ``get_epsilon(delta)`` is the total epsilon for any delta; ``get_delta(epsilon)``
    is 0 when ``epsilon`` covers the total and 1 otherwise (the only statement pure
    composition makes).

    Examples
    --------
    >>> from dpkit.accounting import LaplaceEvent, PureAccountant
    >>> PureAccountant().compose(LaplaceEvent(2.0), count=3).get_epsilon(0.0)
    1.5
    """

    def __init__(self) -> None:
        super().__init__()
        self._total = Fraction(0)

    @property
    def guarantee(self) -> PureDP:
        """The composed guarantee."""
        with self._lock:
            return PureDP(fraction_up(self._total))

    def _supports_leaf(self, event: Event) -> bool:
        return pure_epsilon(event) is not None

    def _compose_leaf(self, event: Event, count: int) -> None:
        epsilon = pure_epsilon(event)
        assert epsilon is not None  # checked by _supports_leaf before any change
        self._total += count * Fraction(epsilon)

    def _epsilon(self, delta: float) -> float:
        return fraction_up(self._total)

    def _delta(self, epsilon: float) -> float:
        return 0.0 if Fraction(epsilon) >= self._total else 1.0


class ZCDPAccountant(Accountant):
    """Composition in zero-concentrated DP: the rhos add up.

    Supports every event with a zCDP guarantee (:func:`zcdp_rho` is not None: Gaussian
    and discrete Gaussian noise, exponential mechanism via bounded range, and every
    pure-DP event through ``eps tanh(eps/2)``). (epsilon, delta) come from the optimal
    conversion (CKS20, Cor. 13).

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent, ZCDPAccountant
    >>> accountant = ZCDPAccountant().compose(GaussianEvent(1.0))
    >>> accountant.guarantee
    ZCDP(rho=0.5)
    >>> round(accountant.get_epsilon(1e-5), 4)
    4.7284
    """

    def __init__(self) -> None:
        super().__init__()
        self._total = Fraction(0)

    @property
    def guarantee(self) -> ZCDP:
        """The composed guarantee."""
        with self._lock:
            return ZCDP(fraction_up(self._total))

    def _supports_leaf(self, event: Event) -> bool:
        return zcdp_rho(event) is not None

    def _compose_leaf(self, event: Event, count: int) -> None:
        rho = zcdp_rho(event)
        assert rho is not None  # checked by _supports_leaf before any change
        self._total += count * Fraction(rho)

    def _epsilon(self, delta: float) -> float:
        if self._total == 0:
            return 0.0
        if delta == 0:
            return float("inf")
        return ZCDP(fraction_up(self._total)).to_approx(delta).epsilon

    def _delta(self, epsilon: float) -> float:
        if self._total == 0:
            return 0.0
        return ZCDP(fraction_up(self._total)).delta_for(epsilon)
